//! `--only anchors` (issue 24 items 1 and 3): BullMQ, graphile-worker and apalis drain the
//! drain rows' workload beside this library on the same servers, interleaved per cell with
//! the starting system rotating, each system's state wiped before and after its run.
//!
//! Installs first: the Node runners (`crates/bench/anchors/node`, pinned versions, committed
//! lockfile) are copied to `target/anchors/node` and `npm ci` runs there when the lockfile
//! changed; the apalis runner (`crates/bench/anchors/apalis`, its own workspace and lockfile)
//! is built with `--locked` into `target/anchors/apalis`. A missing `node`, `npm` or `cargo`
//! fails the row naming the tool.
//!
//! Each runner enqueues, prints `READY`, waits for the bench's line on stdin, drains, prints
//! the `ANCHOR` line ([`anchors::parse_outcome`]) and exits when stdin closes; the cost
//! counters are read after `READY` and after the process exited, so they hold the drain
//! alone. PostgreSQL runs get a database of their own for the row (apalis keeps a fixed
//! `apalis` schema), dropped at the end.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use crate::anchors::{self, Cell, Cost, Measured, Probe, System};
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

use crate::args::workspace_root as root;

/// The installed runners.
pub struct Tools {
    node_dir: PathBuf,
    apalis: PathBuf,
}

/// Runs `program args` in `dir`, failing with the tool's name when it is missing.
fn run_tool(program: &str, args: &[&str], dir: &Path, env: &[(&str, &Path)]) -> Result<()> {
    let mut cmd = std::process::Command::new(program);
    cmd.args(args).current_dir(dir).stdout(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let status = cmd.status().map_err(|e| {
        let hint = if program == "cargo" {
            "the Rust toolchain"
        } else {
            "Node.js 20 and npm: apt-get install nodejs npm"
        };
        setup(format!(
            "`{program}` could not be run ({e}): the anchors row needs it ({hint})"
        ))
    })?;
    if !status.success() {
        return Err(setup(format!(
            "`{program} {}` in {} failed ({status})",
            args.join(" "),
            dir.display()
        )));
    }
    Ok(())
}

/// Copies the Node runners to `target/anchors/node` and runs `npm ci` when the lockfile is
/// not the one installed there.
fn install_node(root: &Path) -> Result<PathBuf> {
    let source = root.join("crates/bench/anchors/node");
    let dir = root.join("target/anchors/node");
    std::fs::create_dir_all(&dir).map_err(|e| setup(format!("{}: {e}", dir.display())))?;
    for name in [
        "package.json",
        "package-lock.json",
        "common.js",
        "bullmq.js",
        "graphile.js",
    ] {
        std::fs::copy(source.join(name), dir.join(name))
            .map_err(|e| setup(format!("copy {name}: {e}")))?;
    }
    let lock = std::fs::read(dir.join("package-lock.json"))
        .map_err(|e| setup(format!("package-lock.json: {e}")))?;
    let stamp = dir.join("node_modules/.lease-bench-lock");
    if std::fs::read(&stamp).ok().as_deref() != Some(lock.as_slice()) {
        eprintln!("lease-bench: npm ci in {}", dir.display());
        run_tool(
            "npm",
            &["ci", "--no-audit", "--no-fund", "--loglevel=error"],
            &dir,
            &[],
        )?;
        std::fs::write(&stamp, &lock).map_err(|e| setup(format!("{}: {e}", stamp.display())))?;
    }
    Ok(dir)
}

/// Builds the apalis runner in its own target dir.
fn install_apalis(root: &Path) -> Result<PathBuf> {
    let manifest = root.join("crates/bench/anchors/apalis/Cargo.toml");
    let target = root.join("target/anchors/apalis");
    let manifest_text = manifest.to_string_lossy().into_owned();
    run_tool(
        "cargo",
        &[
            "build",
            "--release",
            "--locked",
            "--quiet",
            "--manifest-path",
            &manifest_text,
        ],
        root,
        &[("CARGO_TARGET_DIR", &target)],
    )?;
    Ok(target.join("release/lease-bench-anchor-apalis"))
}

/// Installs every runner.
pub fn install() -> Result<Tools> {
    let root = root();
    Ok(Tools {
        node_dir: install_node(&root)?,
        apalis: install_apalis(&root)?,
    })
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

/// Runs one runner process to the end: jobs/s and the cost per job of its drain.
async fn drive(mut cmd: Command, probe: &Probe, jobs: u64) -> Result<(f64, Cost)> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| setup(format!("spawn the runner: {e}")))?;
    let mut stdin = child.stdin.take().ok_or_else(|| setup("runner stdin"))?;
    let stdout = child.stdout.take().ok_or_else(|| setup("runner stdout"))?;
    let mut lines = BufReader::new(stdout).lines();
    line_with(&mut lines, "READY", ENQUEUE_DEADLINE).await?;
    let before = probe.read().await?;
    stdin
        .write_all(b"go\n")
        .await
        .map_err(|e| setup(format!("runner stdin: {e}")))?;
    let line = line_with(&mut lines, anchors::OUTCOME_PREFIX.trim(), DRAIN_DEADLINE).await?;
    let outcome = anchors::parse_outcome(&line, jobs)?;
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
    let cost = Cost::between(before, probe.read().await?, jobs)?;
    Ok((outcome.jobs as f64 / outcome.secs, cost))
}

