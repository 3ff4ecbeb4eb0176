//! The job queues' pickup latency and bulk enqueue beside this library's, in the same run:
//! the pieces that need no queue installed - the systems, the lines their runners print
//! (`PICKUP`, `BULK`), the cells and their targets, the markdown tables.
//! [`crate::peer_runs`] installs and drives the runners.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::anchors::{self, Outcome};
use crate::args::Kind;
use crate::error::{BenchError, Result};
use crate::wake::Dist;

/// What a cell measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Measure {
    /// Admit (add) to worker start of one job, an idle worker running.
    Pickup,
    /// Jobs admitted (added) per second in batches of 1,000 into an empty queue.
    Admit,
}

impl Measure {
    /// Both, in report order.
    pub const ALL: [Measure; 2] = [Measure::Pickup, Measure::Admit];

    /// The word of `--only` that selects it.
    pub fn word(self) -> &'static str {
        match self {
            Measure::Pickup => "peer-pickup",
            Measure::Admit => "peer-admit",
        }
    }
}

/// The systems of the peer rows, in row order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Peer {
    /// This project: `pickup cross-process` / `admit_batch` of 1000.
    Lease,
    /// graphile-worker 0.18.0 (PostgreSQL): LISTEN/NOTIFY (its default) / `addJobs`.
    Graphile,
    /// pg-boss 10.4.2 (PostgreSQL), 2 s polling (its default) / `insert`.
    PgBoss,
    /// pg-boss polling every 0.5 s (the shortest it accepts); pickup only.
    PgBossFast,
    /// BullMQ 6.7.0 (Redis): blocking wait on its marker (its default) / `addBulk`.
    BullMq,
}

impl Peer {
    /// Every system, in row order.
    pub const ALL: [Peer; 5] = [
        Peer::Lease,
        Peer::Graphile,
        Peer::PgBoss,
        Peer::PgBossFast,
        Peer::BullMq,
    ];

    /// A short key (`--anchor-system` words match it).
    pub fn key(self) -> &'static str {
        match self {
            Peer::Lease => "lease",
            Peer::Graphile => "graphile",
            Peer::PgBoss => "pgboss",
            Peer::PgBossFast => "pgboss-poll500",
            Peer::BullMq => "bullmq",
        }
    }

    /// The row's name in `measure`'s table.
    pub fn name(self, measure: Measure) -> &'static str {
        match (self, measure) {
            (Peer::Lease, Measure::Pickup) => "this library, default options",
            (Peer::Lease, Measure::Admit) => "this library, admit_batch",
            (Peer::Graphile, Measure::Pickup) => "graphile-worker 0.18.0, defaults (LISTEN/NOTIFY)",
            (Peer::Graphile, Measure::Admit) => "graphile-worker 0.18.0, addJobs",
            (Peer::PgBoss, Measure::Pickup) => "pg-boss 10.4.2, defaults (2 s polling)",
            (Peer::PgBoss | Peer::PgBossFast, Measure::Admit) => "pg-boss 10.4.2, insert",
            (Peer::PgBossFast, Measure::Pickup) => "pg-boss 10.4.2, 0.5 s polling (its minimum)",
            (Peer::BullMq, Measure::Pickup) => "BullMQ 6.7.0, defaults (blocking wait)",
            (Peer::BullMq, Measure::Admit) => "BullMQ 6.7.0, addBulk",
        }
    }

    /// The runner script (none for this library).
    pub fn script(self) -> Option<&'static str> {
        match self {
            Peer::Lease => None,
            Peer::Graphile => Some("graphile.js"),
            Peer::PgBoss | Peer::PgBossFast => Some("pgboss.js"),
            Peer::BullMq => Some("bullmq.js"),
        }
    }

    /// The runner's mode argument for `measure`.
    pub fn mode(self, measure: Measure) -> &'static str {
        match (self, measure) {
            (_, Measure::Admit) => "bulk",
            (Peer::PgBossFast, Measure::Pickup) => "pickup-fast",
            (_, Measure::Pickup) => "pickup",
        }
    }

    /// The mean gap between two adds of its pickup series, ms: ours (20 ms) for the queues
    /// that wake their workers, a quarter of the polling interval for pg-boss (its workers
    /// take one job per fetch, all polling about together: the adds must not outrun them).
    pub fn pickup_every_ms(self) -> u64 {
        match self {
            Peer::PgBoss => 500,
            Peer::PgBossFast => 125,
            _ => crate::wake::PICKUP_EVERY.as_millis() as u64,
        }
    }

    /// Whether it runs on `kind` for `measure`.
    pub fn serves(self, kind: Kind, measure: Measure) -> bool {
        match self {
            Peer::Lease => matches!(kind, Kind::Postgres | Kind::Redis),
            Peer::Graphile | Peer::PgBoss => kind == Kind::Postgres,
            Peer::PgBossFast => kind == Kind::Postgres && measure == Measure::Pickup,
            Peer::BullMq => kind == Kind::Redis,
        }
    }

    /// Whether `--anchor-system` words select it (none given: every system).
    pub fn selected(self, words: &[String]) -> bool {
        words.is_empty() || words.iter().any(|w| self.key().contains(w.as_str()))
    }
}

