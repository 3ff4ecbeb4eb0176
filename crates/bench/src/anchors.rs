//! The job queues measured beside this library in the same run, with what each costs the
//! server per job:
//! the pieces that need no anchor installed - the line an anchor's runner prints, the
//! servers' cost counters (`INFO commandstats`, `INFO cpu`, `pg_stat_database`,
//! `pg_current_wal_lsn`) turned into cost per job, the rotation of the starting system per
//! cell, the table with this project / best anchor, and the wipe of an anchor's own Redis
//! key prefix and PostgreSQL schema. [`crate::anchor_runs`] installs and drives the runners.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::args::Kind;
use crate::error::{BenchError, Result};

/// The systems of a cell, in the table's row order: this library, the job queues (each at its
/// defaults, then at its documented best configurations), and the database's own bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum System {
    /// This project: a worker with `DispatcherOptions::new().concurrency(C)`.
    Lease,
    /// This project tuned: `.prefetch(500).claim_batch(500)` as well.
    LeaseTuned,
    /// BullMQ (Node, Redis), defaults.
    BullMq,
    /// BullMQ with completed jobs removed at once (`removeOnComplete: { count: 0 }`).
    BullMqTuned,
    /// graphile-worker (Node, PostgreSQL), defaults.
    Graphile,
    /// graphile-worker, `localQueue.size` 32 and batched completions.
    Graphile32,
    /// graphile-worker, `localQueue.size` 500 and batched completions (its performance page).
    Graphile500,
    /// pg-boss 10 (Node, PostgreSQL), defaults.
    PgBoss,
    /// pg-boss, `batchSize: 500` and its shortest polling interval.
    PgBossBatch,
    /// awa 0.6 (Rust, PostgreSQL), defaults.
    Awa,
    /// awa as its own queue-storage throughput benchmark runs it: polling every 50 ms, no
    /// per-claim deadline.
    AwaTuned,
    /// River's Rust port, `riverqueue bench -n N --max-workers C` (its own fetch settings).
    River,
    /// apalis (Rust; Redis, PostgreSQL, SQLite), defaults.
    Apalis,
    /// The database's own bound: batched, fenced claims and acknowledgements of 32, no
    /// client work.
    Bound32,
    /// The same with batches of 500.
    Bound500,
}

/// What a system is, for the ratios.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// This project at its defaults.
    LeaseDefault,
    /// This project tuned.
    LeaseTuned,
    /// A job queue at the defaults a new user gets.
    AnchorDefault,
    /// A job queue at a documented throughput configuration (or its own benchmark's).
    AnchorTuned,
    /// The database's bound of the protocol at this claim batch.
    Bound(usize),
}

impl System {
    /// Every system, in row order.
    pub const ALL: [System; 15] = [
        System::Lease,
        System::LeaseTuned,
        System::BullMq,
        System::BullMqTuned,
        System::Graphile,
        System::Graphile32,
        System::Graphile500,
        System::PgBoss,
        System::PgBossBatch,
        System::Awa,
        System::AwaTuned,
        System::River,
        System::Apalis,
        System::Bound32,
        System::Bound500,
    ];

    /// The row's name.
    pub fn name(self) -> &'static str {
        match self {
            System::Lease => "this library, default options",
            System::LeaseTuned => "this library, prefetch(500) + claim_batch(500)",
            System::BullMq => "BullMQ 6.7.0, defaults",
            System::BullMqTuned => "BullMQ 6.7.0, removeOnComplete {count: 0}",
            System::Graphile => "graphile-worker 0.18.0, defaults",
            System::Graphile32 => "graphile-worker, localQueue 32 + batched completions",
            System::Graphile500 => "graphile-worker, localQueue 500 + batched completions",
            System::PgBoss => "pg-boss 10.4.2, defaults (batchSize 1, 2 s polling)",
            System::PgBossBatch => "pg-boss 10.4.2, batchSize 500 + 0.5 s polling",
            System::Awa => "awa 0.6.9, defaults",
            System::AwaTuned => "awa 0.6.9, poll_interval 50 ms + deadline_duration 0",
            System::River => "riverqueue-cli 0.5.0 bench (River's Rust port)",
            System::Apalis => "apalis 1.0.0, defaults",
            System::Bound32 => "database bound, batches of 32",
            System::Bound500 => "database bound, batches of 500",
        }
    }

    /// A short key (`--anchor-system` matches it; the JSON report names systems by it).
    pub fn key(self) -> &'static str {
        match self {
            System::Lease => "lease",
            System::LeaseTuned => "lease-tuned",
            System::BullMq => "bullmq",
            System::BullMqTuned => "bullmq-tuned",
            System::Graphile => "graphile",
            System::Graphile32 => "graphile-lq32",
            System::Graphile500 => "graphile-lq500",
            System::PgBoss => "pgboss",
            System::PgBossBatch => "pgboss-batch",
            System::Awa => "awa",
            System::AwaTuned => "awa-tuned",
            System::River => "river",
            System::Apalis => "apalis",
            System::Bound32 => "bound32",
            System::Bound500 => "bound500",
        }
    }

    /// What the system is, for the ratios.
    pub fn role(self) -> Role {
        match self {
            System::Lease => Role::LeaseDefault,
            System::LeaseTuned => Role::LeaseTuned,
            System::BullMq | System::Graphile | System::PgBoss | System::Awa | System::Apalis => {
                Role::AnchorDefault
            }
            System::BullMqTuned
            | System::Graphile32
            | System::Graphile500
            | System::PgBossBatch
            | System::AwaTuned
            | System::River => Role::AnchorTuned,
            System::Bound32 => Role::Bound(32),
            System::Bound500 => Role::Bound(500),
        }
    }

    /// Whether the system runs on `kind`'s server.
    pub fn serves(self, kind: Kind) -> bool {
        match self {
            System::Lease
            | System::LeaseTuned
            | System::Apalis
            | System::Bound32
            | System::Bound500 => kind != Kind::Memory,
            System::BullMq | System::BullMqTuned => kind == Kind::Redis,
            System::Graphile
            | System::Graphile32
            | System::Graphile500
            | System::PgBoss
            | System::PgBossBatch
            | System::Awa
            | System::AwaTuned
            | System::River => kind == Kind::Postgres,
        }
    }

    /// Whether `--anchor-system` words select it (none given: every system).
    pub fn selected(self, words: &[String]) -> bool {
        words.is_empty() || words.iter().any(|w| self.key().contains(w.as_str()))
    }
}

