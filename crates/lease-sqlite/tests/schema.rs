//! Schema migration: fresh files, reopening, and every kind of database we must refuse.

use lease_core::ExecutionClientExt;
use lease_core::{Admission, ExecutionClient, ExecutionId, LeaseError};
use lease_sqlite::migrate::{APPLICATION_ID, PRODUCT, SCHEMA_VERSION};
use lease_sqlite::{SqliteBackend, SqliteConfig};
use rusqlite::Connection;

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("valid id")
}

fn meta(path: &std::path::Path, key: &str) -> Option<String> {
    let conn = Connection::open(path).expect("raw open");
    conn.query_row("SELECT value FROM lease_meta WHERE key = ?1", [key], |r| {
        r.get(0)
    })
    .ok()
}

fn expect_schema_error(result: lease_core::Result<SqliteBackend>, needle: &str) -> String {
    match result {
        Err(LeaseError::Schema { location, reason }) => {
            assert!(
                reason.contains(needle),
                "reason {reason:?} should mention {needle:?}"
            );
            format!("{location}: {reason}")
        }
        other => panic!("expected a schema error mentioning {needle:?}, got {other:?}"),
    }
}

#[tokio::test]
async fn fresh_file_gets_the_schema_and_marker() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("fresh.db");
    let _backend = open_and_admit(&path).await;
    assert_eq!(meta(&path, "product").as_deref(), Some(PRODUCT));
    assert_eq!(
        meta(&path, "schema_version"),
        Some(SCHEMA_VERSION.to_string())
    );
    let conn = Connection::open(&path).expect("raw open");
    let app_id: i32 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .expect("application_id");
    assert_eq!(app_id, APPLICATION_ID);
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("journal_mode");
    assert_eq!(mode, "wal");
    let names: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .expect("prepare")
        .query_map([], |r| r.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert!(names.iter().all(|n| n.starts_with("lease_")), "{names:?}");
}

#[tokio::test]
async fn reopening_keeps_data_and_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("reopen.db");
    let first = SqliteBackend::open(SqliteConfig::file(&path))
        .await
        .expect("open");
    first
        .admit(&Admission::new(id("kept")))
        .await
        .expect("admit");
    drop(first);
    let again = SqliteBackend::open(SqliteConfig::file(&path))
        .await
        .expect("reopen");
    assert!(again.get(&id("kept")).await.expect("get").is_some());
    assert_eq!(
        meta(&path, "schema_version"),
        Some(SCHEMA_VERSION.to_string())
    );
}

#[tokio::test]
async fn newer_schema_version_is_refused_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("newer.db");
    drop(
        SqliteBackend::open(SqliteConfig::file(&path))
            .await
            .expect("open"),
    );
    Connection::open(&path)
        .expect("raw open")
        .execute(
            "UPDATE lease_meta SET value = '99' WHERE key = 'schema_version'",
            [],
        )
        .expect("bump version");
    let message = expect_schema_error(
        SqliteBackend::open(SqliteConfig::file(&path)).await,
        "newer",
    );
    assert!(message.contains("99"), "{message}");
    assert_eq!(meta(&path, "schema_version").as_deref(), Some("99"));
}

#[tokio::test]
async fn foreign_product_marker_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("foreign.db");
    let conn = Connection::open(&path).expect("raw open");
    conn.execute_batch(
        "CREATE TABLE lease_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
         INSERT INTO lease_meta VALUES ('product', 'someone-elses-lease-manager');
         INSERT INTO lease_meta VALUES ('schema_version', '1');",
    )
    .expect("foreign schema");
    drop(conn);
    expect_schema_error(
        SqliteBackend::open(SqliteConfig::file(&path)).await,
        "someone-elses-lease-manager",
    );
}

#[tokio::test]
async fn foreign_application_id_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("app.db");
    let conn = Connection::open(&path).expect("raw open");
    conn.execute_batch("PRAGMA application_id = 42; CREATE TABLE theirs (x);")
        .expect("foreign app");
    drop(conn);
    expect_schema_error(
        SqliteBackend::open(SqliteConfig::file(&path)).await,
        "another application",
    );
    let conn = Connection::open(&path).expect("raw open");
    let ours: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name LIKE 'lease%'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(ours, 0, "nothing was created in a foreign database");
}

