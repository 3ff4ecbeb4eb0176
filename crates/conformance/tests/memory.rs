//! The suite run against the in-memory reference backend.

use async_trait::async_trait;
use lease_core::{ManualClock, MemoryBackend, RedeliveryPolicy, Result};

/// Harness for [`MemoryBackend`]: a fresh state per case; peers share it.
pub struct MemoryHarness(MemoryBackend);

#[async_trait]
impl lease_conformance::Harness for MemoryHarness {
    type Backend = MemoryBackend;

    async fn setup(clock: ManualClock, policy: RedeliveryPolicy) -> Result<Self> {
        Ok(MemoryHarness(
            MemoryBackend::with_clock(std::sync::Arc::new(clock)).with_policy(policy),
        ))
    }

    fn backend(&self) -> MemoryBackend {
        self.0.clone()
    }

    async fn peer(&self) -> Result<MemoryBackend> {
        Ok(self.0.peer())
    }

    async fn teardown(self) -> Result<()> {
        Ok(())
    }
}

lease_conformance::conformance_tests!(MemoryHarness);
