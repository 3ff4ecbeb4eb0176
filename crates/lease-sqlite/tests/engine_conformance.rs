//! The RFC 002 conformance suite against lease-core's engine over the SQLite backend's
//! tables ([`SqliteStore`]): the rules written once in the engine must hold on SQLite's rows
//! exactly as the backend's own operations keep them.

use std::sync::Arc;

use async_trait::async_trait;
use lease_core::engine::Engine;
use lease_core::{ManualClock, RedeliveryPolicy, Result};
use lease_sqlite::{SqliteBackend, SqliteConfig, SqliteStore};

/// Harness: one temp dir and file per case, removed at teardown.
pub struct EngineHarness {
    engine: Engine<SqliteStore>,
    backend: SqliteBackend,
    clock: ManualClock,
    policy: RedeliveryPolicy,
    dir: tempfile::TempDir,
}

impl EngineHarness {
    /// The engine over `backend`'s connection, on the case's clock and policy.
    fn engine_over(&self, backend: SqliteBackend) -> Engine<SqliteStore> {
        Engine::over(backend.store().clone(), Arc::new(self.clock.clone())).with_policy(self.policy)
    }
}

#[async_trait]
impl lease_conformance::Harness for EngineHarness {
    type Backend = Engine<SqliteStore>;

    async fn setup(clock: ManualClock, policy: RedeliveryPolicy) -> Result<Self> {
        let dir = tempfile::tempdir().map_err(|e| lease_core::LeaseError::Backend {
            backend: "sqlite",
            operation: "test setup",
            source: Box::new(e),
        })?;
        let config = SqliteConfig::file(dir.path().join("engine.db"))
            .clock(Arc::new(clock.clone()))
            .policy(policy);
        let backend = SqliteBackend::open(config).await?;
        let engine =
            Engine::over(backend.store().clone(), Arc::new(clock.clone())).with_policy(policy);
        Ok(EngineHarness {
            engine,
            backend,
            clock,
            policy,
            dir,
        })
    }

    fn backend(&self) -> Engine<SqliteStore> {
        self.engine.clone()
    }

    async fn peer(&self) -> Result<Engine<SqliteStore>> {
        Ok(self.engine_over(self.backend.peer().await?))
    }

    async fn teardown(self) -> Result<()> {
        drop(self.engine);
        drop(self.backend);
        drop(self.dir);
        Ok(())
    }
}

lease_conformance::conformance_tests!(EngineHarness);