/// The systems of `measure` on `kind` that `words` select, the starting one rotated by
/// `round`.
pub fn order(kind: Kind, measure: Measure, round: usize, words: &[String]) -> Vec<Peer> {
    let mut systems: Vec<Peer> = Peer::ALL
        .into_iter()
        .filter(|p| p.serves(kind, measure) && p.selected(words))
        .collect();
    if !systems.is_empty() {
        let n = round % systems.len();
        systems.rotate_left(n);
    }
    systems
}

/// The prefix of a runner's pickup line.
pub const PICKUP_PREFIX: &str = "PICKUP ";
/// The prefix of a runner's bulk-enqueue line.
pub const BULK_PREFIX: &str = "BULK ";

/// A pickup line: `PICKUP {"ms":[...],"lost":L}`.
#[derive(Debug, Deserialize)]
struct PickupLine {
    ms: Vec<f64>,
    lost: u64,
}

/// The text after `prefix` on the last line of `stdout` that starts with it.
fn payload<'a>(stdout: &'a str, prefix: &str) -> Result<&'a str> {
    stdout
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix(prefix))
        .ok_or_else(|| BenchError::Setup(format!("no {prefix:?} line in the output")))
}

/// The latencies (ms) of a runner's last `PICKUP` line: exactly `expected`, none lost, each a
/// finite number of at least 0.
pub fn parse_pickup(stdout: &str, expected: usize) -> Result<Vec<f64>> {
    let text = payload(stdout, PICKUP_PREFIX)?;
    let line: PickupLine = serde_json::from_str(text)
        .map_err(|e| BenchError::Setup(format!("pickup result {text:?}: {e}")))?;
    if line.lost > 0 || line.ms.len() != expected {
        return Err(BenchError::Setup(format!(
            "the runner's worker picked up {} of {expected} measured jobs ({} adds never picked up)",
            line.ms.len(),
            line.lost
        )));
    }
    if let Some(bad) = line.ms.iter().find(|v| !(v.is_finite() && **v >= 0.0)) {
        return Err(BenchError::Setup(format!("a pickup latency of {bad} ms")));
    }
    Ok(line.ms)
}

/// The jobs/s of a runner's last `BULK {"jobs":N,"secs":S}` line: every one of `expected`
/// jobs added, in a positive time.
pub fn parse_bulk(stdout: &str, expected: u64) -> Result<f64> {
    let text = payload(stdout, BULK_PREFIX)?;
    let outcome: Outcome = serde_json::from_str(text)
        .map_err(|e| BenchError::Setup(format!("bulk result {text:?}: {e}")))?;
    if outcome.partial {
        return Err(BenchError::Setup(
            "a bulk enqueue has no partial result".into(),
        ));
    }
    let outcome = anchors::check_outcome(outcome, expected)?;
    Ok(outcome.jobs as f64 / outcome.secs)
}

/// One system's result in a cell.
#[derive(Debug, Clone, Serialize)]
pub struct PeerResult {
    /// The system.
    pub peer: Peer,
    /// Pickup: the latencies of every run pooled (ms).
    pub pickup: Option<Dist>,
    /// Admit: the median run's jobs/s.
    pub rate: Option<f64>,
    /// Admit: each run's jobs/s.
    pub rates: Vec<f64>,
    /// Why a run failed (the system has no figure then).
    pub error: Option<String>,
}

