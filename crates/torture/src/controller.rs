//! Controller mode: admits executions, runs the runtime processes (re-executing this
//! binary), injects the seeded fault schedule, shows progress, stops the faults at the
//! deadline, waits for every execution within the liveness bound, reads the final state
//! (the application rows too), runs the history checker and the application-row checker
//! and prints the report.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::time::Duration;

use clap::builder::RangedU64ValueParser;
use futures::StreamExt;
use lease_conformance::history::{self, CheckOptions, Op, OpKind, OpResult};
use lease_core::{Admission, ExecutionId, LeaseBackend};
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, Command};
use tokio::time::Instant;

use crate::app::{AppStore, AppWrite};
use crate::appcheck;
use crate::backend::{self, Kind};
use crate::cli;
use crate::effectcheck;
use crate::effects::{self, EffectMode};
use crate::failover;
use crate::faults::{self, Fault, FaultKind};
use crate::lostlease;
use crate::nemesis::{self, Dropper};
use crate::netns::{self, Impairment, Network};
use crate::oplog::{self, OpLog, Tail, now_us};
use crate::recorder::terminal_text;
use crate::report::{self, Report};
use crate::skew::Skewer;
use crate::timeline::{self, FaultEvent};
use crate::workflow;

/// Options of a controller run (`lease-torture run --help`).
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Durations take a bare number in the unit their value name says \
    (SECS, MS) or humantime's spelling: 90s, 1m 30s, 500ms."
)]
pub struct RunArgs {
    /// sqlite:PATH | postgres://... | redis://... (default: sqlite, a file in the work dir).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Runtime processes, 1 to 64.
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=64))]
    pub processes: usize,
    /// Deliveries per process.
    #[arg(long, value_name = "N", default_value_t = 8,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..))]
    pub concurrency: usize,
    /// Executions kept in flight: admitted, not yet complete (at least 1).
    #[arg(long = "executions", value_name = "N", default_value_t = 100,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..))]
    pub window: usize,
    /// Stop admitting after N in all (default: no limit).
    #[arg(long, value_name = "N")]
    pub max_executions: Option<u64>,
    /// How long faults are injected and executions admitted.
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = cli::secs)]
    pub duration: Duration,
    /// Fault schedule seed (default: from the clock; printed).
    #[arg(long, value_name = "N", default_value_t = cli::clock_seed(), hide_default_value = true)]
    pub seed: u64,
    /// pause,kill,drop,slow-renew,restart,failover,partition,loss,latency | all | none (all:
    /// each kind the backend and the given options allow).
    #[arg(long, value_name = "LIST", default_value = "all", value_parser = faults::parse_kinds)]
    pub faults: BTreeSet<FaultKind>,
    /// Mean time between faults.
    #[arg(long, value_name = "MS", default_value = "2000", value_parser = cli::millis)]
    pub fault_every: Duration,
    /// Lease duration, renewed every third; at least 30 ms.
    #[arg(long = "lease-ms", value_name = "MS", default_value = "1500", value_parser = cli::lease_ms)]
    pub lease_ms: u64,
    /// Every execution must complete this long after the faults stop.
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = cli::secs)]
    pub liveness: Duration,
    /// Shell command restarting the server (needed for the `restart` fault).
    #[arg(long, value_name = "CMD")]
    pub restart_cmd: Option<String>,
    /// Run each runtime incarnation under libfaketime, its clock offset by up to an hour
    /// either way and running 0.5x-2x (drawn from the seed; combines with any --faults).
    #[arg(long)]
    pub clock_skew: bool,
    /// Logs and the SQLite file (default: a fresh temp dir).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Also write the report as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write the run's timeline picture (SVG; always written to the work dir as
    /// timeline.svg).
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    /// Keep the work dir and the namespace even when the run passes.
    #[arg(long)]
    pub keep: bool,
    /// fenced: the application rows through step_in_tx / step_in_script; unfenced:
    /// NEGATIVE CONTROL, the rows written outside the fence (the checker must report
    /// violations).
    #[arg(long, value_name = "MODE", default_value = "fenced", value_parser = AppWrite::parse)]
    pub app_write: AppWrite,
    /// The failover fault's script and replication mode.
    #[command(flatten)]
    pub failover: failover::Options,
    /// helper: the effect step calls its provider through Delivery::effect; unfenced:
    /// NEGATIVE CONTROL, the provider called inside a plain step (the effect checker must
    /// report violations).
    #[arg(long, value_name = "MODE", default_value = "helper", value_parser = EffectMode::parse)]
    pub effects: EffectMode,
    /// Each runtime in its own network namespace, reaching the server through a forwarder
    /// (root, ip and nft; PostgreSQL and Redis): needed for partition, loss and latency.
    #[arg(long)]
    pub netns: bool,
}

/// One runtime slot: the current process and its history.
struct Slot {
    incarnation: u32,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    pid: Option<u32>,
    /// Set while we keep it down on purpose (killed, waiting to restart).
    down: bool,
}