/// Names of one run's state: unique per run so nothing else is touched.
struct Names {
    redis_prefix: String,
    pg_schema: String,
}

impl Names {
    fn new() -> Names {
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

/// The command of `system`'s runner on `kind` at concurrency `c`, and its state.
fn runner(system: System, kind: Kind, c: usize, at: &Servers<'_>) -> Result<(Command, Wipe)> {
    let names = Names::new();
    let (c_text, n_text) = (c.to_string(), drain::JOBS.to_string());
    let redis = &at.options.redis_url;
    let postgres = &at.options.postgres_url;
    let apalis = |args: &[&str]| {
        let mut cmd = Command::new(&at.tools.apalis);
        cmd.args(args).args([&c_text, &n_text]);
        cmd
    };
    let node = |script: &str, url: &str, ns: &str| {
        let mut cmd = Command::new("node");
        cmd.current_dir(&at.tools.node_dir)
            .args([script, url, ns, &c_text, &n_text]);
        cmd
    };
    let prefix = names.redis_prefix;
    Ok(match (system, kind) {
        (System::BullMq, Kind::Redis) => (node("bullmq.js", redis, &prefix), Wipe::Redis(prefix)),
        (System::Graphile, Kind::Postgres) => (
            node("graphile.js", postgres, &names.pg_schema),
            Wipe::Schema(names.pg_schema),
        ),
        (System::Apalis, Kind::Redis) => (apalis(&["redis", redis, &prefix]), Wipe::Redis(prefix)),
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
async fn anchor_run(system: System, kind: Kind, c: usize, at: &Servers<'_>) -> Result<(f64, Cost)> {
    let (cmd, state) = runner(system, kind, c, at)?;
    state.remove(at).await?;
    state.create()?;
    let result = drive(cmd, at.probe, drain::JOBS).await;
    state.remove(at).await?;
    result
}

/// An anchor's state.
enum Wipe {
    /// Every Redis key under this prefix.
    Redis(String),
    /// This PostgreSQL schema of the row's database.
    Schema(String),
    /// This directory (made empty before the run).
    Dir(PathBuf),
}

impl Wipe {
    /// Removes the state.
    async fn remove(&self, at: &Servers<'_>) -> Result<()> {
        match self {
            Wipe::Redis(prefix) => {
                anchors::wipe_redis_prefix(&at.options.redis_url, prefix).await?;
            }
            Wipe::Schema(schema) => {
                let pool = at.pg_pool.ok_or_else(|| setup("no PostgreSQL pool"))?;
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

/// One run of `system` in a cell.
async fn system_run(system: System, kind: Kind, c: usize, at: &Servers<'_>) -> Result<(f64, Cost)> {
    if system == System::Lease {
        let (sample, cost) = drain::sample_probed(
            kind,
            Side::Library,
            c,
            drain::JOBS,
            drain::Place::Child,
            at.options,
            at.probe,
        )
        .await?;
        return Ok((sample.rate(), cost));
    }
    anchor_run(system, kind, c, at).await
}

/// The runs of one cell: [`drain::RUNS`] rounds, each system once per round, the starting
/// system rotating per round and cell; the median rate and mean cost per system.
async fn cell(
    kind: Kind,
    c: usize,
    index: usize,
    at: &Servers<'_>,
    errors: &mut Vec<String>,
) -> Cell {
    let load_1m = load::one_minute();
    let systems = anchors::order(kind, 0);
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); systems.len()];
    let mut costs: Vec<Vec<Cost>> = vec![Vec::new(); systems.len()];
    let mut failed = vec![false; systems.len()];
    for round in 0..drain::RUNS {
        for system in anchors::order(kind, index * drain::RUNS + round) {
            let i = systems.iter().position(|s| *s == system).unwrap_or(0);
            if failed[i] {
                continue;
            }
            match system_run(system, kind, c, at).await {
                Ok((rate, cost)) => {
                    eprintln!(
                        "lease-bench: anchors {} c{c} {}: {rate:.0} jobs/s",
                        kind.name(),
                        system.name()
                    );
                    rates[i].push(rate);
                    costs[i].push(cost);
                }
                Err(e) => {
                    failed[i] = true;
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
    let measured = System::ALL.iter().map(|&s| {
        let m = systems.iter().position(|x| *x == s).and_then(|i| {
            let rate = drain::median(rates[i].clone(), drain::JOBS)?.rate();
            (!failed[i]).then(|| Measured {
                rate,
                cost: Cost::mean(&costs[i]),
            })
        });
        (s, m)
    });
    Cell {
        backend,
        c,
        load_1m,
        systems: measured.collect(),
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
    /// Load average before and after.
    pub load_before: Option<[f64; 3]>,
    /// Load average after.
    pub load_after: Option<[f64; 3]>,
    /// The cells.
    pub cells: Vec<Cell>,
    /// Runs that failed.
    pub errors: Vec<String>,
}

/// Runs the row: every cell of every selected server backend.
pub async fn run(options: &Options, started_unix: u64) -> Result<Report> {
    let tools = tokio::task::spawn_blocking(install)
        .await
        .map_err(|e| setup(format!("install: {e}")))??;
    let db = if options.backends.contains(&Kind::Postgres) {
        Some(crate::anchor_db::RunDatabase::create(&options.postgres_url).await?)
    } else {
        None
    };
    let mut row_options = options.clone();
    if let Some(db) = &db {
        row_options.postgres_url = db.url().to_owned();
    }
    let load_before = load::now();
    let mut cells = Vec::new();
    let mut errors = Vec::new();
    let kinds = options.backends.iter().filter(|k| **k != Kind::Memory);
    for (k, &kind) in kinds.enumerate() {
        let (probe, pool) = probe_for(kind, &row_options).await?;
        let at = Servers {
            options: &row_options,
            probe: &probe,
            pg_pool: pool.as_ref(),
            tools: &tools,
        };
        for (i, c) in drain::CONCURRENCY.into_iter().enumerate() {
            cells.push(cell(kind, c, k * drain::CONCURRENCY.len() + i, &at, &mut errors).await);
        }
        if let Some(pool) = pool {
            pool.close().await;
        }
    }
    if let Some(db) = db {
        db.drop().await?;
    }
    Ok(Report {
        started_unix,
        jobs: drain::JOBS,
        runs: drain::RUNS,
        load_before,
        load_after: load::now(),
        cells,
        errors,
    })
}

/// Writes the report to `dir/anchors-<unix>.json` and `dir/anchors-latest.json`.
pub fn write_json(dir: &Path, report: &Report) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| setup(format!("create {}: {e}", dir.display())))?;
    let text = serde_json::to_string_pretty(report).map_err(|e| setup(format!("json: {e}")))?;
    let path = dir.join(format!("anchors-{}.json", report.started_unix));
    for p in [&path, &dir.join("anchors-latest.json")] {
        std::fs::write(p, &text).map_err(|e| setup(format!("write {}: {e}", p.display())))?;
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
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
        let (rate, cost) = drive(sh(script), &Probe::None, 4).await.expect("driven");
        assert_eq!(rate, 2.0);
        assert_eq!(cost, Cost::default());
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
