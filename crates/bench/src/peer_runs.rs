//! `--only peer-pickup` and `--only peer-admit` (`--only peers`: both; never in the default
//! run): this library's pickup and `admit_batch` beside the job queues' pickup and bulk
//! enqueue ([`crate::peers`]), on the same servers in the same run, the runs interleaved
//! with the starting system rotating per round, each runner's state wiped before and after.
//!
//! Pickup: this library's `pickup cross-process` series ([`crate::wake::pickup_series`]) of
//! [`PICKUP_SAMPLES`] admissions beside each queue's runner in its `pickup` mode (an idle
//! worker at concurrency [`PICKUP_CONCURRENCY`], then as many jobs added one at a time, each
//! carrying its add instant), the latencies of every run pooled. Admit: `admit_batch` of 1000
//! into a fresh store, [`ADMIT_JOBS`] in all, beside each queue's runner in its `bulk` mode
//! (the same count in batches of 1,000 through its bulk API into an empty queue), the median
//! run. Runs per system: `--anchor-runs`; systems: `--anchor-system`. PostgreSQL runs get a
//! database of their own for the row, dropped at the end.

use std::path::{Path, PathBuf};

use serde::Serialize;
use tokio::process::Command;

use crate::anchor_runs::{Names, Wipe};
use crate::args::{Kind, Options};
use crate::error::{BenchError, Result};
use crate::peers::{self, Measure, Peer, PeerCell, PeerResult};
use crate::wake::Dist;

/// The word of `--only` that selects both measurements.
pub const WORD: &str = "peers";
/// Measured adds per pickup run (5 more warm up first, left out).
pub const PICKUP_SAMPLES: usize = 200;
/// The idle worker's concurrency in the pickup runs (the pickup row's dispatcher's).
pub const PICKUP_CONCURRENCY: usize = 8;
/// Jobs per bulk-admission run.
pub const ADMIT_JOBS: u64 = 20_000;

fn setup(text: impl Into<String>) -> BenchError {
    BenchError::Setup(text.into())
}

/// The measurements `--only` selects (by their exact words, or [`WORD`] for both).
pub fn selected(options: &Options) -> Vec<Measure> {
    let has = |w: &str| options.only.iter().any(|o| o == w);
    Measure::ALL
        .into_iter()
        .filter(|m| has(m.word()) || has(WORD))
        .collect()
}

/// Where the runs go.
struct Servers<'a> {
    options: &'a Options,
    pg_pool: Option<&'a sqlx::PgPool>,
    node_dir: &'a std::result::Result<PathBuf, String>,
}

/// The command of `peer`'s runner for `measure` on `kind`, and its state.
fn runner(peer: Peer, measure: Measure, kind: Kind, at: &Servers<'_>) -> Result<(Command, Wipe)> {
    let script = peer
        .script()
        .ok_or_else(|| setup(format!("{} has no runner", peer.key())))?;
    let dir = at
        .node_dir
        .as_ref()
        .map_err(|why| setup(format!("the Node runners were not installed: {why}")))?;
    let names = Names::new();
    let (url, ns, wipe) = match kind {
        Kind::Postgres => (
            &at.options.postgres_url,
            names.pg_schema.clone(),
            Wipe::Schema(names.pg_schema),
        ),
        Kind::Redis => (
            &at.options.redis_url,
            names.redis_prefix.clone(),
            Wipe::Redis(vec![names.redis_prefix]),
        ),
        _ => {
            return Err(setup(format!(
                "{} has no runner on {}",
                peer.key(),
                kind.name()
            )));
        }
    };
    let (c, jobs) = match measure {
        Measure::Pickup => (PICKUP_CONCURRENCY, PICKUP_SAMPLES as u64),
        Measure::Admit => (1, ADMIT_JOBS),
    };
    let mut cmd = Command::new("node");
    cmd.current_dir(dir).args([
        script,
        url.as_str(),
        &ns,
        &c.to_string(),
        &jobs.to_string(),
        peer.mode(measure),
        "0",
        &peer.pickup_every_ms().to_string(),
    ]);
    Ok((cmd, wipe))
}

/// What one run gives: pickup latencies (ms) or jobs/s.
#[derive(Debug, Clone, PartialEq)]
enum RunValue {
    Latencies(Vec<f64>),
    Rate(f64),
}

/// Drives a started runner through its handshake to the result line of `measure`.
async fn drive(cmd: Command, measure: Measure) -> Result<RunValue> {
    let mut runner = crate::anchor_runs::start(cmd).await?;
    let value = match measure {
        Measure::Pickup => {
            let line = runner.go(peers::PICKUP_PREFIX.trim()).await?;
            RunValue::Latencies(peers::parse_pickup(&line, PICKUP_SAMPLES)?)
        }
        Measure::Admit => {
            let line = runner.go(peers::BULK_PREFIX.trim()).await?;
            RunValue::Rate(peers::parse_bulk(&line, ADMIT_JOBS)?)
        }
    };
    runner.finish().await?;
    Ok(value)
}