/// Something to do later.
#[derive(Debug)]
enum Later {
    Resume {
        slot: usize,
        incarnation: u32,
    },
    Respawn {
        slot: usize,
    },
    Fast {
        slot: usize,
        incarnation: u32,
    },
    /// End a network impairment (the fault whose event is `event` in `fault_events`).
    Heal {
        slot: usize,
        event: usize,
    },
}

struct Controller {
    a: RunArgs,
    kind: Kind,
    url: String,
    namespace: String,
    dir: PathBuf,
    exe: PathBuf,
    slots: Vec<Slot>,
    logs: Vec<PathBuf>,
    tails: Vec<Tail>,
    later: Vec<(Instant, Later)>,
    backend: Arc<dyn LeaseBackend>,
    app: AppStore,
    control: OpLog,
    dropper: Option<Dropper>,
    /// The namespaces, veths and forwarders of `--netns`.
    net: Option<Network>,
    server_port: u16,
    admitted: BTreeMap<String, Instant>,
    done: BTreeSet<String>,
    next_id: u64,
    faults_done: BTreeMap<String, u64>,
    /// Every fault that took effect, for the timeline.
    fault_events: Vec<FaultEvent>,
    faults_skipped: u64,
    restarts: u64,
    unexpected_exits: u64,
    stale_refused: u64,
    last_done_at: Instant,
    /// Draws and checks the runtimes' clock skews (`--clock-skew`).
    skew: Option<Skewer>,
}

fn execution_name(n: u64) -> String {
    format!("e{n:06}")
}

