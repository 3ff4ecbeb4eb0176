//! Dispatchers under measurement: in this process, or in a child process of this same
//! binary (`lease-bench --child <json>`), reporting when each delivery started.
//!
//! A child opens the store from a [`StoreSpec`], starts one dispatcher and prints one line
//! per event on stdout: `ready` once its first claim came back (it is idle from then on),
//! `start <id> <unix us> <token>` when a delivery's worker starts, `metrics <claim calls>
//! <empty claims> <wake-ups> <acknowledgements>` when asked. It reads commands on stdin:
//! `metrics`, or `stop` (graceful shutdown, final metrics, exit). Start instants are read on
//! the system clock (`CLOCK_REALTIME`) with microseconds, so they compare across processes
//! on this machine.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lease_core::{Json, SharedBackend, WorkflowRunOutcome};
use lease_runtime::{
    Delivery, DeliveryError, Dispatcher, DispatcherOptions, MetricsSnapshot, Reply,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;

use crate::error::{BenchError, Context, Result};
use crate::fixture::StoreSpec;

/// Microseconds since the Unix epoch on the system clock.
pub fn unix_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// What the worker does with a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// Acknowledges completed at once (the empty handler).
    Ack,
    /// Acknowledges suspended (no wake) on the execution's first delivery, completed after.
    SuspendFirst,
    /// Holds the lease until cancelled (a process to kill).
    Hold,
}

/// The prefetch bound and claim batch of a dispatcher tuned for throughput.
pub const TUNED_BATCH: usize = 500;

/// How the dispatcher under measurement runs.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// Dispatcher concurrency.
    pub concurrency: usize,
    /// Lease duration and renewal interval in ms (`None`: the defaults).
    pub lease_ms: Option<(u64, u64)>,
    /// What the worker does.
    pub mode: Mode,
    /// Tuned for throughput: prefetch and claim batch of [`TUNED_BATCH`].
    #[serde(default)]
    pub tuned: bool,
}

impl WorkerSpec {
    /// Concurrency 8, default options, the empty handler.
    pub fn idle() -> Self {
        WorkerSpec {
            concurrency: 8,
            lease_ms: None,
            mode: Mode::Ack,
            tuned: false,
        }
    }

    fn options(&self) -> DispatcherOptions {
        let mut o = DispatcherOptions::new().concurrency(self.concurrency);
        if self.tuned {
            o = o.prefetch(TUNED_BATCH).claim_batch(TUNED_BATCH);
        }
        match self.lease_ms {
            Some((lease, renew)) => o
                .lease_duration(Duration::from_millis(lease))
                .renew_every(Duration::from_millis(renew)),
            None => o,
        }
    }
}

/// One delivery start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Execution id.
    pub id: String,
    /// When the worker started, µs since the Unix epoch (system clock).
    pub at_us: i64,
    /// The delivery's token.
    pub token: u64,
}

/// The counters the bench reads from a dispatcher.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Claim calls.
    pub claim_calls: u64,
    /// Claim calls that granted nothing.
    pub empty_claims: u64,
    /// Wake-ups received.
    pub wakeups: u64,
    /// Acknowledgements.
    pub acknowledgements: u64,
}

impl Counters {
    fn of(m: &MetricsSnapshot) -> Self {
        Counters {
            claim_calls: m.claim_calls,
            empty_claims: m.empty_claims,
            wakeups: m.wakeups,
            acknowledgements: m.acknowledgements,
        }
    }

    /// `self - earlier`, counter by counter.
    pub fn since(self, earlier: Counters) -> Counters {
        Counters {
            claim_calls: self.claim_calls.saturating_sub(earlier.claim_calls),
            empty_claims: self.empty_claims.saturating_sub(earlier.empty_claims),
            wakeups: self.wakeups.saturating_sub(earlier.wakeups),
            acknowledgements: self
                .acknowledgements
                .saturating_sub(earlier.acknowledgements),
        }
    }

    /// Counter-wise sum.
    pub fn plus(self, o: Counters) -> Counters {
        Counters {
            claim_calls: self.claim_calls + o.claim_calls,
            empty_claims: self.empty_claims + o.empty_claims,
            wakeups: self.wakeups + o.wakeups,
            acknowledgements: self.acknowledgements + o.acknowledgements,
        }
    }

    fn line(&self) -> String {
        format!(
            "metrics {} {} {} {}",
            self.claim_calls, self.empty_claims, self.wakeups, self.acknowledgements
        )
    }

