//! `--only anchors`: the job queues drain the drain rows' workload beside this library on the
//! same servers, each at its defaults and at its documented best configurations, with the
//! database's own bound of the protocol ([`crate::bound`]); interleaved per cell with the
//! starting system rotating, each system's state wiped before and after its run.
//!
//! The runners are installed first ([`crate::anchor_tools`]). Each runner enqueues, prints
//! `READY`, waits for the bench's line on stdin, drains, prints the `ANCHOR` line
//! ([`anchors::parse_outcome`]) and exits when stdin closes; the cost counters are read
//! after `READY` and after the process exited, so they hold the drain alone. A run longer
//! than the budget (`--anchor-budget`) reports the jobs done by then, marked partial. River's
//! Rust port runs its own `bench` command (enqueue and drain in one process, its own timing
//! and completion count read from its table), so its cost is not read. PostgreSQL runs get a
//! database of their own for the row, dropped at the end.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use crate::anchor_tools::{self, Tools};
use crate::anchors::{self, Cell, Cost, Measured, Probe, RunResult, System};
use crate::args::{Kind, Options};
use crate::drain;
use crate::error::{BenchError, Result};
use crate::load;
use crate::side::Side;

/// The word of `--only` that selects this row (never part of the default run).
pub const WORD: &str = "anchors";

/// Whether `--only anchors` was given.
pub fn selected(options: &Options) -> bool {
    options.only.iter().any(|w| w == WORD)
}

fn setup(text: impl Into<String>) -> BenchError {
    BenchError::Setup(text.into())
}

/// The drives of a runner process: the handshake and the deadlines.
const ENQUEUE_DEADLINE: Duration = Duration::from_secs(300);
const DRAIN_DEADLINE: Duration = Duration::from_secs(600);
const EXIT_DEADLINE: Duration = Duration::from_secs(60);

/// Reads `lines` until one starts with `prefix`; returns it.
async fn line_with<R: tokio::io::AsyncBufRead + Unpin>(
    lines: &mut tokio::io::Lines<R>,
    prefix: &str,
    deadline: Duration,
) -> Result<String> {
    let find = async {
        while let Some(line) = lines
            .next_line()
            .await
            .map_err(|e| setup(format!("runner output: {e}")))?
        {
            if line.trim_start().starts_with(prefix) {
                return Ok(line);
            }
        }
        Err(setup(format!("the runner ended without a {prefix:?} line")))
    };
    tokio::time::timeout(deadline, find).await.map_err(|_| {
        setup(format!(
            "no {prefix:?} line from the runner in {deadline:?}"
        ))
    })?
}

/// A runner process that printed `READY` and waits for the bench's go line.
pub(crate) struct Started {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

/// Spawns the runner and waits for its `READY` line.
pub(crate) async fn start(mut cmd: Command) -> Result<Started> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| setup(format!("spawn the runner: {e}")))?;
    let stdin = child.stdin.take().ok_or_else(|| setup("runner stdin"))?;
    let stdout = child.stdout.take().ok_or_else(|| setup("runner stdout"))?;
    let mut lines = BufReader::new(stdout).lines();
    line_with(&mut lines, "READY", ENQUEUE_DEADLINE).await?;
    Ok(Started {
        child,
        stdin,
        lines,
    })
}

impl Started {
    /// Writes the go line and reads until the line that starts with `prefix`; returns it.
    pub(crate) async fn go(&mut self, prefix: &str) -> Result<String> {
        self.stdin
            .write_all(b"go\n")
            .await
            .map_err(|e| setup(format!("runner stdin: {e}")))?;
        line_with(&mut self.lines, prefix, DRAIN_DEADLINE).await
    }

    /// Closes stdin and waits for the runner to exit successfully.
    pub(crate) async fn finish(self) -> Result<()> {
        let Started {
            mut child,
            stdin,
            mut lines,
        } = self;
        drop(stdin);
        // Keep reading what the runner prints while it shuts down (a full pipe would stall it).
        let rest = tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let status = tokio::time::timeout(EXIT_DEADLINE, child.wait())
            .await
            .map_err(|_| setup("the runner did not exit after its stdin closed"))?
            .map_err(|e| setup(format!("runner: {e}")))?;
        let _ = rest.await;
        if !status.success() {
            return Err(setup(format!("the runner failed ({status})")));
        }
        Ok(())
    }
}