/// Runs the controller; the exit code is 0 only for a clean, complete run.
pub async fn main(mut a: RunArgs) -> ExitCode {
    match run(&mut a).await {
        Ok(report) => {
            if report.passed() {
                ExitCode::SUCCESS
            } else {
                if report.violations == 0 {
                    eprintln!(
                        "lease-torture: the runtimes' clocks did not show the skew drawn for \
                         them (MISMATCH above): the run tested nothing of clock skew"
                    );
                }
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("lease-torture: {e}");
            ExitCode::from(2)
        }
    }
}

fn work_dir(a: &RunArgs, kind_hint: &str) -> Result<PathBuf, String> {
    let dir = match &a.work_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!(
            "lease-torture-{kind_hint}-{}-{}",
            a.seed,
            std::process::id()
        )),
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

async fn run(a: &mut RunArgs) -> Result<Report, String> {
    let kind_hint = match &a.url {
        Some(u) => Kind::of(u)?.name(),
        None => "sqlite",
    };
    if kind_hint == Kind::Sqlite.name() && std::mem::take(&mut a.clock_skew) {
        eprintln!("lease-torture: note: {}", crate::skew::SQLITE_NOTE);
    }
    // Before anything is created: a missing libfaketime changes nothing.
    let skew = a.clock_skew.then(|| Skewer::new(a.seed)).transpose()?;
    let dir = work_dir(a, kind_hint)?;
    let url = match &a.url {
        Some(u) => u.clone(),
        None => format!("sqlite:{}", dir.join("torture.db").display()),
    };
    let kind = Kind::of(&url)?;
    // What the backend and the options allow.
    let mut skipped_kinds = Vec::new();
    if kind == Kind::Sqlite {
        for k in [FaultKind::Drop, FaultKind::Restart] {
            if a.faults.remove(&k) {
                skipped_kinds.push(format!(
                    "{k} (SQLite is an embedded file: no connections, no server)"
                ));
            }
        }
    }
    if a.restart_cmd.is_none() && a.faults.remove(&FaultKind::Restart) {
        skipped_kinds.push(
            "restart (no --restart-cmd: only a throwaway server may be restarted; \
             cargo xtask torture starts one)"
                .to_owned(),
        );
    }
    if a.failover.cmd.is_none() && a.faults.remove(&FaultKind::Failover) {
        skipped_kinds.push(
            "failover (no --failover-cmd: cargo xtask torture starts a PostgreSQL pair or a \
             Redis Cluster with one)"
                .to_owned(),
        );
    }
    skipped_kinds.extend(netns::restrict(&mut a.faults, a.netns, kind)?);
    for note in &skipped_kinds {
        eprintln!("lease-torture: note: skipping fault {note}");
    }
    let namespace = format!("torture_{}_{}", a.seed, now_us() / 1000 % 1_000_000_000);
    let lease = Duration::from_millis(a.lease_ms);
    let schedule = faults::schedule(
        a.seed,
        a.duration,
        a.fault_every,
        a.processes,
        &a.faults,
        lease,
    );
    let fingerprint = faults::fingerprint(&schedule);
    let kinds: Vec<String> = faults::count(&schedule)
        .into_iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    eprintln!(
        "lease-torture: {} at {}, namespace {namespace}, seed {} (schedule {fingerprint}: {} faults: {}), work dir {}",
        kind.name(),
        redact(&url),
        a.seed,
        schedule.len(),
        if kinds.is_empty() {
            "none".to_owned()
        } else {
            kinds.join(",")
        },
        dir.display()
    );
    if a.faults.contains(&FaultKind::Failover)
        && a.failover.mode(kind)? == failover::Replication::Wait
    {
        backend::wait_for_replicas(1);
    }
    let (backend, app) =
        backend::open_retrying(&url, &namespace, 4, Duration::from_secs(30)).await?;
    app.create().await?;
    if a.faults.contains(&FaultKind::Failover) {
        failover::apply(&a.failover, &url, kind, &namespace).await?;
        let mode = a.failover.mode(kind)?;
        eprintln!(
            "lease-torture: failover with {} replication{}",
            mode.name(),
            if mode == failover::Replication::Async {
                " (NEGATIVE CONTROL on PostgreSQL: the checker must report violations)"
            } else {
                ""
            }
        );
    }
    let net = if a.netns && kind != Kind::Sqlite {
        Some(Network::create(a.processes, &url, kind).await?)
    } else {
        None
    };
    let dropper = if a.faults.contains(&FaultKind::Drop) && net.is_none() {
        Some(Dropper::connect(&url, kind).await?)
    } else {
        None
    };
    let control =
        OpLog::create(&dir.join("controller.jsonl")).map_err(|e| format!("controller log: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
    let mut c = Controller {
        kind,
        server_port: nemesis::server_port(&url, kind),
        url: url.clone(),
        namespace: namespace.clone(),
        dir: dir.clone(),
        exe,
        slots: (0..a.processes)
            .map(|_| Slot {
                incarnation: 0,
                child: None,
                stdin: None,
                pid: None,
                down: false,
            })
            .collect(),
        logs: Vec::new(),
        tails: Vec::new(),
        later: Vec::new(),
        backend,
        app: app.clone(),
        control,
        dropper,
        net,
        admitted: BTreeMap::new(),
        done: BTreeSet::new(),
        next_id: 1,
        faults_done: BTreeMap::new(),
        fault_events: Vec::new(),
        faults_skipped: 0,
        restarts: 0,
        unexpected_exits: 0,
        stale_refused: 0,
        last_done_at: Instant::now(),
        skew,
        a: a.clone(),
    };
    let result = tokio::select! {
        r = c.drive(&schedule) => r,
        signal = interrupted() => Err(format!("stopped by {signal}")),
    };
    c.stop_all().await;
    let (started, faults_end) = result?;
    let report = c.finish(started, faults_end, &fingerprint).await?;
    if let Some(mut net) = c.net.take() {
        net.teardown();
    }
    println!("{report}");
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if report.passed() && !a.keep {
        if let Err(e) = backend::destroy(&url, &namespace).await {
            eprintln!("lease-torture: warning: cleanup of {namespace}: {e}");
        }
        if let Err(e) = app.destroy().await {
            eprintln!("lease-torture: warning: cleanup of the application rows: {e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        eprintln!(
            "lease-torture: kept the logs in {} and namespace {namespace}",
            dir.display()
        );
    }
    Ok(report)
}

/// Resolves on SIGINT or SIGTERM (its name): the run stops, the runtimes and the namespaces
/// are cleaned up. Never resolves where the handlers cannot be installed.
async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut int), Ok(mut term)) => tokio::select! {
            _ = int.recv() => "SIGINT",
            _ = term.recv() => "SIGTERM",
        },
        _ => std::future::pending().await,
    }
}

/// The URL without a password (userinfo or libpq's `password=`), for messages: the one
/// redaction of [`lease_core::redact_url`] (issue 25 item 2).
pub(crate) fn redact(url: &str) -> String {
    lease_core::redact_url(url)
}

impl Controller {
    /// Starts the runtime of `slot` (a new incarnation with its own log file).
    fn spawn(&mut self, slot: usize) -> Result<(), String> {
        let s = &mut self.slots[slot];
        s.incarnation += 1;
        let process = u32::try_from(slot + 1).unwrap_or(0) * 1000 + s.incarnation;
        let log = self
            .dir
            .join(format!("p{}-{}.jsonl", slot + 1, s.incarnation));
        let stderr = std::fs::File::create(self.dir.join(format!(
            "p{}-{}.stderr",
            slot + 1,
            s.incarnation
        )))
        .map_err(|e| format!("runtime stderr file: {e}"))?;
        let (incarnation, dir) = (s.incarnation, self.dir.clone());
        let skew_env = self.skew.as_mut().map(|k| k.env(slot, incarnation, &dir));
        let (mut command, url) = match &self.net {
            Some(net) => (net.command(slot, &self.exe), net.url(slot)),
            None => (Command::new(&self.exe), self.url.as_str()),
        };
        let mut child = command
            .arg("runtime")
            .env(crate::runtime::RUNTIME_URL_ENV, url)
            .args(["--namespace", &self.namespace])
            .args(["--process", &process.to_string()])
            .arg("--log")
            .arg(&log)
            .args(["--concurrency", &self.a.concurrency.to_string()])
            .args(["--lease-ms", &self.a.lease_ms.to_string()])
            .args(["--app-write", self.a.app_write.name()])
            .envs(self.a.failover.runtime_env())
            .args(["--effects", self.a.effects.name()])
            .envs(skew_env.unwrap_or_default())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start a runtime: {e}"))?;
        s.stdin = child.stdin.take();
        s.pid = child.id();
        s.child = Some(child);
        s.down = false;
        self.tails.push(Tail::new(log.clone()));
        self.logs.push(log);
        Ok(())
    }

