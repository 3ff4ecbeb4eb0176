//! The workload of the comparison with job queues: [`JOBS`] executions admitted up
//! front (`admit_batch`), then a separate worker process (a dispatcher of this binary,
//! `--child`, concurrency C, the empty handler, default options) drains them; timed from
//! the process's spawn to the moment its dispatcher has recorded the last acknowledgement.
//! Jobs/s, median of [`RUNS`] runs (the mean of the two). The job queues are measured
//! beside it in the same run by `--only anchors` ([`crate::anchor_runs`]): figures copied
//! from an earlier run are no comparison (another day's load and build differ), so this
//! row carries none.
//!
//! The raw bound is the raw end-to-end pipeline of 0 steps ([`crate::e2e`]) at the same C on
//! the same kind of store, holding the same [`JOBS`] admitted up front, in this process (no
//! process start, no connect): the claims (batches of up to 32 as free slots allow) and
//! acknowledgements issued as bare statements / scripts. At C = 1 it is two round trips per
//! job where the dispatcher's `acknowledge_and_claim` makes one, so there it is not an
//! upper bound.

use lease_core::ExecutionClientExt;
use std::sync::Arc;
use std::time::Duration;

use crate::anchors::{Cost, Probe};
use crate::args::{Kind, Options};
use crate::controls::setup::Setup;
use crate::e2e::Engine;
use crate::error::{BenchError, Context, Result};
use crate::fill;
use crate::fixture::Fixture;
use crate::measure::Sample;
use crate::side::Side;
use crate::wake::worker;

/// Executions per run.
pub const JOBS: u64 = 20_000;

/// Runs per row (their median is the row's figure).
pub const RUNS: usize = 2;

/// The concurrencies of the job-queue comparison's table.
pub const CONCURRENCY: [usize; 3] = [1, 8, 64];

/// The row's name.
pub fn name(c: usize) -> String {
    format!("drain 20k c{c}")
}

/// Where the dispatcher runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A separate process (the measurement).
    Child,
    /// This process (the unit test, where the test binary cannot be the worker).
    #[cfg_attr(not(test), allow(dead_code))]
    Here,
}

/// One run of one side on a fresh store: jobs/s.
pub async fn sample(
    kind: Kind,
    side: Side,
    c: usize,
    jobs: u64,
    place: Place,
    options: &Options,
) -> Result<Sample> {
    sample_controlled(kind, side, c, jobs, place, options, None).await
}

/// One run as [`sample`], with `setup`'s controls set first and the jobs admitted as it
/// says when given (the drain with controls in use).
pub async fn sample_controlled(
    kind: Kind,
    side: Side,
    c: usize,
    jobs: u64,
    place: Place,
    options: &Options,
    setup: Option<&Setup>,
) -> Result<Sample> {
    let mut fx = Fixture::new(kind, options).await?;
    let drainer = Drainer { c, tuned: false };
    let result = run(&mut fx, side, drainer, jobs, place, &Probe::None, setup).await;
    let (sample, _) = fx.remove_after(result).await?;
    Ok(sample)
}

/// The dispatcher that drains: its concurrency, and whether it runs tuned for throughput
/// (`prefetch` and `claim_batch` of [`worker::TUNED_BATCH`]) rather than at its defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drainer {
    /// Concurrency.
    pub c: usize,
    /// Tuned options.
    pub tuned: bool,
}

/// One run as [`sample`], with the cost per job `probe` reads around the drain alone (after
/// the admissions, until the worker process has exited).
pub async fn sample_probed(
    kind: Kind,
    side: Side,
    drainer: Drainer,
    jobs: u64,
    place: Place,
    options: &Options,
    probe: &Probe,
) -> Result<(Sample, Cost)> {
    let mut fx = Fixture::new(kind, options).await?;
    let result = run(&mut fx, side, drainer, jobs, place, probe, None).await;
    fx.remove_after(result).await
}

/// One library run on `fx` (a store the caller made), with the cost per job `probe`
/// reads around the drain alone; the store is removed afterwards.
pub async fn sample_on(fx: Fixture, c: usize, jobs: u64, probe: &Probe) -> Result<(Sample, Cost)> {
    probed_on(fx, Side::Library, c, jobs, Place::Child, probe).await
}