    fn parse(line: &str) -> Option<Counters> {
        let mut it = line.strip_prefix("metrics ")?.split(' ');
        let mut next = || it.next()?.parse().ok();
        Some(Counters {
            claim_calls: next()?,
            empty_claims: next()?,
            wakeups: next()?,
            acknowledgements: next()?,
        })
    }
}

/// Every delivery start seen so far, by execution id, in order.
#[derive(Default)]
pub struct Events {
    seen: Mutex<HashMap<String, Vec<Event>>>,
    changed: Notify,
}

impl Events {
    fn push(&self, e: Event) {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(e.id.clone())
            .or_default()
            .push(e);
        self.changed.notify_waiters();
    }

    /// The `nth` (0-based) start of `id`, waiting up to `timeout` for it.
    pub async fn wait(&self, id: &str, nth: usize, timeout: Duration) -> Option<Event> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            if let Some(e) = self.get(id, nth) {
                return Some(e);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.get(id, nth);
            }
        }
    }

    /// The `nth` start of `id`, if seen.
    pub fn get(&self, id: &str, nth: usize) -> Option<Event> {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .and_then(|v| v.get(nth).cloned())
    }
}

/// Starts a dispatcher on `backend` whose worker reports each start to `report`.
fn start_dispatcher(
    backend: SharedBackend,
    spec: WorkerSpec,
    report: impl Fn(Event) + Send + Sync + 'static,
) -> Result<Dispatcher> {
    let report = Arc::new(report);
    let mode = spec.mode;
    let worker = move |d: Delivery| {
        let at_us = unix_us();
        let report = report.clone();
        async move {
            let first = !d.record().ever_suspended;
            report(Event {
                id: d.execution_id().as_str().to_owned(),
                at_us,
                token: d.token().get(),
            });
            match mode {
                Mode::Ack => Ok(Reply::Acknowledge(WorkflowRunOutcome::Completed(
                    Json::null(),
                ))),
                Mode::SuspendFirst if first => {
                    Ok(Reply::Acknowledge(WorkflowRunOutcome::Suspended))
                }
                Mode::SuspendFirst => Ok(Reply::Acknowledge(WorkflowRunOutcome::Completed(
                    Json::null(),
                ))),
                Mode::Hold => {
                    d.cancelled().await;
                    Err::<Reply, _>(DeliveryError::Cancelled)
                }
            }
        }
    };
    Dispatcher::start(backend, worker, spec.options()).context(|| "start dispatcher".into())
}