/// One cell: one measurement on one backend.
#[derive(Debug, Clone, Serialize)]
pub struct PeerCell {
    /// What it measures.
    pub measure: Measure,
    /// Backend.
    pub backend: &'static str,
    /// 1-minute load average when the cell started.
    pub load_1m: f64,
    /// Jobs per run (pickup: measured adds; admit: jobs added).
    pub jobs: u64,
    /// The systems, in [`Peer::ALL`] order.
    pub results: Vec<PeerResult>,
}

/// A cell's target and how it came out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// The target, in words.
    pub target: String,
    /// This library's figure over the peer's (p99 over p99; jobs/s over jobs/s).
    pub ratio: Option<f64>,
    /// Whether it was met (none when a side has no figure).
    pub met: Option<bool>,
}

/// Admission: this library's rate at least this times the best peer's bulk enqueue.
pub const ADMIT_RATIO: f64 = 1.1;

impl PeerCell {
    fn get(&self, peer: Peer) -> Option<&PeerResult> {
        self.results.iter().find(|r| r.peer == peer)
    }

    /// The best peer's bulk rate and which peer.
    pub fn best_bulk(&self) -> Option<(f64, Peer)> {
        self.results
            .iter()
            .filter(|r| r.peer != Peer::Lease)
            .filter_map(|r| r.rate.map(|v| (v, r.peer)))
            .max_by(|a, b| a.0.total_cmp(&b.0))
    }

    /// The cell's target: PostgreSQL pickup p99 no worse than graphile-worker's; admission
    /// at least [`ADMIT_RATIO`] times the best peer's bulk enqueue. None where no target
    /// applies (Redis pickup).
    pub fn verdict(&self) -> Option<Verdict> {
        let lease = self.get(Peer::Lease);
        match self.measure {
            Measure::Pickup => {
                if self.backend != "PostgreSQL" {
                    return None;
                }
                let ours = lease.and_then(|r| r.pickup).map(|d| d.p99);
                let theirs = self
                    .get(Peer::Graphile)
                    .and_then(|r| r.pickup)
                    .map(|d| d.p99);
                let ratio = ours.zip(theirs).map(|(o, t)| o / t);
                Some(Verdict {
                    target: "p99 <= graphile-worker's p99".into(),
                    ratio,
                    met: ours.zip(theirs).map(|(o, t)| o <= t),
                })
            }
            Measure::Admit => {
                let ours = lease.and_then(|r| r.rate);
                let best = self.best_bulk().map(|b| b.0);
                let ratio = ours.zip(best).map(|(o, b)| o / b);
                Some(Verdict {
                    target: format!(">= {ADMIT_RATIO}x the best peer's bulk enqueue"),
                    ratio,
                    met: ratio.map(|r| r >= ADMIT_RATIO),
                })
            }
        }
    }
}

fn ms(v: f64) -> String {
    format!("{v:.2}")
}

/// One pickup row: n, p50, p95, p99, max.
fn pickup_cells(r: &PeerResult) -> String {
    match (&r.pickup, &r.error) {
        (Some(d), _) => format!(
            "{} | {} | {} | {} | {}",
            d.n,
            ms(d.p50),
            ms(d.p95),
            ms(d.p99),
            ms(d.max)
        ),
        (None, _) => "failed | | | |".into(),
    }
}