/// The systems of cell number `cell` on `kind` that `words` select, the starting one
/// rotating by one per cell (interleaved per cell, the starting system rotating).
pub fn order(kind: Kind, cell: usize, words: &[String]) -> Vec<System> {
    let mut systems: Vec<System> = System::ALL
        .into_iter()
        .filter(|s| s.serves(kind) && s.selected(words))
        .collect();
    if !systems.is_empty() {
        let n = cell % systems.len();
        systems.rotate_left(n);
    }
    systems
}

/// What an anchor's runner prints last on stdout: `ANCHOR {"jobs":N,"secs":S}` (S from the
/// start of its workers until every job is done), with `"partial":true` when its budget ran
/// out first (N then counts the jobs done by then).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct Outcome {
    /// Jobs completed.
    pub jobs: u64,
    /// Seconds.
    pub secs: f64,
    /// The budget ran out before every job completed.
    #[serde(default)]
    pub partial: bool,
}

/// The prefix of an anchor runner's result line.
pub const OUTCOME_PREFIX: &str = "ANCHOR ";

/// The last result line of a runner's `stdout`; `expected` jobs must have completed, unless
/// the line says the run was partial (fewer, none past `expected`).
pub fn parse_outcome(stdout: &str, expected: u64) -> Result<Outcome> {
    let line = stdout
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix(OUTCOME_PREFIX))
        .ok_or_else(|| BenchError::Setup(format!("no {OUTCOME_PREFIX:?} line in the output")))?;
    let outcome: Outcome = serde_json::from_str(line)
        .map_err(|e| BenchError::Setup(format!("anchor result {line:?}: {e}")))?;
    check_outcome(outcome, expected)
}

/// Checks a run's outcome: all `expected` jobs, or a partial run with fewer, in a positive
/// time.
pub fn check_outcome(outcome: Outcome, expected: u64) -> Result<Outcome> {
    let complete = outcome.jobs == expected;
    if !(complete || (outcome.partial && outcome.jobs < expected)) {
        return Err(BenchError::Setup(format!(
            "the anchor completed {} of {expected} jobs{}",
            outcome.jobs,
            if outcome.partial { " (partial)" } else { "" }
        )));
    }
    if !(outcome.secs.is_finite() && outcome.secs > 0.0) {
        return Err(BenchError::Setup(format!(
            "the anchor's time {} is not a positive number of seconds",
            outcome.secs
        )));
    }
    Ok(Outcome {
        partial: !complete,
        ..outcome
    })
}

/// The Redis server's counters (for the cost per job): commands called, CPU microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RedisCounters {
    /// Sum of `calls` over `INFO commandstats`.
    pub commands: u64,
    /// `used_cpu_sys` + `used_cpu_user` of `INFO cpu`, in microseconds.
    pub cpu_us: u64,
}

/// The counters of an `INFO commandstats` + `INFO cpu` reply.
pub fn parse_redis_info(info: &str) -> Result<RedisCounters> {
    let mut counters = RedisCounters::default();
    let mut cpu = [None, None];
    for line in info.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("cmdstat_") {
            let calls = rest
                .split_once(':')
                .and_then(|(_, fields)| fields.split(',').find_map(|f| f.strip_prefix("calls=")))
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| BenchError::Setup(format!("INFO commandstats line {line:?}")))?;
            counters.commands += calls;
        }
        for (i, key) in ["used_cpu_sys:", "used_cpu_user:"].into_iter().enumerate() {
            if let Some(v) = line.strip_prefix(key) {
                let secs: f64 = v
                    .parse()
                    .map_err(|_| BenchError::Setup(format!("INFO cpu line {line:?}")))?;
                cpu[i] = Some(secs);
            }
        }
    }
    let [Some(sys), Some(user)] = cpu else {
        return Err(BenchError::Setup(
            "INFO cpu without used_cpu_sys/user".into(),
        ));
    };
    counters.cpu_us = ((sys + user) * 1e6).round() as u64;
    Ok(counters)
}

