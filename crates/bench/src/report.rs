//! The report: one row per (backend, measurement) with the library's rate, the raw
//! baseline's, their ratio and the issue's target; printed as a markdown table and written
//! as JSON.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::args::Kind;
use crate::error::{BenchError, Result};
use crate::measure::Sample;

/// The issue's target for a row (informational: a benchmark never fails on it).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Target {
    /// library/raw at least this.
    Ratio(f64),
    /// library rate above this.
    Above(f64),
    /// Compared with the job queues only in the same run, by `--only anchors` (issue 24
    /// item 1, issue 25 item 19: no job-queue figure copied from another day).
    Anchors,
}

impl Target {
    /// The target of measurement `name` on `kind` (issue 6, item 4).
    pub fn of(kind: Kind, name: &str) -> Option<Target> {
        if kind == Kind::Memory {
            return None;
        }
        if name.starts_with("drain 20k c") {
            return Some(Target::Anchors);
        }
        if name.starts_with("stored ") {
            return None;
        }
        if name == crate::fenced::NAMES[1] {
            // Issue 13: step_in_tx faster than write_step + a separate transaction.
            return Some(Target::Ratio(1.0));
        }
        if name.starts_with("purge_terminal") {
            return Some(Target::Above(crate::purge::TARGET));
        }
        if name.starts_with("admit_batch") {
            return Some(Target::Above(match kind {
                Kind::Postgres => 40_000.0,
                _ => 100_000.0,
            }));
        }
        if name.starts_with("e2e 0 steps") {
            if name.ends_with(" c1") {
                return None;
            }
            return Some(Target::Above(match kind {
                Kind::Redis => 20_000.0,
                Kind::Postgres => 3_500.0,
                _ => 7_500.0,
            }));
        }
        if name.starts_with("e2e 3 steps") {
            return Some(Target::Ratio(0.7));
        }
        Some(Target::Ratio(0.9))
    }

    fn describe(self) -> String {
        match self {
            Target::Ratio(r) => format!(">= {r}x raw"),
            Target::Above(v) => format!("> {}/s", thousands(v)),
            Target::Anchors => "1.1x best job queue: in the same run, `--only anchors`".into(),
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Backend name.
    pub backend: &'static str,
    /// Measurement name.
    pub name: String,
    /// What is counted.
    pub unit: &'static str,
    /// The library's sample.
    pub library: Option<Sample>,
    /// The raw baseline's sample.
    pub raw: Option<Sample>,
    /// The library's rate in every round.
    pub library_rounds: Vec<f64>,
    /// The raw baseline's rate in every round.
    pub raw_rounds: Vec<f64>,
    /// library rate / raw rate.
    pub ratio: Option<f64>,
    /// The target.
    pub target: Option<Target>,
    /// Whether the target was met.
    pub met: Option<bool>,
    /// 1-minute load average when the measurement started.
    pub load_1m: f64,
    /// Why the measurement did not complete.
    pub error: Option<String>,
}

impl Row {
    /// A row from its samples; computes the ratio and the verdict.
    pub fn new(
        kind: Kind,
        name: String,
        unit: &'static str,
        library: Option<Sample>,
        raw: Option<Sample>,
        load_1m: f64,
        error: Option<String>,
    ) -> Row {
        let ratio = match (library, raw) {
            (Some(l), Some(r)) if r.rate() > 0.0 => Some(l.rate() / r.rate()),
            _ => None,
        };
        let target = Target::of(kind, &name);
        let met = match target {
            Some(Target::Ratio(t)) => ratio.map(|r| r >= t),
            Some(Target::Above(v)) => library.map(|l| l.rate() > v),
            Some(Target::Anchors) | None => None,
        };
        Row {
            backend: kind.name(),
            name,
            unit,
            library,
            raw,
            library_rounds: Vec::new(),
            raw_rounds: Vec::new(),
            ratio,
            target,
            met,
            load_1m,
            error,
        }
    }
}

/// `12345.6` -> `12,346`.
pub fn thousands(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let n = v.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

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
    /// The stored-work cost ratios (issue 12).
    pub stored: &'a [crate::stored::CostRatio],
    /// The space rows (issue 12 item 2).
    pub footprint: &'a [crate::footprint::Row],
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

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(1234.0), "1,234");
        assert_eq!(thousands(1234567.0), "1,234,567");
    }

    #[test]
    fn targets_follow_the_issue() {
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
            "no job-queue figure from another run (issue 25 item 19)"
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