#[tokio::test]
async fn lease_tables_without_marker_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("half.db");
    Connection::open(&path)
        .expect("raw open")
        .execute_batch("CREATE TABLE lease_executions (x);")
        .expect("stray table");
    expect_schema_error(
        SqliteBackend::open(SqliteConfig::file(&path)).await,
        "version marker",
    );
}

#[tokio::test]
async fn garbage_file_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("garbage.db");
    let garbage: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 13) as u8).collect();
    std::fs::write(&path, &garbage).expect("write garbage");
    expect_schema_error(
        SqliteBackend::open(SqliteConfig::file(&path)).await,
        "not a SQLite database",
    );
    assert_eq!(std::fs::read(&path).expect("read back"), garbage);
}

#[tokio::test]
async fn another_applications_database_can_host_the_schema() {
    // A database with unrelated tables (and application_id 0) may host ours beside them:
    // every table is prefixed `lease_`.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("shared.db");
    Connection::open(&path)
        .expect("raw open")
        .execute_batch("CREATE TABLE orders (id INTEGER PRIMARY KEY);")
        .expect("their table");
    let backend = SqliteBackend::open(SqliteConfig::file(&path))
        .await
        .expect("open beside another app's tables");
    backend
        .admit(&Admission::new(id("x")))
        .await
        .expect("admit");
    let conn = Connection::open(&path).expect("raw open");
    let app_id: i32 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .expect("application_id");
    assert_eq!(app_id, 0, "the header of a shared database is left alone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_opens_migrate_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("race.db");
    let opens: Vec<_> = (0..6)
        .map(|_| tokio::spawn(SqliteBackend::open(SqliteConfig::file(path.clone()))))
        .collect();
    let mut backends = Vec::new();
    for open in opens {
        backends.push(open.await.expect("join").expect("every open succeeds"));
    }
    assert_eq!(
        meta(&path, "schema_version"),
        Some(SCHEMA_VERSION.to_string())
    );
    for (i, b) in backends.iter().enumerate() {
        b.admit(&Admission::new(id(&format!("e{i}"))))
            .await
            .expect("admit");
    }
}

#[tokio::test]
async fn bad_namespace_is_rejected() {
    for bad in ["", "tab\there", &"n".repeat(300)] {
        let err = SqliteBackend::open(SqliteConfig::in_memory().namespace(bad))
            .await
            .expect_err("bad namespace");
        assert!(
            matches!(
                err,
                LeaseError::InvalidInput {
                    field: "namespace",
                    ..
                }
            ),
            "{err:?}"
        );
    }
}

/// A version 3 file (before retention and the split claim index) with a completed and an
/// admitted execution migrates on open: `purge_terminal` removes the completed one through
/// its new index, a claim finds the admitted one through the new claim indexes, and the
/// rows keep their insertion order as their admission order (schema v12).
#[tokio::test]
async fn a_version_3_file_migrates_and_purges() {
    use lease_core::{ClaimRequest, Json, Timestamp, WorkflowRunOutcome};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("v3.db");
    let b = SqliteBackend::open(SqliteConfig::file(&path))
        .await
        .expect("open");
    b.admit(&Admission::new(id("done"))).await.expect("admit");
    let lease = b
        .claim_due(ClaimRequest {
            now: Timestamp::MAX,
            limit: 1,
            duration: std::time::Duration::from_secs(30),
        })
        .await
        .expect("claim")
        .remove(0);
    let acked = b
        .acknowledge(&lease, &WorkflowRunOutcome::Completed(Json::null()))
        .await
        .expect("acknowledge");
    assert!(!acked.is_lost());
    b.admit(&Admission::new(id("waiting")))
        .await
        .expect("admit");
    drop(b);
    Connection::open(&path)
        .expect("raw open")
        .execute_batch(
            "ALTER TABLE lease_counters DROP COLUMN takeovers;
             ALTER TABLE lease_executions DROP COLUMN delivery_claimed_at;
             DROP INDEX lease_executions_by_key_workflow;
             DROP TABLE lease_redelivery_policies;
             ALTER TABLE lease_executions DROP COLUMN redelivery_policy;
             ALTER TABLE lease_executions DROP COLUMN deliveries;
             DROP INDEX lease_executions_admitted;
             DROP INDEX lease_executions_by_status;
             DROP INDEX lease_executions_by_workflow;
             DROP INDEX lease_executions_by_key;
             DROP TABLE lease_rate_limits;
             DROP TABLE lease_ordered_keys;
             DROP TABLE lease_rate_starts;
             ALTER TABLE lease_executions DROP COLUMN admitted_seq;
             DROP INDEX lease_executions_dead;
             DROP TABLE lease_attempt_limits;
             ALTER TABLE lease_executions DROP COLUMN attempt_limit;
             ALTER TABLE lease_executions DROP COLUMN last_error;
             ALTER TABLE lease_executions DROP COLUMN trace_context;
             DROP INDEX lease_executions_claim_waiting;
             DROP TABLE lease_limits;
             ALTER TABLE lease_executions DROP COLUMN priority;
             ALTER TABLE lease_executions DROP COLUMN concurrency_key;
             DROP TABLE lease_paused;
             DROP TABLE lease_effects;
             DROP TABLE lease_store_waiters;
             DROP INDEX lease_executions_terminal;
             DROP INDEX lease_store_receipts_execution;
             DROP INDEX lease_starts_target;
             DROP INDEX lease_executions_claim_running;
             CREATE INDEX lease_executions_claim
                 ON lease_executions (namespace, claim_due_at, id, claimable_at)
                 WHERE claimable_at IS NOT NULL;
             UPDATE lease_meta SET value = '3' WHERE key = 'schema_version';",
        )
        .expect("back to version 3");
    let b = reopen_migrated(&path).await;
    // Rows stored before the admission order existed keep the order they were inserted in;
    // an admission after the migration comes after them.
    b.admit(&Admission::new(id("later"))).await.expect("admit");
    let page = b
        .list_executions(&lease_core::ExecutionFilter::default(), None, 10)
        .await
        .expect("list");
    let listed: Vec<&str> = page.records.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(listed, ["later", "waiting", "done"]);
    b.cancel(
        &id("later"),
        &lease_core::CancelReason::new("not part of this test").expect("reason"),
    )
    .await
    .expect("cancel");
    let purged = b.purge_terminal(Timestamp::MAX, 10).await.expect("purge");
    assert_eq!(purged.ids, [id("done"), id("later")]);
    assert!(b.get(&id("done")).await.expect("get").is_none());
    let claimed = b
        .claim_due(ClaimRequest {
            now: Timestamp::MAX,
            limit: 10,
            duration: std::time::Duration::from_secs(30),
        })
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].execution_id, id("waiting"));
}