    async fn send(&mut self, slot: usize, line: &str) {
        if let Some(stdin) = self.slots[slot].stdin.as_mut() {
            let _ = stdin.write_all(format!("{line}\n").as_bytes()).await;
            let _ = stdin.flush().await;
        }
    }

    fn count_fault(&mut self, kind: FaultKind) {
        *self.faults_done.entry(kind.name().to_owned()).or_default() += 1;
    }

    /// Injects one scheduled fault and, when it took effect, notes it for the timeline.
    async fn inject(&mut self, f: &Fault) {
        let before: u64 = self.faults_done.values().sum();
        let at_us = now_us();
        self.inject_one(f).await;
        if self.faults_done.values().sum::<u64>() > before {
            self.fault_events.push(FaultEvent {
                at_us,
                until_us: None,
                kind: f.kind,
                slot: (f.kind != FaultKind::Restart).then_some(f.target),
            });
        }
    }

    /// Injects one scheduled fault.
    async fn inject_one(&mut self, f: &Fault) {
        let now = Instant::now();
        let slot = f.target;
        let live = !self.slots[slot].down && self.slots[slot].pid.is_some();
        match f.kind {
            FaultKind::Pause | FaultKind::Kill | FaultKind::Drop | FaultKind::SlowRenew
                if !live =>
            {
                self.faults_skipped += 1;
            }
            FaultKind::Pause => {
                let pid = self.slots[slot].pid.unwrap_or(0);
                match faults::signal("STOP", pid).await {
                    Ok(()) => {
                        self.count_fault(f.kind);
                        let incarnation = self.slots[slot].incarnation;
                        self.later
                            .push((now + f.hold, Later::Resume { slot, incarnation }));
                    }
                    Err(e) => {
                        eprintln!("\nlease-torture: pause: {e}");
                        self.faults_skipped += 1;
                    }
                }
            }
            FaultKind::Kill => {
                let s = &mut self.slots[slot];
                s.down = true;
                s.stdin = None;
                if let Some(mut child) = s.child.take() {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                }
                s.pid = None;
                self.count_fault(f.kind);
                self.later.push((now + f.hold, Later::Respawn { slot }));
            }
            FaultKind::Drop if self.net.is_some() => {
                match self.net.as_ref().map(|n| n.drop_connections(slot)) {
                    Some(0) | None => self.faults_skipped += 1,
                    Some(_) => self.count_fault(f.kind),
                }
            }
            FaultKind::Partition | FaultKind::Loss | FaultKind::Latency => {
                self.impair(f).await;
            }
            FaultKind::Drop => {
                let pid = self.slots[slot].pid.unwrap_or(0);
                let port = self.server_port;
                if let Some(d) = self.dropper.as_mut() {
                    match d.drop_connections(pid, port).await {
                        Ok(0) => self.faults_skipped += 1,
                        Ok(_) => self.count_fault(f.kind),
                        Err(e) => {
                            eprintln!("\nlease-torture: drop: {e}");
                            self.faults_skipped += 1;
                        }
                    }
                }
            }
            FaultKind::SlowRenew => {
                self.send(slot, &format!("slow {}", f.delay.as_millis()))
                    .await;
                self.count_fault(f.kind);
                let incarnation = self.slots[slot].incarnation;
                self.later
                    .push((now + f.hold, Later::Fast { slot, incarnation }));
            }
            FaultKind::Failover => {
                let o = self.a.failover.clone();
                let (dir, url, ns) = (self.dir.clone(), self.url.clone(), self.namespace.clone());
                match failover::inject(&o, f, &dir, &url, self.kind, &ns).await {
                    Ok(_) => self.count_fault(f.kind),
                    Err(e) => {
                        eprintln!("\nlease-torture: failover: {e}");
                        self.faults_skipped += 1;
                    }
                }
            }
            FaultKind::Restart => {
                let Some(cmd) = self.a.restart_cmd.clone() else {
                    self.faults_skipped += 1;
                    return;
                };
                match nemesis::restart(&cmd, &self.dir.join("restart.log")).await {
                    Ok(_) => self.count_fault(f.kind),
                    Err(e) => {
                        eprintln!("\nlease-torture: restart: {e}");
                        self.faults_skipped += 1;
                    }
                }
            }
        }
    }