/// One admit row: jobs/s and each run's.
fn admit_cells(r: &PeerResult) -> String {
    match r.rate {
        Some(v) => format!(
            "{} | {}",
            crate::row::thousands(v),
            r.rates
                .iter()
                .map(|x| crate::row::thousands(*x))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => "failed |".into(),
    }
}

fn verdict_text(v: &Verdict) -> String {
    let ratio = v.ratio.map_or("-".into(), |r| format!("{r:.2}x"));
    let met = match v.met {
        Some(true) => "met",
        Some(false) => "**missed**",
        None => "not measured",
    };
    format!("target {}: {ratio}, {met}", v.target)
}

/// The markdown table of one cell: a row per system, then the target and the load.
pub fn cell_markdown(cell: &PeerCell) -> String {
    let mut out = String::new();
    let _ = match cell.measure {
        Measure::Pickup => writeln!(
            out,
            "\n| {} pickup, add to worker start (ms) | n | p50 | p95 | p99 | max |\n|---|---:|---:|---:|---:|---:|",
            cell.backend
        ),
        Measure::Admit => writeln!(
            out,
            "\n| {} bulk admission, {} jobs in batches of 1000 | jobs/s (median) | each run |\n|---|---:|---|",
            cell.backend,
            crate::row::thousands(cell.jobs as f64)
        ),
    };
    for r in &cell.results {
        let figures = match cell.measure {
            Measure::Pickup => pickup_cells(r),
            Measure::Admit => admit_cells(r),
        };
        let _ = writeln!(out, "| {} | {figures} |", r.peer.name(cell.measure));
    }
    if let Some(v) = cell.verdict() {
        let _ = writeln!(out, "\n{}", verdict_text(&v));
    }
    let _ = writeln!(out, "load 1m at the cell's start: {:.2}", cell.load_1m);
    for r in &cell.results {
        if let Some(e) = &r.error {
            let _ = writeln!(out, "{}: failed: {e}", r.peer.name(cell.measure));
        }
    }
    out
}

/// The markdown of every cell.
pub fn markdown(cells: &[PeerCell]) -> String {
    cells.iter().map(cell_markdown).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pickup_line_gives_every_latency_or_an_error() {
        let out = "READY\n[worker] job 1\nPICKUP {\"ms\":[9.0],\"lost\":0}\nPICKUP {\"ms\":[1.5,0.25,3],\"lost\":0}\n";
        assert_eq!(
            parse_pickup(out, 3).ok(),
            Some(vec![1.5, 0.25, 3.0]),
            "the last line"
        );
        assert!(parse_pickup(out, 4).is_err(), "one missing");
        let lost = "PICKUP {\"ms\":[1.5,0.25,3],\"lost\":1}";
        let e = parse_pickup(lost, 3).expect_err("a lost warm-up add");
        assert!(e.to_string().contains("1 adds never picked up"), "{e}");
        for (bad, why) in [
            ("PICKUP {\"ms\":[-1],\"lost\":0}", "negative"),
            ("PICKUP {\"ms\":[1]}", "no lost count"),
            ("ANCHOR {\"jobs\":1,\"secs\":1}", "no line"),
        ] {
            assert!(parse_pickup(bad, 1).is_err(), "{why}");
        }
    }

    #[test]
    fn a_bulk_line_gives_the_rate_of_every_job() {
        let out = "READY\nBULK {\"jobs\":20000,\"secs\":0.5}\n";
        assert_eq!(parse_bulk(out, 20_000).ok(), Some(40_000.0));
        for (bad, expected, why) in [
            (out, 30_000, "jobs missing"),
            ("BULK {\"jobs\":10,\"secs\":0}", 10, "no time"),
            (
                "BULK {\"jobs\":10,\"secs\":1,\"partial\":true}",
                10,
                "no partial bulk",
            ),
            ("PICKUP {\"ms\":[],\"lost\":0}", 10, "no line"),
        ] {
            assert!(parse_bulk(bad, expected).is_err(), "{why}");
        }
    }

    #[test]
    fn each_backend_has_its_peers_and_the_order_rotates() {
        let all = Vec::new();
        assert_eq!(
            order(Kind::Postgres, Measure::Pickup, 0, &all),
            [Peer::Lease, Peer::Graphile, Peer::PgBoss, Peer::PgBossFast]
        );
        assert_eq!(
            order(Kind::Postgres, Measure::Admit, 1, &all),
            [Peer::Graphile, Peer::PgBoss, Peer::Lease],
            "pg-boss's polling does not change its insert"
        );
        assert_eq!(
            order(Kind::Redis, Measure::Pickup, 3, &all),
            [Peer::BullMq, Peer::Lease]
        );
        assert!(order(Kind::Sqlite, Measure::Admit, 0, &all).is_empty());
        let words = vec!["pgboss".to_owned()];
        assert_eq!(
            order(Kind::Postgres, Measure::Pickup, 0, &words),
            [Peer::PgBoss, Peer::PgBossFast]
        );
        assert_eq!(Peer::PgBossFast.mode(Measure::Pickup), "pickup-fast");
        assert_eq!(Peer::PgBoss.mode(Measure::Admit), "bulk");
        assert_eq!(Peer::Graphile.pickup_every_ms(), 20);
        assert_eq!(Peer::PgBoss.pickup_every_ms(), 500);
    }

    fn result(peer: Peer, p99: Option<f64>, rate: Option<f64>) -> PeerResult {
        PeerResult {
            peer,
            pickup: p99.and_then(|v| Dist::of(vec![v / 2.0, v])),
            rate,
            rates: rate.into_iter().collect(),
            error: None,
        }
    }

    #[test]
    fn targets_compare_with_graphile_and_the_best_bulk_peer() {
        let pickup = |lease, graphile| PeerCell {
            measure: Measure::Pickup,
            backend: "PostgreSQL",
            load_1m: 1.0,
            jobs: 2,
            results: vec![
                result(Peer::Lease, lease, None),
                result(Peer::Graphile, graphile, None),
                result(Peer::PgBoss, Some(1.0), None),
            ],
        };
        let v = pickup(Some(4.0), Some(8.0)).verdict().expect("a target");
        assert_eq!((v.ratio, v.met), (Some(0.5), Some(true)));
        let v = pickup(Some(9.0), Some(8.0)).verdict().expect("a target");
        assert_eq!(v.met, Some(false), "pg-boss's faster p99 is not the target");
        assert_eq!(pickup(None, Some(8.0)).verdict().and_then(|v| v.met), None);
        let redis = PeerCell {
            backend: "Redis",
            ..pickup(Some(1.0), None)
        };
        assert_eq!(redis.verdict(), None, "no pickup target on Redis");
        let admit = |lease| PeerCell {
            measure: Measure::Admit,
            backend: "PostgreSQL",
            load_1m: 1.0,
            jobs: 20_000,
            results: vec![
                result(Peer::Lease, None, lease),
                result(Peer::Graphile, None, Some(20_000.0)),
                result(Peer::PgBoss, None, Some(30_000.0)),
            ],
        };
        let cell = admit(Some(33_000.0));
        assert_eq!(cell.best_bulk(), Some((30_000.0, Peer::PgBoss)));
        assert_eq!(cell.verdict().and_then(|v| v.met), Some(true));
        assert_eq!(
            admit(Some(32_000.0)).verdict().and_then(|v| v.met),
            Some(false)
        );
    }

    #[test]
    fn the_tables_show_each_system_the_target_and_the_load() {
        let cell = PeerCell {
            measure: Measure::Admit,
            backend: "Redis",
            load_1m: 2.5,
            jobs: 20_000,
            results: vec![
                PeerResult {
                    rates: vec![100_000.0, 120_000.0],
                    ..result(Peer::Lease, None, Some(100_000.0))
                },
                PeerResult {
                    error: Some("spawn".into()),
                    ..result(Peer::BullMq, None, None)
                },
            ],
        };
        let table = cell_markdown(&cell);
        for want in [
            "| Redis bulk admission, 20,000 jobs in batches of 1000 | jobs/s (median) | each run |",
            "| this library, admit_batch | 100,000 | 100,000, 120,000 |",
            "| BullMQ 6.7.0, addBulk | failed | |",
            "target >= 1.1x the best peer's bulk enqueue: -, not measured",
            "load 1m at the cell's start: 2.50",
            "BullMQ 6.7.0, addBulk: failed: spawn",
        ] {
            assert!(table.contains(want), "{want}\nnot in\n{table}");
        }
        let pickup = PeerCell {
            measure: Measure::Pickup,
            backend: "PostgreSQL",
            load_1m: 1.0,
            jobs: 2,
            results: vec![
                result(Peer::Lease, Some(2.0), None),
                result(Peer::Graphile, Some(4.0), None),
            ],
        };
        let table = cell_markdown(&pickup);
        assert!(
            table.contains("| this library, default options | 2 | 1.00 | 2.00 | 2.00 | 2.00 |"),
            "{table}"
        );
        assert!(
            table.contains("target p99 <= graphile-worker's p99: 0.50x, met"),
            "{table}"
        );
    }
}
