//! Command line of `lease-bench` (what `cargo xtask bench` passes through).

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{BenchError, Result};

/// Usage text.
pub const USAGE: &str = "\
usage: lease-bench [--backend sqlite|postgres|redis|memory|all]... [--duration D] [--rounds N]
                   [--quick] [--only WORD]... [--json-dir DIR] [--wait-load L] [--wait-max D]
                   [--stored-max N]

Measures ops/s of claim_due (batch 1 and 32), renew, write_step and acknowledge,
executions/s through the dispatcher (0 and 3 fenced steps, concurrency 1, 8 and 64) and
admit_batch x1000, for each backend, next to the same SQL statements / Lua scripts issued
without the library (the raw baseline). Then the wake-up rows (issue 10), with dispatchers
in child processes of this binary where the store can be shared: pickup latency (cross-process
and in-process) beside the bare change signal, timer lateness (not_before, request_wake),
redelivery delay after a SIGKILL or an abandoned claim, idle claim calls beside the server's
own counters, and claim calls per admission with a herd of 4 dispatcher processes. Then the issue 13
rows (not on memory): a fenced application transaction (one row into an application table of the
lease's database; Redis: fenced_script) against the same transaction unfenced, and step_in_tx
(Redis: step_in_script) against the unfenced transaction + write_step, interleaved call by call,
one call in flight. Then the issue 12 rows
(not on memory): drain (20,000 admitted, a worker process at concurrency 1, 8, 64 drains
them; median of 2 runs beside the issue's best job queue), ack_and_claim (acknowledge_and_claim
against acknowledge + claim_due_with_horizon, one call in flight), stored (claim, renew,
write_step, acknowledge at 10^3, 10^5, 10^6 stored executions, scheduled / running /
terminal, and the cost ratio largest/10^3), purge (purge_terminal x1000 over 100,000
completed executions with 3 steps each), footprint (bytes per completed execution and per step
record as the server counts them, PostgreSQL table and index sizes at 10^6 completed, and
PostgreSQL dead tuples and autovacuum runs under admit/complete/purge churn). Prints markdown
tables; writes JSON to DIR (default target/bench).

Selecting rows with --only: claim, renew, write_step, acknowledge, e2e, admit_batch, pickup,
timer, redelivery, idle, herd, fenced, drain, ack_and_claim, stored, purge, footprint (or any part of a row's
name, e.g. cross-process, 'drain 20k c64', 'stored running', 10^6). `claim` also selects
the two ack_and_claim rows; a stored group is selected by its name ('stored <shape> 10^k'),
never by an operation's.

  --backend NAME   repeatable or comma-separated; default all (sqlite, postgres, redis, memory)
  --duration D     per measurement and side, e.g. 3s, 500ms (default 3s; --quick: 1s)
  --rounds N       split each measurement into N rounds alternating library and raw, each
                   on a fresh store, and report the median round (default 3; --quick: 1)
  --quick          short measurements, for trying the harness
  --only WORD      only measurements whose name contains WORD (repeatable), e.g. claim, e2e,
                   pickup (latency rows run `--duration` of samples; idle watches 20s, 5s
                   with --quick)
  --json-dir DIR   where the JSON report goes
  --wait-load L    before starting, wait until the 1-minute load average is below L
  --wait-max D     give up waiting after D (default 10m) and run anyway (noted in the report)
  --stored-max N   largest stored count of the stored rows (default 1000000; --quick: 100000)

Servers: LEASE_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test) and
LEASE_REDIS_URL (default redis://127.0.0.1:6379). These are benchmarks: the exit status
reflects only whether the measurements ran, never whether a target was met.";

/// A backend to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// lease-sqlite on a temp file (WAL, synchronous NORMAL).
    Sqlite,
    /// lease-postgres.
    Postgres,
    /// lease-redis.
    Redis,
    /// lease-core's in-memory reference backend (no raw baseline).
    Memory,
}

impl Kind {
    /// Every backend, in report order.
    pub const ALL: [Kind; 4] = [Kind::Sqlite, Kind::Postgres, Kind::Redis, Kind::Memory];

    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Sqlite => "sqlite",
            Kind::Postgres => "postgres",
            Kind::Redis => "redis",
            Kind::Memory => "memory",
        }
    }
}

/// Parsed options.
#[derive(Debug, Clone)]
pub struct Options {
    /// Backends, in report order.
    pub backends: Vec<Kind>,
    /// Length of each measurement.
    pub duration: Duration,
    /// Rounds per measurement (alternating library and raw; the median is reported).
    pub rounds: usize,
    /// Short run.
    pub quick: bool,
    /// Name filters (any match selects a measurement); empty = everything.
    pub only: Vec<String>,
    /// Output directory of the JSON report.
    pub json_dir: PathBuf,
    /// Wait for the load average to drop below this before starting.
    pub wait_load: Option<f64>,
    /// Longest wait for the load average.
    pub wait_max: Duration,
    /// PostgreSQL URL.
    pub postgres_url: String,
    /// Redis URL.
    pub redis_url: String,
    /// The largest stored count of the stored-work rows.
    pub stored_max: u64,
}

