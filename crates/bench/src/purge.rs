//! Retention throughput: `purge_terminal(before, 1000)` called until it
//! returns fewer than 1000, over [`EXECUTIONS`] completed executions with [`STEPS`] step
//! records each; executions removed per second. The raw bound on its own fresh store of the
//! same content: a bare delete of the same rows / keys, 1000 executions per statement /
//! script / transaction ([`crate::raw::Raw::purge`]).
//!
//! The executions are copies of one the library completed with 3 step records, written
//! server-side ([`crate::raw::Raw::clone_terminal`]).

use std::time::Instant;

use lease_core::Timestamp;

use crate::args::{Kind, Options};
use crate::error::{BenchError, Context, Result};
use crate::fill;
use crate::fixture::Fixture;
use crate::measure::Sample;
use crate::side::Side;

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
        let raw = fill::completed(&fx, STEPS, n).await?;
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
    fx.remove_after(result).await
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::args::Kind;
    use crate::side::Side;
    use crate::stored::{self, Shape};
    use crate::{chain, drain};

    /// Every drain and storage row's code on SQLite (no server needed), small: the drain (in this
    /// process: the test binary cannot be the worker), both acknowledge_and_claim rows,
    /// every stored shape with the cost ratios, purge on both sides.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn drain_and_storage_rows_run_on_sqlite() {
        let options = crate::args::parse(&[]).expect("options");
        let kind = Kind::Sqlite;
        for side in [Side::Library, Side::Raw] {
            let s = drain::sample(kind, side, 8, 300, drain::Place::Here, &options)
                .await
                .expect("drain");
            assert_eq!(s.count, 300);
            assert!(s.rate() > 0.0, "{s:?}");
        }
        let m = drain::median(vec![300.0, 100.0], 300).expect("median");
        assert!((m.rate() - 200.0).abs() < 1e-6, "{m:?}");
        for combined in [true, false] {
            let (l, r) = chain::measure(kind, combined, &options, Duration::from_millis(100))
                .await
                .expect("ack_and_claim");
            assert!(l.count > 10 && r.count > 10, "{l:?} {r:?}");
        }
        let mut rows = Vec::new();
        for shape in Shape::ALL {
            rows.extend(
                stored::rows(kind, shape, 1_000, &options, Duration::from_millis(50)).await,
            );
        }
        rows.extend(
            stored::rows(
                kind,
                Shape::Terminal,
                10_000,
                &options,
                Duration::from_millis(50),
            )
            .await,
        );
        // 4 operations x (3 shapes at 10^3 + terminal at 10^4), each beside its raw side, and
        // the 8 list pages measured once at 10^3 (the list has no raw counterpart).
        let (lists, ops): (Vec<_>, Vec<_>) = rows.iter().partition(|r| r.name.contains(" list "));
        assert_eq!((ops.len(), lists.len()), (16, 8), "{rows:?}");
        assert!(
            ops.iter()
                .all(|r| r.error.is_none() && r.library.is_some() && r.raw.is_some()),
            "{rows:?}"
        );
        assert!(
            lists
                .iter()
                .all(|r| r.error.is_none() && r.library.is_some()),
            "{rows:?}"
        );
        let ratios = stored::ratios(&rows);
        assert_eq!(ratios.len(), 4, "{ratios:?}");
        assert!(
            ratios
                .iter()
                .all(|r| r.shape == "terminal" && r.library.is_some())
        );
        assert!(stored::markdown(&ratios).contains("| sqlite | terminal | renew | 10^4 / 10^3 |"));
        for side in [Side::Library, Side::Raw] {
            let s = super::sample(kind, side, 2_500, &options)
                .await
                .expect("purge");
            assert_eq!(s.count, 2_500);
        }
    }
}
