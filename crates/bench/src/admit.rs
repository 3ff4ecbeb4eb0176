//! `admit_batch` throughput: executions/s admitted in batches of [`BATCH`]
//! through the library, beside the raw bound of one bare multi-row statement / script per
//! batch ([`crate::raw::Raw::admit_batch`]). Each side on its own fresh store.

use std::time::{Duration, Instant};

use lease_core::{Admission, ExecutionId};

use crate::args::{Kind, Options};
use crate::error::{Context, Result};
use crate::fixture::Fixture;
use crate::measure::Sample;
use crate::side::Side;

/// Executions per batch.
pub const BATCH: usize = 1000;

/// The measurement's name.
pub const NAME: &str = "admit_batch x1000";

fn ids(batch: usize) -> Vec<String> {
    (0..BATCH).map(|i| format!("a{batch:06}-{i:04}")).collect()
}

/// How long a side admits: for a duration (at least one batch), or a number of batches.
#[derive(Debug, Clone, Copy)]
enum Until {
    Elapsed(Duration),
    Batches(usize),
}

impl Until {
    fn done(self, batches: usize, started: Instant) -> bool {
        match self {
            Until::Elapsed(d) => batches > 0 && started.elapsed() >= d,
            Until::Batches(n) => batches >= n,
        }
    }
}

/// One side for `duration` on a fresh store (`None`: no raw client for this backend).
pub async fn sample(
    kind: Kind,
    side: Side,
    options: &Options,
    duration: Duration,
) -> Result<Option<Sample>> {
    sample_until(kind, side, options, Until::Elapsed(duration)).await
}

/// The library side admitting `batches` batches of [`BATCH`] into a fresh, empty store (the
/// peers' bulk enqueue of the same count beside it).
pub async fn library_batches(kind: Kind, options: &Options, batches: usize) -> Result<Sample> {
    sample_until(kind, Side::Library, options, Until::Batches(batches.max(1)))
        .await?
        .ok_or_else(|| crate::error::BenchError::Setup("no library sample".into()))
}

async fn sample_until(
    kind: Kind,
    side: Side,
    options: &Options,
    until: Until,
) -> Result<Option<Sample>> {
    let fx = Fixture::new(kind, options).await?;
    let result = async {
        let raw = match side {
            Side::Library => None,
            Side::Raw => match fx.raw().await? {
                Some(r) => Some(r),
                None => return Ok(None),
            },
        };
        let started = Instant::now();
        let mut batches = 0;
        while !until.done(batches, started) {
            let ids = ids(batches);
            match &raw {
                Some(r) => r.admit_batch(&ids).await?,
                None => library_batch(&fx, ids).await?,
            }
            batches += 1;
        }
        Ok(Some(Sample {
            count: (batches * BATCH) as u64,
            secs: started.elapsed().as_secs_f64(),
        }))
    }
    .await;
    fx.remove_after(result).await
}

/// One batch through the library's `admit_batch`, every record returned.
async fn library_batch(fx: &Fixture, ids: Vec<String>) -> Result<()> {
    let admissions = ids
        .into_iter()
        .map(|id| ExecutionId::new(id).map(Admission::new))
        .collect::<lease_core::Result<Vec<_>>>()
        .context(|| "id".into())?;
    let records = fx
        .lib
        .admit_batch(&admissions)
        .await
        .context(|| "admit_batch".into())?;
    if records.len() != BATCH {
        return Err(crate::error::BenchError::Setup(format!(
            "admit_batch returned {} records",
            records.len()
        )));
    }
    Ok(())
}
