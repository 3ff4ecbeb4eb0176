//! `drop_schema` drops only what the library created, so it never destroys the
//! application's own data: an application table in the lease schema, an object elsewhere
//! that depends on a lease table, or the schema `public` (a unit test in `backend.rs`:
//! connecting would migrate into `public`) make it refuse with `LeaseError::Schema`,
//! changing nothing; `drop_schema_forced` keeps `CASCADE` for callers that own everything
//! in the schema.

mod common;

use lease_core::LeaseError;
use lease_postgres::{PostgresBackend, PostgresConfig};
use sqlx::{AssertSqlSafe, Connection, PgConnection};

async fn admin() -> PgConnection {
    PgConnection::connect(&common::url())
        .await
        .expect("admin connection")
}

async fn exec(sql: String) {
    let mut conn = admin().await;
    sqlx::raw_sql(AssertSqlSafe(sql))
        .execute(&mut conn)
        .await
        .expect("admin sql");
}

async fn schema_exists(schema: &str) -> bool {
    let mut conn = admin().await;
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
        .bind(schema)
        .fetch_one(&mut conn)
        .await
        .expect("schema query")
}

async fn connect(schema: &str) -> PostgresBackend {
    let config = PostgresConfig::new(common::url())
        .schema(schema)
        .max_connections(2);
    PostgresBackend::connect(config).await.expect("connect")
}

/// Runs `body` on a fresh schema name, dropping the schema afterwards whatever happened.
async fn in_fresh_schema<F, Fut>(body: F)
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let schema = common::fresh_schema();
    common::cleaning_up(schema.clone(), body(schema)).await;
}

/// The refusal is a schema error naming `named`, and the schema is still there.
async fn assert_refused(backend: &PostgresBackend, schema: &str, named: &str) {
    let err = backend.drop_schema().await.expect_err("dropped");
    assert!(matches!(err, LeaseError::Schema { .. }), "{err:?}");
    assert!(err.to_string().contains(named), "{err}");
    assert!(schema_exists(schema).await, "{schema} was dropped");
}

#[tokio::test]
async fn an_application_table_in_the_schema_is_refused_and_nothing_dropped() {
    in_fresh_schema(|s| async move {
        let backend = connect(&s).await;
        exec(format!(
            "CREATE TABLE \"{s}\".charges (id text PRIMARY KEY)"
        ))
        .await;
        assert_refused(&backend, &s, "charges").await;
        // The library's tables are still usable: nothing was dropped.
        exec(format!("SELECT count(*) FROM \"{s}\".executions")).await;
        backend.drop_schema_forced().await.expect("forced drop");
        assert!(!schema_exists(&s).await);
        backend.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_view_elsewhere_on_a_lease_table_is_refused() {
    let app = common::fresh_schema();
    let a = app.clone();
    in_fresh_schema(|s| async move {
        let backend = connect(&s).await;
        exec(format!(
            "CREATE SCHEMA \"{a}\"; CREATE VIEW \"{a}\".running AS \
             SELECT id FROM \"{s}\".executions"
        ))
        .await;
        assert_refused(&backend, &s, "running").await;
        exec(format!("SELECT * FROM \"{a}\".running")).await;
        exec(format!("DROP SCHEMA \"{a}\" CASCADE")).await;
        backend
            .drop_schema()
            .await
            .expect("drop once the view is gone");
        assert!(!schema_exists(&s).await);
        backend.close().await;
    })
    .await;
    common::drop_schema_named(&app).await;
}

#[tokio::test]
async fn a_clean_library_schema_is_dropped() {
    in_fresh_schema(|s| async move {
        let backend = connect(&s).await;
        backend.drop_schema().await.expect("drop");
        assert!(!schema_exists(&s).await);
        // Dropping again is a no-op, as before.
        backend.drop_schema().await.expect("drop again");
        backend.close().await;
    })
    .await;
}
