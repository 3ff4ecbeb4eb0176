//! Embedded migrations: idempotent, safe under concurrent first connects, version-checked.

mod common;

use lease_core::ExecutionClientExt;
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, Clock, DeliveryEnd, DeliveryEntry, DeliveryHistory, ExecutionClient,
    ExecutionFilter, ExecutionId, ExecutionLease, Json, LastError, LeaseError, ManualClock,
    Timestamp, WorkflowRunOutcome,
};
use lease_postgres::{PostgresBackend, PostgresConfig, SCHEMA_VERSION};
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use std::sync::Arc;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime")
}

fn config(schema: &str) -> PostgresConfig {
    PostgresConfig::new(common::url())
        .schema(schema)
        .max_connections(2)
}

async fn admin() -> PgConnection {
    PgConnection::connect(&common::url())
        .await
        .expect("admin connection")
}

async fn exec(conn: &mut PgConnection, sql: String) {
    sqlx::raw_sql(AssertSqlSafe(sql))
        .execute(conn)
        .await
        .expect("admin sql");
}

#[test]
fn concurrent_first_connects_all_succeed_once_migrated() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let connects: Vec<_> = (0..8)
            .map(|_| {
                let config = config(&schema).max_connections(1);
                tokio::spawn(PostgresBackend::connect(config))
            })
            .collect();
        let mut backends = Vec::new();
        for c in connects {
            backends.push(c.await.expect("task").expect("connect"));
        }
        let mut conn = admin().await;
        let version: i32 = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT version FROM \"{schema}\".lease_schema"
        )))
        .fetch_one(&mut conn)
        .await
        .expect("version");
        assert_eq!(version, SCHEMA_VERSION);
        // Reconnecting to an up-to-date schema changes nothing.
        let again = PostgresBackend::connect(config(&schema))
            .await
            .expect("reconnect");
        again.drop_schema().await.expect("drop");
        for b in backends {
            b.close().await;
        }
        again.close().await;
    }));
}

/// Creates a fresh schema, changes it with the statement `tamper` makes for its name, and
/// checks that connecting to it again is a schema error, which `check` then inspects.
fn reconnect_after(
    tamper: impl FnOnce(&str) -> String + Send + 'static,
    check: impl FnOnce(&LeaseError) + Send + 'static,
) {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let backend = PostgresBackend::connect(config(&schema))
            .await
            .expect("connect");
        let mut conn = admin().await;
        exec(&mut conn, tamper(&schema)).await;
        let err = PostgresBackend::connect(config(&schema))
            .await
            .expect_err("a schema this library must not use");
        assert!(matches!(err, LeaseError::Schema { .. }), "{err:?}");
        check(&err);
        backend.drop_schema().await.expect("drop");
        backend.close().await;
    }));
}

#[test]
fn newer_schema_version_is_a_schema_error() {
    reconnect_after(
        |schema| {
            format!(
                "UPDATE \"{schema}\".lease_schema SET version = {}",
                SCHEMA_VERSION + 1
            )
        },
        |err| assert!(err.to_string().contains("newer"), "{err}"),
    );
}

#[test]
fn schema_of_someone_else_is_a_schema_error() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let mut conn = admin().await;
        exec(
            &mut conn,
            format!("CREATE SCHEMA \"{schema}\"; CREATE TABLE \"{schema}\".executions (x int)"),
        )
        .await;
        let err = PostgresBackend::connect(config(&schema))
            .await
            .expect_err("foreign schema");
        assert!(matches!(err, LeaseError::Schema { .. }), "{err:?}");
        // Nothing was added to it.
        let tables: i64 =
            sqlx::query_scalar("SELECT count(*) FROM pg_tables WHERE schemaname = $1")
                .bind(&schema)
                .fetch_one(&mut conn)
                .await
                .expect("count");
        assert_eq!(tables, 1);
        exec(&mut conn, format!("DROP SCHEMA \"{schema}\" CASCADE")).await;
    }));
}

#[test]
fn version_table_of_another_owner_is_a_schema_error() {
    reconnect_after(
        |schema| format!("UPDATE \"{schema}\".lease_schema SET owner = 'someone-else'"),
        |_| {},
    );
}

