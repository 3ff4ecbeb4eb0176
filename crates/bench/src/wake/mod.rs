//! Wake-up benchmarks: how soon an idle dispatcher starts what becomes
//! claimable, and what being idle costs. Every row runs on a fresh store that is removed
//! afterwards; dispatchers run in child processes of this binary ([`mod@worker`]) wherever the
//! backend can be shared between processes (SQLite file, PostgreSQL, Redis), in this
//! process for the memory backend and the in-process rows.
//!
//! - `pickup cross-process` / `pickup in-process`: an idle dispatcher (concurrency 8,
//!   default options, empty handler); this process admits one execution every
//!   [`PICKUP_EVERY`]; latency = the worker's start minus the admit call's start, both on the
//!   system clock in µs. Raw bound: the backend's bare change signal ([`signal`]).
//! - `pickup in-tx cross-process` / `pickup in-tx in-process` (SQLite): the same idle
//!   dispatcher, admissions made inside the application's own transaction ([`tx_admit`])
//!   alternating with plain admits; latency = the worker's start minus the start of the
//!   admit call in the transaction. Beside it, in the raw column, the plain admits of the
//!   same series; target: p50 and p99 at most [`TX_PICKUP_RATIO`] times theirs.
//! - `timer not_before +500ms`: admissions scheduled 500 ms ahead; lateness = the worker's
//!   start minus the scheduled instant. `timer request_wake +500ms`: an execution whose
//!   first delivery acknowledged suspended (no wake), then woken 500 ms ahead with
//!   `request_wake` from this process. Raw bound: a tokio sleep to the same kind of
//!   instant, then one raw claim statement (what the dispatcher does at best).
//! - `redelivery after kill`: a dispatcher holding leases (2 s, renewed every 1 s) is
//!   killed with SIGKILL (aborted, for the memory backend); another idle dispatcher
//!   reclaims them. `redelivery after abandon`: leases claimed by a bare `claim_due` call
//!   and never renewed. Delay = the reclaiming start minus the instant the record became
//!   claimable again (lease expiry plus the redelivery delay, from `get` after the kill).
//!   Raw bound: the timer floor above.
//! - `idle cost`: an idle dispatcher with default options over a window, claim calls/s
//!   from its own counters, beside the server's own count ([`servers`]).
//! - `herd 4 processes`: four idle dispatchers; admissions one at a time; claim calls of
//!   all four per admitted execution.

mod series;
pub mod servers;
pub mod signal;
mod tx_admit;
pub mod worker;

pub use series::{PICKUP_EVERY, WARMUP};

use lease_core::ExecutionClientExt;
use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, ExecutionId, ExecutionStatus, RedeliveryPolicy, Timestamp,
};
use serde::Serialize;

use crate::args::{Kind, Options};
use crate::client::FAR_FUTURE;
use crate::error::{BenchError, Context, Result};
use crate::fixture::Fixture;
use worker::{Counters, Events, Mode, Worker, WorkerSpec, unix_us};

/// How far ahead timers are set.
pub const TIMER_AHEAD: Duration = Duration::from_millis(500);
/// Leases of the redelivery rows: (duration, renewal) in ms.
const RECLAIM_LEASE: (u64, u64) = (2_000, 1_000);
/// Leases killed or abandoned per redelivery row.
const RECLAIM_SAMPLES: usize = 5;
/// Dispatchers of the herd row.
pub const HERD: usize = 4;
/// The longest wait for one delivery to start.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Pickup of a transactional admission: its p50 and p99 at most this times the plain
/// admit's, measured in the same series ("unchanged" within the series' own jitter).
pub const TX_PICKUP_RATIO: f64 = 1.2;
/// The names of the transactional-admission pickup rows start so.
const TX_PICKUP: &str = "pickup in-tx";

/// A latency distribution in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Dist {
    /// Samples.
    pub n: usize,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

impl Dist {
    /// The distribution of `samples` (nearest-rank percentiles); `None` when empty.
    pub fn of(mut samples: Vec<f64>) -> Option<Dist> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_by(f64::total_cmp);
        let n = samples.len();
        let rank = |p: f64| samples[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
        Some(Dist {
            n,
            p50: rank(0.50),
            p95: rank(0.95),
            p99: rank(0.99),
            max: samples[n - 1],
            mean: samples.iter().sum::<f64>() / n as f64,
        })
    }
}

/// A latency target (ms, each part optional; informational).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LatencyTarget {
    /// p50 at most this.
    pub p50: Option<f64>,
    /// p99 at most this.
    pub p99: Option<f64>,
    /// max at most this.
    pub max: Option<f64>,
    /// p50 and p99 at most this times those of the series beside (the raw column).
    pub beside: Option<f64>,
}