/// A PostgreSQL LSN (`16/B374D848`) as a byte position.
pub fn parse_lsn(lsn: &str) -> Result<u64> {
    let bad = || BenchError::Setup(format!("LSN {lsn:?}"));
    let (hi, lo) = lsn.trim().split_once('/').ok_or_else(bad)?;
    let hi = u64::from_str_radix(hi, 16).map_err(|_| bad())?;
    let lo = u64::from_str_radix(lo, 16).map_err(|_| bad())?;
    if hi > u64::from(u32::MAX) || lo > u64::from(u32::MAX) {
        return Err(bad());
    }
    Ok((hi << 32) | lo)
}

/// The PostgreSQL server's counters (for the cost per job).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PgCounters {
    /// Write transactions: transaction ids assigned so far
    /// (`pg_snapshot_xmax(pg_current_snapshot())`), the commits that flush WAL. Read at
    /// once, where `pg_stat_database.xact_commit` is flushed by each backend up to 10 s late
    /// (and counts read-only commits, which cost no flush).
    pub commits: u64,
    /// `pg_current_wal_lsn()` as a byte position.
    pub wal: u64,
}

/// Cost per job of one run: the counters' growth over the run divided by its jobs.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Cost {
    /// PostgreSQL commits per job.
    pub commits: Option<f64>,
    /// PostgreSQL WAL bytes per job.
    pub wal_bytes: Option<f64>,
    /// Redis commands per job.
    pub commands: Option<f64>,
    /// Redis server CPU microseconds per job.
    pub cpu_us: Option<f64>,
}

fn per_job(before: u64, after: u64, jobs: u64) -> Result<f64> {
    let grown = after
        .checked_sub(before)
        .ok_or_else(|| BenchError::Setup(format!("a counter went back: {before} -> {after}")))?;
    if jobs == 0 {
        return Err(BenchError::Setup("cost of a run of 0 jobs".into()));
    }
    Ok(grown as f64 / jobs as f64)
}

impl Cost {
    /// The Redis cost of a run of `jobs`.
    pub fn redis(before: RedisCounters, after: RedisCounters, jobs: u64) -> Result<Cost> {
        Ok(Cost {
            commands: Some(per_job(before.commands, after.commands, jobs)?),
            cpu_us: Some(per_job(before.cpu_us, after.cpu_us, jobs)?),
            ..Cost::default()
        })
    }

    /// The PostgreSQL cost of a run of `jobs`.
    pub fn postgres(before: PgCounters, after: PgCounters, jobs: u64) -> Result<Cost> {
        Ok(Cost {
            commits: Some(per_job(before.commits, after.commits, jobs)?),
            wal_bytes: Some(per_job(before.wal, after.wal, jobs)?),
            ..Cost::default()
        })
    }

    fn describe(self) -> String {
        let mut parts = Vec::new();
        if let Some(c) = self.commits {
            parts.push(format!("{c:.2} commits"));
        }
        if let Some(w) = self.wal_bytes {
            parts.push(format!("{w:.0} B WAL"));
        }
        if let Some(c) = self.commands {
            parts.push(format!("{c:.1} cmds"));
        }
        if let Some(u) = self.cpu_us {
            parts.push(format!("{u:.0} us CPU"));
        }
        parts.join(", ")
    }
}

/// One run's result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunResult {
    /// Jobs/s.
    pub rate: f64,
    /// Cost per job completed.
    pub cost: Cost,
    /// The jobs completed, when the budget ran out first.
    pub partial_jobs: Option<u64>,
}

impl RunResult {
    /// The result of `outcome` with the counters read around it.
    pub fn of(outcome: Outcome, before: Counters, after: Counters) -> Result<Self> {
        let cost = if outcome.jobs == 0 {
            Cost::default()
        } else {
            Cost::between(before, after, outcome.jobs)?
        };
        Ok(RunResult {
            rate: outcome.jobs as f64 / outcome.secs,
            cost,
            partial_jobs: outcome.partial.then_some(outcome.jobs),
        })
    }
}

/// One system's median in one cell.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Measured {
    /// Jobs/s.
    pub rate: f64,
    /// Cost per job (the mean over the runs).
    pub cost: Cost,
    /// The fewest jobs a run completed when a run ran out of its budget (its rate is that
    /// count over the budget); none when every run drained them all.
    pub partial_jobs: Option<u64>,
}

/// One cell of the table: backend x C.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Backend.
    pub backend: &'static str,
    /// Concurrency.
    pub c: usize,
    /// 1-minute load average when the cell started.
    pub load_1m: f64,
    /// The systems that ran on this backend, in [`System::ALL`] order: the result, or none
    /// where the system failed.
    pub systems: Vec<(System, Option<Measured>)>,
}

/// The ratios of one cell.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Ratios {
    /// This library at its defaults over the best job queue at its defaults.
    pub defaults: Option<f64>,
    /// This library tuned over the best job queue at any configuration.
    pub tuned: Option<f64>,
    /// This library at its defaults over the database's bound at batches of 32.
    pub defaults_of_bound: Option<f64>,
    /// This library tuned over the database's bound at batches of 500.
    pub tuned_of_bound: Option<f64>,
}