    /// Starts a network fault on its slot's link and schedules its heal (`--netns`).
    async fn impair(&mut self, f: &Fault) {
        let what = match f.kind {
            FaultKind::Partition => Impairment::Partition,
            FaultKind::Loss => Impairment::Loss(f.loss_pct),
            _ => Impairment::Latency(f.delay),
        };
        // The fault's id is the index its timeline event gets (`inject` pushes it next).
        let event = self.fault_events.len();
        let Some(net) = self.net.as_mut() else {
            self.faults_skipped += 1;
            return;
        };
        match net.impair(f.target, event as u64, what).await {
            Ok(()) => {
                self.count_fault(f.kind);
                let slot = f.target;
                self.later
                    .push((Instant::now() + f.hold, Later::Heal { slot, event }));
            }
            Err(e) => {
                eprintln!("\nlease-torture: {}: {e}", f.kind);
                self.faults_skipped += 1;
            }
        }
    }

    /// Ends the network fault of timeline event `event` on `slot`; notes the heal time.
    async fn heal(&mut self, slot: usize, event: usize) {
        let Some(net) = self.net.as_mut() else {
            return;
        };
        if let Err(e) = net.heal(slot, event as u64).await {
            eprintln!("\nlease-torture: heal: {e}");
        }
        if let Some(ev) = self.fault_events.get_mut(event) {
            ev.until_us = Some(now_us());
        }
    }