impl LatencyTarget {
    /// The target of latency row `name` on `kind`.
    pub fn of(kind: Kind, name: &str) -> Option<LatencyTarget> {
        let t = |p50, p99| {
            Some(LatencyTarget {
                p50,
                p99,
                ..LatencyTarget::default()
            })
        };
        if name.starts_with(TX_PICKUP) {
            return (kind != Kind::Memory).then_some(LatencyTarget {
                beside: Some(TX_PICKUP_RATIO),
                ..LatencyTarget::default()
            });
        }
        if name.starts_with("pickup") {
            return match (kind, name.ends_with("in-process")) {
                (Kind::Redis, _) => t(Some(1.5), Some(4.0)),
                (Kind::Postgres, _) => t(Some(2.5), Some(5.0)),
                (Kind::Sqlite, true) => t(None, Some(2.0)),
                (Kind::Sqlite, false) => t(None, Some(20.0)),
                (Kind::Memory, _) => None,
            };
        }
        if name.starts_with("timer") {
            return t(Some(2.0), Some(5.0));
        }
        if name.starts_with("redelivery") {
            return Some(LatencyTarget {
                max: Some(10.0),
                ..LatencyTarget::default()
            });
        }
        None
    }

    /// Whether `d` meets the target; `None` when it is relative and `beside` is missing.
    fn met(&self, d: &Dist, beside: Option<&Dist>) -> Option<bool> {
        let relative = match self.beside {
            Some(x) => {
                let b = beside?;
                d.p50 <= x * b.p50 && d.p99 <= x * b.p99
            }
            None => true,
        };
        Some(
            relative
                && self.p50.is_none_or(|t| d.p50 <= t)
                && self.p99.is_none_or(|t| d.p99 <= t)
                && self.max.is_none_or(|t| d.max <= t),
        )
    }

    pub(crate) fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(v) = self.p50 {
            parts.push(format!("p50 <= {v}"));
        }
        if let Some(v) = self.p99 {
            parts.push(format!("p99 <= {v}"));
        }
        if let Some(v) = self.max {
            parts.push(format!("max <= {v}"));
        }
        if let Some(v) = self.beside {
            parts.push(format!("p50, p99 <= {v}x the plain admit's"));
        }
        parts.join(", ")
    }
}

/// One latency row.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyRow {
    /// Backend name.
    pub backend: &'static str,
    /// Measurement name.
    pub name: String,
    /// The library's latencies (ms).
    pub library: Option<Dist>,
    /// The raw bound's latencies (ms); for the `pickup in-tx` rows, the plain admits of the
    /// same series.
    pub raw: Option<Dist>,
    /// What the raw bound is (or the plain admits).
    pub raw_is: &'static str,
    /// Cross-process pickup rows: also a raw admit + raw claim in this process (the
    /// statements' own cost, which the bare signal leaves out), ms.
    pub raw_statements: Option<Dist>,
    /// The target.
    pub target: Option<LatencyTarget>,
    /// Whether the library met it.
    pub met: Option<bool>,
    /// 1-minute load average when the row started.
    pub load_1m: f64,
    /// Dispatcher counters of the run, summed over its dispatchers.
    pub counters: Option<Counters>,
    /// Why the row did not complete.
    pub error: Option<String>,
}

/// One cost row (idle cost, herds).
#[derive(Debug, Clone, Serialize)]
pub struct CostRow {
    /// Backend name.
    pub backend: &'static str,
    /// Measurement name.
    pub name: String,
    /// What is counted.
    pub unit: &'static str,
    /// The library's value (from its own counters).
    pub library: Option<f64>,
    /// The comparison value (server counters, or the minimum).
    pub server: Option<f64>,
    /// What `server` is.
    pub server_is: String,
    /// The target, as text.
    pub target: Option<String>,
    /// Whether the library met it.
    pub met: Option<bool>,
    /// 1-minute load average when the row started.
    pub load_1m: f64,
    /// Counters and details.
    pub detail: serde_json::Value,
    /// Why the row did not complete.
    pub error: Option<String>,
}

/// The wake-up rows of one run.
#[derive(Debug, Default, Serialize)]
pub struct WakeRows {
    /// Latency rows.
    pub latency: Vec<LatencyRow>,
    /// Cost rows.
    pub cost: Vec<CostRow>,
}

/// The names of the latency rows of `kind`.
pub fn latency_names(kind: Kind) -> Vec<&'static str> {
    let mut names = Vec::new();
    if kind != Kind::Memory {
        names.push("pickup cross-process");
    }
    if matches!(kind, Kind::Sqlite | Kind::Memory) {
        names.push("pickup in-process");
    }
    if kind != Kind::Memory {
        names.push("pickup in-tx cross-process");
    }
    if kind == Kind::Sqlite {
        names.push("pickup in-tx in-process");
    }
    names.extend([
        "timer not_before +500ms",
        "timer request_wake +500ms",
        "redelivery after kill",
        "redelivery after abandon",
    ]);
    names
}

/// The names of the cost rows.
pub const COST_NAMES: [&str; 2] = ["idle cost", "herd 4 processes"];

/// Samples of a latency series lasting about `duration` at one every `every`.
fn samples(duration: Duration, every: Duration) -> usize {
    ((duration.as_secs_f64() / every.as_secs_f64()) as usize).clamp(10, 2_000)
}