/// Waits until the dispatcher's first claim came back (it is idle from then on).
async fn first_claim(d: &Dispatcher) -> Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while d.snapshot().claim_calls == 0 {
        if tokio::time::Instant::now() > deadline {
            return Err(BenchError::Setup("dispatcher made no claim in 30s".into()));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(())
}

/// A dispatcher under measurement, here or in a child process.
pub enum Worker {
    /// In this process.
    Local {
        /// The dispatcher.
        dispatcher: Dispatcher,
    },
    /// In a child process.
    Child {
        /// The process.
        child: Box<Child>,
        /// Its commands.
        stdin: ChildStdin,
        /// Its `metrics` replies.
        metrics: mpsc::UnboundedReceiver<Counters>,
        /// The stdout reader.
        reader: JoinHandle<()>,
    },
}

impl Worker {
    /// An idle dispatcher in this process on `backend`, reporting to `events`.
    pub async fn local(
        backend: SharedBackend,
        spec: WorkerSpec,
        events: Arc<Events>,
    ) -> Result<Self> {
        let dispatcher = start_dispatcher(backend, spec, move |e| events.push(e))?;
        first_claim(&dispatcher).await?;
        Ok(Worker::Local { dispatcher })
    }

    /// An idle dispatcher in a new process of this binary on `store`, reporting to
    /// `events`; returns once it is ready.
    pub async fn spawn(store: &StoreSpec, spec: WorkerSpec, events: Arc<Events>) -> Result<Self> {
        let exe = std::env::current_exe().map_err(|e| BenchError::Setup(format!("exe: {e}")))?;
        let config = serde_json::to_string(&ChildConfig {
            store: store.clone(),
            worker: spec,
            drain: None,
        })
        .map_err(|e| BenchError::Setup(e.to_string()))?;
        let mut child = tokio::process::Command::new(exe)
            .arg("--child")
            .arg(config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| BenchError::Setup(format!("spawn worker process: {e}")))?;
        let stdin = child.stdin.take().ok_or_else(|| setup("child stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| setup("child stdout"))?;
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let (metrics_tx, metrics) = mpsc::unbounded_channel();
        let reader = tokio::spawn(async move {
            let mut ready = Some(ready_tx);
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if line == "ready" {
                    if let Some(r) = ready.take() {
                        let _ = r.send(());
                    }
                } else if let Some(c) = Counters::parse(&line) {
                    let _ = metrics_tx.send(c);
                } else if let Some(e) = parse_start(&line) {
                    events.push(e);
                }
            }
        });
        match tokio::time::timeout(Duration::from_secs(60), ready_rx).await {
            Ok(Ok(())) => Ok(Worker::Child {
                child: Box::new(child),
                stdin,
                metrics,
                reader,
            }),
            _ => {
                let _ = child.start_kill();
                Err(setup("the worker process did not get ready"))
            }
        }
    }

    /// The dispatcher's counters now.
    pub async fn counters(&mut self) -> Result<Counters> {
        match self {
            Worker::Local { dispatcher } => Ok(Counters::of(&dispatcher.snapshot())),
            Worker::Child { stdin, metrics, .. } => {
                stdin
                    .write_all(b"metrics\n")
                    .await
                    .map_err(|e| BenchError::Setup(format!("worker stdin: {e}")))?;
                tokio::time::timeout(Duration::from_secs(10), metrics.recv())
                    .await
                    .ok()
                    .flatten()
                    .ok_or_else(|| setup("the worker process sent no metrics"))
            }
        }
    }

    /// Graceful shutdown; returns the final counters.
    pub async fn stop(self) -> Result<Counters> {
        match self {
            Worker::Local { dispatcher } => {
                let report = dispatcher.shutdown(Duration::from_secs(2)).await;
                Ok(Counters::of(&report.metrics))
            }
            Worker::Child {
                mut child,
                mut stdin,
                mut metrics,
                reader,
            } => {
                let _ = stdin.write_all(b"stop\n").await;
                let last = tokio::time::timeout(Duration::from_secs(20), metrics.recv()).await;
                let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
                let _ = child.start_kill();
                reader.abort();
                last.ok()
                    .flatten()
                    .ok_or_else(|| setup("the worker process sent no final metrics"))
            }
        }
    }

    /// Hard stop: SIGKILL for a child (its leases expire), abort for a local dispatcher.
    pub async fn kill(self) {
        match self {
            Worker::Local { dispatcher } => dispatcher.abort(),
            Worker::Child {
                mut child, reader, ..
            } => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                reader.abort();
            }
        }
    }
}

fn setup(what: &str) -> BenchError {
    BenchError::Setup(what.to_owned())
}

fn parse_start(line: &str) -> Option<Event> {
    let mut it = line.strip_prefix("start ")?.split(' ');
    Some(Event {
        id: it.next()?.to_owned(),
        at_us: it.next()?.parse().ok()?,
        token: it.next()?.parse().ok()?,
    })
}

/// What a child process is told.
#[derive(Debug, Serialize, Deserialize)]
struct ChildConfig {
    store: StoreSpec,
    worker: WorkerSpec,
    /// Drain mode: no per-delivery lines; print `drained <started us> <done us>`
    /// once this many acknowledgements are recorded.
    #[serde(default)]
    drain: Option<u64>,
}

/// When a drain's dispatcher started and when its last acknowledgement was recorded, µs
/// since the Unix epoch (system clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drained {
    /// Just before `Dispatcher::start` (after the backend connected).
    pub started_us: i64,
    /// When the dispatcher's acknowledgement counter reached the target (polled every ms).
    pub done_us: i64,
}