/// One run of `side` on `fx`, probed by `probe`; the store is removed afterwards.
async fn probed_on(
    mut fx: Fixture,
    side: Side,
    c: usize,
    jobs: u64,
    place: Place,
    probe: &Probe,
) -> Result<(Sample, Cost)> {
    let drainer = Drainer { c, tuned: false };
    let result = run(&mut fx, side, drainer, jobs, place, probe, None).await;
    fx.remove_after(result).await
}

async fn run(
    fx: &mut Fixture,
    side: Side,
    drainer: Drainer,
    jobs: u64,
    place: Place,
    probe: &Probe,
    setup: Option<&Setup>,
) -> Result<(Sample, Cost)> {
    let c = drainer.c;
    admit_jobs(fx, jobs, setup).await?;
    // PostgreSQL: ANALYZE after the bulk admission, as autovacuum would soon after (on a
    // fresh table without statistics its planner walks the whole backlog per claim). Not on
    // Redis, which has nothing to settle (and whose raw client opens no cluster URL).
    if fx.kind != Kind::Redis
        && let Some(raw) = fx.raw().await?
    {
        raw.settle().await?;
    }
    let before = probe.read().await?;
    let sample = match side {
        Side::Library => {
            let (from_us, to_us) = match (place, fx.spec()) {
                (Place::Child, Some(spec)) => {
                    let (spawned, d) = worker::drain_child(&spec, c, drainer.tuned, jobs).await?;
                    (spawned, d.done_us)
                }
                _ => {
                    let backend = fx.peer().await?;
                    let spec = worker::WorkerSpec {
                        concurrency: c,
                        tuned: drainer.tuned,
                        ..worker::WorkerSpec::idle()
                    };
                    let d =
                        worker::drain_here(backend, spec, jobs, Duration::from_secs(600)).await?;
                    (d.started_us, d.done_us)
                }
            };
            Sample {
                count: jobs,
                secs: (to_us - from_us) as f64 / 1e6,
            }
        }
        Side::Raw => {
            let engine = match fx.raw_sqlite()? {
                Some(sqlite) => Engine::RawSqlite(Arc::new(sqlite)),
                None => match fx.raw().await? {
                    Some(raw) => Engine::Raw(raw),
                    None => return Err(BenchError::Setup("no raw client".into())),
                },
            };
            let (s, finished) =
                crate::e2e::run(&engine, fx, c, 0, jobs, Duration::from_secs(600)).await?;
            if finished != jobs {
                return Err(BenchError::Setup(format!(
                    "the raw pipeline completed {finished} of {jobs}"
                )));
            }
            s
        }
    };
    let cost = Cost::between(before, probe.read().await?, jobs)?;
    // Every job was recorded complete: nothing is left to claim.
    let left = fx
        .lib
        .claim_due(fill::request(1, Duration::from_secs(30)))
        .await
        .context(|| "claim after the drain".into())?;
    if !left.is_empty() {
        return Err(BenchError::Setup(format!(
            "{} still due after the drain",
            left[0].execution_id
        )));
    }
    Ok((sample, cost))
}

/// Admits the `jobs` to drain, due now: plain, or as `setup` says after setting its
/// controls.
async fn admit_jobs(fx: &Fixture, jobs: u64, setup: Option<&Setup>) -> Result<()> {
    match setup {
        Some(setup) => {
            setup.set(&fx.lib).await?;
            fill::admit_each(&fx.lib, "d", 0, jobs, |i, a| setup.apply(i, a)).await
        }
        None => fill::admit(&fx.lib, "d", 0, jobs, None).await,
    }
}

/// The median of `rates` (the mean of the middle two for an even count), as a sample of
/// `jobs` executions.
pub fn median(mut rates: Vec<f64>, jobs: u64) -> Option<Sample> {
    rates.sort_by(f64::total_cmp);
    let n = rates.len();
    if n == 0 {
        return None;
    }
    let m = if n % 2 == 1 {
        rates[n / 2]
    } else {
        (rates[n / 2 - 1] + rates[n / 2]) / 2.0
    };
    (m > 0.0).then(|| Sample {
        count: jobs,
        secs: jobs as f64 / m,
    })
}