#[test]
fn claim_uses_the_claimable_index() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let backend = PostgresBackend::connect(config(&schema))
            .await
            .expect("connect");
        let mut conn = admin().await;
        // Enough rows, mostly not claimable, that a sequential scan would be the wrong plan.
        exec(
            &mut conn,
            format!(
                "INSERT INTO \"{schema}\".executions (id, status, due_at, claimable_at) \
                 SELECT 'x' || g, 'suspended', NULL, NULL FROM generate_series(1, 5000) g; \
                 ANALYZE \"{schema}\".executions"
            ),
        )
        .await;
        // The walk of one priority level (schema v10: the claim takes levels one at a time).
        let plan: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!(
            "EXPLAIN SELECT e.id FROM \"{schema}\".executions e \
             WHERE e.priority = 0 AND e.claimable_at IS NOT NULL AND e.status <> 'running' \
             AND e.sort_due <= 5 AND e.claimable_at <= 5 \
             ORDER BY e.sort_due, e.id LIMIT 10 FOR UPDATE SKIP LOCKED"
        )))
        .fetch_all(&mut conn)
        .await
        .expect("explain");
        let plan = plan.join("\n");
        assert!(
            plan.contains("executions_claim_waiting_by_priority"),
            "{plan}"
        );
        assert!(
            !plan.contains("Sort"),
            "claims walk the index in order: {plan}"
        );
        backend.drop_schema().await.expect("drop");
        backend.close().await;
    }));
}

/// `list_live_leases` at 10^5 executions (10,000 running, half of them expired; 90,000
/// completed), with the library's session settings and its generic plan: a walk of
/// `executions_live` (schema v14) from the clock that stops after the limit's rows, with no
/// sort and no other rows read.
#[test]
fn live_leases_walk_their_index() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let backend = PostgresBackend::connect(config(&schema))
            .await
            .expect("connect");
        let mut conn = admin().await;
        let s = format!("\"{schema}\"");
        exec(
            &mut conn,
            format!(
                "INSERT INTO {s}.executions (id, status, token, due_at, lease_expires_at) \
                 SELECT 'run' || g, 'running', g, 0, 1000000 + (g % 5000) * 1000 \
                 FROM generate_series(1, 10000) g; \
                 INSERT INTO {s}.executions (id, status, token, last_delivery_ended_at, \
                     outcome) \
                 SELECT 'done' || g, 'completed', 20000 + g, g, 'null' \
                 FROM generate_series(1, 90000) g; \
                 ANALYZE {s}.executions"
            ),
        )
        .await;
        let sql = lease_postgres::raw::statements(&schema).list_live_leases;
        let mut tx = conn.begin().await.expect("begin");
        sqlx::raw_sql(AssertSqlSafe(format!(
            "SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL jit = off; \
             SET LOCAL enable_bitmapscan = off; PREPARE live(bigint, bigint) AS {sql}"
        )))
        .execute(&mut *tx)
        .await
        .expect("prepare");
        // The clock halfway: leases expiring at or before 3,500,000 have ended.
        let plan: Vec<String> = sqlx::query_scalar(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE live(50, 3500000)",
        )
        .fetch_all(&mut *tx)
        .await
        .expect("explain");
        tx.rollback().await.expect("rollback");
        let plan = plan.join("\n");
        assert!(plan.contains("Index Scan using executions_live"), "{plan}");
        for absent in ["Sort", "Seq Scan", "Bitmap"] {
            assert!(!plan.contains(absent), "{absent}: {plan}");
        }
        assert!(plan.contains("rows=50 loops=1"), "{plan}");
        assert!(!plan.contains("rows=5000"), "read past the limit: {plan}");
        backend.drop_schema().await.expect("drop");
        backend.close().await;
    }));
}