impl Cell {
    fn get(&self, system: System) -> Option<Measured> {
        self.systems
            .iter()
            .find(|(s, _)| *s == system)
            .and_then(|(_, m)| *m)
    }

    /// The best job queue whose role is one of `roles`: its rate and name.
    pub fn best_of(&self, roles: &[Role]) -> Option<(f64, System)> {
        self.systems
            .iter()
            .filter(|(s, _)| roles.contains(&s.role()))
            .filter_map(|(s, m)| m.map(|m| (m.rate, *s)))
            .max_by(|a, b| a.0.total_cmp(&b.0))
    }

    /// The best job queue at any configuration.
    pub fn best_anchor(&self) -> Option<(f64, System)> {
        self.best_of(&[Role::AnchorDefault, Role::AnchorTuned])
    }

    fn over(&self, system: System, other: Option<f64>) -> Option<f64> {
        let this = self.get(system)?.rate;
        other.filter(|o| *o > 0.0).map(|o| this / o)
    }

    /// The cell's ratios (none where a side did not run).
    pub fn ratios(&self) -> Ratios {
        let rate = |s: System| self.get(s).map(|m| m.rate);
        Ratios {
            defaults: self.over(
                System::Lease,
                self.best_of(&[Role::AnchorDefault]).map(|b| b.0),
            ),
            tuned: self.over(System::LeaseTuned, self.best_anchor().map(|b| b.0)),
            defaults_of_bound: self.over(System::Lease, rate(System::Bound32)),
            tuned_of_bound: self.over(System::LeaseTuned, rate(System::Bound500)),
        }
    }
}

/// A measured rate with its cost per job, or why it is missing.
fn describe(m: Option<Measured>) -> String {
    let Some(m) = m else {
        return "failed".into();
    };
    let mut notes = Vec::new();
    if let Some(done) = m.partial_jobs {
        notes.push(format!(
            "partial: {} jobs in the budget",
            crate::row::thousands(done as f64)
        ));
    }
    let cost = m.cost.describe();
    if !cost.is_empty() {
        notes.push(cost);
    }
    let rate = if m.rate < 100.0 {
        format!("{:.1}", m.rate)
    } else {
        crate::row::thousands(m.rate)
    };
    if notes.is_empty() {
        rate
    } else {
        format!("{rate} ({})", notes.join("; "))
    }
}

/// Reads one ratio of a cell's [`Ratios`].
type RatioOf = fn(&Ratios) -> Option<f64>;

fn ratio_text(r: Option<f64>) -> String {
    r.map_or("-".into(), |r| format!("{r:.2}x"))
}

/// The markdown tables: per backend one table, a row per system and a column per C (jobs/s
/// with the cost per job), then the ratios and each cell's load.
pub fn markdown(cells: &[Cell]) -> String {
    let mut out = String::new();
    let mut backends: Vec<&str> = cells.iter().map(|c| c.backend).collect();
    backends.dedup();
    for backend in backends {
        let group: Vec<&Cell> = cells.iter().filter(|c| c.backend == backend).collect();
        let _ = writeln!(
            out,
            "\n| {backend} drain, jobs/s | {} |\n|---|{}",
            group
                .iter()
                .map(|c| format!("C={}", c.c))
                .collect::<Vec<_>>()
                .join(" | "),
            "---:|".repeat(group.len())
        );
        for system in System::ALL {
            if !group
                .iter()
                .any(|c| c.systems.iter().any(|(s, _)| *s == system))
            {
                continue;
            }
            let texts: Vec<String> = group
                .iter()
                .map(|c| match c.systems.iter().find(|(s, _)| *s == system) {
                    Some((_, m)) => describe(*m),
                    None => "-".into(),
                })
                .collect();
            let _ = writeln!(out, "| {} | {} |", system.name(), texts.join(" | "));
        }
        let lines: [(&str, RatioOf); 4] = [
            ("defaults / best job queue at its defaults", |r| r.defaults),
            ("tuned / best job queue at any configuration", |r| r.tuned),
            ("defaults / database bound (32)", |r| r.defaults_of_bound),
            ("tuned / database bound (500)", |r| r.tuned_of_bound),
        ];
        for (label, get) in lines {
            let texts: Vec<String> = group.iter().map(|c| ratio_text(get(&c.ratios()))).collect();
            let _ = writeln!(out, "| {label} | {} |", texts.join(" | "));
        }
        let loads: Vec<String> = group.iter().map(|c| format!("{:.2}", c.load_1m)).collect();
        let _ = writeln!(
            out,
            "| load 1m at the cell's start | {} |",
            loads.join(" | ")
        );
    }
    out
}

/// The `SCAN MATCH` pattern of every key under `prefix`, glob characters escaped.
pub fn prefix_pattern(prefix: &str) -> String {
    let mut p = String::with_capacity(prefix.len() + 1);
    for ch in prefix.chars() {
        if matches!(ch, '*' | '?' | '[' | ']' | '\\') {
            p.push('\\');
        }
        p.push(ch);
    }
    p.push('*');
    p
}