/// Runs a dispatcher with the empty handler (no reporting) on `backend` until `jobs`
/// acknowledgements are recorded (at most `limit`), then shuts it down; an error unless
/// the run was clean.
pub async fn drain_here(
    backend: SharedBackend,
    spec: WorkerSpec,
    jobs: u64,
    limit: Duration,
) -> Result<Drained> {
    let started_us = unix_us();
    let dispatcher = start_dispatcher(backend, spec, |_| {})?;
    let deadline = tokio::time::Instant::now() + limit;
    let done_us = loop {
        if dispatcher.snapshot().acknowledgements >= jobs {
            break unix_us();
        }
        if tokio::time::Instant::now() > deadline {
            let _ = dispatcher.shutdown(Duration::from_secs(2)).await;
            return Err(setup("the drain did not finish in time"));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let report = dispatcher.shutdown(Duration::from_secs(10)).await;
    let m = report.metrics;
    if m.lost > 0 || m.worker_failures > 0 || m.backend_errors > 0 || report.cancelled > 0 {
        return Err(BenchError::Setup(format!(
            "drain dispatcher run was not clean: {m:?}, {} cancelled",
            report.cancelled
        )));
    }
    Ok(Drained {
        started_us,
        done_us,
    })
}

/// Spawns a worker process of this binary on `store` that drains `jobs` executions at
/// `concurrency` with the empty handler; returns when it spawned (µs, system clock) and
/// what it reported, once it exited cleanly.
pub async fn drain_child(
    store: &StoreSpec,
    concurrency: usize,
    tuned: bool,
    jobs: u64,
) -> Result<(i64, Drained)> {
    let exe = std::env::current_exe().map_err(|e| BenchError::Setup(format!("exe: {e}")))?;
    let config = serde_json::to_string(&ChildConfig {
        store: store.clone(),
        worker: WorkerSpec {
            concurrency,
            lease_ms: None,
            mode: Mode::Ack,
            tuned,
        },
        drain: Some(jobs),
    })
    .map_err(|e| BenchError::Setup(e.to_string()))?;
    let spawned_us = unix_us();
    let mut child = tokio::process::Command::new(exe)
        .arg("--child")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| BenchError::Setup(format!("spawn worker process: {e}")))?;
    let stdout = child.stdout.take().ok_or_else(|| setup("child stdout"))?;
    let read = async {
        let mut lines = BufReader::new(stdout).lines();
        let mut drained = None;
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(rest) = line.strip_prefix("drained ") {
                let mut it = rest.split(' ').map(|v| v.parse::<i64>().ok());
                if let (Some(Some(started_us)), Some(Some(done_us))) = (it.next(), it.next()) {
                    drained = Some(Drained {
                        started_us,
                        done_us,
                    });
                }
            }
        }
        drained
    };
    let drained = tokio::time::timeout(Duration::from_secs(600), read)
        .await
        .map_err(|_| setup("the drain worker process did not finish in 600s"))?;
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .map_err(|_| setup("the drain worker process did not exit"))?
        .map_err(|e| BenchError::Setup(format!("drain worker process: {e}")))?;
    match drained {
        Some(d) if status.success() => Ok((spawned_us, d)),
        _ => Err(BenchError::Setup(format!(
            "the drain worker process failed ({status})"
        ))),
    }
}

/// The child process: `lease-bench --child <json>`.
pub fn child_main(config: &str) -> std::process::ExitCode {
    let result = serde_json::from_str::<ChildConfig>(config)
        .map_err(|e| BenchError::Setup(format!("child config: {e}")))
        .and_then(|config| {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .map_err(|e| BenchError::Setup(format!("tokio runtime: {e}")))?
                .block_on(child(config))
        });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lease-bench child: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

/// The child's last line to its own writer (never printed).
const END: &str = "\u{0}end";

async fn child(config: ChildConfig) -> Result<()> {
    let backend = config.store.open().await?;
    if let Some(jobs) = config.drain {
        let d = drain_here(backend, config.worker, jobs, Duration::from_secs(590)).await?;
        let mut out = tokio::io::stdout();
        out.write_all(format!("drained {} {}\n", d.started_us, d.done_us).as_bytes())
            .await
            .map_err(|e| BenchError::Setup(format!("stdout: {e}")))?;
        out.flush()
            .await
            .map_err(|e| BenchError::Setup(format!("stdout: {e}")))?;
        return Ok(());
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let events = tx.clone();
    let dispatcher = start_dispatcher(backend, config.worker, move |e| {
        let _ = events.send(format!("start {} {} {}", e.id, e.at_us, e.token));
    })?;
    // One writer owns stdout, so the worker never waits on a pipe.
    let writer = tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        while let Some(line) = rx.recv().await {
            if line == END {
                break;
            }
            if out.write_all(format!("{line}\n").as_bytes()).await.is_err() {
                break;
            }
            let _ = out.flush().await;
        }
    });
    first_claim(&dispatcher).await?;
    let _ = tx.send("ready".into());
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        match lines.next_line().await {
            Ok(Some(cmd)) if cmd == "metrics" => {
                let _ = tx.send(Counters::of(&dispatcher.snapshot()).line());
            }
            Ok(Some(cmd)) if cmd != "stop" => {}
            _ => break,
        }
    }
    let report = dispatcher.shutdown(Duration::from_secs(2)).await;
    let _ = tx.send(Counters::of(&report.metrics).line());
    let _ = tx.send(END.into());
    let _ = writer.await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let c = Counters {
            claim_calls: 3,
            empty_claims: 2,
            wakeups: 7,
            acknowledgements: 1,
        };
        assert_eq!(Counters::parse(&c.line()), Some(c));
        assert_eq!(
            parse_start("start p12 1700000000123456 9"),
            Some(Event {
                id: "p12".into(),
                at_us: 1_700_000_000_123_456,
                token: 9
            })
        );
        assert_eq!(parse_start("start p12 x 9"), None);
    }
}
