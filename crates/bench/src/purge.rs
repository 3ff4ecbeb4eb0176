//! Retention throughput (issue 12 item 3): `purge_terminal(before, 1000)` called until it
//! returns fewer than 1000, over [`EXECUTIONS`] completed executions with [`STEPS`] step
//! records each; executions removed per second. The raw bound on its own fresh store of the
//! same content: a bare delete of the same rows / keys, 1000 executions per statement /
//! script / transaction ([`crate::raw::Raw::purge`]).
//!
//! The executions are copies of one the library completed with 3 step records, written
//! server-side ([`crate::raw::Raw::clone_terminal`]).

use std::time::Instant;

use lease_core::Timestamp;

use crate::Side;
use crate::args::{Kind, Options};
use crate::error::{BenchError, Context, Result};
use crate::fill::{self, TEMPLATE};
use crate::fixture::Fixture;
use crate::measure::Sample;

/// Completed executions per run.
pub const EXECUTIONS: u64 = 100_000;

/// Step records per execution.
pub const STEPS: usize = 3;

/// Executions per call.
pub const BATCH: usize = 1000;

/// The row's name.
pub const NAME: &str = "purge_terminal x1000 (100k, 3 steps each)";

/// The target (executions/s).
pub const TARGET: f64 = 20_000.0;

/// One side on a fresh store holding `n` completed executions.
pub async fn sample(kind: Kind, side: Side, n: u64, options: &Options) -> Result<Sample> {
    let fx = Fixture::new(kind, options).await?;
    let result = async {
        let raw = fx
            .raw()
            .await?
            .ok_or_else(|| BenchError::Setup("no raw client".into()))?;
        fill::template(&fx.lib, STEPS).await?;
        raw.clone_terminal(TEMPLATE, "p", 0, n - 1).await?;
        raw.settle().await?;
        let before = Timestamp::from_millis(fill::unix_ms() + 60_000);
        let started = Instant::now();
        let mut purged = 0u64;
        loop {
            let got = match side {
                Side::Library => fx
                    .lib
                    .purge_terminal(before, BATCH)
                    .await
                    .context(|| "purge_terminal".into())?
                    .ids
                    .len(),
                Side::Raw => raw.purge(BATCH).await?,
            };
            purged += got as u64;
            if got < BATCH {
                break;
            }
        }
        let secs = started.elapsed().as_secs_f64();
        if purged != n {
            return Err(BenchError::Setup(format!("purged {purged} of {n}")));
        }
        Ok(Sample {
            count: purged,
            secs,
        })
    }
    .await;
    let removed = fx.remove().await;
    let s = result?;
    removed?;
    Ok(s)
}