/// One run of a queue's runner, its state wiped before and after.
async fn peer_run(peer: Peer, measure: Measure, kind: Kind, at: &Servers<'_>) -> Result<RunValue> {
    let (cmd, state) = runner(peer, measure, kind, at)?;
    let redis = &at.options.redis_url;
    state.remove(redis, at.pg_pool).await?;
    let result = drive(cmd, measure).await;
    state.remove(redis, at.pg_pool).await?;
    result
}

/// One run of `peer` (this library or a queue).
async fn system_run(
    peer: Peer,
    measure: Measure,
    kind: Kind,
    at: &Servers<'_>,
) -> Result<RunValue> {
    match (peer, measure) {
        (Peer::Lease, Measure::Pickup) => {
            crate::wake::pickup_series(kind, at.options, PICKUP_SAMPLES)
                .await
                .map(RunValue::Latencies)
        }
        (Peer::Lease, Measure::Admit) => {
            let batches = (ADMIT_JOBS as usize).div_ceil(crate::admit::BATCH);
            let sample = crate::admit::library_batches(kind, at.options, batches).await?;
            Ok(RunValue::Rate(sample.rate()))
        }
        _ => peer_run(peer, measure, kind, at).await,
    }
}

/// The runs of one system in a cell, gathered.
#[derive(Default)]
struct Runs {
    latencies: Vec<f64>,
    rates: Vec<f64>,
    error: Option<String>,
}

impl Runs {
    fn add(&mut self, value: RunValue) {
        match value {
            RunValue::Latencies(l) => self.latencies.extend(l),
            RunValue::Rate(r) => self.rates.push(r),
        }
    }

    fn result(self, peer: Peer) -> PeerResult {
        let failed = self.error.is_some();
        PeerResult {
            peer,
            pickup: (!failed).then(|| Dist::of(self.latencies)).flatten(),
            rate: (!failed)
                .then(|| crate::drain::median(self.rates.clone(), ADMIT_JOBS).map(|s| s.rate()))
                .flatten(),
            rates: self.rates,
            error: self.error,
        }
    }
}

fn progress(kind: Kind, measure: Measure, peer: Peer, value: &Result<RunValue>) {
    let text = match value {
        Ok(RunValue::Latencies(l)) => Dist::of(l.clone()).map_or("no samples".into(), |d| {
            format!("p50 {:.2} p99 {:.2} max {:.2} ms", d.p50, d.p99, d.max)
        }),
        Ok(RunValue::Rate(r)) => format!("{r:.0} jobs/s"),
        Err(e) => format!("failed: {e}"),
    };
    eprintln!(
        "lease-bench: {} {} {}: {text}",
        measure.word(),
        kind.name(),
        peer.key()
    );
}

/// One cell: `runs` rounds, each system once per round, the starting system rotating.
async fn cell(kind: Kind, measure: Measure, at: &Servers<'_>) -> PeerCell {
    let load_1m = crate::load::one_minute();
    let anchors = &at.options.anchors;
    let systems = peers::order(kind, measure, 0, &anchors.systems);
    let mut runs: Vec<Runs> = systems.iter().map(|_| Runs::default()).collect();
    for round in 0..anchors.runs {
        for peer in peers::order(kind, measure, round, &anchors.systems) {
            let i = systems.iter().position(|s| *s == peer).unwrap_or(0);
            if runs[i].error.is_some() {
                continue;
            }
            let value = system_run(peer, measure, kind, at).await;
            progress(kind, measure, peer, &value);
            match value {
                Ok(v) => runs[i].add(v),
                Err(e) => runs[i].error = Some(e.to_string()),
            }
        }
    }
    let mut results: Vec<PeerResult> = systems
        .iter()
        .zip(runs)
        .map(|(p, r)| r.result(*p))
        .collect();
    results.sort_by_key(|r| Peer::ALL.iter().position(|p| *p == r.peer));
    PeerCell {
        measure,
        backend: backend_name(kind),
        load_1m,
        jobs: match measure {
            Measure::Pickup => PICKUP_SAMPLES as u64,
            Measure::Admit => ADMIT_JOBS,
        },
        results,
    }
}

fn backend_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Sqlite => "SQLite",
        Kind::Postgres => "PostgreSQL",
        Kind::Redis => "Redis",
        Kind::Memory => "memory",
    }
}

/// The row's report (`peers-<unix>.json` beside the bench's JSON).
#[derive(Serialize)]
pub struct Report {
    /// Start, Unix seconds.
    pub started_unix: u64,
    /// Runs per system and cell.
    pub runs: usize,
    /// Load average before.
    pub load_before: Option<[f64; 3]>,
    /// Load average after.
    pub load_after: Option<[f64; 3]>,
    /// The cells.
    pub cells: Vec<PeerCell>,
}

impl Report {
    /// Whether every system of every cell has its figure.
    pub fn ok(&self) -> bool {
        self.cells
            .iter()
            .all(|c| c.results.iter().all(|r| r.error.is_none()))
    }
}

