//! One row of the report per (backend, measurement): the library's rate, the raw
//! baseline's, their ratio and the target ([`Target`]).

use serde::Serialize;

use crate::args::Kind;
use crate::measure::Sample;

/// The console rows' target (`ui ... page`): more pages per second than this is a page in
/// under 200 ms.
pub const UI_PAGES_PER_SEC: f64 = 5.0;

/// The target for a row (informational: a benchmark never fails on it).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Target {
    /// library/raw at least this.
    Ratio(f64),
    /// library rate above this.
    Above(f64),
    /// Compared with the job queues only in the same run, by `--only anchors` (no job-queue
    /// figure copied from another day: its load and build differ).
    Anchors,
}

impl Target {
    /// The target of measurement `name` on `kind`.
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
            // The step's record written in the application's transaction must beat
            // write_step + a separate transaction, or it buys nothing.
            return Some(Target::Ratio(1.0));
        }
        if name.starts_with("ui ") && name.ends_with(" page") {
            // A console page in under 200 ms at 10^5 stored executions.
            return Some(Target::Above(UI_PAGES_PER_SEC));
        }
        if name.starts_with("ui idle") {
            // Reported, no bound: nothing (0) is what a console nobody watches should cost.
            return None;
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

    /// The target as the markdown table shows it.
    pub fn describe(self) -> String {
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
