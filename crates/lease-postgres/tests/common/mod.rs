//! Shared test support: the database URL, fresh schemas, and the conformance harness.

#![allow(dead_code)]

use std::sync::Arc;

use async_trait::async_trait;
use lease_core::{ManualClock, RedeliveryPolicy, Result};
use lease_postgres::{PostgresBackend, PostgresConfig};

/// The test database: `LEASE_POSTGRES_URL`, else the local default. An unreachable server
/// fails the tests; it never skips them.
pub fn url() -> String {
    lease_testserver::postgres_url()
}

/// A schema name nobody else uses (prefix `lease_t_` so leftovers are recognisable).
pub fn fresh_schema() -> String {
    format!("lease_t_{}", uuid::Uuid::new_v4().simple())
}

/// A configuration for a fresh schema over `clock`, with a small pool (the server is shared).
pub fn config(clock: ManualClock, policy: RedeliveryPolicy) -> PostgresConfig {
    PostgresConfig::new(url())
        .schema(fresh_schema())
        .clock(Arc::new(clock))
        .policy(policy)
        .max_connections(4)
}

/// Drops `schema` (if it exists) over a fresh connection: cleanup that works after a test
/// panicked with the backend in any state.
pub async fn drop_schema_named(schema: &str) {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(&url())
        .await
        .expect("cleanup connection");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
    )))
    .execute(&mut conn)
    .await
    .expect("drop schema");
}

/// Runs `body` as a task, then drops `schema` whatever happened, then re-raises a panic of
/// the body: no test leaves its schema behind in the shared database.
pub async fn cleaning_up<F>(schema: String, body: F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let outcome = tokio::spawn(body).await;
    drop_schema_named(&schema).await;
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

/// Harness: a fresh random schema per case; peers are separate pools on the same schema;
/// teardown drops the schema.
pub struct PostgresHarness {
    backend: PostgresBackend,
}

/// Terminates, on the server, every wake-up listener connection of `backend`'s schema
/// (found by the listener's `application_name`); the number terminated.
pub async fn kill_listeners_of(backend: &PostgresBackend) -> usize {
    let killed: i64 = sqlx::query_scalar(
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE application_name = $1 AND pid <> pg_backend_pid()",
    )
    .bind(backend.listener_application_name())
    .fetch_one(backend.pool())
    .await
    .expect("terminate listeners");
    usize::try_from(killed).expect("a count")
}

/// [`kill_listeners_of`], polling (10 s deadline) until there was at least one to kill: a
/// listener is started by the first `wakeups()` call and connects asynchronously.
pub async fn kill_listeners_when_connected(backend: &PostgresBackend) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let killed = kill_listeners_of(backend).await;
        if killed > 0 || std::time::Instant::now() > deadline {
            return killed;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Waits (10 s deadline) until `backend`'s wake-up listener has run its LISTEN: from then
/// on every committed notification reaches it.
pub async fn wait_until_listening(backend: &PostgresBackend) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let listening: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE application_name = $1 AND state = 'idle' AND query LIKE 'LISTEN %'",
        )
        .bind(backend.listener_application_name())
        .fetch_one(backend.pool())
        .await
        .expect("pg_stat_activity");
        if listening > 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the wake-up listener never listened"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

#[async_trait]
impl lease_conformance::Harness for PostgresHarness {
    type Backend = PostgresBackend;

    const KILLABLE_LISTENER: bool = true;

    async fn kill_listeners(&self) -> Result<bool> {
        Ok(kill_listeners_when_connected(&self.backend).await > 0)
    }

    async fn setup(clock: ManualClock, policy: RedeliveryPolicy) -> Result<Self> {
        let backend = PostgresBackend::connect(config(clock, policy)).await?;
        Ok(PostgresHarness { backend })
    }

    fn backend(&self) -> PostgresBackend {
        self.backend.clone()
    }

    async fn peer(&self) -> Result<PostgresBackend> {
        self.backend.peer().await
    }

    async fn teardown(self) -> Result<()> {
        self.backend.drop_schema().await?;
        self.backend.close().await;
        Ok(())
    }
}
