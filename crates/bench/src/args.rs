//! Command line of `lease-bench` (what `cargo xtask bench` passes through).

use std::path::PathBuf;
use std::time::Duration;

use clap::{CommandFactory, Parser};

use crate::error::{BenchError, Result};

/// What `--help` prints after the options.
const ABOUT: &str = "\
Measures ops/s of claim_due (batch 1 and 32), renew, write_step and acknowledge,
executions/s through the dispatcher (0 and 3 fenced steps, concurrency 1, 8 and 64) and
admit_batch x1000, for each backend, next to the same SQL statements / Lua scripts issued
without the library (the raw baseline). Then the wake-up rows, with dispatchers
in child processes of this binary where the store can be shared: pickup latency (cross-process
and in-process) beside the bare change signal, the same with admissions made inside the
application's transaction beside plain admits (pickup in-tx), timer lateness (not_before, request_wake),
redelivery delay after a SIGKILL or an abandoned claim, idle claim calls beside the server's
own counters, and claim calls per admission with a herd of 4 dispatcher processes. Then the fenced-write
rows (not on memory): a fenced application transaction (one row into an application table of the
lease's database; Redis: fenced_script) against the same transaction unfenced, and step_in_tx
(Redis: step_in_script) against the unfenced transaction + write_step, interleaved call by call,
one call in flight. Then the drain and storage rows
(not on memory): drain (20,000 admitted, a worker process at concurrency 1, 8, 64 drains
them; median of 2 runs; the job queues run beside it with --only anchors), ack_and_claim (acknowledge_and_claim
against acknowledge + claim_due_with_horizon, one call in flight), stored (claim, renew,
write_step, acknowledge at 10^3, 10^5, 10^6 stored executions, scheduled / running /
terminal, and the cost ratio largest/10^3), purge (purge_terminal x1000 over 100,000
completed executions with 3 steps each), footprint (bytes per completed execution and per step
record as the server counts them, PostgreSQL table and index sizes at 10^6 completed, and
PostgreSQL dead tuples and autovacuum runs under admit/complete/purge churn). Then the control
rows (not on memory): controls claim (claim_due x1 at 10^3, 10^5, 10^6 stored executions with
4 priority levels and 100 concurrency keys, 20 limited, interleaved with the same claim on a
plain store and the raw claim there; the cost ratio mixed/plain), controls drain c1, c8 (the
drain with priorities, keys and limits beside the plain drain and the raw pipeline), controls
drain configured c1, c8, c64 (every control set, none binding, beside the plain drain) and
controls cancel (p50/p99 of cancel -> the dispatcher's worker cancelled, against the renewal
interval). Then, with redis, the shard rows: one namespace of 20,000 jobs drained at C = 64
by a worker process on a standalone redis-server (1 and 6 partitions) and on Redis Clusters of
1, 2 and 3 primaries (6 partitions spread evenly), servers started by the row (redis-server
on PATH): jobs/s and server CPU per job (INFO cpu, summed over the primaries) beside the
standalone server. Prints markdown tables; writes JSON to DIR (default target/bench).

Selecting rows with --only: claim, renew, write_step, acknowledge, e2e, admit_batch, pickup,
timer, redelivery, idle, herd, fenced, drain, ack_and_claim, stored, purge, footprint, controls, ui, shards (or any part of a row's
name, e.g. cross-process, 'drain 20k c64', 'stored running', 10^6). `claim` also selects
the two ack_and_claim rows; a stored group is selected by its name ('stored <shape> 10^k'),
never by an operation's. `--only anchors` (never in the default run) installs BullMQ,
graphile-worker, pg-boss (npm ci), apalis, awa (cargo build) and River's Rust port (cargo
install riverqueue-cli) into <target>/anchors and runs each at its defaults and at its
documented best configuration beside this library at its defaults and tuned (prefetch 500,
claim_batch 500), and the database's own bound of the batched fenced claim/acknowledge
protocol (batches of 32 and 500), draining --anchor-jobs at C = 1, 8, 64 on the same servers,
interleaved, with cost per job; a drain past --anchor-budget reports its partial count; a
missing tool fails its systems' rows; combine with --backend and --anchor-system.
`--only peer-pickup` and `--only peer-admit` (`--only peers`: both; never in the default run)
install the Node runners the same way and measure, on PostgreSQL and Redis, this library's
pickup cross-process series (200 admissions) beside graphile-worker, pg-boss (2 s and 0.5 s
polling) and BullMQ picking up 200 jobs added one at a time to an idle worker (concurrency 8),
and admit_batch of 1000 (20,000 executions into a fresh store) beside their bulk enqueue
(addJobs, insert, addBulk: 20,000 jobs in batches of 1000 into an empty queue), interleaved,
--anchor-runs runs each, --anchor-system selecting the systems (lease, graphile, pgboss,
pgboss-poll500, bullmq).\n\nServers: LEASE_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test) and
LEASE_REDIS_URL (default redis://127.0.0.1:6379). PostgreSQL is measured over plain TCP
(sslmode=disable added) unless the URL or PGSSLMODE names a mode, as the job queues connect. These are benchmarks: the exit status
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
    /// How the `--only anchors` row runs.
    pub anchors: AnchorOptions,
}