#[test]
fn a_version_1_schema_is_upgraded_in_place() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let backend = PostgresBackend::connect(config(&schema))
            .await
            .expect("connect");
        backend
            .admit(&Admission::new(ExecutionId::new("old").expect("id")))
            .await
            .expect("admit");
        backend.close().await;
        // Turn the schema back into what version 1 created (undoing versions 21 to 2;
        // dropping the priority column drops version 10's index with it, dropping the
        // attempt columns version 15's index and check, dropping the admission column
        // version 16's and 18's indexes and the sequence).
        let mut conn = admin().await;
        exec(
            &mut conn,
            format!(
                "DROP TABLE \"{schema}\".takeovers; \
                 DROP TABLE \"{schema}\".redelivery_policies; \
                 ALTER TABLE \"{schema}\".executions DROP COLUMN delivery_claimed_at; \
                 DROP FUNCTION \"{schema}\".history_fold, \"{schema}\".history_end, \
                     \"{schema}\".claimable_after, \"{schema}\".policy_delay; \
                 ALTER TABLE \"{schema}\".executions DROP COLUMN redelivery_base_ms, \
                     DROP COLUMN redelivery_factor, DROP COLUMN redelivery_cap_ms, \
                     DROP COLUMN deliveries; \
                 DROP TABLE \"{schema}\".key_starts, \"{schema}\".key_policies; \
                 DROP FUNCTION \"{schema}\".key_room; \
                 ALTER TABLE \"{schema}\".executions DROP COLUMN admission_seq; \
                 DROP TABLE \"{schema}\".attempt_limits; \
                 ALTER TABLE \"{schema}\".executions DROP COLUMN attempt_limit, \
                     DROP COLUMN last_error_kind, DROP COLUMN last_error_message, \
                     DROP COLUMN last_error_attempt, DROP COLUMN last_error_at; \
                 DROP FUNCTION \"{schema}\".record_problem_v11; \
                 DROP INDEX \"{schema}\".executions_live; \
                 ALTER TABLE \"{schema}\".executions DROP COLUMN trace_context; \
                 DROP TABLE \"{schema}\".paused_scopes; \
                 DROP TABLE \"{schema}\".concurrency_limits; \
                 ALTER TABLE \"{schema}\".executions DROP COLUMN priority; \
                 ALTER TABLE \"{schema}\".executions DROP COLUMN concurrency_key; \
                 DROP TABLE \"{schema}\".effects; \
                 DROP TABLE \"{schema}\".store_waiters; \
                 DROP INDEX \"{schema}\".executions_claim_expired; \
                 DROP INDEX \"{schema}\".executions_terminal; \
                 DROP INDEX \"{schema}\".store_receipts_execution; \
                 DROP INDEX \"{schema}\".start_requests_target; \
                 DROP FUNCTION \"{schema}\".record_problem; \
                 DROP FUNCTION \"{schema}\".record_problem_v9; \
                 DROP FUNCTION \"{schema}\".record_problem_v5; \
                 DROP FUNCTION \"{schema}\".token_counter_behind; \
                 DROP FUNCTION \"{schema}\".live_leases; \
                 DROP INDEX \"{schema}\".executions_horizon_waiting; \
                 ALTER TABLE \"{schema}\".executions DROP COLUMN sort_due; \
                 CREATE INDEX executions_claimable_at ON \"{schema}\".executions (claimable_at) \
                     WHERE claimable_at IS NOT NULL; \
                 UPDATE \"{schema}\".lease_schema SET version = 1"
            ),
        )
        .await;
        let upgraded = PostgresBackend::connect(config(&schema))
            .await
            .expect("upgrade");
        let version: i32 = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT version FROM \"{schema}\".lease_schema"
        )))
        .fetch_one(&mut conn)
        .await
        .expect("version");
        assert_eq!(version, SCHEMA_VERSION);
        // The row written under version 1 is claimable through the new index.
        let leases = upgraded
            .claim_due(ClaimRequest {
                now: upgraded.now().await.expect("now"),
                limit: 10,
                duration: Duration::from_secs(30),
            })
            .await
            .expect("claim");
        assert_eq!(leases.len(), 1);
        upgraded.close().await;
    }));
}