/// Runs one runner process to the end: its result, with the cost per job of its drain.
async fn drive(cmd: Command, probe: &Probe, jobs: u64) -> Result<RunResult> {
    let mut runner = start(cmd).await?;
    let before = probe.read().await?;
    let line = runner.go(anchors::OUTCOME_PREFIX.trim()).await?;
    let outcome = anchors::parse_outcome(&line, jobs)?;
    runner.finish().await?;
    RunResult::of(outcome, before, probe.read().await?)
}

/// Names of one run's state: unique per run so nothing else is touched.
pub(crate) struct Names {
    pub(crate) redis_prefix: String,
    pub(crate) pg_schema: String,
}

impl Names {
    pub(crate) fn new() -> Names {
        let id = uuid::Uuid::new_v4().simple().to_string();
        Names {
            redis_prefix: format!("lease-anchors-{}", &id[..12]),
            pg_schema: format!("lease_anchors_{}", &id[..12]),
        }
    }
}

/// Where one cell runs.
struct Servers<'a> {
    options: &'a Options,
    probe: &'a Probe,
    pg_pool: Option<&'a sqlx::PgPool>,
    tools: &'a Tools,
}

/// The mode argument of a Node or awa runner for `system`.
fn mode(system: System) -> &'static str {
    match system {
        System::BullMqTuned | System::AwaTuned => "tuned",
        System::Graphile32 => "lq32",
        System::Graphile500 => "lq500",
        System::PgBossBatch => "batch",
        _ => "default",
    }
}

/// The command of `system`'s runner on `kind` at concurrency `c`, and its state.
fn runner(system: System, kind: Kind, c: usize, at: &Servers<'_>) -> Result<(Command, Wipe)> {
    let tool = at
        .tools
        .path(system)?
        .ok_or_else(|| setup(format!("{} has no runner", system.name())))?;
    let names = Names::new();
    let anchors = &at.options.anchors;
    let (c_text, n_text) = (c.to_string(), anchors.jobs.to_string());
    let budget = format!("{:.3}", anchors.budget.as_secs_f64());
    let redis = &at.options.redis_url;
    let postgres = &at.options.postgres_url;
    let apalis = |args: &[&str]| {
        let mut cmd = Command::new(tool);
        cmd.args(args).args([&c_text, &n_text, &budget]);
        cmd
    };
    let node = |script: &str, url: &str, ns: &str| {
        let mut cmd = Command::new("node");
        cmd.current_dir(tool)
            .args([script, url, ns, &c_text, &n_text, mode(system), &budget]);
        cmd
    };
    let prefix = names.redis_prefix;
    let schema = names.pg_schema;
    Ok(match (system, kind) {
        (System::BullMq | System::BullMqTuned, Kind::Redis) => {
            (node("bullmq.js", redis, &prefix), Wipe::Redis(vec![prefix]))
        }
        (System::Graphile | System::Graphile32 | System::Graphile500, Kind::Postgres) => {
            (node("graphile.js", postgres, &schema), Wipe::Schema(schema))
        }
        (System::PgBoss | System::PgBossBatch, Kind::Postgres) => {
            (node("pgboss.js", postgres, &schema), Wipe::Schema(schema))
        }
        (System::Awa | System::AwaTuned, Kind::Postgres) => {
            let mut cmd = Command::new(tool);
            cmd.args([postgres.as_str(), mode(system), &c_text, &n_text, &budget]);
            // awa keeps its fixed `awa` schema (canonical tables and queue storage).
            (cmd, Wipe::Schema("awa".into()))
        }
        // apalis-redis also lists every queue in one key of its own outside the prefix.
        (System::Apalis, Kind::Redis) => (
            apalis(&["redis", redis, &prefix]),
            Wipe::Redis(vec![prefix, APALIS_QUEUE_LIST.into()]),
        ),
        (System::Apalis, Kind::Postgres) => (
            apalis(&["postgres", postgres, "drain"]),
            Wipe::Schema("apalis".into()),
        ),
        (System::Apalis, Kind::Sqlite) => {
            let dir = std::env::temp_dir().join(&prefix);
            let url = format!("sqlite://{}?mode=rwc", dir.join("apalis.db").display());
            (apalis(&["sqlite", &url, "drain"]), Wipe::Dir(dir))
        }
        _ => {
            return Err(setup(format!(
                "{} does not run on {}",
                system.name(),
                kind.name()
            )));
        }
    })
}