/// A new database file (and its WAL) is its owner's only, and a symlink in the file's place
/// is refused, its target untouched.
#[cfg(unix)]
#[tokio::test]
async fn a_new_file_is_private_and_a_symlink_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("private.db");
    open_and_admit(&path).await;
    for file in [path.clone(), dir.path().join("private.db-wal")] {
        let mode = std::fs::metadata(&file)
            .expect("metadata")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{}", file.display());
    }
    let target = dir.path().join("elsewhere.db");
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let opened = SqliteBackend::open(SqliteConfig::file(&link)).await;
    assert!(opened.is_err(), "a symlinked path was opened");
    assert!(!target.exists(), "the symlink's target was created");
}

/// Opens `path` and admits one execution (so the file and its WAL exist).
async fn open_and_admit(path: &std::path::Path) -> SqliteBackend {
    let backend = SqliteBackend::open(SqliteConfig::file(path))
        .await
        .expect("open");
    backend
        .admit(&Admission::new(id("a")))
        .await
        .expect("admit");
    backend
}

/// A write of a keyed execution (claim, renew, acknowledge) rewrites every index whose
/// columns or condition name a column it sets, and each key-led one dirties a page per key
/// a commit touches. Since v15 the concurrency limit's count and the ordered key's line walk
/// the browse index by key, so only the two browse indexes lead with the key.
#[tokio::test]
async fn keyed_writes_keep_two_key_led_indexes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("keyed.db");
    let b = SqliteBackend::open(SqliteConfig::file(&path))
        .await
        .expect("open");
    drop(b);
    let conn = Connection::open(&path).expect("raw open");
    let mut stmt = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'lease_executions' \
             AND sql LIKE '%(namespace, concurrency_key%' ORDER BY name",
        )
        .expect("prepare");
    let names: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .expect("query")
        .collect::<rusqlite::Result<_>>()
        .expect("names");
    assert_eq!(
        names,
        [
            "lease_executions_by_key",
            "lease_executions_by_key_workflow"
        ]
    );
}

