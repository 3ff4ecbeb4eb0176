//! Per-operation cost against the amount of stored work: `claim_due` x1,
//! `renew`, `write_step` and `acknowledge`, one call in flight, library and raw interleaved
//! ([`crate::ops::measure`]), on a store already holding `n` executions (10^3, 10^5, 10^6)
//! in one of three shapes:
//!
//! * `scheduled`: all admitted (`admit_batch`) with `Admission::not_before` a day ahead;
//! * `running`: `min(n, 10,000)` admitted and claimed with leases of one hour, the rest
//!   completed;
//! * `terminal`: all completed;
//! * `list`: the list API's store ([`crate::list`]), where `list_executions` pages are
//!   measured instead of the four operations.
//!
//! Completed executions are copies of one the library completed, written server-side
//! ([`crate::raw::Raw::clone_terminal`]). The operations' own working set (a few thousand
//! due executions admitted as the measurement goes) comes on top. Afterwards, per backend,
//! shape and operation: the cost ratio (time per call at the largest `n` over that at
//! 10^3), against the target of 1.5 (the list's pages: 1.2).

use std::time::Duration;

use serde::Serialize;

use crate::args::{Kind, Options};
use crate::client::{Baseline, Library};
use crate::error::{BenchError, Result};
use crate::fill::{self, TEMPLATE};
use crate::fixture::Fixture;
use crate::list;
use crate::measure::Sample;
use crate::ops::{self, Op};
use crate::raw::Raw;
use crate::row::Row;

/// The shapes of stored work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Admitted, due a day ahead.
    Scheduled,
    /// 10,000 live leases, the rest completed.
    Running,
    /// Completed.
    Terminal,
    /// The list API's store ([`crate::list`]).
    List,
}

impl Shape {
    /// Every shape, in report order.
    pub const ALL: [Shape; 4] = [
        Shape::Scheduled,
        Shape::Running,
        Shape::Terminal,
        Shape::List,
    ];

    /// Name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Scheduled => "scheduled",
            Shape::Running => "running",
            Shape::Terminal => "terminal",
            Shape::List => "list",
        }
    }

    /// The names of the rows measured on this shape (after the group's name).
    pub fn op_names(self) -> Vec<String> {
        match self {
            Shape::List => list::OPS.iter().map(|o| o.name()).collect(),
            _ => OPS.iter().map(|o| o.name()).collect(),
        }
    }

    /// The target of the cost ratio on this shape.
    pub fn target(self) -> f64 {
        match self {
            Shape::List => list::TARGET,
            _ => TARGET,
        }
    }
}

/// Live leases of the `running` shape.
pub const RUNNING: u64 = 10_000;

/// The stored counts measured (those up to `--stored-max`).
pub const SIZES: [u64; 3] = [1_000, 100_000, 1_000_000];

/// The operations measured.
pub const OPS: [Op; 4] = [Op::Claim(1), Op::Renew, Op::WriteStep, Op::Acknowledge];

/// `10^k` for the report.
pub fn size_name(n: u64) -> String {
    match n {
        1_000 => "10^3".into(),
        10_000 => "10^4".into(),
        100_000 => "10^5".into(),
        1_000_000 => "10^6".into(),
        n => n.to_string(),
    }
}

/// The prefix of a (shape, size) group's row names (what `--only` matches for the group).
pub fn group(shape: Shape, n: u64) -> String {
    format!("stored {} {}", shape.name(), size_name(n))
}

/// Fills `fx` with `n` executions of `shape`.
pub async fn fill(fx: &Fixture, raw: &dyn Raw, shape: Shape, n: u64) -> Result<()> {
    match shape {
        Shape::Scheduled => {
            let day_ahead = lease_core::Timestamp::from_millis(fill::unix_ms() + 86_400_000);
            fill::admit(&fx.lib, "s", 0, n, Some(day_ahead)).await?;
        }
        Shape::List => return list::fill(fx, raw, n).await,
        Shape::Running | Shape::Terminal => {
            let running = if shape == Shape::Running {
                n.min(RUNNING)
            } else {
                0
            };
            let completed = n - running;
            if completed > 0 {
                fill::template(&fx.lib, 0).await?;
                raw.clone_terminal(TEMPLATE, "c", 0, completed - 1).await?;
            }
            if running > 0 {
                fill::admit(&fx.lib, "r", 0, running, None).await?;
                let claimed = fill::claim_everything(&fx.lib, Duration::from_secs(3600)).await?;
                if claimed != running {
                    return Err(BenchError::Setup(format!(
                        "claimed {claimed} of {running} running"
                    )));
                }
            }
        }
    }
    raw.settle().await
}