/// A multiplexed connection to the Redis server at `url`.
pub async fn redis_connect(url: &str) -> Result<redis::aio::MultiplexedConnection> {
    let client = redis::Client::open(url).map_err(|e| BenchError::Setup(format!("redis: {e}")))?;
    client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| BenchError::Setup(format!("redis connect: {e}")))
}

/// One `SCAN cursor MATCH pattern COUNT 1000` page: the next cursor (0 at the end) and keys.
pub async fn scan_page(
    conn: &mut redis::aio::MultiplexedConnection,
    cursor: u64,
    pattern: &str,
) -> Result<(u64, Vec<String>)> {
    redis::cmd("SCAN")
        .arg(cursor)
        .arg("MATCH")
        .arg(pattern)
        .arg("COUNT")
        .arg(1000)
        .query_async(conn)
        .await
        .map_err(|e| BenchError::Setup(format!("SCAN: {e}")))
}

/// Deletes every Redis key under `prefix` (an anchor's own state, wiped before its run) and
/// nothing else; returns how many.
pub async fn wipe_redis_prefix(url: &str, prefix: &str) -> Result<u64> {
    if prefix.is_empty() {
        return Err(BenchError::Setup(
            "refusing to wipe an empty Redis prefix".into(),
        ));
    }
    let mut conn = redis_connect(url).await?;
    let pattern = prefix_pattern(prefix);
    let mut cursor: u64 = 0;
    let mut removed = 0u64;
    loop {
        let (next, keys) = scan_page(&mut conn, cursor, &pattern).await?;
        if !keys.is_empty() {
            let n: u64 = redis::cmd("UNLINK")
                .arg(&keys)
                .query_async(&mut conn)
                .await
                .map_err(|e| BenchError::Setup(format!("UNLINK: {e}")))?;
            removed += n;
        }
        if next == 0 {
            return Ok(removed);
        }
        cursor = next;
    }
}

/// The statement that drops schema `schema` (checked: `[a-z_][a-z0-9_]*`, at most 63 bytes,
/// so nothing but that one schema can be named).
pub fn drop_schema_sql(schema: &str) -> Result<String> {
    let mut chars = schema.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !(first_ok && rest_ok && schema.len() <= 63) {
        return Err(BenchError::Setup(format!(
            "{schema:?} is not a plain schema name"
        )));
    }
    Ok(include_str!("anchors_drop_schema.sql").replace("{schema}", schema))
}

/// Drops an anchor's schema (its whole state on PostgreSQL) and nothing else.
pub async fn wipe_pg_schema(pool: &sqlx::PgPool, schema: &str) -> Result<()> {
    let sql = drop_schema_sql(schema)?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(pool)
        .await
        .map_err(|e| BenchError::Setup(format!("drop schema {schema}: {e}")))?;
    Ok(())
}

/// Where a run's cost counters are read: the Redis server, the PostgreSQL
/// cluster, or nothing (SQLite).
pub enum Probe {
    /// No counters.
    None,
    /// `INFO commandstats` and `INFO cpu` of this server.
    Redis(redis::aio::MultiplexedConnection),
    /// The same of each of these servers (a cluster's primaries), summed.
    RedisNodes(Vec<redis::aio::MultiplexedConnection>),
    /// Transaction ids and WAL position of this cluster.
    Postgres(sqlx::PgPool),
}

/// One reading of a [`Probe`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Counters {
    /// Nothing read.
    None,
    /// Redis.
    Redis(RedisCounters),
    /// PostgreSQL.
    Postgres(PgCounters),
}

impl Probe {
    /// Reads the counters now.
    pub async fn read(&self) -> Result<Counters> {
        match self {
            Probe::None => Ok(Counters::None),
            Probe::Redis(conn) => Ok(Counters::Redis(read_redis(conn).await?)),
            Probe::RedisNodes(conns) => {
                let mut sum = RedisCounters::default();
                for conn in conns {
                    let c = read_redis(conn).await?;
                    sum.commands += c.commands;
                    sum.cpu_us += c.cpu_us;
                }
                Ok(Counters::Redis(sum))
            }
            Probe::Postgres(pool) => {
                let (xid, lsn): (String, String) =
                    sqlx::query_as(include_str!("anchors_pg_counters.sql"))
                        .fetch_one(pool)
                        .await
                        .map_err(|e| BenchError::Setup(format!("PostgreSQL counters: {e}")))?;
                let commits = xid
                    .parse()
                    .map_err(|_| BenchError::Setup(format!("transaction id {xid:?}")))?;
                Ok(Counters::Postgres(PgCounters {
                    commits,
                    wal: parse_lsn(&lsn)?,
                }))
            }
        }
    }
}

/// One server's `INFO commandstats` + `INFO cpu` counters.
async fn read_redis(conn: &redis::aio::MultiplexedConnection) -> Result<RedisCounters> {
    let mut conn = conn.clone();
    let mut text = String::new();
    for section in ["commandstats", "cpu"] {
        let part: String = redis::cmd("INFO")
            .arg(section)
            .query_async(&mut conn)
            .await
            .map_err(|e| BenchError::Setup(format!("INFO {section}: {e}")))?;
        text.push_str(&part);
    }
    parse_redis_info(&text)
}

