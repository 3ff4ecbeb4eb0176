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
