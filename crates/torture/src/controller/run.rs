//! The steps of a controller run: plan (work dir, fault kinds the backend allows, the
//! schedule), open the store, drive, finish, report and clean up.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use lease_core::LeaseBackend;
use tokio::time::Instant;

use super::args::RunArgs;
use super::state::{Controller, Slot};
use crate::app::AppStore;
use crate::backend::{self, Kind};
use crate::failover;
use crate::faults::{self, Fault, FaultKind};
use crate::nemesis::{self, Dropper};
use crate::netns::{self, Network};
use crate::oplog::{OpLog, now_us};
use crate::recorder::Recorder;
use crate::report::Report;
use crate::skew::Skewer;

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

/// What a run is about to do: its work dir, store, namespace and fault schedule.
struct Plan {
    skew: Option<Skewer>,
    dir: PathBuf,
    url: String,
    kind: Kind,
    namespace: String,
    schedule: Vec<Fault>,
    fingerprint: String,
}

async fn run(a: &mut RunArgs) -> Result<Report, String> {
    let mut plan = plan(a)?;
    let (backend, app) = open_store(a, &plan).await?;
    let mut c = connect(a, &mut plan, backend, app.clone()).await?;
    // The controller's copy: a setting the backend does not support leaves it, named in
    // the report.
    if let Err(e) = c.a.controls.prepare(&c.recorded).await {
        let _ = backend::destroy(&plan.url, &plan.namespace).await;
        let _ = app.destroy().await;
        return Err(e);
    }
    let result = tokio::select! {
        r = c.drive(&plan.schedule) => r,
        signal = interrupted() => Err(format!("stopped by {signal}")),
    };
    c.stop_all().await;
    let (started, faults_end) = result?;
    let report = c.finish(started, faults_end, &plan.fingerprint).await?;
    if let Some(mut net) = c.net.take() {
        net.teardown();
    }
    println!("{report}");
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    clean_up(a, &plan, &report, &app).await;
    Ok(report)
}

/// The work dir, the store, the fault kinds the backend and the options allow, and the
/// seeded schedule (announced on stderr).
fn plan(a: &mut RunArgs) -> Result<Plan, String> {
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
    skip_unsupported_faults(a, kind)?;
    let base = format!("torture_{}_{}", a.seed, now_us() / 1000 % 1_000_000_000);
    let namespace = failover::spread_namespace(&url, &base)?;
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
    announce(a, kind, &url, &namespace, &schedule, &fingerprint, &dir);
    Ok(Plan {
        skew,
        dir,
        url,
        kind,
        namespace,
        schedule,
        fingerprint,
    })
}

/// Drops the fault kinds the backend or the options cannot inject, each with a note.
fn skip_unsupported_faults(a: &mut RunArgs, kind: Kind) -> Result<(), String> {
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
    Ok(())
}

/// The run's first line: backend, namespace, seed, schedule and work dir.
fn announce(
    a: &RunArgs,
    kind: Kind,
    url: &str,
    namespace: &str,
    schedule: &[Fault],
    fingerprint: &str,
    dir: &Path,
) {
    let kinds: Vec<String> = faults::count(schedule)
        .into_iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    eprintln!(
        "lease-torture: {} at {}, namespace {namespace}, seed {} (schedule {fingerprint}: {} faults: {}), work dir {}",
        kind.name(),
        redact(url),
        a.seed,
        schedule.len(),
        if kinds.is_empty() {
            "none".to_owned()
        } else {
            kinds.join(",")
        },
        dir.display()
    );
}

/// Opens the backend and the application store (and sets up failover replication).
async fn open_store(a: &RunArgs, plan: &Plan) -> Result<(Arc<dyn LeaseBackend>, AppStore), String> {
    let (kind, url, namespace) = (plan.kind, &plan.url, &plan.namespace);
    if a.faults.contains(&FaultKind::Failover)
        && a.failover.mode(kind)? == failover::Replication::Wait
    {
        backend::wait_for_replicas(1);
    }
    let (backend, app) = backend::open_retrying(url, namespace, 4, Duration::from_secs(30)).await?;
    app.create().await?;
    if a.faults.contains(&FaultKind::Failover) {
        failover::apply(&a.failover, url, kind, namespace).await?;
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
    Ok((backend, app))
}

/// The network namespaces, the connection dropper, the controller's log, and the
/// controller over them.
async fn connect(
    a: &RunArgs,
    plan: &mut Plan,
    backend: Arc<dyn LeaseBackend>,
    app: AppStore,
) -> Result<Controller, String> {
    let (kind, url, dir) = (plan.kind, &plan.url, &plan.dir);
    let net = if a.netns && kind != Kind::Sqlite {
        Some(Network::create(a.processes, url, kind).await?)
    } else {
        None
    };
    let dropper = if a.faults.contains(&FaultKind::Drop) && net.is_none() {
        Some(Dropper::connect(url, kind).await?)
    } else {
        None
    };
    let control = Arc::new(
        OpLog::create(&dir.join("controller.jsonl")).map_err(|e| format!("controller log: {e}"))?,
    );
    // `--break-control`: the negative control breaks the controller's side of a control.
    let controlled = match a.controls.break_control.as_slice() {
        [] => backend.clone(),
        broken => crate::mutant::Mutant::wrap(backend.clone(), broken),
    };
    let recorded = Recorder::new(controlled, control.clone(), 0, Arc::new(AtomicU64::new(0)));
    let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
    Ok(Controller {
        kind,
        server_port: nemesis::server_port(url, kind),
        url: url.clone(),
        namespace: plan.namespace.clone(),
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
        app,
        control,
        recorded,
        cancel_tried: BTreeSet::new(),
        cancels: 0,
        paused_since: None,
        schedule_until_ms: None,
        next_pause: Instant::now() + a.controls.pause_for().unwrap_or_default(),
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
        skew: plan.skew.take(),
        a: a.clone(),
    })
}

/// Removes the namespace, the application rows and the work dir of a passed run (unless
/// `--keep`); otherwise says where they are.
async fn clean_up(a: &RunArgs, plan: &Plan, report: &Report, app: &AppStore) {
    let (url, namespace, dir) = (&plan.url, &plan.namespace, &plan.dir);
    if report.passed() && !a.keep {
        if let Err(e) = backend::destroy(url, namespace).await {
            eprintln!("lease-torture: warning: cleanup of {namespace}: {e}");
        }
        if let Err(e) = app.destroy().await {
            eprintln!("lease-torture: warning: cleanup of the application rows: {e}");
        }
        let _ = std::fs::remove_dir_all(dir);
    } else {
        eprintln!(
            "lease-torture: kept the logs in {} and namespace {namespace}",
            dir.display()
        );
    }
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
/// redaction of [`lease_core::redact_url`], so no message of the run shows a password.
pub(super) fn redact(url: &str) -> String {
    lease_core::redact_url(url)
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