/// Measures the four operations (the list's pages on [`Shape::List`]) on one fresh store
/// holding `n` executions of `shape`: one row per operation.
pub async fn rows(
    kind: Kind,
    shape: Shape,
    n: u64,
    options: &Options,
    duration: Duration,
) -> Vec<Row> {
    let load = crate::load::one_minute();
    let unit = |name: &str| match shape {
        Shape::List => "pages/s",
        _ => OPS
            .iter()
            .find(|op| op.name() == name)
            .map_or("ops/s", |op| op.unit()),
    };
    match measure(kind, shape, n, options, duration).await {
        Ok(samples) => shape
            .op_names()
            .into_iter()
            .zip(samples)
            .map(|(op, (l, r))| {
                let name = format!("{} {op}", group(shape, n));
                let mut row = Row::new(kind, name, unit(&op), Some(l), r, load, None);
                row.library_rounds = vec![l.rate()];
                row.raw_rounds = r.iter().map(Sample::rate).collect();
                crate::progress::print(&row);
                row
            })
            .collect(),
        Err(e) => {
            let row = Row::new(
                kind,
                format!("{} (fill)", group(shape, n)),
                "ops/s",
                None,
                None,
                load,
                Some(e.to_string()),
            );
            crate::progress::print(&row);
            vec![row]
        }
    }
}

async fn measure(
    kind: Kind,
    shape: Shape,
    n: u64,
    options: &Options,
    duration: Duration,
) -> Result<Vec<(Sample, Option<Sample>)>> {
    let mut fx = Fixture::new(kind, options).await?;
    let result = async {
        let raw = fx
            .raw()
            .await?
            .ok_or_else(|| BenchError::Setup("no raw client".into()))?;
        let started = std::time::Instant::now();
        fill(&fx, raw.as_ref(), shape, n).await?;
        eprintln!(
            "lease-bench: {kind:?} {} filled in {:.1}s",
            group(shape, n),
            started.elapsed().as_secs_f64()
        );
        if shape == Shape::List {
            let pages = list::measure(&fx, n, duration).await?;
            return Ok(pages.into_iter().map(|p| (p, None)).collect());
        }
        let lib = Library::new(fx.lib.clone())?;
        let baseline = Baseline(raw.clone());
        let mut out = Vec::new();
        for op in OPS {
            // PostgreSQL: fresh statistics before each operation (the previous one's working
            // set changed the table).
            raw.settle().await?;
            let (l, r) = ops::measure(&lib, Some(&baseline), &mut fx, op, duration).await?;
            let r = r.ok_or_else(|| BenchError::Setup("no raw sample".into()))?;
            out.push((l, Some(r)));
        }
        Ok(out)
    }
    .await;
    fx.remove_after(result).await
}

/// Per backend, shape and operation: how much dearer one call is at the largest stored
/// count than at the smallest.
#[derive(Debug, Clone, Serialize)]
pub struct CostRatio {
    /// Backend.
    pub backend: &'static str,
    /// Shape.
    pub shape: &'static str,
    /// Operation.
    pub op: String,
    /// The smallest stored count measured.
    pub small: u64,
    /// The largest.
    pub large: u64,
    /// Library time per call at `large` over that at `small`.
    pub library: Option<f64>,
    /// The same for the raw bound.
    pub raw: Option<f64>,
    /// The target (at most this).
    pub target: f64,
    /// library <= target.
    pub met: Option<bool>,
}

/// The target of the cost ratio.
pub const TARGET: f64 = 1.5;

/// The cost ratios of the stored rows among `rows`.
pub fn ratios(rows: &[Row]) -> Vec<CostRatio> {
    let mut out = Vec::new();
    for kind in Kind::ALL {
        for shape in Shape::ALL {
            for op in shape.op_names() {
                let found: Vec<(u64, &Row)> = SIZES
                    .iter()
                    .chain(&[10_000])
                    .filter_map(|&n| {
                        let name = format!("{} {op}", group(shape, n));
                        rows.iter()
                            .find(|r| r.backend == kind.name() && r.name == name)
                            .map(|r| (n, r))
                    })
                    .collect();
                let (Some(small), Some(large)) = (
                    found.iter().min_by_key(|(n, _)| *n),
                    found.iter().max_by_key(|(n, _)| *n),
                ) else {
                    continue;
                };
                if small.0 == large.0 {
                    continue;
                }
                // Cost per call is 1 / rate: the ratio of costs is the inverse ratio of rates.
                let ratio = |s: Option<Sample>, l: Option<Sample>| match (s, l) {
                    (Some(s), Some(l)) if l.rate() > 0.0 => Some(s.rate() / l.rate()),
                    _ => None,
                };
                let library = ratio(small.1.library, large.1.library);
                out.push(CostRatio {
                    backend: kind.name(),
                    shape: shape.name(),
                    op,
                    small: small.0,
                    large: large.0,
                    library,
                    raw: ratio(small.1.raw, large.1.raw),
                    target: shape.target(),
                    met: library.map(|r| r <= shape.target()),
                });
            }
        }
    }
    out
}

/// The markdown table of the cost ratios.
pub fn markdown(ratios: &[CostRatio]) -> String {
    let mut out = String::from(
        "| backend | shape | operation | stored | library cost ratio | raw cost ratio | target | met |\n\
         |---|---|---|---|---:|---:|---|---|\n",
    );
    let v = |x: Option<f64>| x.map_or_else(|| "-".into(), |x| format!("{x:.2}"));
    for r in ratios {
        out.push_str(&format!(
            "| {} | {} | {} | {} / {} | {} | {} | <= {}x | {} |\n",
            r.backend,
            r.shape,
            r.op,
            size_name(r.large),
            size_name(r.small),
            v(r.library),
            v(r.raw),
            r.target,
            match r.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "",
            }
        ));
    }
    out
}