/// How the `--only anchors` row runs: runs per system and cell, the jobs of each run, the
/// longest one drain may take, and which systems.
#[derive(Debug, Clone, PartialEq)]
pub struct AnchorOptions {
    /// Runs per system and cell (the median is reported).
    pub runs: usize,
    /// Jobs admitted and drained per run.
    pub jobs: u64,
    /// The longest one drain runs: a slower one reports the jobs it completed by then.
    pub budget: Duration,
    /// Only systems whose key contains one of these words (empty: every system).
    pub systems: Vec<String>,
}

impl Default for AnchorOptions {
    fn default() -> Self {
        AnchorOptions {
            runs: 2,
            jobs: 20_000,
            budget: Duration::from_secs(30),
            systems: Vec::new(),
        }
    }
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

/// Parses a duration as humantime writes them (`3s`, `500ms`, `2m`, `1m 30s`) or a
/// number of seconds (`2`, `1.5`, `1.5s`); more than 0 and at most an hour.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let bad = || BenchError::Setup(format!("bad duration {text:?} (try 3s or 500ms)"));
    let d = match humantime::parse_duration(text.trim()) {
        Ok(d) => d,
        Err(_) => {
            let t = text.trim();
            let secs: f64 = t
                .strip_suffix('s')
                .unwrap_or(t)
                .parse()
                .map_err(|_| bad())?;
            if !secs.is_finite() || secs <= 0.0 {
                return Err(bad());
            }
            Duration::try_from_secs_f64(secs).map_err(|_| bad())?
        }
    };
    if d.is_zero() || d > Duration::from_secs(3600) {
        return Err(bad());
    }
    Ok(d)
}

/// The workspace root (the bench runs from its source tree).
pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .and_then(|p| p.parent())
        .map_or_else(|| PathBuf::from("."), PathBuf::from)
}

/// The default JSON directory: `<workspace>/target/bench`.
fn default_json_dir() -> PathBuf {
    workspace_root().join("target").join("bench")
}