    /// Runs what is due in `later` (all of it when `all`).
    async fn run_later(&mut self, all: bool) -> Result<(), String> {
        let now = Instant::now();
        let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.later)
            .into_iter()
            .partition(|(at, _)| all || *at <= now);
        self.later = keep;
        for (_, what) in due {
            match what {
                Later::Resume { slot, incarnation } => {
                    let s = &self.slots[slot];
                    if s.incarnation == incarnation
                        && let Some(pid) = s.pid
                    {
                        let _ = faults::signal("CONT", pid).await;
                    }
                }
                Later::Respawn { slot } => {
                    if self.slots[slot].down {
                        self.spawn(slot)?;
                        self.restarts += 1;
                    }
                }
                Later::Fast { slot, incarnation } => {
                    if self.slots[slot].incarnation == incarnation {
                        self.send(slot, "fast").await;
                    }
                }
                Later::Heal { slot, event } => self.heal(slot, event).await,
            }
        }
        Ok(())
    }

    /// Restarts runtimes that exited on their own (a crash is reported, not hidden).
    fn reap(&mut self) -> Result<(), String> {
        for slot in 0..self.slots.len() {
            let exited = match self.slots[slot].child.as_mut().map(Child::try_wait) {
                Some(Ok(Some(status))) => Some(status),
                _ => None,
            };
            if let Some(status) = exited {
                self.unexpected_exits += 1;
                let s = &self.slots[slot];
                eprintln!(
                    "\nlease-torture: runtime {} (incarnation {}) exited on its own: {status}; see {}",
                    slot + 1,
                    s.incarnation,
                    self.dir
                        .join(format!("p{}-{}.stderr", slot + 1, s.incarnation))
                        .display()
                );
                self.slots[slot].child = None;
                self.spawn(slot)?;
            }
        }
        Ok(())
    }

    /// Reads new log lines: counts completions and stale refusals.
    fn poll_logs(&mut self) {
        for tail in &mut self.tails {
            for op in tail.poll() {
                match (&op.kind, op.result) {
                    (OpKind::Acknowledge { outcome }, OpResult::Accepted)
                        if outcome != "suspended" && self.done.insert(op.execution.clone()) =>
                    {
                        self.last_done_at = Instant::now();
                    }
                    (OpKind::WriteStep { .. } | OpKind::Acknowledge { .. }, OpResult::Lost) => {
                        self.stale_refused += 1;
                    }
                    _ => {}
                }
            }
        }
    }

    /// Reads the executions (admitted at least `older` ago) not yet seen completing, at
    /// most `limit` of them: an acknowledgement whose log line died with its process is
    /// found this way. Terminal ones are logged as final reads.
    async fn poll_outstanding(&mut self, older: Duration, limit: usize) {
        let now = Instant::now();
        let ids: Vec<String> = self
            .admitted
            .iter()
            .filter(|(id, at)| !self.done.contains(*id) && now.duration_since(**at) >= older)
            .map(|(id, _)| id.clone())
            .take(limit)
            .collect();
        for id in ids {
            if let Some(op) = self.read_outcome(&id).await
                && matches!(op.kind, OpKind::ReadOutcome { outcome: Some(_) })
            {
                let seq = self.control.next_seq();
                self.control.record(seq, op);
                self.done.insert(id);
                self.last_done_at = Instant::now();
            }
        }
    }

    async fn read_outcome(&self, id: &str) -> Option<Op> {
        let eid = ExecutionId::new(id).ok()?;
        let start_us = now_us();
        let record = self.backend.get(&eid).await.ok()??;
        Some(Op {
            process: 0,
            execution: id.to_owned(),
            token: record.token.get(),
            start_us,
            end_us: now_us(),
            kind: OpKind::ReadOutcome {
                outcome: record.outcome.as_ref().map(terminal_text),
            },
            result: OpResult::Accepted,
        })
    }

    /// Admits executions up to the window.
    async fn admit_more(&mut self) {
        let in_flight = self.admitted.len() - self.done.len();
        let want = self.a.window.saturating_sub(in_flight);
        for _ in 0..want {
            if self.a.max_executions.is_some_and(|m| self.next_id > m) {
                return;
            }
            let id = execution_name(self.next_id);
            let Ok(eid) = ExecutionId::new(id.clone()) else {
                return;
            };
            // Admission is idempotent by identity: retrying an unknown outcome is safe.
            if self.backend.admit(&Admission::new(eid)).await.is_err() {
                return;
            }
            self.admitted.insert(id, Instant::now());
            self.next_id += 1;
        }
    }

    fn progress(&self, started: Instant, phase: &str, force_line: bool) {
        let elapsed = started.elapsed().as_secs_f64();
        let done = self.done.len();
        let rate = done as f64 / elapsed.max(0.001);
        let faults: u64 = self.faults_done.values().sum();
        let total = self.a.duration.as_secs_f64();
        let width = 20usize;
        let filled = ((elapsed / total.max(0.001)).min(1.0) * width as f64) as usize;
        let bar = format!("{}{}", "=".repeat(filled), " ".repeat(width - filled));
        let line = format!(
            "[{bar}] {elapsed:>5.0}s/{total:.0}s {phase} | done {done} / admitted {} | {rate:.1}/s | faults {faults} | stale refused {}",
            self.admitted.len(),
            self.stale_refused
        );
        let mut err = std::io::stderr();
        if err.is_terminal() && !force_line {
            let _ = write!(err, "\r\x1b[2K{line}");
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }

    /// Runs the fault window and the drain. Returns the start and the end of the faults.
    async fn drive(&mut self, schedule: &[Fault]) -> Result<(Instant, i64), String> {
        for slot in 0..self.slots.len() {
            self.spawn(slot)?;
        }
        let started = Instant::now();
        let deadline = started + self.a.duration;
        let mut next_fault = 0;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut last_poll = Instant::now();
        let mut last_progress = Instant::now();
        let mut last_line = Instant::now();
        let tty = std::io::stderr().is_terminal();
        self.admit_more().await;
        while Instant::now() < deadline {
            tick.tick().await;
            while next_fault < schedule.len() && started + schedule[next_fault].at <= Instant::now()
            {
                let f = schedule[next_fault].clone();
                self.inject(&f).await;
                next_fault += 1;
            }
            self.run_later(false).await?;
            self.reap()?;
            self.poll_logs();
            if last_poll.elapsed() >= Duration::from_secs(2) {
                self.poll_outstanding(Duration::from_secs(5), 32).await;
                last_poll = Instant::now();
            }
            self.admit_more().await;
            if last_progress.elapsed() >= Duration::from_millis(250) {
                let line = !tty && last_line.elapsed() >= Duration::from_secs(10);
                if tty || line {
                    self.progress(started, "faults", false);
                    last_line = Instant::now();
                }
                last_progress = Instant::now();
            }
        }
        // Faults stop: resume, restart and speed up everything, then drain.
        self.run_later(true).await?;
        let faults_end = now_us();
        let drain_deadline = Instant::now() + self.a.liveness;
        while self.done.len() < self.admitted.len() && Instant::now() < drain_deadline {
            tick.tick().await;
            self.reap()?;
            self.poll_logs();
            if last_poll.elapsed() >= Duration::from_secs(1) {
                self.poll_outstanding(Duration::ZERO, 256).await;
                last_poll = Instant::now();
            }
            if last_progress.elapsed() >= Duration::from_millis(250) {
                let line = !tty && last_line.elapsed() >= Duration::from_secs(10);
                if tty || line {
                    self.progress(started, "drain", false);
                    last_line = Instant::now();
                }
                last_progress = Instant::now();
            }
        }
        self.progress(started, "end", true);
        Ok((started, faults_end))
    }

    /// Stops every runtime: closes its standard input (graceful shutdown), kills it after
    /// ten seconds.
    async fn stop_all(&mut self) {
        for s in &mut self.slots {
            if let Some(pid) = s.pid {
                let _ = faults::signal("CONT", pid).await;
            }
            s.stdin = None;
        }
        for s in &mut self.slots {
            if let Some(mut child) = s.child.take()
                && tokio::time::timeout(Duration::from_secs(10), child.wait())
                    .await
                    .is_err()
            {
                let _ = child.start_kill();
                let _ = child.wait().await;
            }
            s.pid = None;
        }
    }

    /// Final reads, the check, the report.
    async fn finish(
        &mut self,
        started: Instant,
        faults_end: i64,
        fingerprint: &str,
    ) -> Result<Report, String> {
        let elapsed = started.elapsed().as_secs_f64();
        let drain_s = if self.done.len() == self.admitted.len() {
            self.last_done_at
                .saturating_duration_since(started + self.a.duration)
                .as_secs_f64()
        } else {
            f64::NAN
        };
        eprintln!(
            "lease-torture: reading the final state of {} executions",
            self.admitted.len()
        );
        let backend = self.backend.clone();
        let ids: Vec<String> = self.admitted.keys().cloned().collect();
        let reads: Vec<Vec<Op>> = futures::stream::iter(ids)
            .map(|id| final_reads(backend.clone(), id))
            .buffer_unordered(16)
            .collect()
            .await;
        for op in reads.into_iter().flatten() {
            let seq = self.control.next_seq();
            self.control.record(seq, op);
        }
        let mut keyed = Vec::new();
        let mut torn = 0;
        for path in self.logs.iter().chain([&self.dir.join("controller.jsonl")]) {
            let (o, t) = oplog::read_keyed(path).map_err(|e| format!("{}: {e}", path.display()))?;
            keyed.extend(o);
            torn += t;
        }
        let ops: Vec<Op> = keyed.iter().map(|(_, op)| op.clone()).collect();
        let rows = self.app.rows().await?;
        let app_violations = appcheck::check(&rows, &keyed, &workflow::is_app_step);
        let lease_ms = self.a.lease_ms;
        let expected_step = workflow::expected_step;
        let expected_outcome = move |e: &str| workflow::expected_outcome(e, lease_ms);
        let options = CheckOptions {
            must_complete: self.admitted.keys().cloned().collect(),
            complete_by_us: Some(
                faults_end + i64::try_from(self.a.liveness.as_micros()).unwrap_or(i64::MAX),
            ),
            expected_step: Some(&expected_step),
            expected_outcome: Some(&expected_outcome),
        };
        let violations = history::check(&ops, &options);
        let ids: Vec<String> = self.admitted.keys().cloned().collect();
        let (effect_violations, effects, effect_torn) =
            effectcheck::check_run(&self.backend, &ids, &self.logs, &ops).await?;
        let (late_side_effects, network) = self.lost_lease_figures(&ops);
        if !violations.is_empty() || !app_violations.is_empty() || !effect_violations.is_empty() {
            let path = self.dir.join("violations.json");
            let text =
                serde_json::to_string_pretty(&(&violations, &app_violations, &effect_violations))
                    .unwrap_or_default();
            let _ = std::fs::write(&path, text);
        }
        self.draw_timeline(
            &ops,
            fingerprint,
            violations.len() + app_violations.len() + effect_violations.len(),
        );
        let counts = report::count_ops(&ops);
        let lost = |kinds: &[&str]| -> u64 {
            kinds
                .iter()
                .filter_map(|k| counts.get(k).and_then(|r| r.get("lost")))
                .sum()
        };
        let final_done = ops
            .iter()
            .filter(|op| {
                op.result == OpResult::Accepted
                    && match &op.kind {
                        OpKind::ReadOutcome { outcome } => outcome.is_some(),
                        _ => false,
                    }
            })
            .map(|op| op.execution.as_str())
            .collect::<BTreeSet<_>>();
        let done_in_final_state = final_done.len() as u64;
        let done = self
            .done
            .iter()
            .map(String::as_str)
            .chain(final_done)
            .collect::<BTreeSet<_>>()
            .len() as u64;
        let active = self
            .last_done_at
            .saturating_duration_since(started)
            .as_secs_f64();
        Ok(Report {
            backend: self.kind.name().to_owned(),
            seed: self.a.seed,
            schedule: fingerprint.to_owned(),
            processes: self.a.processes,
            concurrency: self.a.concurrency,
            lease_ms,
            duration_s: self.a.duration.as_secs_f64(),
            elapsed_s: elapsed,
            drain_s,
            admitted: self.admitted.len() as u64,
            done,
            done_in_final_state,
            executions_per_s: done as f64 / active.max(0.001),
            faults: self.faults_done.clone(),
            faults_skipped: self.faults_skipped,
            restarts: self.restarts,
            unexpected_exits: self.unexpected_exits,
            stale_writes_refused: lost(&["write_step", "acknowledge"]),
            stale_renewals_refused: lost(&["renew", "release"]),
            ops: counts,
            torn_lines: torn + effect_torn,
            app_write: self.a.app_write.name().to_owned(),
            app_rows: rows.len() as u64,
            violations: violations.len() + app_violations.len() + effect_violations.len(),
            history_violations: violations.len(),
            app_violations: app_violations.len(),
            first_violations: violations.into_iter().take(20).collect(),
            first_app_violations: app_violations.into_iter().take(20).collect(),
            effect_mode: self.a.effects.name().to_owned(),
            effects,
            effect_violations: effect_violations.len(),
            first_effect_violations: effect_violations.into_iter().take(20).collect(),
            clock_skew: self.skew.as_ref().map(Skewer::figures),
            late_side_effects,
            network,
        })
    }

    /// Side effects started after their lease was lost, and the namespace mode's figures.
    fn lost_lease_figures(
        &self,
        ops: &[Op],
    ) -> (lostlease::LateFigures, Option<netns::NetworkFigures>) {
        let paths: Vec<PathBuf> = self.logs.iter().map(|l| effects::log_path(l)).collect();
        let events = effects::read(&paths).map(|(e, _)| e).unwrap_or_default();
        let late = lostlease::late_side_effects(ops, &events);
        let lease_us = i64::try_from(self.a.lease_ms).unwrap_or(i64::MAX / 1000) * 1000;
        let network = self.net.as_ref().map(|n| {
            n.figures(&lostlease::partition_figures(
                ops,
                &self.fault_events,
                lease_us,
            ))
        });
        (late, network)
    }
}

