//! Filling a store for the drain and storage rows (setup, never timed): executions admitted in
//! batches through the library's `admit_batch`, leases claimed in batches, and terminal
//! executions copied server-side from one the library completed ([`crate::raw::Raw::
//! clone_terminal`]), so 10^6 stored executions take seconds, not an hour of acknowledgements.

use lease_core::ExecutionClientExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lease_core::{
    Admission, ClaimRequest, ExecutionId, ExecutionLease, Fenced, Json, SharedBackend, StepKey,
    StepWrite, Timestamp, WorkflowRunOutcome,
};

use crate::client::{FAR_FUTURE, STEP_RESPONSE};
use crate::error::{BenchError, Context, Result};
use crate::raw::clone_id;

/// The id of the terminal execution the copies are made from.
pub const TEMPLATE: &str = "template";

/// The most one `admit_batch` / claim call takes.
const BATCH: u64 = 1000;

/// Milliseconds since the Unix epoch on the system clock (the servers are on this machine).
pub fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Admits ids `{prefix}{i:09}` for `i` in `from..from + n`, 1000 per `admit_batch` call,
/// due now or not before `at`.
pub async fn admit(
    lib: &SharedBackend,
    prefix: &str,
    from: u64,
    n: u64,
    at: Option<Timestamp>,
) -> Result<()> {
    admit_each(lib, prefix, from, n, |_, a| {
        Ok(match at {
            Some(t) => a.not_before(t),
            None => a,
        })
    })
    .await
}

/// Admits ids `{prefix}{i:09}` for `i` in `from..from + n`, 1000 per `admit_batch` call,
/// each admission as `make(i, Admission::new(id))` returns it (the control rows' priorities and
/// concurrency keys, [`crate::controls::mix::Mix`]).
pub async fn admit_each(
    lib: &SharedBackend,
    prefix: &str,
    from: u64,
    n: u64,
    make: impl Fn(u64, Admission) -> lease_core::Result<Admission>,
) -> Result<()> {
    let mut i = from;
    while i < from + n {
        let end = (i + BATCH).min(from + n);
        let batch = (i..end)
            .map(|k| make(k, Admission::new(ExecutionId::new(clone_id(prefix, k))?)))
            .collect::<lease_core::Result<Vec<_>>>()
            .context(|| "admission".into())?;
        let records = lib
            .admit_batch(&batch)
            .await
            .context(|| "admit_batch".into())?;
        if records.len() != batch.len() {
            return Err(BenchError::Setup(format!(
                "admit_batch returned {} of {} records",
                records.len(),
                batch.len()
            )));
        }
        i = end;
    }
    Ok(())
}

/// A claim of up to `limit` at the backend clock's now with leases of `lease`.
pub fn request(limit: usize, lease: Duration) -> ClaimRequest {
    ClaimRequest {
        now: FAR_FUTURE,
        limit,
        duration: lease,
    }
}

/// Claims every due execution with leases of `lease`, 1000 per call; returns how many.
pub async fn claim_everything(lib: &SharedBackend, lease: Duration) -> Result<u64> {
    let mut n = 0;
    loop {
        let got = lib
            .claim_due(request(BATCH as usize, lease))
            .await
            .context(|| "claim_due".into())?;
        if got.is_empty() {
            return Ok(n);
        }
        n += got.len() as u64;
    }
}

fn accepted<T>(op: &str, f: Fenced<T>) -> Result<T> {
    match f {
        Fenced::Accepted(v) => Ok(v),
        Fenced::Lost => Err(BenchError::Setup(format!("{op}: lost"))),
    }
}

/// Makes [`TEMPLATE`] a completed execution with `steps` step records, through the library
/// (admit, claim, write_step, acknowledge), on a store with nothing else due.
pub async fn template(lib: &SharedBackend, steps: usize) -> Result<()> {
    let id = ExecutionId::new(TEMPLATE).context(|| "id".into())?;
    lib.admit(&Admission::new(id.clone()))
        .await
        .context(|| "admit template".into())?;
    let lease: ExecutionLease = lib
        .claim_due(request(1, Duration::from_secs(30)))
        .await
        .context(|| "claim template".into())?
        .into_iter()
        .next()
        .filter(|l| l.execution_id == id)
        .ok_or_else(|| BenchError::Setup("the template was not claimed".into()))?;
    let response = Json::parse("step", STEP_RESPONSE).context(|| "json".into())?;
    for k in 0..steps {
        let write = StepWrite {
            step_key: StepKey::new(format!("step-{k}")).context(|| "step key".into())?,
            step_attempt: 1,
            done: true,
            response: response.clone(),
        };
        accepted(
            "write_step",
            lib.write_step(&lease, &write)
                .await
                .context(|| "template step".into())?,
        )?;
    }
    accepted(
        "acknowledge",
        lib.acknowledge(&lease, &WorkflowRunOutcome::Completed(Json::null()))
            .await
            .context(|| "acknowledge template".into())?,
    )?;
    Ok(())
}

/// Fills the fixture's store with `n` completed executions with `steps` step records each:
/// [`TEMPLATE`] through the library and `n - 1` server-side copies of it, then the server's
/// settling ([`crate::raw::Raw::settle`]). Returns the raw client it used.
pub async fn completed(
    fx: &crate::fixture::Fixture,
    steps: usize,
    n: u64,
) -> Result<std::sync::Arc<dyn crate::raw::Raw>> {
    let raw = fx
        .raw()
        .await?
        .ok_or_else(|| BenchError::Setup("no raw client".into()))?;
    template(&fx.lib, steps).await?;
    raw.clone_terminal(TEMPLATE, "p", 0, n - 1).await?;
    raw.settle().await?;
    Ok(raw)
}