/// One run of one anchor on `kind` at concurrency `c`, its state wiped before and after.
async fn anchor_run(system: System, kind: Kind, c: usize, at: &Servers<'_>) -> Result<RunResult> {
    let (cmd, state) = runner(system, kind, c, at)?;
    let redis = &at.options.redis_url;
    state.remove(redis, at.pg_pool).await?;
    state.create()?;
    let result = drive(cmd, at.probe, at.options.anchors.jobs).await;
    state.remove(redis, at.pg_pool).await?;
    result
}

/// The key where apalis-redis lists its queues, whatever the run's prefix.
const APALIS_QUEUE_LIST: &str = "core:apalis:queues:list";

/// An anchor's state.
pub(crate) enum Wipe {
    /// Every Redis key under these prefixes.
    Redis(Vec<String>),
    /// This PostgreSQL schema of the row's database.
    Schema(String),
    /// This directory (made empty before the run).
    Dir(PathBuf),
}

impl Wipe {
    /// Removes the state (Redis keys on the server at `redis_url`, a schema through `pg_pool`).
    pub(crate) async fn remove(
        &self,
        redis_url: &str,
        pg_pool: Option<&sqlx::PgPool>,
    ) -> Result<()> {
        match self {
            Wipe::Redis(prefixes) => {
                for prefix in prefixes {
                    anchors::wipe_redis_prefix(redis_url, prefix).await?;
                }
            }
            Wipe::Schema(schema) => {
                let pool = pg_pool.ok_or_else(|| setup("no PostgreSQL pool"))?;
                anchors::wipe_pg_schema(pool, schema).await?;
            }
            Wipe::Dir(dir) => {
                if dir.exists() {
                    std::fs::remove_dir_all(dir)
                        .map_err(|e| setup(format!("remove {}: {e}", dir.display())))?;
                }
            }
        }
        Ok(())
    }

    /// Makes what the runner expects to exist (the directory).
    fn create(&self) -> Result<()> {
        if let Wipe::Dir(dir) = self {
            std::fs::create_dir_all(dir).map_err(|e| setup(format!("{}: {e}", dir.display())))?;
        }
        Ok(())
    }
}

/// One run of this library (at its defaults or tuned) in a worker process.
async fn lease_run(kind: Kind, c: usize, tuned: bool, at: &Servers<'_>) -> Result<RunResult> {
    let (sample, cost) = drain::sample_probed(
        kind,
        Side::Library,
        drain::Drainer { c, tuned },
        at.options.anchors.jobs,
        drain::Place::Child,
        at.options,
        at.probe,
    )
    .await?;
    Ok(RunResult {
        rate: sample.rate(),
        cost,
        partial_jobs: None,
    })
}

/// One run of `system` in a cell.
async fn system_run(system: System, kind: Kind, c: usize, at: &Servers<'_>) -> Result<RunResult> {
    let jobs = at.options.anchors.jobs;
    match system {
        System::Lease => lease_run(kind, c, false, at).await,
        System::LeaseTuned => lease_run(kind, c, true, at).await,
        System::Bound32 | System::Bound500 => {
            let batch = if system == System::Bound32 { 32 } else { 500 };
            let (rate, cost) =
                crate::bound::run(kind, batch, c, jobs, at.options, at.probe).await?;
            Ok(RunResult {
                rate,
                cost,
                partial_jobs: None,
            })
        }
        System::River => {
            let tool = at
                .tools
                .path(system)?
                .ok_or_else(|| setup("no riverqueue"))?;
            crate::anchor_river::run(
                tool,
                &at.options.postgres_url,
                c,
                jobs,
                at.options.anchors.budget,
            )
            .await
        }
        _ => anchor_run(system, kind, c, at).await,
    }
}