impl Controller {
    /// Writes `timeline.svg` to the work dir (and to `--timeline FILE`), and the injected
    /// faults as `faults.json`.
    fn draw_timeline(&self, ops: &[Op], fingerprint: &str, violations: usize) {
        let faults: Vec<String> = self
            .faults_done
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        let summary = [
            format!(
                "lease-torture {} seed {} (schedule {fingerprint}), {} processes x {}, lease {} ms",
                self.kind.name(),
                self.a.seed,
                self.a.processes,
                self.a.concurrency,
                self.a.lease_ms
            ),
            format!(
                "executions admitted {}, faults {}, violations {violations}",
                self.admitted.len(),
                if faults.is_empty() {
                    "none".to_owned()
                } else {
                    faults.join(", ")
                }
            ),
            format!(
                "the {} executions with the most claims; one lane per runtime slot",
                timeline::SAMPLE
            ),
        ];
        let events = serde_json::to_string_pretty(&self.fault_events).unwrap_or_default();
        let _ = std::fs::write(self.dir.join("faults.json"), events);
        let picture = timeline::svg(ops, &self.fault_events, self.a.processes, &summary);
        for path in [Some(self.dir.join("timeline.svg")), self.a.timeline.clone()]
            .into_iter()
            .flatten()
        {
            match std::fs::write(&path, &picture) {
                Ok(()) => eprintln!("lease-torture: timeline in {}", path.display()),
                Err(e) => eprintln!("lease-torture: timeline {}: {e}", path.display()),
            }
        }
    }
}

