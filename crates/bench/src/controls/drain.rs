//! The drain of [`crate::drain`] with controls set ([`Setup`]) beside the plain drain, in the
//! same run: runs of the sides in turn, each on a fresh store, the side that goes first
//! alternating from run to run; the median of each side's runs.
//!
//! - `controls drain c1`, `c8` ([`DRAIN_MIX`](super::mix::DRAIN_MIX): priorities, keys, limits
//!   of 2 that bind now and then) and `controls drain unlimited c1`, `c8` (the same without
//!   limits): [`MIX_RUNS`] runs, the raw pipeline on a plain store as a third side. Target
//!   (this project's reading of "holds"): at least [`MIX_TARGET`] of the plain drain.
//! - `controls drain configured c1`, `c8`, `c64` ([`CONFIGURED`]: attempt limits, the
//!   workflow's redelivery policy, start rates, ordered keys and concurrency limits, all set
//!   and none able to bind): [`CONFIGURED_RUNS`] runs of the two library sides (the raw
//!   pipeline knows none of the controls, so it bounds nothing here). Target: at least
//!   [`CONFIGURED_TARGET`] of the plain drain: what is set but never used costs (almost)
//!   nothing.

use serde::Serialize;

use super::cells::{two, verdict};
use super::setup::{CONFIGURED, Setup};
use crate::args::{Kind, Options};
use crate::drain::{self as plain_drain, Place};
use crate::error::Result;
use crate::measure::Sample;
use crate::side::Side;

/// The concurrencies of the mix rows.
pub const MIX_CONCURRENCY: [usize; 2] = [1, 8];

/// The concurrencies of the configured rows (the plain drain's).
pub const CONFIGURED_CONCURRENCY: [usize; 3] = plain_drain::CONCURRENCY;

/// Runs per mix row.
pub const MIX_RUNS: usize = plain_drain::RUNS;

/// Runs per configured row: three, so the median is one run's rate, not the mean of two.
pub const CONFIGURED_RUNS: usize = 3;

/// A mix row's target: jobs/s with the mix over plain jobs/s, at least.
pub const MIX_TARGET: f64 = 0.9;

/// A configured row's target: jobs/s with every control set over plain jobs/s, at least.
pub const CONFIGURED_TARGET: f64 = 0.95;

/// Every drain row's controls, in report order.
pub fn setups() -> [Setup; 3] {
    use super::mix::{DRAIN_MIX, DRAIN_UNLIMITED_MIX};
    [
        Setup::Mix(DRAIN_MIX),
        Setup::Mix(DRAIN_UNLIMITED_MIX),
        Setup::Configured(CONFIGURED),
    ]
}

/// The concurrencies measured with `setup`.
pub fn concurrency(setup: &Setup) -> &'static [usize] {
    match setup {
        Setup::Mix(_) => &MIX_CONCURRENCY,
        Setup::Configured(_) => &CONFIGURED_CONCURRENCY,
    }
}

/// Runs per row, the target, and whether the raw pipeline runs as a third side.
fn plan(setup: &Setup) -> (usize, f64, bool) {
    match setup {
        Setup::Mix(_) => (MIX_RUNS, MIX_TARGET, true),
        Setup::Configured(_) => (CONFIGURED_RUNS, CONFIGURED_TARGET, false),
    }
}

/// The row's name.
pub fn name(setup: &Setup, c: usize) -> String {
    let variant = match setup {
        Setup::Mix(mix) if mix.limited == 0 => "unlimited ",
        Setup::Mix(_) => "",
        Setup::Configured(_) => "configured ",
    };
    format!("controls drain {variant}c{c}")
}

/// The table's cell naming the controls.
fn controls(setup: &Setup) -> String {
    match setup {
        Setup::Mix(mix) => format!("priorities, keys, limits: {}", super::claim::limits(mix)),
        Setup::Configured(_) => "every control, none binding".into(),
    }
}

/// One run's rates, jobs/s.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Run {
    /// With the controls.
    pub controlled: f64,
    /// The plain drain.
    pub plain: f64,
    /// The raw pipeline on a plain store (rows without a raw side: none).
    pub raw: Option<f64>,
    /// Whether the drain with the controls ran before the plain one.
    pub controlled_first: bool,
}