/// Opens the file at `path`, an older version, and checks it migrated to this one.
async fn reopen_migrated(path: &std::path::Path) -> SqliteBackend {
    let b = SqliteBackend::open(SqliteConfig::file(path))
        .await
        .expect("migrate");
    assert_eq!(
        meta(path, "schema_version"),
        Some(SCHEMA_VERSION.to_string())
    );
    b
}

/// Opens (creating) `path` and admits an execution of each name.
async fn open_admitting(path: &std::path::Path, names: &[&str]) -> SqliteBackend {
    let b = SqliteBackend::open(SqliteConfig::file(path))
        .await
        .expect("open");
    for name in names {
        b.admit(&Admission::new(id(name))).await.expect("admit");
    }
    b
}

/// Claims every due execution at the backend clock with a lease long enough to outlive the
/// test, in id order.
async fn claim_all(b: &SqliteBackend) -> Vec<lease_core::ExecutionLease> {
    let mut leases = b
        .claim_due(lease_core::ClaimRequest {
            now: lease_core::Timestamp::MAX,
            limit: 10,
            duration: std::time::Duration::from_secs(600),
        })
        .await
        .expect("claim");
    leases.sort_by(|a, b| a.execution_id.as_str().cmp(b.execution_id.as_str()));
    leases
}