/// Histories stored by version 18 (every entry in the `deliveries` jsonb, the latest open
/// while its lease runs) read the same after the upgrade to 19, and the deliveries they left
/// open end as before: an acknowledgement closes the jsonb's entry, a takeover after the
/// expiry closes it as expired, and the delivery that takes over is kept beside it.
#[test]
fn version_18_histories_read_the_same_after_the_upgrade() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let clock = ManualClock::starting_now();
        let connect = || connect_at(&schema, &clock);
        let id = |name: &str| ExecutionId::new(name).expect("id");
        let done = WorkflowRunOutcome::Completed(Json::parse("outcome", "1").expect("json"));
        let names = ["done", "live", "lapsed"];
        let backend = connect().await;
        for name in names {
            backend
                .admit(&Admission::new(id(name)))
                .await
                .expect("admit");
        }
        let lease = Duration::from_secs(30);
        let claimed_at = clock.now();
        let leases = claim(&backend, claimed_at, lease).await;
        let lease_of = |name: &str| {
            leases
                .iter()
                .find(|l| l.execution_id.as_str() == name)
                .expect("claimed")
                .clone()
        };
        clock.advance(Duration::from_millis(5));
        let acked = backend.acknowledge(&lease_of("done"), &done).await;
        assert!(!acked.expect("ack").is_lost());
        let before = histories(&backend, &names.map(id)).await;
        backend.close().await;
        exec(&mut admin().await, undo_to_version_19(&schema)).await;

        let upgraded = connect().await;
        assert_eq!(histories(&upgraded, &names.map(id)).await, before);
        clock.advance(Duration::from_millis(5));
        let acked = upgraded.acknowledge(&lease_of("live"), &done).await;
        assert!(!acked.expect("ack").is_lost());
        let live = upgraded.deliveries(&id("live")).await.expect("history");
        let mut want = DeliveryEntry::claimed(lease_of("live").token, claimed_at);
        want.end = Some(DeliveryEnd::Acknowledged);
        want.ended_at = Some(clock.now());
        assert_eq!(live.deliveries, vec![want]);

        let lapsed = lease_of("lapsed");
        // Past the expiry and the default policy's first redelivery delay (1 s).
        clock.set(Timestamp::from_millis(
            lapsed.expires_at.as_millis() + 1_000,
        ));
        let taken = claim(&upgraded, clock.now(), lease).await;
        assert_eq!(taken.len(), 1, "the lapsed lease alone: {taken:?}");
        let acked = upgraded.acknowledge(&taken[0], &done).await;
        assert!(!acked.expect("ack").is_lost());
        let mut expired = DeliveryEntry::claimed(lapsed.token, claimed_at);
        expired.end = Some(DeliveryEnd::Expired);
        expired.ended_at = Some(lapsed.expires_at);
        expired.error = Some(LastError::expiry_note());
        let mut completed = DeliveryEntry::claimed(taken[0].token, clock.now());
        completed.end = Some(DeliveryEnd::Acknowledged);
        completed.ended_at = Some(clock.now());
        let got = upgraded.deliveries(&id("lapsed")).await.expect("history");
        assert_eq!(got.deliveries, vec![expired, completed]);
        upgraded.close().await;
    }));
}

/// A backend on `schema` (migrated to the latest version) reading time from `clock`.
async fn connect_at(schema: &str, clock: &ManualClock) -> PostgresBackend {
    let config = config(schema).clock(Arc::new(clock.clone()));
    PostgresBackend::connect(config).await.expect("connect")
}

async fn claim(backend: &PostgresBackend, now: Timestamp, lease: Duration) -> Vec<ExecutionLease> {
    backend
        .claim_due(ClaimRequest {
            now,
            limit: 10,
            duration: lease,
        })
        .await
        .expect("claim")
}

async fn histories(backend: &PostgresBackend, ids: &[ExecutionId]) -> Vec<DeliveryHistory> {
    let mut out = Vec::new();
    for id in ids {
        out.push(backend.deliveries(id).await.expect("history"));
    }
    out
}

async fn schema_exists(conn: &mut PgConnection, schema: &str) -> bool {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
        .bind(schema)
        .fetch_one(conn)
        .await
        .expect("schema lookup")
}

/// Opening without migrating (`PostgresConfig::migrate(false)`, read-only tools): a schema
/// that does not exist (a mistyped name) is `SchemaMismatch` with no version, and is not
/// created.
#[test]
fn verifying_a_missing_schema_creates_nothing() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let err = PostgresBackend::connect(config(&schema).migrate(false))
            .await
            .expect_err("no schema");
        assert!(
            matches!(&err, LeaseError::SchemaMismatch { found: None, expected, .. }
                if *expected == SCHEMA_VERSION.unsigned_abs()),
            "{err:?}"
        );
        assert!(!schema_exists(&mut admin().await, &schema).await);
    }));
}