/// The runs of one system in one cell, gathered.
#[derive(Default)]
struct Runs {
    rates: Vec<f64>,
    costs: Vec<Cost>,
    partial: Option<u64>,
    failed: bool,
}

impl Runs {
    fn add(&mut self, r: RunResult) {
        self.rates.push(r.rate);
        self.costs.push(r.cost);
        if let Some(done) = r.partial_jobs {
            self.partial = Some(self.partial.map_or(done, |p| p.min(done)));
        }
    }

    fn measured(&self, jobs: u64) -> Option<Measured> {
        if self.failed {
            return None;
        }
        let rate = drain::median(self.rates.clone(), jobs)?.rate();
        Some(Measured {
            rate,
            cost: Cost::mean(&self.costs),
            partial_jobs: self.partial,
        })
    }
}

/// The runs of one cell: `runs` rounds, each system once per round, the starting system
/// rotating per round and cell; the median rate and mean cost per system.
async fn cell(
    kind: Kind,
    c: usize,
    index: usize,
    at: &Servers<'_>,
    errors: &mut Vec<String>,
) -> Cell {
    let load_1m = load::one_minute();
    let anchors = &at.options.anchors;
    let systems = anchors::order(kind, 0, &anchors.systems);
    let mut runs: Vec<Runs> = systems.iter().map(|_| Runs::default()).collect();
    for round in 0..anchors.runs {
        for system in anchors::order(kind, index * anchors.runs + round, &anchors.systems) {
            let i = systems.iter().position(|s| *s == system).unwrap_or(0);
            if runs[i].failed {
                continue;
            }
            match system_run(system, kind, c, at).await {
                Ok(r) => {
                    eprintln!(
                        "lease-bench: anchors {} c{c} {}: {:.1} jobs/s{}",
                        kind.name(),
                        system.key(),
                        r.rate,
                        r.partial_jobs
                            .map_or(String::new(), |n| format!(" (partial: {n} jobs)"))
                    );
                    runs[i].add(r);
                }
                Err(e) => {
                    eprintln!(
                        "lease-bench: anchors {} c{c} {}: failed: {e}",
                        kind.name(),
                        system.key()
                    );
                    runs[i].failed = true;
                    errors.push(format!("{} c{c} {}: {e}", kind.name(), system.name()));
                }
            }
        }
    }
    let backend = match kind {
        Kind::Sqlite => "SQLite",
        Kind::Postgres => "PostgreSQL",
        Kind::Redis => "Redis",
        Kind::Memory => "memory",
    };
    let mut measured: Vec<(System, Option<Measured>)> = systems
        .iter()
        .zip(&runs)
        .map(|(s, r)| (*s, r.measured(anchors.jobs)))
        .collect();
    measured.sort_by_key(|(s, _)| System::ALL.iter().position(|x| x == s));
    Cell {
        backend,
        c,
        load_1m,
        systems: measured,
    }
}

/// The probe and pool of `kind`'s server for the row.
async fn probe_for(kind: Kind, options: &Options) -> Result<(Probe, Option<sqlx::PgPool>)> {
    match kind {
        Kind::Redis => Ok((
            Probe::Redis(anchors::redis_connect(&options.redis_url).await?),
            None,
        )),
        Kind::Postgres => {
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(2)
                .connect(&options.postgres_url)
                .await
                .map_err(|e| setup(format!("PostgreSQL: {e}")))?;
            Ok((Probe::Postgres(pool.clone()), Some(pool)))
        }
        Kind::Sqlite | Kind::Memory => Ok((Probe::None, None)),
    }
}

/// The row's report (`anchors-<unix>.json` beside the bench's JSON).
#[derive(Serialize)]
pub struct Report {
    /// Start, Unix seconds.
    pub started_unix: u64,
    /// Jobs per run.
    pub jobs: u64,
    /// Runs per system and cell.
    pub runs: usize,
    /// The longest one drain ran before it reported a partial count, seconds.
    pub budget_secs: f64,
    /// Load average before and after.
    pub load_before: Option<[f64; 3]>,
    /// Load average after.
    pub load_after: Option<[f64; 3]>,
    /// The cells.
    pub cells: Vec<Cell>,
    /// The ratios of each cell, in the cells' order.
    pub ratios: Vec<anchors::Ratios>,
    /// Runs that failed.
    pub errors: Vec<String>,
}