/// The command line as clap reads it (`--help` is generated from it).
#[derive(Debug, Parser)]
#[command(name = "lease-bench", about = "Benchmarks of every lease backend against raw baselines.", after_help = ABOUT)]
struct Cli {
    /// Backends, repeatable or comma-separated: sqlite, postgres, redis, memory, all
    /// (default all).
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    backend: Vec<String>,
    /// Per measurement and side, e.g. 3s, 500ms, 2m or a bare number of seconds (default
    /// 3s; --quick: 1s).
    #[arg(long, value_name = "D", value_parser = duration_arg)]
    duration: Option<Duration>,
    /// Split each measurement into N rounds alternating library and raw, each on a fresh
    /// store, and report the median round (default 3; --quick: 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=100))]
    rounds: Option<u16>,
    /// Short measurements, for trying the harness.
    #[arg(long)]
    quick: bool,
    /// Only measurements whose name contains WORD (repeatable), e.g. claim, e2e, pickup,
    /// 'drain 20k c64', footprint.
    #[arg(long, value_name = "WORD")]
    only: Vec<String>,
    /// Where the JSON report goes (default `<workspace>/target/bench`).
    #[arg(long, value_name = "DIR")]
    json_dir: Option<PathBuf>,
    /// Before starting, wait until the 1-minute load average is below L.
    #[arg(long, value_name = "L")]
    wait_load: Option<f64>,
    /// Give up waiting after D and run anyway (noted in the report).
    #[arg(long, value_name = "D", value_parser = duration_arg, default_value = "10m")]
    wait_max: Duration,
    /// Largest stored count of the stored rows, `_` allowed (default 1000000; --quick:
    /// 100000).
    #[arg(long, value_name = "N", value_parser = count_arg)]
    stored_max: Option<u64>,
    /// `--only anchors` and the peer rows: runs per system and cell, the median reported
    /// (default 2).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=20))]
    anchor_runs: Option<u16>,
    /// `--only anchors`: jobs per run, `_` allowed (default 20000).
    #[arg(long, value_name = "N", value_parser = count_arg)]
    anchor_jobs: Option<u64>,
    /// `--only anchors`: the longest one drain runs before it reports the jobs completed by
    /// then, marked partial (default 30s).
    #[arg(long, value_name = "D", value_parser = duration_arg)]
    anchor_budget: Option<Duration>,
    /// `--only anchors` and the peer rows: only the systems whose key contains WORD
    /// (repeatable), e.g. lease, graphile, pgboss, awa, river, bound.
    #[arg(long, value_name = "WORD")]
    anchor_system: Vec<String>,
}

/// clap's value parser for durations: [`parse_duration`].
fn duration_arg(text: &str) -> std::result::Result<Duration, String> {
    parse_duration(text).map_err(|e| e.to_string())
}

/// clap's value parser for counts written with `_` separators (`1_000_000`).
fn count_arg(text: &str) -> std::result::Result<u64, String> {
    text.replace('_', "")
        .parse()
        .map_err(|_| format!("bad stored count {text:?}"))
}

/// The usage text (`--help`), generated by clap.
pub fn usage() -> String {
    Cli::command().render_long_help().to_string()
}

/// Parses the arguments after the program name. `--help` comes back as an error whose text
/// is the help (the caller prints it).
pub fn parse(args: &[String]) -> Result<Options> {
    let cli =
        Cli::try_parse_from(std::iter::once("lease-bench".to_owned()).chain(args.iter().cloned()))
            .map_err(|e| BenchError::Setup(e.render().to_string()))?;
    let mut backends = Vec::new();
    for name in &cli.backend {
        match name.trim() {
            "all" => backends.extend(Kind::ALL),
            other => backends.push(
                Kind::ALL
                    .into_iter()
                    .find(|k| k.name() == other)
                    .ok_or_else(|| BenchError::Setup(format!("unknown backend {other:?}")))?,
            ),
        }
    }
    if backends.is_empty() {
        backends.extend(Kind::ALL);
    }
    backends.sort();
    backends.dedup();
    let quick = cli.quick;
    let default = if quick {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(3)
    };
    Ok(Options {
        backends,
        duration: cli.duration.unwrap_or(default),
        rounds: cli.rounds.map_or(if quick { 1 } else { 3 }, usize::from),
        quick,
        only: cli.only,
        json_dir: cli.json_dir.unwrap_or_else(default_json_dir),
        wait_load: cli.wait_load,
        wait_max: cli.wait_max,
        postgres_url: plaintext_unless_named(
            lease_testserver::postgres_url(),
            std::env::var_os("PGSSLMODE").is_some(),
        ),
        redis_url: lease_testserver::redis_url(),
        stored_max: cli
            .stored_max
            .unwrap_or(if quick { 100_000 } else { 1_000_000 }),
        anchors: anchor_options(
            cli.anchor_runs,
            cli.anchor_jobs,
            cli.anchor_budget,
            cli.anchor_system,
        )?,
    })
}