impl Cost {
    /// The cost of a run of `jobs` between two readings of one probe.
    pub fn between(before: Counters, after: Counters, jobs: u64) -> Result<Cost> {
        match (before, after) {
            (Counters::None, Counters::None) => Ok(Cost::default()),
            (Counters::Redis(b), Counters::Redis(a)) => Cost::redis(b, a, jobs),
            (Counters::Postgres(b), Counters::Postgres(a)) => Cost::postgres(b, a, jobs),
            _ => Err(BenchError::Setup("counters of two kinds".into())),
        }
    }

    /// The mean of `costs`, field by field (a field only where every cost has it).
    pub fn mean(costs: &[Cost]) -> Cost {
        let field = |get: fn(&Cost) -> Option<f64>| -> Option<f64> {
            let values: Option<Vec<f64>> = costs.iter().map(get).collect();
            values
                .filter(|v| !v.is_empty())
                .map(|v| v.iter().sum::<f64>() / v.len() as f64)
        };
        Cost {
            commits: field(|c| c.commits),
            wal_bytes: field(|c| c.wal_bytes),
            commands: field(|c| c.commands),
            cpu_us: field(|c| c.cpu_us),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_starting_system_rotates_per_cell() {
        let all = Vec::new();
        let redis = order(Kind::Redis, 0, &all);
        assert_eq!(
            redis,
            [
                System::Lease,
                System::LeaseTuned,
                System::BullMq,
                System::BullMqTuned,
                System::Apalis,
                System::Bound32,
                System::Bound500
            ]
        );
        let next = order(Kind::Redis, 1, &all);
        assert_eq!(next[0], System::LeaseTuned);
        assert_eq!(next[6], System::Lease);
        assert_eq!(order(Kind::Redis, 7, &all), redis, "a full turn");
        let pg = order(Kind::Postgres, 0, &all);
        assert_eq!(pg.len(), 13, "everything but the two BullMQ rows: {pg:?}");
        assert!(!pg.contains(&System::BullMq));
        assert_eq!(
            order(Kind::Sqlite, 1, &all),
            [
                System::LeaseTuned,
                System::Apalis,
                System::Bound32,
                System::Bound500,
                System::Lease
            ]
        );
        assert!(order(Kind::Memory, 0, &all).is_empty());
        let words = vec!["awa".to_owned(), "lease".to_owned()];
        assert_eq!(
            order(Kind::Postgres, 0, &words),
            [
                System::Lease,
                System::LeaseTuned,
                System::Awa,
                System::AwaTuned
            ]
        );
        assert!(order(Kind::Redis, 0, &["awa".to_owned()]).is_empty());
    }

    #[test]
    fn every_system_has_a_distinct_key_and_one_role() {
        let mut keys: Vec<&str> = System::ALL.iter().map(|s| s.key()).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), System::ALL.len());
        assert_eq!(System::Lease.role(), Role::LeaseDefault);
        assert_eq!(System::Graphile500.role(), Role::AnchorTuned);
        assert_eq!(
            System::River.role(),
            Role::AnchorTuned,
            "its bench's own settings"
        );
        assert_eq!(System::PgBoss.role(), Role::AnchorDefault);
        assert_eq!(System::Bound500.role(), Role::Bound(500));
    }

    #[test]
    fn an_anchors_last_result_line_is_parsed_and_checked() {
        let out =
            "starting\nANCHOR {\"jobs\":5,\"secs\":9.0}\nANCHOR {\"jobs\":20000,\"secs\":2.5}\n";
        assert_eq!(
            parse_outcome(out, 20_000).ok(),
            Some(Outcome {
                jobs: 20_000,
                secs: 2.5,
                partial: false
            })
        );
        assert!(parse_outcome(out, 19_999).is_err(), "jobs missing");
        assert!(parse_outcome("done\n", 1).is_err(), "no line");
        assert!(parse_outcome("ANCHOR {\"jobs\":1}", 1).is_err(), "no secs");
        assert!(parse_outcome("ANCHOR {\"jobs\":1,\"secs\":0}", 1).is_err());
        let partial = "ANCHOR {\"jobs\":40,\"secs\":30.0,\"partial\":true,\"events\":41}";
        assert_eq!(
            parse_outcome(partial, 20_000).ok(),
            Some(Outcome {
                jobs: 40,
                secs: 30.0,
                partial: true
            }),
            "a budget that ran out: the jobs done by then, other fields ignored"
        );
        let none = "ANCHOR {\"jobs\":0,\"secs\":30.0,\"partial\":true}";
        assert_eq!(parse_outcome(none, 10).map(|o| o.jobs).ok(), Some(0));
        assert!(
            parse_outcome("ANCHOR {\"jobs\":11,\"secs\":3,\"partial\":true}", 10).is_err(),
            "more than admitted"
        );
        let all = "ANCHOR {\"jobs\":10,\"secs\":3,\"partial\":true}";
        assert_eq!(
            parse_outcome(all, 10).map(|o| o.partial).ok(),
            Some(false),
            "every job done is no partial run"
        );
    }