/// The systems that run on the selected backends.
fn systems_of(options: &Options) -> Vec<System> {
    System::ALL
        .into_iter()
        .filter(|s| s.selected(&options.anchors.systems))
        .filter(|s| options.backends.iter().any(|k| s.serves(*k)))
        .collect()
}

/// Runs the row: every cell of every selected server backend.
pub async fn run(options: &Options, started_unix: u64) -> Result<Report> {
    let systems = systems_of(options);
    let tools = tokio::task::spawn_blocking(move || anchor_tools::install(&systems))
        .await
        .map_err(|e| setup(format!("install: {e}")))?;
    let load_before = load::now();
    let mut errors = Vec::new();
    let kinds: Vec<Kind> = options
        .backends
        .iter()
        .copied()
        .filter(|k| *k != Kind::Memory)
        .collect();
    let mut k = 0;
    let cells = on_each_server(
        options,
        &kinds,
        async |kind, row_options, probe, pg_pool| {
            let at = Servers {
                options: row_options,
                probe,
                pg_pool,
                tools: &tools,
            };
            let mut cells = Vec::new();
            for (i, c) in drain::CONCURRENCY.into_iter().enumerate() {
                cells.push(cell(kind, c, k * drain::CONCURRENCY.len() + i, &at, &mut errors).await);
            }
            k += 1;
            cells
        },
    )
    .await?;
    Ok(Report {
        started_unix,
        jobs: options.anchors.jobs,
        runs: options.anchors.runs,
        budget_secs: options.anchors.budget.as_secs_f64(),
        load_before,
        load_after: load::now(),
        ratios: cells.iter().map(Cell::ratios).collect(),
        cells,
        errors,
    })
}