/// The anchors row's options from their flags, the defaults for those not given.
fn anchor_options(
    runs: Option<u16>,
    jobs: Option<u64>,
    budget: Option<Duration>,
    systems: Vec<String>,
) -> Result<AnchorOptions> {
    let defaults = AnchorOptions::default();
    let jobs = jobs.unwrap_or(defaults.jobs);
    if jobs == 0 {
        return Err(BenchError::Setup("--anchor-jobs must be at least 1".into()));
    }
    let budget = budget.unwrap_or(defaults.budget);
    if budget.is_zero() {
        return Err(BenchError::Setup("--anchor-budget must be positive".into()));
    }
    Ok(AnchorOptions {
        runs: runs.map_or(defaults.runs, usize::from),
        jobs,
        budget,
        systems,
    })
}

/// The bench's PostgreSQL URL: `url` with `sslmode=disable` added when neither the URL nor
/// `PGSSLMODE` (`env_mode`) names a mode. The library's default (`prefer`, libpq's) takes TLS
/// from a server that offers it, which Debian's PostgreSQL does, while graphile-worker's
/// node-postgres connects in plain text unless told otherwise: measured side by side, the
/// library would pay for encryption its anchor does not (on loopback, a TLS 1.3 record per
/// round trip). A URL that names a mode is kept, so TLS can still be measured on purpose.
fn plaintext_unless_named(url: String, env_mode: bool) -> String {
    let named = url
        .split_once('?')
        .is_some_and(|(_, q)| q.split('&').any(|kv| kv.starts_with("sslmode=")));
    if named || env_mode {
        url
    } else if url.contains('?') {
        format!("{url}&sslmode=disable")
    } else {
        format!("{url}?sslmode=disable")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_is_plaintext_unless_a_mode_is_named() {
        let base = "postgres://postgres@127.0.0.1:5432/test";
        assert_eq!(
            plaintext_unless_named(base.into(), false),
            format!("{base}?sslmode=disable")
        );
        assert_eq!(
            plaintext_unless_named(format!("{base}?application_name=x"), false),
            format!("{base}?application_name=x&sslmode=disable")
        );
        let tls = format!("{base}?sslmode=require");
        assert_eq!(plaintext_unless_named(tls.clone(), false), tls);
        assert_eq!(plaintext_unless_named(base.into(), true), base);
    }

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
        assert_eq!(
            parse_duration("1.5s").expect("fraction"),
            Duration::from_millis(1500)
        );
        assert_eq!(
            parse_duration("2m").expect("minutes"),
            Duration::from_secs(120)
        );
        assert!(parse_duration("2h").is_err(), "over an hour");
        assert!(parse_duration("-1").is_err());
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

    #[test]
    fn anchor_flags_parse_with_their_defaults() {
        let o = parse(&args(&["--only", "anchors"])).expect("defaults");
        assert_eq!(o.anchors, AnchorOptions::default());
        assert_eq!(o.anchors.jobs, 20_000);
        let o = parse(&args(&[
            "--anchor-runs",
            "1",
            "--anchor-jobs",
            "2_000",
            "--anchor-budget",
            "20s",
            "--anchor-system",
            "awa",
            "--anchor-system",
            "river",
        ]))
        .expect("flags");
        assert_eq!(
            o.anchors,
            AnchorOptions {
                runs: 1,
                jobs: 2_000,
                budget: Duration::from_secs(20),
                systems: vec!["awa".into(), "river".into()],
            }
        );
        assert!(parse(&args(&["--anchor-runs", "0"])).is_err());
        assert!(parse(&args(&["--anchor-jobs", "0"])).is_err());
        assert!(parse(&args(&["--anchor-budget", "0s"])).is_err());
    }
}
