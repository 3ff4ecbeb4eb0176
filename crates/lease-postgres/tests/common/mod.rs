//! Shared test support: the database URL, fresh schemas, and the conformance harness.

#![allow(dead_code)]

use std::sync::Arc;

use async_trait::async_trait;
use lease_core::{ManualClock, RedeliveryPolicy, Result};
use lease_postgres::{PostgresBackend, PostgresConfig};

/// The test database: `LEASE_POSTGRES_URL`, else the local default. An unreachable server
/// fails the tests; it never skips them.
pub fn url() -> String {
    std::env::var("LEASE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
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

#[async_trait]
impl lease_conformance::Harness for PostgresHarness {
    type Backend = PostgresBackend;

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