    #[test]
    fn redis_info_gives_commands_and_cpu() {
        let info = "# Commandstats\r\ncmdstat_evalsha:calls=30,usec=100,usec_per_call=3.33,rejected_calls=0,failed_calls=0\r\n\
                    cmdstat_get:calls=12,usec=5,usec_per_call=0.4\r\n# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:0.750000\r\nused_cpu_sys_children:9.0\r\n";
        let c = parse_redis_info(info).expect("parsed");
        assert_eq!(
            c,
            RedisCounters {
                commands: 42,
                cpu_us: 2_000_000
            }
        );
        assert!(parse_redis_info("cmdstat_get:usec=5\r\n").is_err());
        assert!(
            parse_redis_info("cmdstat_get:calls=1\r\n").is_err(),
            "no cpu"
        );
        let after = RedisCounters {
            commands: 42 + 40,
            cpu_us: 2_000_000 + 1_000,
        };
        let cost = Cost::redis(c, after, 10).expect("cost");
        assert_eq!(cost.commands, Some(4.0));
        assert_eq!(cost.cpu_us, Some(100.0));
        assert!(Cost::redis(after, c, 10).is_err(), "a counter went back");
    }

    #[test]
    fn lsns_and_postgres_cost() {
        assert_eq!(parse_lsn("16/B374D848").ok(), Some(0x16_B374_D848));
        assert_eq!(parse_lsn("0/0").ok(), Some(0));
        assert!(parse_lsn("16B374D848").is_err());
        assert!(parse_lsn("x/1").is_err());
        assert!(parse_lsn("1/100000000").is_err());
        let before = PgCounters {
            commits: 100,
            wal: 1_000,
        };
        let after = PgCounters {
            commits: 140,
            wal: 5_000,
        };
        let cost = Cost::postgres(before, after, 20).expect("cost");
        assert_eq!(cost.commits, Some(2.0));
        assert_eq!(cost.wal_bytes, Some(200.0));
        assert!(Cost::postgres(before, after, 0).is_err());
    }

    fn measured(rate: f64, commits: Option<f64>) -> Option<Measured> {
        Some(Measured {
            rate,
            cost: Cost {
                commits,
                ..Cost::default()
            },
            partial_jobs: None,
        })
    }

    #[test]
    fn ratios_compare_defaults_with_defaults_and_tuned_with_the_best() {
        let cell = Cell {
            backend: "PostgreSQL",
            c: 8,
            load_1m: 1.5,
            systems: vec![
                (System::Lease, measured(6_000.0, Some(0.1))),
                (System::LeaseTuned, measured(12_000.0, None)),
                (System::Graphile, measured(2_000.0, Some(2.0))),
                (System::Graphile500, measured(20_000.0, None)),
                (System::PgBoss, None),
                (System::Awa, measured(3_000.0, None)),
                (System::Bound32, measured(24_000.0, None)),
                (System::Bound500, measured(40_000.0, None)),
            ],
        };
        assert_eq!(cell.best_anchor(), Some((20_000.0, System::Graphile500)));
        assert_eq!(
            cell.best_of(&[Role::AnchorDefault]),
            Some((3_000.0, System::Awa)),
            "a failed system is no best"
        );
        let r = cell.ratios();
        assert_eq!(r.defaults, Some(2.0));
        assert_eq!(r.tuned, Some(0.6));
        assert_eq!(r.defaults_of_bound, Some(0.25));
        assert_eq!(r.tuned_of_bound, Some(0.3));
        let alone = Cell {
            backend: "SQLite",
            c: 1,
            load_1m: 0.0,
            systems: vec![(System::Lease, measured(1.0, None))],
        };
        assert_eq!(alone.ratios(), Ratios::default(), "nothing to compare with");
    }

    #[test]
    fn the_table_has_a_row_per_system_a_column_per_c_ratios_and_load() {
        let cell = |c, lease, graphile, load_1m| Cell {
            backend: "PostgreSQL",
            c,
            load_1m,
            systems: vec![
                (System::Lease, measured(lease, Some(1.0))),
                (System::Graphile, graphile),
                (
                    System::PgBoss,
                    Some(Measured {
                        rate: 0.5,
                        cost: Cost::default(),
                        partial_jobs: Some(15),
                    }),
                ),
            ],
        };
        let cells = [
            cell(1, 720.0, measured(1_621.0, Some(2.0)), 1.5),
            cell(8, 4_000.0, None, 2.25),
        ];
        let table = markdown(&cells);
        for want in [
            "| PostgreSQL drain, jobs/s | C=1 | C=8 |\n|---|---:|---:|",
            "| this library, default options | 720 (1.00 commits) | 4,000 (1.00 commits) |",
            "| graphile-worker 0.18.0, defaults | 1,621 (2.00 commits) | failed |",
            "| pg-boss 10.4.2, defaults (batchSize 1, 2 s polling) | 0.5 (partial: 15 jobs in the budget) | 0.5 (partial: 15 jobs in the budget) |",
            "| defaults / best job queue at its defaults | 0.44x | 8000.00x |",
            "| tuned / best job queue at any configuration | - | - |",
            "| load 1m at the cell's start | 1.50 | 2.25 |",
        ] {
            assert!(table.contains(want), "{want}\nnot in\n{table}");
        }
        assert!(!table.contains("BullMQ"), "only the systems that ran");
    }

