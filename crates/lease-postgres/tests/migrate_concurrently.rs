//! Upgrading an existing schema builds its indexes with `CREATE INDEX CONCURRENTLY`, outside
//! any transaction, each step waiting for locks at most the configured `lock_timeout`: a
//! writer is never queued behind a build, a build behind a long transaction fails typed
//! (leaving an INVALID index), and the next run drops and rebuilds that index.

mod common;

use std::time::{Duration, Instant};

use lease_core::LeaseError;
use lease_postgres::{PostgresBackend, PostgresConfig, SCHEMA_VERSION};
use sqlx::{AssertSqlSafe, Connection, PgConnection};

/// The version before the one that builds `executions_live` concurrently (v14).
const BEFORE_LIVE_INDEX: i32 = 13;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn config(schema: &str, lock_timeout: Duration) -> PostgresConfig {
    PostgresConfig::new(common::url())
        .schema(schema)
        .max_connections(2)
        .lock_timeout(lock_timeout)
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

fn migration_file(name: &str, schema: &str) -> String {
    let path = format!("{}/src/migrate/{name}.sql", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path)
        .expect("migration file")
        .replace("{s}", &format!("\"{schema}\""))
}

/// `schema` as the library left it at `version`: the shipped migrations up to it, applied
/// in one transaction with plain index builds, as a first connect of that version did.
async fn schema_at(schema: &str, version: i32) {
    let mut sql = migration_file("create_version_table", schema);
    sql.push_str(&format!(
        ";\nINSERT INTO \"{schema}\".lease_schema (owner, version) VALUES ('lease-postgres', {version});\n"
    ));
    for v in 1..=version {
        sql.push_str(&migration_file(&format!("v{v}"), schema).replace(" CONCURRENTLY", ""));
        sql.push('\n');
    }
    let mut conn = admin().await;
    let mut tx = conn.begin().await.expect("begin");
    exec(&mut tx, sql).await;
    tx.commit().await.expect("commit");
}

/// `Some(valid)` for the schema's index `name`, `None` when there is none.
async fn index_valid(conn: &mut PgConnection, schema: &str, name: &str) -> Option<bool> {
    sqlx::query_scalar(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
         JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2",
    )
    .bind(schema)
    .bind(name)
    .fetch_optional(conn)
    .await
    .expect("pg_index")
}

async fn version_of(conn: &mut PgConnection, schema: &str) -> i32 {
    sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT version FROM \"{schema}\".lease_schema"
    )))
    .fetch_one(conn)
    .await
    .expect("version")
}

/// A transaction holding what a writer holds on `executions` (ROW EXCLUSIVE), open until
/// rolled back.
async fn writer_holding(schema: &str) -> PgConnection {
    let mut holder = admin().await;
    exec(
        &mut holder,
        format!("BEGIN; LOCK TABLE \"{schema}\".executions IN ROW EXCLUSIVE MODE"),
    )
    .await;
    holder
}

/// Polls until a session of the server waits on a lock in a statement building index
/// `name`, or panics after 20 s.
async fn until_build_waits(conn: &mut PgConnection, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
             AND query LIKE '%INDEX%' || $1 || '%'",
        )
        .bind(name)
        .fetch_one(&mut *conn)
        .await
        .expect("pg_stat_activity");
        if waiting > 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the build of {name} never waited"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// While the build of `executions_live` waits for a long writer transaction, another
/// writer still takes its lock on `executions` at once: a build in a transaction (or a
/// plain CREATE INDEX) would queue it behind. Once the long transaction ends the build
/// completes, valid, and every later migration runs.
#[test]
fn a_waiting_index_build_queues_no_writer_behind_it() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        schema_at(&schema, BEFORE_LIVE_INDEX).await;
        let holder = writer_holding(&schema).await;
        let upgrade = tokio::spawn(PostgresBackend::connect(config(
            &schema,
            Duration::from_secs(30),
        )));
        let mut probe = admin().await;
        until_build_waits(&mut probe, "executions_live").await;
        exec(
            &mut probe,
            format!(
                "BEGIN; SET LOCAL lock_timeout = '1s'; \
                 LOCK TABLE \"{schema}\".executions IN ROW EXCLUSIVE MODE; COMMIT"
            ),
        )
        .await;
        holder.close().await.expect("end the long transaction");
        let backend = upgrade.await.expect("task").expect("the upgrade completes");
        assert_eq!(
            index_valid(&mut probe, &schema, "executions_live").await,
            Some(true)
        );
        assert_eq!(version_of(&mut probe, &schema).await, SCHEMA_VERSION);
        backend.close().await;
    }));
}

/// A build waiting behind a long transaction gives up after the configured lock_timeout
/// with `Unavailable`, leaving the INVALID index PostgreSQL keeps from a failed concurrent
/// build and the version where it was; the next connect drops and rebuilds it, valid.
#[test]
fn a_build_past_its_lock_timeout_fails_typed_and_is_rebuilt_on_retry() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        schema_at(&schema, BEFORE_LIVE_INDEX).await;
        let holder = writer_holding(&schema).await;
        let lock_timeout = Duration::from_millis(300);
        let started = Instant::now();
        let failed = tokio::time::timeout(
            Duration::from_secs(30),
            PostgresBackend::connect(config(&schema, lock_timeout)),
        )
        .await
        .expect("the migration waited without a bound")
        .err();
        let waited = started.elapsed();
        assert!(
            matches!(failed, Some(LeaseError::Unavailable { .. })),
            "{failed:?}"
        );
        assert!(waited < Duration::from_secs(5), "waited {waited:?}");
        let mut conn = admin().await;
        assert_eq!(
            index_valid(&mut conn, &schema, "executions_live").await,
            Some(false),
            "a failed concurrent build leaves an INVALID index"
        );
        assert_eq!(version_of(&mut conn, &schema).await, BEFORE_LIVE_INDEX);

        holder.close().await.expect("end the long transaction");
        // The retry gets a generous bound: a concurrent build also waits out every older
        // transaction of the database (the other test of this file runs beside it), and
        // what is checked here is the rebuild, not the bound.
        let backend = PostgresBackend::connect(config(&schema, Duration::from_secs(30)))
            .await
            .expect("the retry migrates");
        assert_eq!(
            index_valid(&mut conn, &schema, "executions_live").await,
            Some(true),
            "the INVALID index was rebuilt"
        );
        assert_eq!(version_of(&mut conn, &schema).await, SCHEMA_VERSION);
        backend.close().await;
    }));
}
