//! The report: the rows ([`crate::row`]) of every measurement printed as markdown tables
//! (throughput, wake-up latency and cost) and written as JSON with the run's context.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{BenchError, Result};
use crate::measure::Sample;
use crate::row::{Row, Target, thousands};

fn rate(s: Option<Sample>) -> String {
    s.map_or_else(|| "-".into(), |s| thousands(s.rate()))
}

/// The markdown table.
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| backend | measurement | unit | library | raw | library/raw | target | met | load 1m |\n\
         |---|---|---|---:|---:|---:|---|---|---:|\n",
    );
    for r in rows {
        let met = match (&r.error, r.met) {
            (Some(e), _) => format!("ERROR: {e}"),
            (None, Some(true)) => "yes".into(),
            (None, Some(false)) => "**no**".into(),
            (None, None) => String::new(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.2} |\n",
            r.backend,
            r.name,
            r.unit,
            rate(r.library),
            rate(r.raw),
            r.ratio.map_or_else(|| "-".into(), |x| format!("{x:.2}")),
            r.target.map_or_else(String::new, Target::describe),
            met,
            r.load_1m,
        ));
    }
    out
}

/// Everything the JSON report holds.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    /// Unix time the run started.
    pub started_unix: u64,
    /// Seconds per measurement.
    pub duration_secs: f64,
    /// Rounds per measurement (median reported).
    pub rounds: usize,
    /// `--quick`.
    pub quick: bool,
    /// Logical CPUs.
    pub cores: usize,
    /// Load averages (1, 5, 15 min) before the first measurement.
    pub load_before: Option<[f64; 3]>,
    /// Load averages after the last one.
    pub load_after: Option<[f64; 3]>,
    /// Whether `--wait-load` was satisfied (None: not asked), and how long it waited.
    pub load_wait: Option<(bool, f64)>,
    /// The rows.
    pub rows: &'a [Row],
    /// The wake-up rows (latency and cost).
    pub wake: &'a crate::wake::WakeRows,
    /// The stored-work cost ratios.
    pub stored: &'a [crate::stored::CostRatio],
    /// The space rows.
    pub footprint: &'a [crate::footprint::Row],
    /// The controls rows.
    pub controls: &'a crate::controls::ControlRows,
    /// Throughput across shards.
    pub shards: &'a [crate::shards::ShardRow],
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn verdict(error: &Option<String>, met: Option<bool>) -> String {
    match (error, met) {
        (Some(e), _) => format!("ERROR: {e}"),
        (None, Some(true)) => "yes".into(),
        (None, Some(false)) => "**no**".into(),
        (None, None) => String::new(),
    }
}

/// The markdown table of the latency rows (milliseconds).
pub fn latency_markdown(rows: &[crate::wake::LatencyRow]) -> String {
    let mut out = String::from(
        "| backend | measurement (ms) | n | p50 | p95 | p99 | max | raw bound | raw p50 | raw p99 | raw max | raw admit+claim p50 / p99 | target | met | load 1m |\n\
         |---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---|---:|\n",
    );
    for r in rows {
        let lib =
            |f: fn(&crate::wake::Dist) -> f64| r.library.as_ref().map_or("-".into(), |d| ms(f(d)));
        let raw =
            |f: fn(&crate::wake::Dist) -> f64| r.raw.as_ref().map_or("-".into(), |d| ms(f(d)));
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} |\n",
            r.backend,
            r.name,
            r.library.map_or(0, |d| d.n),
            lib(|d| d.p50),
            lib(|d| d.p95),
            lib(|d| d.p99),
            lib(|d| d.max),
            if r.raw_is.is_empty() { "-" } else { r.raw_is },
            raw(|d| d.p50),
            raw(|d| d.p99),
            raw(|d| d.max),
            r.raw_statements
                .map_or_else(|| "-".into(), |d| format!("{} / {}", ms(d.p50), ms(d.p99))),
            r.target.map_or_else(String::new, |t| t.describe()),
            verdict(&r.error, r.met),
            r.load_1m,
        ));
    }
    out
}

/// The markdown table of the cost rows.
pub fn cost_markdown(rows: &[crate::wake::CostRow]) -> String {
    let mut out = String::from(
        "| backend | measurement | unit | library | server / bound | which | target | met | load 1m |\n\
         |---|---|---|---:|---:|---|---|---|---:|\n",
    );
    let v = |x: Option<f64>| x.map_or_else(|| "-".into(), |x| format!("{x:.3}"));
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.2} |\n",
            r.backend,
            r.name,
            r.unit,
            v(r.library),
            v(r.server),
            r.server_is,
            r.target.clone().unwrap_or_default(),
            verdict(&r.error, r.met),
            r.load_1m,
        ));
    }
    out
}

/// Writes the report as `bench-<unix time>.json` and `latest.json` in `dir`.
pub fn write_json(dir: &Path, report: &Report<'_>) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)
        .map_err(|e| BenchError::Setup(format!("create {}: {e}", dir.display())))?;
    let text = serde_json::to_string_pretty(report)
        .map_err(|e| BenchError::Setup(format!("json: {e}")))?;
    let path = dir.join(format!("bench-{}.json", report.started_unix));
    for p in [&path, &dir.join("latest.json")] {
        std::fs::write(p, &text)
            .map_err(|e| BenchError::Setup(format!("write {}: {e}", p.display())))?;
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Kind;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(1234.0), "1,234");
        assert_eq!(thousands(1234567.0), "1,234,567");
    }

    #[test]
    fn each_row_gets_its_target() {
        assert_eq!(
            Target::of(Kind::Redis, "e2e 0 steps c8"),
            Some(Target::Above(20_000.0))
        );
        assert_eq!(Target::of(Kind::Redis, "e2e 0 steps c1"), None);
        assert_eq!(
            Target::of(Kind::Postgres, "e2e 3 steps c64"),
            Some(Target::Ratio(0.7))
        );
        assert_eq!(Target::of(Kind::Sqlite, "renew"), Some(Target::Ratio(0.9)));
        assert_eq!(Target::of(Kind::Memory, "renew"), None);
        assert_eq!(
            Target::of(Kind::Redis, "drain 20k c8"),
            Some(Target::Anchors)
        );
        assert_eq!(
            Target::of(Kind::Postgres, "purge_terminal x1000 (100k, 3 steps each)"),
            Some(Target::Above(20_000.0))
        );
        assert_eq!(Target::of(Kind::Sqlite, "stored running 10^6 renew"), None);
        let s = |count, secs| Some(Sample { count, secs });
        let beat = Row::new(
            Kind::Sqlite,
            "drain 20k c1".into(),
            "jobs/s",
            s(7_000, 1.0),
            None,
            0.0,
            None,
        );
        assert_eq!(
            beat.met, None,
            "no job-queue figure from another run: it is no comparison"
        );
        assert!(markdown(&[beat]).contains("in the same run, `--only anchors`"));
    }

    #[test]
    fn rows_compute_ratio_and_verdict() {
        let s = |count, secs| Some(Sample { count, secs });
        let row = Row::new(
            Kind::Sqlite,
            "renew".into(),
            "ops/s",
            s(90, 1.0),
            s(100, 1.0),
            0.5,
            None,
        );
        assert_eq!(row.ratio, Some(0.9));
        assert_eq!(row.met, Some(true));
        assert!(markdown(&[row]).contains("| sqlite | renew | ops/s | 90 | 100 | 0.90 |"));
    }
}
