//! The RFC 002 conformance suite against the in-memory mode: a fresh named in-memory
//! database per case; peers are new connections to the same database (memdb VFS).

use std::sync::Arc;

use async_trait::async_trait;
use lease_core::{ManualClock, RedeliveryPolicy, Result};
use lease_sqlite::{SqliteBackend, SqliteConfig};

/// Harness: one private in-memory database per case, gone when its last handle drops.
pub struct InMemoryHarness(SqliteBackend);

#[async_trait]
impl lease_conformance::Harness for InMemoryHarness {
    type Backend = SqliteBackend;

    async fn setup(clock: ManualClock, policy: RedeliveryPolicy) -> Result<Self> {
        let config = SqliteConfig::in_memory()
            .clock(Arc::new(clock))
            .policy(policy);
        Ok(InMemoryHarness(SqliteBackend::open(config).await?))
    }

    fn backend(&self) -> SqliteBackend {
        self.0.clone()
    }

    async fn peer(&self) -> Result<SqliteBackend> {
        self.0.peer().await
    }

    async fn teardown(self) -> Result<()> {
        Ok(())
    }
}

lease_conformance::conformance_tests!(InMemoryHarness);