/// Runs the selected measurements on PostgreSQL and Redis (those of `--backend`).
pub async fn run(options: &Options, started_unix: u64) -> Result<Report> {
    let measures = selected(options);
    let kinds: Vec<Kind> = options
        .backends
        .iter()
        .copied()
        .filter(|k| matches!(k, Kind::Postgres | Kind::Redis))
        .collect();
    let node_dir = tokio::task::spawn_blocking(crate::anchor_tools::install_node_runners)
        .await
        .map_err(|e| setup(format!("install: {e}")))?;
    let load_before = crate::load::now();
    let cells = crate::anchor_runs::on_each_server(
        options,
        &kinds,
        async |kind, row_options, _probe, pg_pool| {
            let at = Servers {
                options: row_options,
                pg_pool,
                node_dir: &node_dir,
            };
            let mut cells = Vec::new();
            for &measure in &measures {
                cells.push(cell(kind, measure, &at).await);
            }
            cells
        },
    )
    .await?;
    Ok(Report {
        started_unix,
        runs: options.anchors.runs,
        load_before,
        load_after: crate::load::now(),
        cells,
    })
}

/// Writes the report to `dir/peers-<unix>.json` and `dir/peers-latest.json`.
pub fn write_json(dir: &Path, report: &Report) -> Result<PathBuf> {
    crate::anchor_runs::write_report(dir, "peers", report.started_unix, report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anchor_runs::tests::sh;

    fn parse(a: &[&str]) -> Options {
        crate::args::parse(&a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()).expect("parse")
    }

    #[test]
    fn the_exact_words_select_the_measurements() {
        assert_eq!(
            selected(&parse(&["--only", "peer-pickup"])),
            [Measure::Pickup]
        );
        assert_eq!(
            selected(&parse(&["--only", "peer-admit"])),
            [Measure::Admit]
        );
        assert_eq!(selected(&parse(&["--only", "peers"])), Measure::ALL);
        assert!(selected(&parse(&[])).is_empty(), "not in the default run");
        assert!(selected(&parse(&["--only", "pickup"])).is_empty());
        assert!(selected(&parse(&["--only", "admit_batch"])).is_empty());
    }

    /// The handshake: the go line only after READY, the pickup and bulk lines parsed.
    #[tokio::test]
    async fn runners_are_driven_to_their_pickup_and_bulk_lines() {
        let ms: Vec<String> = (0..PICKUP_SAMPLES)
            .map(|i| format!("{}.5", i % 7))
            .collect();
        let pickup = format!(
            "echo READY; read go; [ \"$go\" = go ] || exit 3; echo '[worker] job done'; \
             echo 'PICKUP {{\"ms\":[{}],\"lost\":0}}'; while read rest; do :; done",
            ms.join(",")
        );
        let value = drive(sh(&pickup), Measure::Pickup).await.expect("pickup");
        let RunValue::Latencies(l) = value else {
            panic!("not latencies: {value:?}");
        };
        assert_eq!((l.len(), l[1]), (PICKUP_SAMPLES, 1.5));
        let bulk =
            format!("echo READY; read go; echo 'BULK {{\"jobs\":{ADMIT_JOBS},\"secs\":0.5}}'");
        let value = drive(sh(&bulk), Measure::Admit).await.expect("bulk");
        assert_eq!(value, RunValue::Rate(ADMIT_JOBS as f64 * 2.0));
    }

    #[tokio::test]
    async fn a_runner_that_loses_jobs_or_fails_is_an_error() {
        let cases = [
            (
                "echo READY; read go; echo 'PICKUP {\"ms\":[1],\"lost\":4}'",
                Measure::Pickup,
                "never picked up",
            ),
            (
                "echo READY; read go; echo 'BULK {\"jobs\":3,\"secs\":1}'",
                Measure::Admit,
                "completed 3 of",
            ),
            (
                "echo READY; read go; echo 'BULK {\"jobs\":20000,\"secs\":1}'; exit 7",
                Measure::Admit,
                "failed",
            ),
            ("exit 0", Measure::Admit, "without"),
        ];
        for (script, measure, want) in cases {
            let err = drive(sh(script), measure)
                .await
                .expect_err(script)
                .to_string();
            assert!(err.contains(want), "{script}: {err}");
        }
    }

    #[test]
    fn a_system_that_failed_has_no_figure() {
        let mut runs = Runs::default();
        runs.add(RunValue::Rate(10.0));
        runs.add(RunValue::Rate(30.0));
        runs.add(RunValue::Rate(20.0));
        let r = runs.result(Peer::Graphile);
        assert_eq!((r.rate, r.rates.len()), (Some(20.0), 3));
        let mut runs = Runs::default();
        runs.add(RunValue::Latencies(vec![1.0, 3.0]));
        runs.add(RunValue::Latencies(vec![2.0]));
        let r = runs.result(Peer::Lease);
        assert_eq!(r.pickup.map(|d| (d.n, d.p50)), Some((3, 2.0)), "pooled");
        let failed = Runs {
            error: Some("spawn".into()),
            ..Runs::default()
        };
        let r = failed.result(Peer::BullMq);
        assert_eq!((r.pickup, r.rate), (None, None));
    }
}
