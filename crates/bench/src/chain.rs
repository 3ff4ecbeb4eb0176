//! `acknowledge_and_claim` against `acknowledge` + `claim_due_with_horizon` (does one round
//! trip per delivery pay off?): one delivery after another, one call in flight, each call
//! acknowledging the lease it holds and claiming the next due execution (limit 1), as a
//! dispatcher at concurrency 1 does. Counted in deliveries/s. Library and raw interleaved
//! on one store, each call timed on its own (as [`crate::ops`]).
//!
//! Raw bound of the combined call: SQLite, the acknowledgement's and the claim's statements
//! in one `BEGIN IMMEDIATE` transaction; PostgreSQL, the acknowledge and claim statements as
//! one simple-query message (one implicit transaction); Redis, the library's own
//! `acknowledge_and_claim` script. Raw bound of the split pair: the raw acknowledge, then the
//! raw claim.

use lease_core::ExecutionClientExt;
use std::time::{Duration, Instant};

use lease_core::{
    Acknowledgement, ExecutionLease, Fenced, Json, SharedBackend, WorkflowRunOutcome,
};

use crate::args::{Kind, Options};
use crate::client::OUTCOME;
use crate::error::{BenchError, Context, Result};
use crate::fill;
use crate::fixture::Fixture;
use crate::measure::{PROBE, Sample, cap};
use crate::raw::{LEASE_MS, Raw, RawLease};

/// The two rows: the combined call, then the split pair.
pub const NAMES: [&str; 2] = [
    "ack_and_claim x1 (one call)",
    "ack_and_claim as acknowledge + claim_due_with_horizon",
];

fn lease_duration() -> Duration {
    Duration::from_millis(LEASE_MS.unsigned_abs())
}

async fn lib_step(
    lib: &SharedBackend,
    lease: ExecutionLease,
    combined: bool,
) -> Result<Option<ExecutionLease>> {
    let outcome = WorkflowRunOutcome::Completed(Json::null());
    let next = fill::request(1, lease_duration());
    let batch = if combined {
        let r = lib
            .acknowledge_and_claim(&Acknowledgement { lease, outcome }, next)
            .await
            .context(|| "acknowledge_and_claim".into())?;
        if let Fenced::Lost = r.acknowledged {
            return Err(BenchError::Setup("acknowledge_and_claim: lost".into()));
        }
        r.next
    } else {
        if let Fenced::Lost = lib
            .acknowledge(&lease, &outcome)
            .await
            .context(|| "acknowledge".into())?
        {
            return Err(BenchError::Setup("acknowledge: lost".into()));
        }
        lib.claim_due_with_horizon(next)
            .await
            .context(|| "claim_due_with_horizon".into())?
    };
    Ok(batch.claimed.into_iter().next().map(|c| c.lease))
}

async fn raw_step(raw: &dyn Raw, lease: RawLease, combined: bool) -> Result<Option<RawLease>> {
    let got = if combined {
        raw.ack_and_claim(&lease, OUTCOME, 1).await?
    } else {
        raw.acknowledge(&lease, OUTCOME).await?;
        raw.claim(1).await?
    };
    Ok(got.into_iter().next())
}

/// Alternates library and raw deliveries (which goes first alternates too) for `wall`, or
/// until a side runs dry; each side's sample is its deliveries over its own calls' time.
async fn run(
    lib: &SharedBackend,
    raw: &dyn Raw,
    l: &mut Option<ExecutionLease>,
    r: &mut Option<RawLease>,
    combined: bool,
    wall: Duration,
) -> Result<(Sample, Sample)> {
    if l.is_none() {
        *l = lib
            .claim_due(fill::request(1, lease_duration()))
            .await
            .context(|| "claim_due".into())?
            .into_iter()
            .next();
    }
    if r.is_none() {
        *r = raw.claim(1).await?.into_iter().next();
    }
    let mut a = Sample {
        count: 0,
        secs: 0.0,
    };
    let mut b = a;
    let started = Instant::now();
    let mut i = 0u64;
    while started.elapsed() < wall && l.is_some() && r.is_some() {
        for side in [i % 2, (i + 1) % 2] {
            if side == 0 {
                if let Some(lease) = l.take() {
                    let t = Instant::now();
                    *l = lib_step(lib, lease, combined).await?;
                    a.secs += t.elapsed().as_secs_f64();
                    a.count += 1;
                }
            } else if let Some(lease) = r.take() {
                let t = Instant::now();
                *r = raw_step(raw, lease, combined).await?;
                b.secs += t.elapsed().as_secs_f64();
                b.count += 1;
            }
        }
        i += 1;
    }
    Ok((a, b))
}

/// One round on a fresh store: (library, raw).
pub async fn measure(
    kind: Kind,
    combined: bool,
    options: &Options,
    duration: Duration,
) -> Result<(Sample, Sample)> {
    let fx = Fixture::new(kind, options).await?;
    let result = async {
        let raw = fx.raw_client().await?;
        let lib = fx.lib.clone();
        let probe = 5_000;
        fill::admit(&lib, "k", 0, probe, None).await?;
        // PostgreSQL: ANALYZE after the bulk admission (see crate::raw::Raw::settle).
        raw.settle().await?;
        let (mut l, mut r) = (None, None);
        let (pa, pb) = run(&lib, raw.as_ref(), &mut l, &mut r, combined, PROBE).await?;
        let rate = (pa.count + pb.count) as f64 / (pa.secs + pb.secs).max(1e-9);
        let wanted = (rate * duration.as_secs_f64() * 2.0 * 1.3).ceil() as u64;
        fill::admit(&lib, "k", probe, wanted.min(cap(kind)), None).await?;
        run(&lib, raw.as_ref(), &mut l, &mut r, combined, duration * 2).await
    }
    .await;
    fx.remove_after(result).await
}
