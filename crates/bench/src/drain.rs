//! The workload of issue 12's comparison with job queues: [`JOBS`] executions admitted up
//! front (`admit_batch`), then a separate worker process (a dispatcher of this binary,
//! `--child`, concurrency C, the empty handler, default options) drains them; timed from
//! the process's spawn to the moment its dispatcher has recorded the last acknowledgement.
//! Jobs/s, median of [`RUNS`] runs (the mean of the two), beside the best job queue of the
//! issue's table for that backend and C, and the target of 1.1x that.
//!
//! The raw bound is the raw end-to-end pipeline of 0 steps ([`crate::e2e`]) at the same C on
//! the same kind of store, holding the same [`JOBS`] admitted up front, in this process (no
//! process start, no connect): the claims (batches of up to 32 as free slots allow) and
//! acknowledgements issued as bare statements / scripts. At C = 1 it is two round trips per
//! job where the dispatcher's `acknowledge_and_claim` makes one, so there it is not an
//! upper bound.

use std::sync::Arc;
use std::time::Duration;

use crate::Side;
use crate::args::{Kind, Options};
use crate::e2e::Engine;
use crate::error::{BenchError, Context, Result};
use crate::fill;
use crate::fixture::Fixture;
use crate::measure::Sample;
use crate::wake::worker;

/// Executions per run.
pub const JOBS: u64 = 20_000;

/// Runs per row (the "median of 2 runs").
pub const RUNS: usize = 2;

/// The concurrencies of the table.
pub const CONCURRENCY: [usize; 3] = [1, 8, 64];

/// The best job queue of issue 12's table (jobs/s measured on this machine, median of 2
/// runs) for `kind` at concurrency `c`: BullMQ and apalis on Redis, graphile-worker and
/// apalis on PostgreSQL, apalis on SQLite.
pub fn best(kind: Kind, c: usize) -> Option<(f64, &'static str)> {
    Some(match (kind, c) {
        // Redis: BullMQ 2,867 / 13,454 / 13,542; apalis 3,414 / 4,203 / 4,091.
        (Kind::Redis, 1) => (3_414.0, "apalis"),
        (Kind::Redis, 8) => (13_454.0, "BullMQ"),
        (Kind::Redis, 64) => (13_542.0, "BullMQ"),
        // PostgreSQL: graphile-worker 1,305 / 2,458 / 2,342; apalis 1,874 / 2,167 / 2,585.
        (Kind::Postgres, 1) => (1_874.0, "apalis"),
        (Kind::Postgres, 8) => (2_458.0, "graphile-worker"),
        (Kind::Postgres, 64) => (2_585.0, "apalis"),
        // SQLite: apalis 6,690 / 6,422 / 6,938.
        (Kind::Sqlite, 1) => (6_690.0, "apalis"),
        (Kind::Sqlite, 8) => (6_422.0, "apalis"),
        (Kind::Sqlite, 64) => (6_938.0, "apalis"),
        _ => return None,
    })
}

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
    let mut fx = Fixture::new(kind, options).await?;
    let result = run(&mut fx, side, c, jobs, place).await;
    let removed = fx.remove().await;
    let s = result?;
    removed?;
    Ok(s)
}

async fn run(fx: &mut Fixture, side: Side, c: usize, jobs: u64, place: Place) -> Result<Sample> {
    fill::admit(&fx.lib, "d", 0, jobs, None).await?;
    // PostgreSQL: ANALYZE after the bulk admission, as autovacuum would soon after (on a
    // fresh table without statistics its planner walks the whole backlog per claim).
    if let Some(raw) = fx.raw().await? {
        raw.settle().await?;
    }
    let sample = match side {
        Side::Library => {
            let (from_us, to_us) = match (place, fx.spec()) {
                (Place::Child, Some(spec)) => {
                    let (spawned, d) = worker::drain_child(&spec, c, jobs).await?;
                    (spawned, d.done_us)
                }
                _ => {
                    let backend = fx.peer().await?;
                    let d = worker::drain_here(backend, c, jobs, Duration::from_secs(600)).await?;
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
    Ok(sample)
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