/// The raw history columns of `id`: (`deliveries`, `delivery_claimed_at`).
fn history_columns(path: &std::path::Path, id: &str) -> (Option<String>, Option<i64>) {
    Connection::open(path)
        .expect("raw open")
        .query_row(
            "SELECT deliveries, delivery_claimed_at FROM lease_executions WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("row")
}

/// Schema v16: the drain's first claim and terminal acknowledgement leave the JSON alone
/// (the row's columns describe the delivery), while an end the columns cannot describe (a
/// release) folds the delivery into it and clears the column.
#[tokio::test]
async fn the_drain_leaves_the_history_json_alone() {
    use lease_core::{DeliveryEnd, Json, Release, WorkflowRunOutcome};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("drain.db");
    let b = open_admitting(&path, &["done", "released"]).await;
    let leases = claim_all(&b).await;
    assert!(history_columns(&path, "done").1.is_some());
    assert_eq!(history_columns(&path, "done").0, None, "a first claim");
    let acked = b
        .acknowledge(&leases[0], &WorkflowRunOutcome::Completed(Json::null()))
        .await
        .expect("acknowledge");
    assert!(!acked.is_lost());
    assert_eq!(
        history_columns(&path, "done").0,
        None,
        "a terminal acknowledgement"
    );
    let done = b.deliveries(&id("done")).await.expect("history");
    assert_eq!(done.deliveries.len(), 1);
    assert_eq!(done.deliveries[0].token, leases[0].token);
    assert_eq!(done.deliveries[0].end, Some(DeliveryEnd::Acknowledged));

    let ended = b
        .release_with(&leases[1], &Release::NotStarted)
        .await
        .expect("release");
    assert!(!ended.is_lost());
    let (json, claimed_at) = history_columns(&path, "released");
    assert!(json.is_some() && claimed_at.is_none(), "a release folds");
    let released = b.deliveries(&id("released")).await.expect("history");
    assert_eq!(released.deliveries.len(), 1);
    assert_eq!(released.deliveries[0].end, Some(DeliveryEnd::NotStarted));
}

/// A version 15 file keeps each execution's whole history in the `deliveries` JSON, its
/// latest entry open while the lease runs. After the upgrade every history reads back the
/// same, and the first transitions that end those deliveries close the JSON's open entry
/// exactly as version 15 did.
#[tokio::test]
async fn a_version_15_history_reads_back_the_same_after_the_upgrade() {
    use lease_core::{DeliveryEnd, Json, Release, WorkflowRunOutcome};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("v15.db");
    let b = open_admitting(&path, &["again", "done", "live"]).await;
    let first = claim_all(&b).await;
    let ended = b
        .acknowledge(&first[1], &WorkflowRunOutcome::Completed(Json::null()))
        .await
        .expect("acknowledge");
    assert!(!ended.is_lost());
    let ended = b
        .release_with(&first[0], &Release::NotStarted)
        .await
        .expect("release");
    assert!(!ended.is_lost());
    let again = claim_all(&b).await.remove(0);
    let names = ["again", "done", "live"];
    let mut before = Vec::new();
    for name in names {
        before.push(b.deliveries(&id(name)).await.expect("history"));
    }
    drop(b);
    // What version 15 stored: the whole history (every lease still live) in the JSON.
    let raw = Connection::open(&path).expect("raw open");
    for (name, history) in names.iter().zip(&before) {
        let json = serde_json::to_string(history).expect("json");
        raw.execute(
            "UPDATE lease_executions SET deliveries = ?1 WHERE id = ?2",
            rusqlite::params![json, name],
        )
        .expect("v15 history");
    }
    raw.execute_batch(
        "ALTER TABLE lease_counters DROP COLUMN takeovers;
         ALTER TABLE lease_executions DROP COLUMN delivery_claimed_at;
         UPDATE lease_meta SET value = '15' WHERE key = 'schema_version';",
    )
    .expect("back to version 15");
    drop(raw);

    let b = reopen_migrated(&path).await;
    for (name, history) in names.iter().zip(&before) {
        let after = b.deliveries(&id(name)).await.expect("history");
        assert_eq!(&after, history, "{name}");
    }
    assert_eq!(before[0].deliveries.len(), 2);
    assert!(before[0].deliveries[1].is_open());

    // The deliveries open across the upgrade end in the JSON, as version 15 ended them.
    let ended = b
        .acknowledge(&again, &WorkflowRunOutcome::Completed(Json::null()))
        .await
        .expect("acknowledge");
    assert!(!ended.is_lost());
    b.cancel(
        &id("live"),
        &lease_core::CancelReason::new("ends the open entry").expect("reason"),
    )
    .await
    .expect("cancel");
    let again_after = b.deliveries(&id("again")).await.expect("history");
    assert_eq!(again_after.deliveries.len(), 2);
    assert_eq!(again_after.deliveries[0], before[0].deliveries[0]);
    assert_eq!(
        again_after.deliveries[1].end,
        Some(DeliveryEnd::Acknowledged)
    );
    let live_after = b.deliveries(&id("live")).await.expect("history");
    assert_eq!(live_after.deliveries.len(), 1);
    assert_eq!(live_after.deliveries[0].end, Some(DeliveryEnd::Cancelled));
}

/// A version 16 file (its counters row without `takeovers`) upgrades to a counter at 0 that
/// the first takeover after the upgrade raises to 1; the claims before it, first claims of a
/// version 16 library, counted nothing.
#[tokio::test]
async fn a_version_16_file_counts_takeovers_from_its_upgrade() {
    use lease_core::{ClaimRequest, Clock, ManualClock};
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("v16.db");
    let clock = ManualClock::starting_now();
    let config = || SqliteConfig::file(&path).clock(Arc::new(clock.clone()));
    let b = SqliteBackend::open(config()).await.expect("open");
    b.admit(&Admission::new(id("lapsed"))).await.expect("admit");
    let request = |now| ClaimRequest {
        now,
        limit: 10,
        duration: std::time::Duration::from_secs(1),
    };
    let first = b.claim_due(request(clock.now())).await.expect("claim");
    assert_eq!(first.len(), 1);
    drop(b);
    let raw = Connection::open(&path).expect("raw open");
    raw.execute_batch(
        "ALTER TABLE lease_counters DROP COLUMN takeovers;
         UPDATE lease_meta SET value = '16' WHERE key = 'schema_version';",
    )
    .expect("back to version 16");
    drop(raw);

    let b = SqliteBackend::open(config()).await.expect("migrate");
    assert_eq!(
        meta(&path, "schema_version"),
        Some(SCHEMA_VERSION.to_string())
    );
    assert_eq!(b.status_counts().await.expect("counts").takeovers, 0);
    // Past the expiry and the default policy's first redelivery delay (1 s).
    clock.advance(std::time::Duration::from_secs(3));
    let taken = b.claim_due(request(clock.now())).await.expect("claim");
    assert_eq!(taken.len(), 1, "the lapsed lease: {taken:?}");
    assert!(taken[0].token > first[0].token);
    let counts = b.status_counts().await.expect("counts");
    assert_eq!((counts.takeovers, counts.running), (1, 1));
}