    #[test]
    fn glob_characters_of_a_prefix_are_escaped() {
        assert_eq!(prefix_pattern("bench:a"), "bench:a*");
        assert_eq!(prefix_pattern("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\*");
    }

    /// The wipe removes exactly its own prefix's keys (the shared Redis on 127.0.0.1).
    #[tokio::test]
    async fn wiping_a_prefix_removes_only_its_own_keys() {
        let url = lease_testserver::redis_url();
        let id = uuid::Uuid::new_v4();
        let own = format!("anchors-test:{id}:bull:");
        let other = format!("anchors-test:{id}:bullx");
        let mut conn = redis_connect(&url).await.expect("the shared Redis");
        for key in [
            format!("{own}a"),
            format!("{own}b:c"),
            other.clone(),
            format!("anchors-test:{id}:bull"),
        ] {
            let () = redis::cmd("SET")
                .arg(&key)
                .arg(1)
                .query_async(&mut conn)
                .await
                .expect("SET");
        }
        let removed = wipe_redis_prefix(&url, &own).await.expect("wipe");
        assert_eq!(removed, 2);
        let left: Vec<String> = redis::cmd("KEYS")
            .arg(format!("anchors-test:{id}*"))
            .query_async(&mut conn)
            .await
            .expect("KEYS");
        let mut left = left;
        left.sort();
        assert_eq!(left, [format!("anchors-test:{id}:bull"), other.clone()]);
        let cleaned = wipe_redis_prefix(&url, &format!("anchors-test:{id}"))
            .await
            .expect("cleanup");
        assert_eq!(cleaned, 2);
        assert!(wipe_redis_prefix(&url, "").await.is_err());
    }

    #[test]
    fn only_plain_schema_names_are_dropped() {
        assert!(drop_schema_sql("anchors_graphile_1").is_ok());
        for bad in [
            "",
            "1a",
            "a-b",
            "a\"; DROP TABLE x; --",
            "A",
            &"a".repeat(64),
        ] {
            assert!(drop_schema_sql(bad).is_err(), "{bad:?}");
        }
    }

    /// The wipe drops exactly its own schema (the shared PostgreSQL on 127.0.0.1).
    #[tokio::test]
    async fn wiping_a_schema_drops_only_that_schema() {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(&lease_testserver::postgres_url())
            .await
            .expect("the shared PostgreSQL");
        let id = uuid::Uuid::new_v4().simple().to_string();
        let own = format!("anchors_t_{}", &id[..12]);
        let other = format!("{own}x");
        for s in [&own, &other] {
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "CREATE SCHEMA {s}; CREATE TABLE {s}.jobs (id int)"
            )))
            .execute(&pool)
            .await
            .expect("create");
        }
        wipe_pg_schema(&pool, &own).await.expect("wipe");
        let left: Vec<String> = sqlx::query_scalar(
            "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE $1 ORDER BY 1",
        )
        .bind(format!("{own}%"))
        .fetch_all(&pool)
        .await
        .expect("schemas");
        assert_eq!(left, vec![other.clone()]);
        wipe_pg_schema(&pool, &other).await.expect("cleanup");
    }
    #[test]
    fn costs_between_readings_and_their_mean() {
        let r = |commands, cpu_us| Counters::Redis(RedisCounters { commands, cpu_us });
        let cost = Cost::between(r(10, 100), r(30, 300), 10).expect("cost");
        assert_eq!((cost.commands, cost.cpu_us), (Some(2.0), Some(20.0)));
        assert_eq!(
            Cost::between(Counters::None, Counters::None, 5).ok(),
            Some(Cost::default())
        );
        let pg = Counters::Postgres(PgCounters::default());
        assert!(Cost::between(r(1, 1), pg, 1).is_err(), "two kinds");
        let a = Cost {
            commits: Some(1.0),
            cpu_us: Some(4.0),
            ..Cost::default()
        };
        let b = Cost {
            commits: Some(2.0),
            ..Cost::default()
        };
        let m = Cost::mean(&[a, b]);
        assert_eq!(m.commits, Some(1.5));
        assert_eq!(m.cpu_us, None, "missing in one run: no mean");
        assert_eq!(Cost::mean(&[]), Cost::default());
    }

    /// The PostgreSQL probe reads a transaction id that grows by one per write commit.
    #[tokio::test]
    async fn the_postgres_probe_counts_write_commits() {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(&lease_testserver::postgres_url())
            .await
            .expect("the shared PostgreSQL");
        let probe = Probe::Postgres(pool.clone());
        let Counters::Postgres(before) = probe.read().await.expect("read") else {
            panic!("not PostgreSQL counters");
        };
        let mut tx = pool.begin().await.expect("begin");
        let _: (String,) = sqlx::query_as("SELECT pg_current_xact_id()::text")
            .fetch_one(&mut *tx)
            .await
            .expect("assign an id");
        tx.commit().await.expect("commit");
        let Counters::Postgres(after) = probe.read().await.expect("read") else {
            panic!("not PostgreSQL counters");
        };
        assert!(after.commits > before.commits, "{before:?} -> {after:?}");
        assert!(after.wal >= before.wal);
    }
}
