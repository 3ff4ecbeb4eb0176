//! `controls drain c1`, `c8`: the drain of [`crate::drain`] with priorities, concurrency
//! keys and limits in use ([`DRAIN_MIX`](super::mix::DRAIN_MIX)), beside the plain drain
//! and the raw pipeline on a plain store, in the same run: [`RUNS`] runs of the three in
//! turn, each on a fresh store, median of each. Target (this project's reading of "holds"):
//! the mixed drain at least [`TARGET`] of the plain one.

use serde::Serialize;

use super::cells::{two, verdict};
use super::mix::Mix;
use crate::args::{Kind, Options};
use crate::drain::{self as plain_drain, Place};
use crate::error::Result;
use crate::measure::Sample;
use crate::side::Side;

/// The concurrencies measured.
pub const CONCURRENCY: [usize; 2] = [1, 8];

/// Runs per row.
pub const RUNS: usize = plain_drain::RUNS;

/// Mixed jobs/s over plain jobs/s, at least.
pub const TARGET: f64 = 0.9;

/// The row's name.
pub fn name(mix: &Mix, c: usize) -> String {
    let variant = if mix.limited == 0 { "unlimited " } else { "" };
    format!("controls drain {variant}c{c}")
}

/// One concurrency of one backend.
#[derive(Debug, Clone, Serialize)]
pub struct DrainRow {
    /// Backend.
    pub backend: &'static str,
    /// Dispatcher concurrency.
    pub concurrency: usize,
    /// The mix of the mixed side.
    pub mix: Mix,
    /// Jobs per run.
    pub jobs: u64,
    /// The mixed drain (median), jobs/s.
    pub mixed: Option<Sample>,
    /// The plain drain.
    pub plain: Option<Sample>,
    /// The raw pipeline on a plain store.
    pub raw: Option<Sample>,
    /// Every run's rate: mixed, plain, raw.
    pub runs: Vec<[f64; 3]>,
    /// 1-minute load average before the row.
    pub load: f64,
    /// Why it did not run.
    pub error: Option<String>,
}

impl DrainRow {
    /// Mixed jobs/s over plain jobs/s.
    pub fn ratio(&self) -> Option<f64> {
        match (self.mixed, self.plain) {
            (Some(m), Some(p)) if p.rate() > 0.0 => Some(m.rate() / p.rate()),
            _ => None,
        }
    }
}

/// One run of the three sides, each on a fresh store.
async fn run(
    kind: Kind,
    mix: &Mix,
    c: usize,
    jobs: u64,
    place: Place,
    options: &Options,
) -> Result<[f64; 3]> {
    let mixed =
        plain_drain::sample_mixed(kind, Side::Library, c, jobs, place, options, Some(mix)).await?;
    let plain = plain_drain::sample(kind, Side::Library, c, jobs, place, options).await?;
    let raw = plain_drain::sample(kind, Side::Raw, c, jobs, place, options).await?;
    Ok([mixed.rate(), plain.rate(), raw.rate()])
}

/// Measures one concurrency (the worker in a child process).
pub async fn row(kind: Kind, mix: &Mix, c: usize, options: &Options, jobs: u64) -> DrainRow {
    row_at(kind, mix, c, options, jobs, Place::Child).await
}

async fn row_at(
    kind: Kind,
    mix: &Mix,
    c: usize,
    options: &Options,
    jobs: u64,
    place: Place,
) -> DrainRow {
    let load = crate::load::one_minute();
    let mut runs = Vec::new();
    let mut error = None;
    for _ in 0..RUNS {
        match run(kind, mix, c, jobs, place, options).await {
            Ok(r) => runs.push(r),
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    let side = |k: usize| plain_drain::median(runs.iter().map(|r| r[k]).collect(), jobs);
    let row = DrainRow {
        backend: kind.name(),
        concurrency: c,
        mix: *mix,
        jobs,
        mixed: side(0),
        plain: side(1),
        raw: side(2),
        runs,
        load,
        error,
    };
    eprintln!(
        "lease-bench: {} {}: {:?} (mixed, plain, raw jobs/s), ratio {}{}",
        kind.name(),
        name(mix, c),
        row.runs,
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

/// The markdown table of the drain rows.
pub fn markdown(rows: &[DrainRow]) -> String {
    let mut out = String::from(
        "| backend | limits | drain | mixed (jobs/s) | plain | raw bound (plain store) | mixed / plain | target | met | load |\n\
         |---|---|---|---:|---:|---:|---:|---|---|---:|\n",
    );
    for r in rows {
        let ratio = r.ratio();
        out.push_str(&format!(
            "| {} | {} | {} c{} | {} | {} | {} | {} | >= {TARGET}x plain | {} | {:.2} |\n",
            r.backend,
            super::claim::limits(&r.mix),
            r.jobs,
            r.concurrency,
            rate(r.mixed),
            rate(r.plain),
            rate(r.raw),
            two(ratio),
            verdict(&r.error, ratio.map(|x| x >= TARGET)),
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
        let r = row_at(Kind::Sqlite, &DRAIN_MIX, 8, &options, 300, Place::Here).await;
        assert_eq!(r.error, None);
        assert_eq!(r.runs.len(), RUNS);
        assert!(r.runs.iter().flatten().all(|&x| x > 0.0), "{:?}", r.runs);
        assert!(r.ratio().is_some());
        let table = markdown(&[r]);
        assert!(
            table.contains("| sqlite | 20 of 100 keys at 2 | 300 c8 |"),
            "{table}"
        );
        assert_eq!(name(&DRAIN_MIX, 8), "controls drain c8");
        assert_eq!(name(&DRAIN_UNLIMITED_MIX, 1), "controls drain unlimited c1");
    }
}