/// One concurrency of one backend.
#[derive(Debug, Clone, Serialize)]
pub struct DrainRow {
    /// Backend.
    pub backend: &'static str,
    /// Dispatcher concurrency.
    pub concurrency: usize,
    /// The controls.
    pub setup: Setup,
    /// Jobs per run.
    pub jobs: u64,
    /// The drain with the controls (median), jobs/s.
    pub controlled: Option<Sample>,
    /// The plain drain.
    pub plain: Option<Sample>,
    /// The raw pipeline on a plain store.
    pub raw: Option<Sample>,
    /// Every run.
    pub runs: Vec<Run>,
    /// Controlled over plain, at least.
    pub target: f64,
    /// 1-minute load average before the row.
    pub load: f64,
    /// Why it did not run.
    pub error: Option<String>,
}

impl DrainRow {
    /// Controlled jobs/s over plain jobs/s.
    pub fn ratio(&self) -> Option<f64> {
        match (self.controlled, self.plain) {
            (Some(m), Some(p)) if p.rate() > 0.0 => Some(m.rate() / p.rate()),
            _ => None,
        }
    }
}

/// How one row runs.
struct Plan<'a> {
    kind: Kind,
    setup: &'a Setup,
    c: usize,
    jobs: u64,
    place: Place,
    options: &'a Options,
}

impl Plan<'_> {
    /// One side on a fresh store: with the controls, or plain.
    async fn side(&self, controlled: bool) -> Result<f64> {
        let setup = controlled.then_some(self.setup);
        let (kind, c, jobs, place) = (self.kind, self.c, self.jobs, self.place);
        let s = plain_drain::sample_controlled(
            kind,
            Side::Library,
            c,
            jobs,
            place,
            self.options,
            setup,
        )
        .await?;
        Ok(s.rate())
    }

    /// Run `k`: the two library sides (the controlled one first in even runs), then the raw
    /// pipeline when the row has one.
    async fn run(&self, k: usize, with_raw: bool) -> Result<Run> {
        let controlled_first = k.is_multiple_of(2);
        let first = self.side(controlled_first).await?;
        let second = self.side(!controlled_first).await?;
        let (controlled, plain) = if controlled_first {
            (first, second)
        } else {
            (second, first)
        };
        let raw = if with_raw {
            let (kind, c, jobs, place) = (self.kind, self.c, self.jobs, self.place);
            let s = plain_drain::sample(kind, Side::Raw, c, jobs, place, self.options).await?;
            Some(s.rate())
        } else {
            None
        };
        Ok(Run {
            controlled,
            plain,
            raw,
            controlled_first,
        })
    }

    /// `n` runs, or those before the first that failed and its error.
    async fn runs(&self, n: usize, with_raw: bool) -> (Vec<Run>, Option<String>) {
        let mut runs = Vec::new();
        for k in 0..n {
            match self.run(k, with_raw).await {
                Ok(r) => runs.push(r),
                Err(e) => return (runs, Some(e.to_string())),
            }
        }
        (runs, None)
    }
}

/// Why a configured row would not measure what it says: a limit that could bind `jobs`.
fn binding(setup: &Setup, jobs: u64) -> Option<String> {
    match setup {
        Setup::Configured(c) if !c.never_binds(jobs) => Some(format!(
            "a configured limit could bind a drain of {jobs} jobs over {} keys",
            c.mix.keys
        )),
        _ => None,
    }
}

/// Measures one concurrency (the worker in a child process).
pub async fn row(kind: Kind, setup: &Setup, c: usize, options: &Options, jobs: u64) -> DrainRow {
    row_at(kind, setup, c, options, jobs, Place::Child).await
}

async fn row_at(
    kind: Kind,
    setup: &Setup,
    c: usize,
    options: &Options,
    jobs: u64,
    place: Place,
) -> DrainRow {
    let load = crate::load::one_minute();
    let (runs_wanted, target, with_raw) = plan(setup);
    let plan = Plan {
        kind,
        setup,
        c,
        jobs,
        place,
        options,
    };
    let (runs, error) = match binding(setup, jobs) {
        Some(e) => (Vec::new(), Some(e)),
        None => plan.runs(runs_wanted, with_raw).await,
    };
    let median = |rates: Vec<f64>| plain_drain::median(rates, jobs);
    let row = DrainRow {
        backend: kind.name(),
        concurrency: c,
        setup: *setup,
        jobs,
        controlled: median(runs.iter().map(|r| r.controlled).collect()),
        plain: median(runs.iter().map(|r| r.plain).collect()),
        raw: median(runs.iter().filter_map(|r| r.raw).collect()),
        runs,
        target,
        load,
        error,
    };
    eprintln!(
        "lease-bench: {} {}: {} (with controls / plain jobs/s), ratio {}{}",
        kind.name(),
        name(setup, c),
        runs_cell(&row.runs),
        two(row.ratio()),
        row.error
            .as_ref()
            .map_or_else(String::new, |e| format!(" ERROR {e}"))
    );
    row
}

