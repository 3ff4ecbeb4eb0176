//! The conformance suite against the redb example adapter: a fresh database file in its own
//! temporary directory per case.

use std::sync::Arc;

use async_trait::async_trait;
use lease_core::{LeaseError, ManualClock, RedeliveryPolicy, Result};
use lease_redb_example::{RedbBackend, open};

/// Harness: one temp dir and database file per case, removed at teardown.
pub struct RedbHarness {
    backend: RedbBackend,
    dir: tempfile::TempDir,
}

#[async_trait]
impl lease_conformance::Harness for RedbHarness {
    type Backend = RedbBackend;

    async fn setup(clock: ManualClock, policy: RedeliveryPolicy) -> Result<Self> {
        let dir = tempfile::tempdir().map_err(|e| LeaseError::Backend {
            backend: "redb",
            operation: "test setup",
            source: Box::new(e),
        })?;
        let backend = open(dir.path().join("leases.redb"), Arc::new(clock), policy)?;
        Ok(RedbHarness { backend, dir })
    }

    fn backend(&self) -> RedbBackend {
        self.backend.clone()
    }

    /// redb allows one open `Database` per file per process, so the peer shares this one
    /// through its `Arc`, as a second handle in the same process would.
    async fn peer(&self) -> Result<RedbBackend> {
        Ok(self.backend.peer())
    }

    async fn teardown(self) -> Result<()> {
        drop(self.backend);
        drop(self.dir);
        Ok(())
    }
}

lease_conformance::conformance_tests!(RedbHarness);