/// Runs every selected wake-up row of `kind`.
pub async fn run(kind: Kind, options: &Options, rows: &mut WakeRows) {
    for name in latency_names(kind) {
        if !options.selected(name) {
            continue;
        }
        let load = crate::load::one_minute();
        let result = latency_row(kind, name, options).await;
        let target = LatencyTarget::of(kind, name);
        let row = match result {
            Ok((library, raw, raw_is, raw_statements, counters)) => LatencyRow {
                backend: kind.name(),
                name: name.to_owned(),
                met: target
                    .zip(library)
                    .and_then(|(t, d)| t.met(&d, raw.as_ref())),
                library,
                raw,
                raw_is,
                raw_statements,
                target,
                load_1m: load,
                counters: Some(counters),
                error: None,
            },
            Err(e) => LatencyRow {
                backend: kind.name(),
                name: name.to_owned(),
                library: None,
                raw: None,
                raw_is: "",
                raw_statements: None,
                target,
                met: None,
                load_1m: load,
                counters: None,
                error: Some(e.to_string()),
            },
        };
        progress_latency(&row);
        rows.latency.push(row);
    }
    for name in COST_NAMES {
        if !options.selected(name) {
            continue;
        }
        let load = crate::load::one_minute();
        let result = match name {
            "idle cost" => idle(kind, options).await,
            _ => herd(kind, options).await,
        };
        let row = result.unwrap_or_else(|e| CostRow {
            backend: kind.name(),
            name: name.to_owned(),
            unit: "",
            library: None,
            server: None,
            server_is: String::new(),
            target: None,
            met: None,
            load_1m: load,
            detail: serde_json::Value::Null,
            error: Some(e.to_string()),
        });
        let row = CostRow {
            load_1m: load,
            ..row
        };
        progress_cost(&row);
        rows.cost.push(row);
    }
}

fn fmt_dist(d: Option<Dist>) -> String {
    d.map_or_else(
        || "-".into(),
        |d| format!("p50 {:.2} p99 {:.2} max {:.2}", d.p50, d.p99, d.max),
    )
}

fn progress_latency(row: &LatencyRow) {
    eprintln!(
        "lease-bench: {:<8} {:<26} library {} | raw {} load {:.2}{}",
        row.backend,
        row.name,
        fmt_dist(row.library),
        fmt_dist(row.raw),
        row.load_1m,
        row.error
            .as_ref()
            .map_or_else(String::new, |e| format!("  ERROR {e}")),
    );
}

fn progress_cost(row: &CostRow) {
    let v = |x: Option<f64>| x.map_or_else(|| "-".into(), |x| format!("{x:.3}"));
    eprintln!(
        "lease-bench: {:<8} {:<26} library {} {} | {} {} load {:.2}{}",
        row.backend,
        row.name,
        v(row.library),
        row.unit,
        row.server_is,
        v(row.server),
        row.load_1m,
        row.error
            .as_ref()
            .map_or_else(String::new, |e| format!("  ERROR {e}")),
    );
}

type LatencyResult = (
    Option<Dist>,
    Option<Dist>,
    &'static str,
    Option<Dist>,
    Counters,
);

/// One latency row on a fresh store.
async fn latency_row(kind: Kind, name: &str, options: &Options) -> Result<LatencyResult> {
    let mut fx = Fixture::new(kind, options).await?;
    let result = latency_on(&mut fx, name, options).await;
    fx.remove_after(result).await
}

async fn latency_on(fx: &mut Fixture, name: &str, options: &Options) -> Result<LatencyResult> {
    let duration = options.duration;
    match name {
        "pickup cross-process" | "pickup in-process" => {
            let n = samples(duration, PICKUP_EVERY);
            let cross = name == "pickup cross-process";
            let (raw, raw_is, statements) = if cross {
                let (signal, what) = pickup_bound(fx, n).await?;
                let (statements, _) = raw_pickup(fx, n).await?;
                (signal, what, Dist::of(statements))
            } else {
                let (raw, what) = raw_pickup(fx, n).await?;
                (raw, what, None)
            };
            let (lib, c) = pickup(fx, cross, n).await?;
            Ok((Dist::of(lib), Dist::of(raw), raw_is, statements, c))
        }
        "pickup in-tx cross-process" | "pickup in-tx in-process" => {
            let n = samples(duration, PICKUP_EVERY);
            let cross = name.ends_with("cross-process");
            let ((in_tx, plain), c) = pickup_in_tx(fx, cross, n).await?;
            Ok((
                Dist::of(in_tx),
                Dist::of(plain),
                "plain admit, alternating in the same series",
                None,
                c,
            ))
        }
        "timer not_before +500ms" | "timer request_wake +500ms" => {
            let every = Duration::from_millis(100);
            let n = samples(duration, every);
            let (raw, raw_is) = timer_floor(fx, n.min(50)).await?;
            let (lib, c) = if name.contains("not_before") {
                timer_scheduled(fx, n, every).await?
            } else {
                timer_wake(fx, n, every).await?
            };
            Ok((Dist::of(lib), Dist::of(raw), raw_is, None, c))
        }
        _ => {
            let (raw, raw_is) = timer_floor(fx, 20).await?;
            let (lib, c) = reclaim(fx, name.ends_with("kill")).await?;
            Ok((Dist::of(lib), Dist::of(raw), raw_is, None, c))
        }
    }
}

fn id(prefix: &str, i: usize) -> Result<ExecutionId> {
    ExecutionId::new(format!("{prefix}{i:06}")).context(|| "id".into())
}

fn unix_ms() -> i64 {
    unix_us() / 1000
}