impl Options {
    /// The length of one round of one side.
    pub fn round(&self) -> Duration {
        self.duration / u32::try_from(self.rounds.max(1)).unwrap_or(1)
    }

    /// True when the measurement named `name` is selected by `--only`.
    pub fn selected(&self, name: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|w| name.contains(w.as_str()))
    }
}

/// Parses `3s`, `500ms`, `1.5s`, `2m` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let bad = || BenchError::Setup(format!("bad duration {text:?} (try 3s or 500ms)"));
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60.0)
    } else {
        (text, 1.0)
    };
    let value: f64 = number.trim().parse().map_err(|_| bad())?;
    let secs = value * scale;
    if !secs.is_finite() || secs <= 0.0 || secs > 3600.0 {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(secs))
}

fn env_or(var: &str, default: &str) -> String {
    std::env::var(var)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_owned())
}

/// The default JSON directory: `<workspace>/target/bench`.
fn default_json_dir() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .and_then(|p| p.parent())
        .map_or_else(|| PathBuf::from("target"), |root| root.join("target"))
        .join("bench")
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Options> {
    let mut backends = Vec::new();
    let mut duration = None;
    let mut rounds = None;
    let mut quick = false;
    let mut only = Vec::new();
    let mut json_dir = None;
    let mut wait_load = None;
    let mut wait_max = Duration::from_secs(600);
    let mut stored_max = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = |name: &str| -> Result<String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| BenchError::Setup(format!("{name} needs a value")))
        };
        match flag {
            "--backend" => {
                for name in value("--backend")?.split(',') {
                    match name.trim() {
                        "all" => backends.extend(Kind::ALL),
                        other => backends.push(
                            Kind::ALL
                                .into_iter()
                                .find(|k| k.name() == other)
                                .ok_or_else(|| {
                                    BenchError::Setup(format!("unknown backend {other:?}"))
                                })?,
                        ),
                    }
                }
            }
            "--duration" => duration = Some(parse_duration(&value("--duration")?)?),
            "--rounds" => {
                let v = value("--rounds")?;
                let n: usize = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=100).contains(n))
                    .ok_or_else(|| BenchError::Setup(format!("bad round count {v:?}")))?;
                rounds = Some(n);
            }
            "--quick" => quick = true,
            "--only" => only.push(value("--only")?),
            "--json-dir" => json_dir = Some(PathBuf::from(value("--json-dir")?)),
            "--wait-load" => {
                let v = value("--wait-load")?;
                let l: f64 = v
                    .parse()
                    .map_err(|_| BenchError::Setup(format!("bad load average {v:?}")))?;
                wait_load = Some(l);
            }
            "--wait-max" => wait_max = parse_duration(&value("--wait-max")?)?,
            "--stored-max" => {
                let v = value("--stored-max")?;
                let n: u64 = v
                    .replace('_', "")
                    .parse()
                    .map_err(|_| BenchError::Setup(format!("bad stored count {v:?}")))?;
                stored_max = Some(n);
            }
            other => return Err(BenchError::Setup(format!("unexpected argument {other:?}"))),
        }
    }
    if backends.is_empty() {
        backends.extend(Kind::ALL);
    }
    backends.sort();
    backends.dedup();
    let default = if quick {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(3)
    };
    Ok(Options {
        backends,
        duration: duration.unwrap_or(default),
        rounds: rounds.unwrap_or(if quick { 1 } else { 3 }),
        quick,
        only,
        json_dir: json_dir.unwrap_or_else(default_json_dir),
        wait_load,
        wait_max,
        postgres_url: env_or(
            "LEASE_POSTGRES_URL",
            "postgres://postgres@127.0.0.1:5432/test",
        ),
        redis_url: env_or("LEASE_REDIS_URL", "redis://127.0.0.1:6379"),
        stored_max: stored_max.unwrap_or(if quick { 100_000 } else { 1_000_000 }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("3s").expect("3s"), Duration::from_secs(3));
        assert_eq!(
            parse_duration("500ms").expect("ms"),
            Duration::from_millis(500)
        );
        assert_eq!(parse_duration("2").expect("bare"), Duration::from_secs(2));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn backends_and_flags_parse() {
        let o = parse(&args(&[
            "--backend",
            "redis,sqlite",
            "--quick",
            "--only=claim",
        ]))
        .expect("parse");
        assert_eq!(o.backends, vec![Kind::Sqlite, Kind::Redis]);
        assert!(o.quick);
        assert_eq!(o.duration, Duration::from_secs(1));
        assert_eq!(o.rounds, 1);
        assert!(o.selected("claim_due x1") && !o.selected("renew"));
        let all = parse(&args(&["--backend", "all", "--duration", "250ms"])).expect("all");
        assert_eq!(all.backends.len(), 4);
        assert_eq!(all.duration, Duration::from_millis(250));
        assert!(parse(&args(&["--backend", "mysql"])).is_err());
        assert!(parse(&args(&["--bogus"])).is_err());
    }
}