/// The final state of one execution as read operations: its outcome and every step.
async fn final_reads(backend: Arc<dyn LeaseBackend>, id: String) -> Vec<Op> {
    let Ok(eid) = ExecutionId::new(id.clone()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for attempt in 0..5 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let start_us = now_us();
        let (Ok(record), Ok(steps)) = (backend.get(&eid).await, backend.list_steps(&eid).await)
        else {
            continue;
        };
        let end_us = now_us();
        let op = |kind, token| Op {
            process: 0,
            execution: id.clone(),
            token,
            start_us,
            end_us,
            kind,
            result: OpResult::Accepted,
        };
        out.push(op(
            OpKind::ReadOutcome {
                outcome: record.and_then(|r| r.outcome.as_ref().map(terminal_text)),
            },
            0,
        ));
        let mut keys: BTreeSet<String> = workflow::step_keys(&id);
        for s in steps {
            keys.remove(s.step_key.as_str());
            // The record's token, as the recorder logs step reads (the application-row
            // check compares it with the row's).
            out.push(op(
                OpKind::ReadStep {
                    step_key: s.step_key.as_str().to_owned(),
                    step_attempt: s.step_attempt,
                    value: Some(s.response.as_str().to_owned()),
                },
                s.token.get(),
            ));
        }
        // Steps the workflow may have written but the store does not hold: the checker
        // reports any that an accepted write or an earlier read had seen.
        for key in keys {
            out.push(op(
                OpKind::ReadStep {
                    step_key: key,
                    step_attempt: lease_core::dispatcher::STEP_ATTEMPT,
                    value: None,
                },
                0,
            ));
        }
        break;
    }
    out
}

#[cfg(test)]
mod tests {
    /// The old private redaction kept libpq's `password=` parameter.
    #[test]
    fn messages_redact_every_password_form() {
        let r = super::redact("postgres://u:pw1@h/db?password=pw2&sslmode=disable");
        assert!(!r.contains("pw1") && !r.contains("pw2"), "{r}");
        assert!(r.contains("sslmode=disable") && r.contains("@h/db"), "{r}");
    }
}