/// An idle dispatcher on `fx`'s store: in a child process when `cross` and the store can
/// be shared, else in this process on a peer handle.
async fn worker(
    fx: &Fixture,
    spec: WorkerSpec,
    events: &Arc<Events>,
    cross: bool,
) -> Result<Worker> {
    match fx.spec() {
        Some(store) if cross => Worker::spawn(&store, spec, events.clone()).await,
        _ => Worker::local(fx.peer().await?, spec, events.clone()).await,
    }
}

/// Runs `body`, then stops `workers` whatever happened; returns the body's value and the
/// summed final counters.
async fn with_workers<T>(
    workers: Vec<Worker>,
    body: impl AsyncFnOnce(&mut Vec<Worker>) -> Result<T>,
) -> Result<(T, Counters)> {
    let mut workers = workers;
    let result = body(&mut workers).await;
    let mut total = Counters::default();
    let mut stop_error = None;
    for w in workers {
        match w.stop().await {
            Ok(c) => total = total.plus(c),
            Err(e) => stop_error = Some(e),
        }
    }
    let value = result?;
    if let Some(e) = stop_error {
        return Err(e);
    }
    Ok((value, total))
}

async fn wait_start(events: &Events, id: &ExecutionId, nth: usize) -> Result<worker::Event> {
    events
        .wait(id.as_str(), nth, START_TIMEOUT)
        .await
        .ok_or_else(|| {
            BenchError::Setup(format!(
                "delivery {} of {} did not start within {START_TIMEOUT:?}",
                nth + 1,
                id.as_str()
            ))
        })
}

fn ticker(every: Duration) -> tokio::time::Interval {
    let mut t = tokio::time::interval(every);
    t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    t
}

/// The raw bound of pickup on `fx`'s backend.
async fn pickup_bound(fx: &Fixture, n: usize) -> Result<(Vec<f64>, &'static str)> {
    Ok(match fx.spec() {
        Some(crate::fixture::StoreSpec::Postgres { url, .. }) => (
            signal::postgres(&url, n, PICKUP_EVERY).await?,
            "bare NOTIFY -> LISTEN",
        ),
        Some(crate::fixture::StoreSpec::Redis { url, .. }) => (
            signal::redis(&url, n, PICKUP_EVERY).await?,
            "bare PUBLISH -> SUBSCRIBE",
        ),
        Some(crate::fixture::StoreSpec::Sqlite { file, .. }) => (
            signal::sqlite(&file, n, PICKUP_EVERY).await?,
            "commit -> data_version poll (5 ms)",
        ),
        None => (Vec::new(), ""),
    })
}

/// The in-process raw bound of pickup: one raw admit statement, then one raw claim
/// statement that takes it (what a dispatcher told at once by an in-process signal does at
/// best); latency (ms) from the admit's start to the claim's return.
async fn raw_pickup(fx: &Fixture, n: usize) -> Result<(Vec<f64>, &'static str)> {
    let Some(raw) = fx.raw().await? else {
        return Ok((Vec::new(), ""));
    };
    let mut tick = ticker(PICKUP_EVERY);
    let mut out = Vec::with_capacity(n);
    for i in 0..n + WARMUP {
        tick.tick().await;
        let ids = [format!("q{i:06}")];
        let t0 = std::time::Instant::now();
        raw.admit_batch(&ids).await?;
        let got = raw.claim(1).await?;
        let elapsed = t0.elapsed();
        if got.len() != 1 || got[0].id != ids[0] {
            return Err(BenchError::Setup(
                "the raw claim missed the admission".into(),
            ));
        }
        if i >= WARMUP {
            out.push(elapsed.as_secs_f64() * 1000.0);
        }
    }
    Ok((out, "raw admit + raw claim"))
}

/// Admits `id` through the library, due now; the instant (µs) just before the call.
async fn plain_admit(fx: &Fixture, id: &ExecutionId) -> Result<i64> {
    let t0 = unix_us();
    fx.lib
        .admit(&Admission::new(id.clone()))
        .await
        .context(|| "admit".into())?;
    Ok(t0)
}

/// The latency (ms) of each of `sent` (id, admission instant in µs): its delivery's start
/// minus that instant.
async fn latencies(events: &Events, sent: &[(ExecutionId, i64)]) -> Result<Vec<f64>> {
    let mut out = Vec::with_capacity(sent.len());
    for (id, t0) in sent {
        let e = wait_start(events, id, 0).await?;
        out.push((e.at_us - t0) as f64 / 1000.0);
    }
    Ok(out)
}

/// Pickup latencies (ms) of `n` admissions, one every [`PICKUP_EVERY`].
async fn pickup(fx: &Fixture, cross: bool, n: usize) -> Result<(Vec<f64>, Counters)> {
    let events = Arc::new(Events::default());
    let w = worker(fx, WorkerSpec::idle(), &events, cross).await?;
    with_workers(vec![w], async |_| {
        let mut tick = ticker(PICKUP_EVERY);
        let mut sent = Vec::with_capacity(n + WARMUP);
        for i in 0..n + WARMUP {
            tick.tick().await;
            let id = id("p", i)?;
            let t0 = plain_admit(fx, &id).await?;
            sent.push((id, t0));
        }
        let all = latencies(&events, &sent).await?;
        Ok(all.into_iter().skip(WARMUP).collect())
    })
    .await
}

