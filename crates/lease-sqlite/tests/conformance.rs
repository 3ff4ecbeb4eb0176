//! The RFC 002 conformance suite against the SQLite backend: a fresh database file in its
//! own temporary directory per case; peers open the same file on their own connections.

use std::sync::Arc;

use async_trait::async_trait;
use lease_core::{ManualClock, RedeliveryPolicy, Result};
use lease_sqlite::{SqliteBackend, SqliteConfig};

/// Harness: one temp dir and file per case, removed at teardown.
pub struct SqliteHarness {
    backend: SqliteBackend,
    dir: tempfile::TempDir,
}

#[async_trait]
impl lease_conformance::Harness for SqliteHarness {
    type Backend = SqliteBackend;

    async fn setup(clock: ManualClock, policy: RedeliveryPolicy) -> Result<Self> {
        let dir = tempfile::tempdir().map_err(|e| lease_core::LeaseError::Backend {
            backend: "sqlite",
            operation: "test setup",
            source: Box::new(e),
        })?;
        let config = SqliteConfig::file(dir.path().join("conformance.db"))
            .clock(Arc::new(clock))
            .policy(policy);
        let backend = SqliteBackend::open(config).await?;
        Ok(SqliteHarness { backend, dir })
    }

    fn backend(&self) -> SqliteBackend {
        self.backend.clone()
    }

    async fn peer(&self) -> Result<SqliteBackend> {
        self.backend.peer().await
    }

    async fn teardown(self) -> Result<()> {
        drop(self.backend);
        drop(self.dir);
        Ok(())
    }
}

lease_conformance::conformance_tests!(SqliteHarness);