fn rate(s: Option<Sample>) -> String {
    s.map_or_else(|| "-".into(), |s| format!("{:.0}", s.rate()))
}

/// Each run's two library rates, in the order they ran: `with / plain; ...`.
fn runs_cell(runs: &[Run]) -> String {
    let cells: Vec<String> = runs
        .iter()
        .map(|r| format!("{:.0} / {:.0}", r.controlled, r.plain))
        .collect();
    cells.join("; ")
}

/// The markdown table of the drain rows.
pub fn markdown(rows: &[DrainRow]) -> String {
    let mut out = String::from(
        "| backend | controls | drain | with controls (jobs/s) | plain | raw bound (plain store) | with / plain | runs (with / plain) | target | met | load |\n\
         |---|---|---|---:|---:|---:|---:|---|---|---|---:|\n",
    );
    for r in rows {
        let ratio = r.ratio();
        out.push_str(&format!(
            "| {} | {} | {} c{} | {} | {} | {} | {} | {} | >= {}x plain | {} | {:.2} |\n",
            r.backend,
            controls(&r.setup),
            r.jobs,
            r.concurrency,
            rate(r.controlled),
            rate(r.plain),
            rate(r.raw),
            two(ratio),
            runs_cell(&r.runs),
            r.target,
            verdict(&r.error, ratio.map(|x| x >= r.target)),
            r.load,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controls::mix::{DRAIN_MIX, DRAIN_UNLIMITED_MIX};

    /// The row's code on SQLite, small, the dispatcher in this process (the test binary
    /// cannot be the worker): every side drained everything.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn drain_row_runs_on_sqlite() {
        let options = crate::args::parse(&[]).expect("options");
        let mix = Setup::Mix(DRAIN_MIX);
        let r = row_at(Kind::Sqlite, &mix, 8, &options, 300, Place::Here).await;
        assert_eq!(r.error, None);
        assert_eq!(r.runs.len(), MIX_RUNS);
        assert!(
            r.runs
                .iter()
                .all(|x| x.controlled > 0.0 && x.plain > 0.0 && x.raw.is_some_and(|v| v > 0.0)),
            "{:?}",
            r.runs
        );
        assert!(r.ratio().is_some());
        let table = markdown(&[r]);
        assert!(
            table.contains("| sqlite | priorities, keys, limits: 20 of 100 keys at 2 | 300 c8 |"),
            "{table}"
        );
        assert!(table.contains("| >= 0.9x plain |"), "{table}");
        assert_eq!(name(&mix, 8), "controls drain c8");
        assert_eq!(
            name(&Setup::Mix(DRAIN_UNLIMITED_MIX), 1),
            "controls drain unlimited c1"
        );
    }

    /// The configured row: three runs of the two library sides, the order alternating, no
    /// raw side, its own target; selected by its own name.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn configured_row_runs_on_sqlite() {
        let options = crate::args::parse(&[]).expect("options");
        let setup = Setup::Configured(CONFIGURED);
        let r = row_at(Kind::Sqlite, &setup, 64, &options, 300, Place::Here).await;
        assert_eq!(r.error, None);
        assert_eq!(
            r.runs
                .iter()
                .map(|x| x.controlled_first)
                .collect::<Vec<_>>(),
            [true, false, true]
        );
        assert!(
            r.runs
                .iter()
                .all(|x| x.controlled > 0.0 && x.plain > 0.0 && x.raw.is_none()),
            "{:?}",
            r.runs
        );
        assert_eq!(r.raw, None);
        let table = markdown(&[r]);
        assert!(
            table.contains("| sqlite | every control, none binding | 300 c64 |"),
            "{table}"
        );
        assert!(
            table.contains("| - |") && table.contains("| >= 0.95x plain |"),
            "{table}"
        );
        let names: Vec<String> = concurrency(&setup)
            .iter()
            .map(|&c| name(&setup, c))
            .collect();
        assert_eq!(
            names,
            [
                "controls drain configured c1",
                "controls drain configured c8",
                "controls drain configured c64"
            ]
        );
        let only = crate::args::parse(&["--only".into(), "drain configured".into()]).expect("only");
        let selected: Vec<String> = setups()
            .iter()
            .flat_map(|s| concurrency(s).iter().map(|&c| name(s, c)))
            .filter(|n| only.selected(n))
            .collect();
        assert_eq!(selected, names);
    }
}