/// The `pickup cross-process` series of `kind` on a fresh store, as the pickup row measures
/// it (an idle dispatcher in a child process where the store can be shared, one admission
/// every [`PICKUP_EVERY`], the first [`WARMUP`] left out): `n` latencies in ms.
pub async fn pickup_series(kind: Kind, options: &Options, n: usize) -> Result<Vec<f64>> {
    let fx = Fixture::new(kind, options).await?;
    let result = pickup(&fx, true, n).await.map(|(latencies, _)| latencies);
    fx.remove_after(result).await
}

/// Pickup latencies (ms) of `n` admissions inside the application's transaction and `n`
/// plain admits, alternating one every [`PICKUP_EVERY`] to the same idle dispatcher (in a
/// child process when `cross`): (in the transaction, plain).
async fn pickup_in_tx(
    fx: &Fixture,
    cross: bool,
    n: usize,
) -> Result<((Vec<f64>, Vec<f64>), Counters)> {
    let admitter = tx_admit::TxAdmitter::new(fx).await?;
    let events = Arc::new(Events::default());
    let measured = async {
        let w = worker(fx, WorkerSpec::idle(), &events, cross).await?;
        with_workers(vec![w], async |_| {
            let mut tick = ticker(PICKUP_EVERY);
            let mut sent = Vec::with_capacity(2 * (n + WARMUP));
            for i in 0..2 * (n + WARMUP) {
                tick.tick().await;
                let in_tx = i.is_multiple_of(2);
                let id = id(if in_tx { "x" } else { "p" }, i)?;
                let t0 = if in_tx {
                    admitter.admit(&id).await?
                } else {
                    plain_admit(fx, &id).await?
                };
                sent.push((id, t0));
            }
            let all = latencies(&events, &sent).await?;
            let mut series = (Vec::with_capacity(n), Vec::with_capacity(n));
            for (i, l) in all.into_iter().enumerate().skip(2 * WARMUP) {
                if i.is_multiple_of(2) {
                    series.0.push(l);
                } else {
                    series.1.push(l);
                }
            }
            Ok(series)
        })
        .await
    }
    .await;
    let removed = admitter.remove().await;
    let out = measured?;
    removed?;
    Ok(out)
}

/// The timer floor: one execution admitted due now, a tokio sleep until an instant 30 ms
/// ahead on a whole millisecond, then one raw claim statement that takes it (so the
/// claim's commit counts, as the dispatcher's does); lateness (ms) of the claim's return.
/// The memory backend has no raw client: its floor claims through the library.
async fn timer_floor(fx: &Fixture, n: usize) -> Result<(Vec<f64>, &'static str)> {
    let raw = fx.raw().await?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let id = id("f", i)?;
        match &raw {
            Some(r) => r.admit_batch(&[id.as_str().to_owned()]).await?,
            None => {
                fx.lib
                    .admit(&Admission::new(id.clone()))
                    .await
                    .context(|| "admit".into())?;
            }
        }
        let at_us = (unix_ms() + 30) * 1000;
        let wait = u64::try_from(at_us - unix_us()).unwrap_or(0);
        tokio::time::sleep(Duration::from_micros(wait)).await;
        let got = match &raw {
            Some(r) => r.claim(1).await?.len(),
            None => fx
                .lib
                .claim_due(ClaimRequest {
                    now: FAR_FUTURE,
                    limit: 1,
                    duration: Duration::from_secs(30),
                })
                .await
                .context(|| "claim".into())?
                .len(),
        };
        out.push((unix_us() - at_us) as f64 / 1000.0);
        if got != 1 {
            return Err(BenchError::Setup("the timer floor claimed nothing".into()));
        }
    }
    Ok((
        out,
        if raw.is_some() {
            "sleep to the instant + raw claim of 1"
        } else {
            "sleep to the instant + claim_due of 1"
        },
    ))
}

/// Lateness (ms) of `n` admissions scheduled [`TIMER_AHEAD`] ahead, one every `every`.
async fn timer_scheduled(fx: &Fixture, n: usize, every: Duration) -> Result<(Vec<f64>, Counters)> {
    let events = Arc::new(Events::default());
    let w = worker(fx, WorkerSpec::idle(), &events, true).await?;
    with_workers(vec![w], async |_| {
        let mut tick = ticker(every);
        let mut sent = Vec::with_capacity(n);
        for i in 0..n {
            tick.tick().await;
            let id = id("t", i)?;
            let at = unix_ms() + TIMER_AHEAD.as_millis() as i64;
            fx.lib
                .admit(&Admission::new(id.clone()).not_before(Timestamp::from_millis(at)))
                .await
                .context(|| "admit".into())?;
            sent.push((id, at));
        }
        let mut out = Vec::with_capacity(n);
        for (id, at) in &sent {
            let e = wait_start(&events, id, 0).await?;
            out.push((e.at_us - at * 1000) as f64 / 1000.0);
        }
        Ok(out)
    })
    .await
}

