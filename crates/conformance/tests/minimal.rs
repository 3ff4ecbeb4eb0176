//! The suite run against an adapter that implements only the required trait methods: the
//! in-memory reference backend behind a wrapper that forwards nothing else, so every
//! defaulted method (`acknowledge_batch`, `acknowledge_and_claim`, `admit_batch`,
//! `wakeups`, `status_counts`...) runs its default, as in an out-of-tree adapter that
//! overrides none of them. Its claim returns the records but no horizon (a backend that
//! cannot tell the next claimable instant), so its dispatcher only polls.

use std::time::Duration;

use async_trait::async_trait;
use lease_core::{
    Acknowledged, Admission, ClaimBatch, ClaimRequest, ExecutionClient, ExecutionClientExt,
    ExecutionId, ExecutionLease, ExecutionRecord, Fenced, HeapClient, HeapRecord, Json,
    ManualClock, MemoryBackend, RedeliveryPolicy, Result, StartClient, StartRequest, Started,
    StepKey, StepWrite, StoreClient, StoreId, StoreKey, StoreOp, StoreReceipt, StoreSnapshot,
    StoreUpdate, Timestamp, WorkflowRunOutcome,
};

/// The reference backend with only the required methods forwarded.
#[derive(Clone)]
pub struct Minimal(MemoryBackend);

#[async_trait]
impl ExecutionClient for Minimal {
    async fn admit(&self, admission: &Admission) -> Result<ExecutionRecord> {
        // Without priorities and concurrency keys, an adapter refuses them: admitting them
        // and then ignoring them would break what the caller asked for.
        Admission::refuse_controls(self.backend_name(), std::slice::from_ref(admission))?;
        self.0.admit(admission).await
    }
    async fn get(&self, id: &ExecutionId) -> Result<Option<ExecutionRecord>> {
        self.0.get(id).await
    }
    async fn list_failing(&self, min: u32, limit: usize) -> Result<Vec<ExecutionRecord>> {
        self.0.list_failing(min, limit).await
    }
    async fn request_wake(&self, id: &ExecutionId, at: Timestamp) -> Result<()> {
        self.0.request_wake(id, at).await
    }
    async fn claim_due_with_horizon(&self, request: ClaimRequest) -> Result<ClaimBatch> {
        Ok(ClaimBatch {
            claimed: self.0.claim_due_with_records(request).await?,
            now: None,
            next_claimable_at: None,
        })
    }
    async fn renew(&self, lease: &ExecutionLease, d: Duration) -> Result<Fenced<ExecutionLease>> {
        self.0.renew(lease, d).await
    }
    async fn release(&self, lease: &ExecutionLease) -> Result<Fenced<()>> {
        self.0.release(lease).await
    }
    async fn acknowledge(
        &self,
        lease: &ExecutionLease,
        outcome: &WorkflowRunOutcome,
    ) -> Result<Fenced<Acknowledged>> {
        self.0.acknowledge(lease, outcome).await
    }
    async fn now(&self) -> Result<Timestamp> {
        self.0.now().await
    }
}

#[async_trait]
impl HeapClient for Minimal {
    async fn write_step(
        &self,
        lease: &ExecutionLease,
        w: &StepWrite,
    ) -> Result<Fenced<HeapRecord>> {
        self.0.write_step(lease, w).await
    }
    async fn read_step(
        &self,
        id: &ExecutionId,
        key: &StepKey,
        attempt: u32,
    ) -> Result<Option<HeapRecord>> {
        self.0.read_step(id, key, attempt).await
    }
    async fn list_steps(&self, id: &ExecutionId) -> Result<Vec<HeapRecord>> {
        self.0.list_steps(id).await
    }
}

#[async_trait]
impl StoreClient for Minimal {
    async fn get_or_create(
        &self,
        store: &StoreId,
        initial: &[(StoreKey, Json)],
    ) -> Result<StoreSnapshot> {
        self.0.get_or_create(store, initial).await
    }
    async fn read_entry(&self, store: &StoreId, key: &StoreKey) -> Result<Option<Json>> {
        self.0.read_entry(store, key).await
    }
    async fn update(&self, receipt: &StoreReceipt, op: &StoreOp) -> Result<StoreUpdate> {
        self.0.update(receipt, op).await
    }
}

#[async_trait]
impl StartClient for Minimal {
    async fn start(&self, request: &StartRequest) -> Result<Started> {
        self.0.start(request).await
    }
}

/// Harness for [`Minimal`]: a fresh state per case; peers share it.
pub struct MinimalHarness(MemoryBackend);

#[async_trait]
impl lease_conformance::Harness for MinimalHarness {
    type Backend = Minimal;

    async fn setup(clock: ManualClock, policy: RedeliveryPolicy) -> Result<Self> {
        Ok(MinimalHarness(
            MemoryBackend::with_clock(std::sync::Arc::new(clock)).with_policy(policy),
        ))
    }

    fn backend(&self) -> Minimal {
        Minimal(self.0.clone())
    }

    async fn peer(&self) -> Result<Minimal> {
        Ok(Minimal(self.0.peer()))
    }

    async fn teardown(self) -> Result<()> {
        Ok(())
    }
}

lease_conformance::conformance_tests!(MinimalHarness);
