//! One interface over the library and the raw baseline, so every measurement runs the
//! same loop on both sides of the comparison.

use lease_core::ExecutionClientExt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lease_core::{
    ClaimRequest, ExecutionLease, Fenced, Json, SharedBackend, StepKey, StepWrite, Timestamp,
    WorkflowRunOutcome,
};

use crate::error::{BenchError, Context, Result};
use crate::raw::{LEASE_MS, Raw, RawLease};

/// The step response every step of the bench records (canonical JSON).
pub const STEP_RESPONSE: &str = r#"{"ok":true}"#;

/// The outcome every execution completes with.
pub const OUTCOME: &str = "null";

/// A caller's `now` later than any backend clock: every backend claims with
/// `min(request.now, its clock)`, so this claims at the backend clock's now without an
/// extra round trip to read it.
pub const FAR_FUTURE: Timestamp = Timestamp::from_millis(i64::MAX);

/// The four hot-path operations of one side of the comparison.
#[async_trait]
pub trait Client: Send + Sync + 'static {
    /// What a claim hands out.
    type Lease: Clone + Send + Sync + 'static;
    /// Claims up to `limit` due executions.
    async fn claim(&self, limit: usize) -> Result<Vec<Self::Lease>>;
    /// Renews a lease; an error unless accepted.
    async fn renew(&self, lease: &Self::Lease) -> Result<()>;
    /// Writes a new done step `step_key`; an error unless accepted.
    async fn write_step(&self, lease: &Self::Lease, step_key: &str) -> Result<()>;
    /// Acknowledges completed; an error unless accepted.
    async fn acknowledge(&self, lease: &Self::Lease) -> Result<()>;
}

/// The library side: the backend's public trait methods, as an application calls them.
pub struct Library {
    backend: SharedBackend,
    response: Json,
    outcome: WorkflowRunOutcome,
}

impl Library {
    /// Wraps a backend.
    pub fn new(backend: SharedBackend) -> Result<Self> {
        Ok(Library {
            backend,
            response: Json::parse("step response", STEP_RESPONSE).context(|| "json".into())?,
            outcome: WorkflowRunOutcome::Completed(
                Json::parse("outcome", OUTCOME).context(|| "json".into())?,
            ),
        })
    }
}

fn lost(op: &str) -> BenchError {
    BenchError::Setup(format!(
        "library {op}: lost (the bench never loses a lease)"
    ))
}

#[async_trait]
impl Client for Library {
    type Lease = ExecutionLease;

    async fn claim(&self, limit: usize) -> Result<Vec<ExecutionLease>> {
        self.backend
            .claim_due(ClaimRequest {
                now: FAR_FUTURE,
                limit,
                duration: Duration::from_millis(LEASE_MS.unsigned_abs()),
            })
            .await
            .context(|| "claim_due".into())
    }

    async fn renew(&self, lease: &ExecutionLease) -> Result<()> {
        match self
            .backend
            .renew(lease, Duration::from_millis(LEASE_MS.unsigned_abs()))
            .await
            .context(|| "renew".into())?
        {
            Fenced::Accepted(_) => Ok(()),
            Fenced::Lost => Err(lost("renew")),
        }
    }

    async fn write_step(&self, lease: &ExecutionLease, step_key: &str) -> Result<()> {
        let write = StepWrite {
            step_key: StepKey::new(step_key).context(|| "step key".into())?,
            step_attempt: 1,
            done: true,
            response: self.response.clone(),
        };
        match self
            .backend
            .write_step(lease, &write)
            .await
            .context(|| "write_step".into())?
        {
            Fenced::Accepted(_) => Ok(()),
            Fenced::Lost => Err(lost("write_step")),
        }
    }

    async fn acknowledge(&self, lease: &ExecutionLease) -> Result<()> {
        match self
            .backend
            .acknowledge(lease, &self.outcome)
            .await
            .context(|| "acknowledge".into())?
        {
            Fenced::Accepted(_) => Ok(()),
            Fenced::Lost => Err(lost("acknowledge")),
        }
    }
}

/// The raw side.
pub struct Baseline(pub Arc<dyn Raw>);

#[async_trait]
impl Client for Baseline {
    type Lease = RawLease;

    async fn claim(&self, limit: usize) -> Result<Vec<RawLease>> {
        self.0.claim(limit).await
    }

    async fn renew(&self, lease: &RawLease) -> Result<()> {
        self.0.renew(lease).await
    }

    async fn write_step(&self, lease: &RawLease, step_key: &str) -> Result<()> {
        self.0.write_step(lease, step_key, STEP_RESPONSE).await
    }

    async fn acknowledge(&self, lease: &RawLease) -> Result<()> {
        self.0.acknowledge(lease, OUTCOME).await
    }
}