/// Opening without migrating a schema at an older version: `SchemaMismatch` naming the
/// version found, and the schema stays at it; at the current version it opens.
#[test]
fn verifying_an_older_schema_upgrades_nothing() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let backend = PostgresBackend::connect(config(&schema))
            .await
            .expect("connect");
        PostgresBackend::connect(config(&schema).migrate(false))
            .await
            .expect("the current version verifies")
            .close()
            .await;
        let older = SCHEMA_VERSION - 1;
        let mut conn = admin().await;
        exec(
            &mut conn,
            format!("UPDATE \"{schema}\".lease_schema SET version = {older}"),
        )
        .await;
        let err = PostgresBackend::connect(config(&schema).migrate(false))
            .await
            .expect_err("an older schema");
        assert!(
            matches!(&err, LeaseError::SchemaMismatch { found: Some(v), .. }
                if i64::from(*v) == i64::from(older)),
            "{err:?}"
        );
        let version: i32 = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT version FROM \"{schema}\".lease_schema"
        )))
        .fetch_one(&mut conn)
        .await
        .expect("version");
        assert_eq!(version, older, "the verification migrated");
        backend.close().await;
    }));
}

/// A migration that cannot get its lock (a transaction holds the table, as a running claim
/// does) gives up after its `lock_timeout` with `Unavailable` and changes nothing, rather
/// than queueing a lock that every later statement on the table would wait behind.
#[test]
fn a_migration_waits_for_its_locks_only_briefly() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let backend = PostgresBackend::connect(config(&schema))
            .await
            .expect("connect");
        let older = VERSION_BEFORE_INDEXES;
        let mut conn = admin().await;
        exec(&mut conn, undo_to_version_19(&schema)).await;
        let mut holder = admin().await;
        let mut tx = holder.begin().await.expect("begin");
        exec(
            &mut tx,
            format!("LOCK TABLE \"{schema}\".executions IN ROW EXCLUSIVE MODE"),
        )
        .await;
        let started = std::time::Instant::now();
        let upgrade = PostgresBackend::connect(config(&schema));
        let err = tokio::time::timeout(Duration::from_secs(30), upgrade)
            .await
            .expect("the migration waited for its lock without a bound")
            .expect_err("the lock is held");
        assert!(matches!(err, LeaseError::Unavailable { .. }), "{err:?}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
        tx.rollback().await.expect("rollback");
        let version: i32 = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT version FROM \"{schema}\".lease_schema"
        )))
        .fetch_one(&mut conn)
        .await
        .expect("version");
        assert_eq!(version, older, "a failed migration changed the version");
        PostgresBackend::connect(config(&schema))
            .await
            .expect("the lock released, the migration runs")
            .close()
            .await;
        backend.close().await;
    }));
}

/// The version before the indexes of the console's reads (version 20).
const VERSION_BEFORE_INDEXES: i32 = 19;

/// SQL that turns a current schema back into version 21 (undoes version 22: the horizon
/// index of every claimable row and the admission-order index back, the fillfactor reset).
fn undo_version_22(schema: &str) -> String {
    assert_eq!(SCHEMA_VERSION, 22, "undo the new latest version here");
    format!(
        "DROP INDEX \"{schema}\".executions_horizon_waiting; \
         CREATE INDEX executions_horizon ON \"{schema}\".executions (claimable_at) \
             WHERE claimable_at IS NOT NULL; \
         CREATE UNIQUE INDEX executions_admitted ON \"{schema}\".executions (admission_seq) \
             WHERE admission_seq > 0; \
         ALTER TABLE \"{schema}\".executions RESET (fillfactor); \
         UPDATE \"{schema}\".lease_schema SET version = 21"
    )
}

/// SQL that turns a current schema back into version 19 (undoes version 22, version 21,
/// the takeover counter, and version 20, the indexes of the console's reads), so
/// connecting runs version 20 again first, a migration that builds indexes on `executions`.
fn undo_to_version_19(schema: &str) -> String {
    format!(
        "{}; \
         DROP TABLE \"{schema}\".takeovers; \
         DROP INDEX \"{schema}\".executions_browse_status, \"{schema}\".executions_corrupt, \
             \"{schema}\".executions_failing; \
         CREATE INDEX executions_admitted_by_status ON \"{schema}\".executions \
             (status, admission_seq); \
         UPDATE \"{schema}\".lease_schema SET version = {VERSION_BEFORE_INDEXES}",
        undo_version_22(schema)
    )
}

