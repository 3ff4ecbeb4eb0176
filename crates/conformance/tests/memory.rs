//! The suite run against the in-memory reference backend.

use async_trait::async_trait;
use lease_core::{ManualClock, MemoryBackend, RedeliveryPolicy, Result};

/// Harness for [`MemoryBackend`]: a fresh state per case; peers share it.
pub struct MemoryHarness(MemoryBackend);

#[async_trait]
impl lease_conformance::Harness for MemoryHarness {
    type Backend = MemoryBackend;
    const WAKEUPS: bool = true;
    const RETENTION: bool = true;
    const STATUS_COUNTS: bool = true;
    const LIVE_LEASES: bool = true;
    const EFFECTS: bool = true;
    const CANCEL: bool = true;
    const PAUSE: bool = true;
    const PRIORITIES_AND_LIMITS: bool = true;
    const ATTEMPTS: bool = true;
    const RATE_LIMITS: bool = true;
    const ORDERED_KEYS: bool = true;
    const BROWSE: bool = true;
    const WORKFLOW_REDELIVERY: bool = true;
    const DELIVERY_HISTORY: bool = true;

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