/// Runs `per_server` for each server backend of `kinds` in order, inside the row's own
/// PostgreSQL database (made first, dropped after), with that backend's probe and pool;
/// returns what the calls returned, in order. The database is dropped and each pool closed
/// even when a step fails, so a failed row leaves nothing on the shared server.
pub(crate) async fn on_each_server<T>(
    options: &Options,
    kinds: &[Kind],
    mut per_server: impl AsyncFnMut(Kind, &Options, &Probe, Option<&sqlx::PgPool>) -> Vec<T>,
) -> Result<Vec<T>> {
    let (db, row_options) = row_database(options, kinds.contains(&Kind::Postgres)).await?;
    let mut out = Vec::new();
    let mut failed = None;
    for &kind in kinds {
        match probe_for(kind, &row_options).await {
            Ok((probe, pool)) => {
                out.extend(per_server(kind, &row_options, &probe, pool.as_ref()).await);
                if let Some(pool) = pool {
                    pool.close().await;
                }
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    if let Some(db) = db {
        db.drop().await?;
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// A database of the row's own on the PostgreSQL server when `postgres` (dropped by the
/// caller at the end), and `options` with its URL.
async fn row_database(
    options: &Options,
    postgres: bool,
) -> Result<(Option<crate::anchor_db::RunDatabase>, Options)> {
    let db = if postgres {
        Some(crate::anchor_db::RunDatabase::create(&options.postgres_url).await?)
    } else {
        None
    };
    let mut row_options = options.clone();
    if let Some(db) = &db {
        row_options.postgres_url = db.url().to_owned();
    }
    Ok((db, row_options))
}

/// Writes `report` to `dir/<stem>-<unix>.json` and `dir/<stem>-latest.json`.
pub(crate) fn write_report(
    dir: &Path,
    stem: &str,
    started_unix: u64,
    report: &impl Serialize,
) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| setup(format!("create {}: {e}", dir.display())))?;
    let text = serde_json::to_string_pretty(report).map_err(|e| setup(format!("json: {e}")))?;
    let path = dir.join(format!("{stem}-{started_unix}.json"));
    for p in [&path, &dir.join(format!("{stem}-latest.json"))] {
        std::fs::write(p, &text).map_err(|e| setup(format!("write {}: {e}", p.display())))?;
    }
    Ok(path)
}

/// Writes the report to `dir/anchors-<unix>.json` and `dir/anchors-latest.json`.
pub fn write_json(dir: &Path, report: &Report) -> Result<PathBuf> {
    write_report(dir, "anchors", report.started_unix, report)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `sh -c script`: a runner in a test.
    pub(crate) fn sh(script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        cmd
    }

    /// The handshake: the go line only after READY, the result line parsed, stdin closed
    /// before the runner may exit.
    #[tokio::test]
    async fn a_runner_is_driven_through_its_handshake() {
        let script = "echo enqueueing; echo READY; read go; [ \"$go\" = go ] || exit 3; \
                      echo 'job 1 done'; echo 'ANCHOR {\"jobs\":4,\"secs\":2.0}'; \
                      while read rest; do :; done; echo bye";
        let r = drive(sh(script), &Probe::None, 4).await.expect("driven");
        assert_eq!(r.rate, 2.0);
        assert_eq!(r.cost, Cost::default());
        assert_eq!(r.partial_jobs, None);
        let partial =
            "echo READY; read go; echo 'ANCHOR {\"jobs\":3,\"secs\":1.5,\"partial\":true}'";
        let r = drive(sh(partial), &Probe::None, 4).await.expect("partial");
        assert_eq!((r.rate, r.partial_jobs), (2.0, Some(3)));
    }

    #[tokio::test]
    async fn a_runner_that_fails_or_says_nothing_is_an_error() {
        let cases = [
            ("echo READY; read go; exit 0", "without"),
            ("exit 0", "without"),
            (
                "echo READY; read go; echo 'ANCHOR {\"jobs\":3,\"secs\":1}'",
                "completed 3 of 4",
            ),
            (
                "echo READY; read go; echo 'ANCHOR {\"jobs\":4,\"secs\":1}'; exit 7",
                "failed",
            ),
        ];
        for (script, want) in cases {
            let err = drive(sh(script), &Probe::None, 4)
                .await
                .expect_err(script)
                .to_string();
            assert!(err.contains(want), "{script}: {err}");
        }
    }

    #[test]
    fn runs_give_the_median_the_fewest_partial_jobs_or_nothing_when_one_failed() {
        let run = |rate, partial_jobs| RunResult {
            rate,
            cost: Cost {
                commits: Some(rate / 100.0),
                ..Cost::default()
            },
            partial_jobs,
        };
        let mut runs = Runs::default();
        runs.add(run(100.0, None));
        runs.add(run(300.0, Some(9_000)));
        runs.add(run(200.0, Some(6_000)));
        let m = runs.measured(20_000).expect("measured");
        assert_eq!(m.rate, 200.0);
        assert_eq!(m.cost.commits, Some(2.0), "the mean cost");
        assert_eq!(m.partial_jobs, Some(6_000));
        runs.failed = true;
        assert_eq!(runs.measured(20_000), None, "a failed system has no figure");
        assert_eq!(Runs::default().measured(20_000), None, "no run");
    }

    #[test]
    fn the_systems_of_the_selected_backends_and_words() {
        let parse = |a: &[&str]| {
            crate::args::parse(&a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
                .expect("parse")
        };
        let redis = systems_of(&parse(&["--backend", "redis"]));
        assert!(redis.contains(&System::BullMqTuned) && redis.contains(&System::Bound500));
        assert!(!redis.contains(&System::Graphile500) && !redis.contains(&System::River));
        let some = systems_of(&parse(&[
            "--anchor-system",
            "pgboss",
            "--anchor-system",
            "bound",
        ]));
        assert_eq!(
            some,
            [
                System::PgBoss,
                System::PgBossBatch,
                System::Bound32,
                System::Bound500
            ]
        );
        assert_eq!(mode(System::Graphile500), "lq500");
        assert_eq!(mode(System::Graphile), "default");
        assert_eq!(mode(System::PgBossBatch), "batch");
    }

    #[test]
    fn only_the_exact_word_selects_the_row() {
        let parse = |a: &[&str]| {
            crate::args::parse(&a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
                .expect("parse")
        };
        assert!(selected(&parse(&["--only", "anchors"])));
        assert!(!selected(&parse(&[])), "not in the default run");
        assert!(!selected(&parse(&["--only", "drain"])));
    }
}