/// A version 20 schema (no takeover counter) upgrades to a counter at 0 that the first
/// takeover after the upgrade raises to 1; the first claim before it counted nothing.
#[test]
fn a_version_20_schema_counts_takeovers_from_its_upgrade() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let clock = ManualClock::starting_now();
        let connect = || connect_at(&schema, &clock);
        let backend = connect().await;
        backend
            .admit(&Admission::new(ExecutionId::new("lapsed").expect("id")))
            .await
            .expect("admit");
        let lease = Duration::from_secs(1);
        let first = claim(&backend, clock.now(), lease).await;
        assert_eq!(first.len(), 1);
        backend.close().await;
        exec(
            &mut admin().await,
            format!(
                "DROP TABLE \"{schema}\".takeovers; \
                 UPDATE \"{schema}\".lease_schema SET version = 20"
            ),
        )
        .await;

        let upgraded = connect().await;
        let counts = upgraded.status_counts().await.expect("counts");
        assert_eq!((counts.takeovers, counts.running), (0, 1));
        // Past the expiry and the default policy's first redelivery delay (1 s).
        clock.advance(Duration::from_secs(3));
        let taken = claim(&upgraded, clock.now(), lease).await;
        assert_eq!(taken.len(), 1, "the lapsed lease: {taken:?}");
        assert!(taken[0].token > first[0].token);
        let counts = upgraded.status_counts().await.expect("counts");
        assert_eq!((counts.takeovers, counts.running), (1, 1));
        upgraded.close().await;
    }));
}

/// A version 21 schema upgrades to 22 in place: the horizon index keeps only rows that are
/// not running, the admission-order index is gone, new pages are half filled; with rows
/// stored before the upgrade, an unfiltered page lists them newest first, a claim takes the
/// waiting ones and reports the running one's instant as its horizon.
#[test]
fn a_version_21_schema_upgrades_to_fewer_writes_per_delivery() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let clock = ManualClock::starting_now();
        let connect = || connect_at(&schema, &clock);
        let backend = connect().await;
        let names = ["first", "second", "third"];
        for name in names {
            let id = ExecutionId::new(name).expect("id");
            backend.admit(&Admission::new(id)).await.expect("admit");
        }
        let lease = Duration::from_secs(30);
        let held = backend
            .claim_due(ClaimRequest {
                now: clock.now(),
                limit: 1,
                duration: lease,
            })
            .await
            .expect("claim");
        assert_eq!(held.len(), 1);
        backend.close().await;
        let mut conn = admin().await;
        exec(&mut conn, undo_version_22(&schema)).await;

        let upgraded = connect().await;
        let indexes: Vec<String> = sqlx::query_scalar(
            "SELECT indexname::text FROM pg_indexes WHERE schemaname = $1 \
             AND tablename = 'executions' ORDER BY 1",
        )
        .bind(&schema)
        .fetch_all(&mut conn)
        .await
        .expect("indexes");
        assert!(indexes.contains(&"executions_horizon_waiting".to_owned()));
        for gone in ["executions_horizon", "executions_admitted"] {
            assert!(!indexes.contains(&gone.to_owned()), "{gone}: {indexes:?}");
        }
        let options: Option<Vec<String>> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT reloptions FROM pg_class WHERE oid = '\"{schema}\".executions'::regclass"
        )))
        .fetch_one(&mut conn)
        .await
        .expect("reloptions");
        assert_eq!(options, Some(vec!["fillfactor=50".to_owned()]));

        let page = upgraded
            .list_executions(&ExecutionFilter::default(), None, 10)
            .await
            .expect("page");
        let listed: Vec<&str> = page.records.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(listed, ["third", "second", "first"]);
        clock.advance(Duration::from_secs(5));
        let batch = upgraded
            .claim_due_with_horizon(ClaimRequest {
                now: clock.now(),
                limit: 10,
                duration: lease,
            })
            .await
            .expect("claim");
        assert_eq!(batch.claimed.len(), 2);
        // The new leases expire 5 s after the held one, whose instant (its expiry plus the
        // first redelivery delay) only the running rows' seek of the horizon finds.
        let running: Option<i64> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT claimable_at FROM \"{schema}\".executions WHERE id = $1"
        )))
        .bind(held[0].execution_id.as_str())
        .fetch_one(&mut conn)
        .await
        .expect("claimable_at");
        assert_eq!(
            batch.next_claimable_at.map(|t| t.as_millis()),
            running,
            "{batch:?}"
        );
        upgraded.close().await;
    }));
}