/// Lateness (ms) of `n` wakes requested [`TIMER_AHEAD`] ahead for suspended executions.
async fn timer_wake(fx: &Fixture, n: usize, every: Duration) -> Result<(Vec<f64>, Counters)> {
    let events = Arc::new(Events::default());
    let spec = WorkerSpec {
        mode: Mode::SuspendFirst,
        ..WorkerSpec::idle()
    };
    let w = worker(fx, spec, &events, true).await?;
    with_workers(vec![w], async |_| {
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..n {
            let lib = fx.lib.clone();
            let events = events.clone();
            let delay = every * u32::try_from(i).unwrap_or(0);
            tasks.spawn(async move {
                tokio::time::sleep(delay).await;
                let id = id("w", i)?;
                lib.admit(&Admission::new(id.clone()))
                    .await
                    .context(|| "admit".into())?;
                wait_start(&events, &id, 0).await?;
                let deadline = tokio::time::Instant::now() + START_TIMEOUT;
                loop {
                    let r = lib.get(&id).await.context(|| "get".into())?;
                    if r.is_some_and(|r| r.status == ExecutionStatus::Suspended) {
                        break;
                    }
                    if tokio::time::Instant::now() > deadline {
                        return Err(BenchError::Setup("never suspended".into()));
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                let at = unix_ms() + TIMER_AHEAD.as_millis() as i64;
                lib.request_wake(&id, Timestamp::from_millis(at))
                    .await
                    .context(|| "request_wake".into())?;
                let e = wait_start(&events, &id, 1).await?;
                Ok::<f64, BenchError>((e.at_us - at * 1000) as f64 / 1000.0)
            });
        }
        let mut out = Vec::with_capacity(n);
        while let Some(r) = tasks.join_next().await {
            out.push(r.map_err(|e| BenchError::Setup(e.to_string()))??);
        }
        Ok(out)
    })
    .await
}

/// Redelivery delays (ms) after a kill (`kill`) or an abandoned bare claim.
async fn reclaim(fx: &Fixture, kill: bool) -> Result<(Vec<f64>, Counters)> {
    let events = Arc::new(Events::default());
    let policy = RedeliveryPolicy::default();
    let ids: Vec<ExecutionId> = (0..RECLAIM_SAMPLES)
        .map(|i| id("r", i))
        .collect::<Result<_>>()?;
    let (lease_ms, renew_ms) = RECLAIM_LEASE;
    let mut holder = None;
    if kill {
        let spec = WorkerSpec {
            concurrency: 8,
            lease_ms: Some((lease_ms, renew_ms)),
            mode: Mode::Hold,
            tuned: false,
        };
        let h = worker(fx, spec, &events, true).await?;
        for id in &ids {
            fx.lib
                .admit(&Admission::new(id.clone()))
                .await
                .context(|| "admit".into())?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        for id in &ids {
            if let Err(e) = wait_start(&events, id, 0).await {
                h.kill().await;
                return Err(e);
            }
        }
        holder = Some(h);
    } else {
        for id in &ids {
            fx.lib
                .admit(&Admission::new(id.clone()))
                .await
                .context(|| "admit".into())?;
        }
        for _ in &ids {
            let got = fx
                .lib
                .claim_due(ClaimRequest {
                    now: FAR_FUTURE,
                    limit: 1,
                    duration: Duration::from_millis(lease_ms),
                })
                .await
                .context(|| "claim".into())?;
            if got.len() != 1 {
                return Err(BenchError::Setup("the bare claim got nothing".into()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let nth = usize::from(kill);
    let reclaimer = worker(fx, WorkerSpec::idle(), &events, true).await;
    if let Some(h) = holder {
        h.kill().await;
    }
    let reclaimer = reclaimer?;
    with_workers(vec![reclaimer], async |_| {
        // A statement the killed process sent just before may still commit.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut due = Vec::with_capacity(ids.len());
        for id in &ids {
            let r = fx
                .lib
                .get(id)
                .await
                .context(|| "get".into())?
                .ok_or_else(|| BenchError::Setup("execution vanished".into()))?;
            let at = r
                .claimable_at(&policy)
                .ok_or_else(|| BenchError::Setup(format!("{} not claimable", id.as_str())))?;
            due.push((id, at.as_millis()));
        }
        let mut out = Vec::with_capacity(ids.len());
        for (id, at) in due {
            let e = wait_start(&events, id, nth).await?;
            out.push((e.at_us - at * 1000) as f64 / 1000.0);
        }
        Ok(out)
    })
    .await
}

/// How long the idle row watches.
fn idle_window(options: &Options) -> Duration {
    if options.quick {
        Duration::from_secs(5)
    } else {
        Duration::from_secs(20)
    }
}

/// The server-side count of an idle row.
enum ServerCount {
    None,
    Postgres(servers::PrivateDatabase),
    Redis(Box<servers::CountedRedis>),
}

impl ServerCount {
    /// The server's count by command (PostgreSQL: `xact`), or `None` without one.
    async fn read(&self) -> Result<Option<Vec<(String, u64)>>> {
        Ok(match self {
            ServerCount::None => None,
            ServerCount::Postgres(db) => Some(vec![("xact".to_owned(), db.transactions().await?)]),
            ServerCount::Redis(r) => Some(r.commands().await?),
        })
    }
}

/// Claim calls/s of an idle dispatcher (default options) over [`idle_window`].
async fn idle(kind: Kind, options: &Options) -> Result<CostRow> {
    let mut opts = options.clone();
    let (server, server_is) = match kind {
        Kind::Postgres => {
            let db = servers::PrivateDatabase::create(&options.postgres_url).await?;
            opts.postgres_url = db.url.clone();
            (
                ServerCount::Postgres(db),
                "server xact/s (pg_stat_database, private db)".to_owned(),
            )
        }
        Kind::Redis => {
            let r = servers::CountedRedis::start(&options.redis_url).await?;
            opts.redis_url = r.url.clone();
            let what = if r.private_server() {
                "server scripts/s (EVALSHA in INFO commandstats, private server)"
            } else {
                "server scripts/s (EVALSHA in INFO commandstats, SHARED server: other clients too)"
            };
            (ServerCount::Redis(Box::new(r)), what.to_owned())
        }
        _ => (ServerCount::None, "-".to_owned()),
    };
    let result = async {
        let fx = Fixture::new(kind, &opts).await?;
        let measured = async {
            let events = Arc::new(Events::default());
            let w = worker(&fx, WorkerSpec::idle(), &events, true).await?;
            let window = idle_window(options);
            with_workers(vec![w], async |ws| {
                // Let the start-up statements reach the server's counters first.
                tokio::time::sleep(Duration::from_millis(1500)).await;
                let c0 = ws[0].counters().await?;
                let s0 = server.read().await?;
                let started = tokio::time::Instant::now();
                tokio::time::sleep(window).await;
                let c1 = ws[0].counters().await?;
                let s1 = server.read().await?;
                let secs = started.elapsed().as_secs_f64();
                Ok((c1.since(c0), s0, s1, secs))
            })
            .await
        }
        .await;
        fx.remove_after(measured).await
    }
    .await;
    let dropped = match server {
        ServerCount::Postgres(db) => db.drop().await,
        ServerCount::Redis(r) => r.stop().await,
        ServerCount::None => Ok(()),
    };
    let ((delta, s0, s1, secs), _) = result?;
    dropped?;
    let backstop = lease_runtime::DispatcherOptions::new().get_backstop(true);
    let allowed = (secs / backstop.as_secs_f64()).ceil();
    let library = delta.claim_calls as f64 / secs;
    let server_delta = s0
        .as_ref()
        .zip(s1.as_ref())
        .map(|(a, b)| servers::command_delta(a, b));
    // Redis counts the commands a script calls too: only the scripts (and any command sent
    // outside one) are statements the client sent; the rest stay in the detail.
    let statement = |name: &str| {
        kind != Kind::Redis || matches!(name, "evalsha" | "eval" | "eval_ro" | "evalsha_ro")
    };
    let server_rate = server_delta.as_ref().map(|d| {
        d.iter()
            .filter(|(name, _)| statement(name))
            .map(|(_, n)| n)
            .sum::<u64>() as f64
            / secs
    });
    Ok(CostRow {
        backend: kind.name(),
        name: "idle cost".into(),
        unit: "claim calls/s",
        library: Some(library),
        server: server_rate,
        server_is,
        target: Some(format!(
            "<= 1 per backstop ({backstop:?} with wake-ups): <= {allowed} in {secs:.1}s"
        )),
        met: Some(delta.claim_calls as f64 <= allowed),
        load_1m: 0.0,
        detail: serde_json::json!({
            "window_secs": secs,
            "counters": delta,
            "server_delta": server_delta,
        }),
        error: None,
    })
}

/// Claim calls per admitted execution with [`HERD`] idle dispatchers.
async fn herd(kind: Kind, options: &Options) -> Result<CostRow> {
    let fx = Fixture::new(kind, options).await?;
    let result = async {
        let events = Arc::new(Events::default());
        let mut workers = Vec::with_capacity(HERD);
        for _ in 0..HERD {
            match worker(&fx, WorkerSpec::idle(), &events, true).await {
                Ok(w) => workers.push(w),
                Err(e) => {
                    for w in workers {
                        w.kill().await;
                    }
                    return Err(e);
                }
            }
        }
        let n = samples(options.duration, Duration::from_millis(50)).min(200);
        with_workers(workers, async |ws| {
            let mut before = Counters::default();
            for w in ws.iter_mut() {
                before = before.plus(w.counters().await?);
            }
            for i in 0..n {
                let id = id("h", i)?;
                fx.lib
                    .admit(&Admission::new(id.clone()))
                    .await
                    .context(|| "admit".into())?;
                wait_start(&events, &id, 0).await?;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            // The losers' claims come back within a few ms of the winner's.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let mut after = Counters::default();
            for w in ws.iter_mut() {
                after = after.plus(w.counters().await?);
            }
            Ok((after.since(before), n))
        })
        .await
    }
    .await;
    let ((delta, n), _) = fx.remove_after(result).await?;
    Ok(CostRow {
        backend: kind.name(),
        name: "herd 4 processes".into(),
        unit: "claim calls/admission",
        library: Some(delta.claim_calls as f64 / n as f64),
        server: Some(2.0),
        server_is: "minimum: 1 claim + the delivery's acknowledge_and_claim".into(),
        target: None,
        met: None,
        load_1m: 0.0,
        detail: serde_json::json!({ "admitted": n, "counters": delta }),
        error: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let d = Dist::of((1..=100).map(f64::from).collect()).expect("samples");
        assert_eq!(
            (d.n, d.p50, d.p95, d.p99, d.max),
            (100, 50.0, 95.0, 99.0, 100.0)
        );
        let one = Dist::of(vec![3.0]).expect("one");
        assert_eq!((one.p50, one.p99, one.max), (3.0, 3.0, 3.0));
        assert!(Dist::of(Vec::new()).is_none());
    }

    #[test]
    fn each_row_gets_its_target() {
        let t = LatencyTarget::of(Kind::Redis, "pickup cross-process").expect("redis");
        assert_eq!((t.p50, t.p99), (Some(1.5), Some(4.0)));
        let s = LatencyTarget::of(Kind::Sqlite, "pickup in-process").expect("sqlite");
        assert_eq!((s.p50, s.p99), (None, Some(2.0)));
        assert!(LatencyTarget::of(Kind::Memory, "pickup in-process").is_none());
        let r = LatencyTarget::of(Kind::Postgres, "redelivery after kill").expect("reclaim");
        assert_eq!(r.max, Some(10.0));
        let d = Dist::of(vec![1.0, 2.0, 3.0]).expect("d");
        assert_eq!(
            LatencyTarget::of(Kind::Memory, "timer not_before +500ms")
                .expect("timer")
                .met(&d, None),
            Some(true)
        );
    }

    #[test]
    fn the_in_tx_pickup_target_is_relative_to_the_plain_admits() {
        let t = LatencyTarget::of(Kind::Postgres, "pickup in-tx cross-process").expect("pg");
        assert_eq!(
            (t.p50, t.p99, t.beside),
            (None, None, Some(TX_PICKUP_RATIO))
        );
        assert!(
            t.describe().contains("1.2x the plain admit's"),
            "{}",
            t.describe()
        );
        assert!(LatencyTarget::of(Kind::Memory, "pickup in-tx cross-process").is_none());
        let plain = Dist::of(vec![1.0, 2.0, 10.0]).expect("plain");
        let same = Dist::of(vec![1.1, 2.2, 11.0]).expect("same");
        let slower = Dist::of(vec![1.1, 3.0, 11.0]).expect("slower");
        assert_eq!(t.met(&same, Some(&plain)), Some(true));
        assert_eq!(t.met(&slower, Some(&plain)), Some(false));
        assert_eq!(t.met(&same, None), None);
        assert!(latency_names(Kind::Redis).contains(&"pickup in-tx cross-process"));
        assert!(!latency_names(Kind::Redis).contains(&"pickup in-tx in-process"));
        assert!(
            !latency_names(Kind::Memory)
                .iter()
                .any(|n| n.starts_with(TX_PICKUP))
        );
    }

    /// The in-tx pickup row end to end on SQLite, its dispatcher in this process (the test
    /// binary cannot be the worker): selected by its name alone, both series complete, the
    /// plain admits beside it in the table with the relative target.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_tx_pickup_row_runs_on_sqlite() {
        let options = crate::args::parse(&[
            "--only".into(),
            "pickup in-tx in-process".into(),
            "--duration".into(),
            "200ms".into(),
        ])
        .expect("options");
        let mut rows = WakeRows::default();
        run(Kind::Sqlite, &options, &mut rows).await;
        let [row] = rows.latency.as_slice() else {
            panic!("one row expected: {:?}", rows.latency);
        };
        assert_eq!(row.error, None);
        assert_eq!(row.name, "pickup in-tx in-process");
        assert_eq!(
            (row.library.map(|d| d.n), row.raw.map(|d| d.n)),
            (Some(10), Some(10))
        );
        assert!(row.met.is_some());
        let counters = row.counters.expect("counters");
        assert!(counters.acknowledgements >= 30, "{counters:?}");
        let table = crate::report::latency_markdown(&rows.latency);
        assert!(
            table.contains("| sqlite | pickup in-tx in-process | 10 |")
                && table.contains("plain admit, alternating in the same series")
                && table.contains("p50, p99 <= 1.2x the plain admit's"),
            "{table}"
        );
        assert!(rows.cost.is_empty());
    }

    /// The measurements themselves, on the memory backend in this process: each must see
    /// every delivery it waits for, on time (the memory backend sends wake-ups, so a
    /// broken wake-up path or horizon shows as a timeout or a poll-sized latency here).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn smoke_on_the_memory_backend() {
        let options = crate::args::parse(&[]).expect("options");
        let fx = Fixture::new(Kind::Memory, &options).await.expect("fixture");
        let (lat, c) = pickup(&fx, false, 20).await.expect("pickup");
        assert_eq!(lat.len(), 20);
        let d = Dist::of(lat).expect("dist");
        assert!(d.p50 < 100.0, "pickup p50 {} ms: wake-ups not used", d.p50);
        assert!(c.acknowledgements >= 25, "{c:?}");
        let (late, _) = timer_scheduled(&fx, 5, Duration::from_millis(20))
            .await
            .expect("timer");
        assert!(late.iter().all(|&l| (0.0..200.0).contains(&l)), "{late:?}");
        let (late, _) = timer_wake(&fx, 3, Duration::from_millis(20))
            .await
            .expect("wake");
        assert!(late.iter().all(|&l| (0.0..200.0).contains(&l)), "{late:?}");
        let (floor, _) = timer_floor(&fx, 3).await.expect("floor");
        assert_eq!(floor.len(), 3);
    }
}
