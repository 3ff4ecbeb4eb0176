//! Prefetch on the memory backend: held leases start in the slots that free,
//! never more workers than the concurrency, a hold that ends releases the lease unrun, and
//! shutdown releases what is held.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use super::tests::{id, setup, wait_until};
use super::*;
use lease_core::{
    Admission, ExecutionClient, ExecutionStatus, Json, MemoryBackend, WorkflowRunOutcome,
};

/// A lease of 3 s renewed every 100 ms: held leases are released after 100 ms.
fn options(c: usize) -> DispatcherOptions {
    DispatcherOptions::new()
        .concurrency(c)
        .lease_duration(Duration::from_secs(3))
        .renew_every(Duration::from_millis(100))
        .poll_interval(Duration::from_millis(5))
}

fn done() -> Reply {
    Reply::Acknowledge(WorkflowRunOutcome::Completed(
        Json::parse("test", "1").expect("json"),
    ))
}

/// Every one of the first `n` executions completed.
async fn assert_all_completed(b: &MemoryBackend, n: usize) {
    for i in 0..n {
        let r = b
            .get(&id(&format!("e-{i:03}")))
            .await
            .expect("get")
            .expect("record");
        assert_eq!(r.status, ExecutionStatus::Completed, "{r:?}");
    }
}

async fn admit(b: &MemoryBackend, n: usize) {
    for i in 0..n {
        b.admit(&Admission::new(id(&format!("e-{i:03}"))))
            .await
            .expect("admit");
    }
}

/// Every execution runs exactly once, never more workers at once than the concurrency,
/// and some ran from leases held by prefetch whose acknowledgements went out in the
/// background. On tokio's paused clock: the workers' 1 ms runs and the 100 ms hold are
/// exact, so a loaded machine cannot make a held lease miss its hold.
#[tokio::test(start_paused = true)]
async fn held_leases_run_in_freed_slots_within_the_concurrency() {
    let (_clock, b) = setup();
    admit(&b, 60).await;
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(Mutex::new(Vec::new()));
    let (r, m, log) = (running.clone(), most.clone(), ran.clone());
    let worker = move |d: Delivery| {
        let (r, m, log) = (r.clone(), m.clone(), log.clone());
        async move {
            let now = r.fetch_add(1, Ordering::SeqCst) + 1;
            m.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(1)).await;
            log.lock()
                .expect("log")
                .push(d.lease().execution_id.to_string());
            r.fetch_sub(1, Ordering::SeqCst);
            Ok(done())
        }
    };
    let dispatcher = Dispatcher::start(Arc::new(b.clone()), worker, options(2)).expect("start");
    let metrics = dispatcher.metrics();
    wait_until("all 60 acknowledged", || {
        metrics.snapshot().acknowledgements == 60
    })
    .await;
    let report = dispatcher.shutdown(Duration::from_secs(5)).await;
    let s = report.metrics;
    assert!(s.prefetched > 0, "nothing was prefetched: {s:?}");
    assert_eq!(s.prefetch_released, 0, "{s:?}");
    assert_eq!(s.releases, 0, "{s:?}");
    assert!(most.load(Ordering::SeqCst) <= 2, "more workers than slots");
    assert!(s.max_in_flight <= 2, "{s:?}");
    let ran = ran.lock().expect("log").clone();
    let distinct: HashSet<_> = ran.iter().collect();
    assert_eq!(ran.len(), 60, "each execution ran once");
    assert_eq!(distinct.len(), 60);
    assert_eq!(s.claims, 60, "every lease claimed was run: {s:?}");
    assert_all_completed(&b, 60).await;
}

/// A worker that answers at once on its first run, then blocks every later run until the
/// gate opens; counts its runs.
struct Gated {
    runs: Arc<AtomicUsize>,
    gate: Arc<Notify>,
    open: Arc<std::sync::atomic::AtomicBool>,
}

impl Gated {
    fn new() -> Self {
        Gated {
            runs: Arc::default(),
            gate: Arc::default(),
            open: Arc::default(),
        }
    }

    fn worker(&self) -> impl Worker {
        let (runs, gate, open) = (self.runs.clone(), self.gate.clone(), self.open.clone());
        move |_d: Delivery| {
            let (runs, gate, open) = (runs.clone(), gate.clone(), open.clone());
            async move {
                if runs.fetch_add(1, Ordering::SeqCst) > 0 {
                    let opened = gate.notified();
                    if !open.load(Ordering::SeqCst) {
                        opened.await;
                    }
                }
                Ok(done())
            }
        }
    }

    fn open(&self) {
        self.open.store(true, Ordering::SeqCst);
        self.gate.notify_waiters();
    }
}

/// A held lease whose hold bound passes before a slot frees is released and never run
/// while held; the executions are delivered again later and all complete.
#[tokio::test]
async fn a_held_lease_whose_hold_ends_is_released_unrun() {
    let (clock, b) = setup();
    admit(&b, 8).await;
    let gated = Gated::new();
    let dispatcher =
        Dispatcher::start(Arc::new(b.clone()), gated.worker(), options(1)).expect("start");
    let metrics = dispatcher.metrics();
    wait_until("a held lease released", || {
        metrics.snapshot().prefetch_released > 0
    })
    .await;
    // The quick first run and the blocked second: no held lease ran.
    assert_eq!(gated.runs.load(Ordering::SeqCst), 2);
    let s = metrics.snapshot();
    assert!(s.prefetched >= s.prefetch_released, "{s:?}");
    wait_until("the released leases accepted", || {
        let s = metrics.snapshot();
        s.releases == s.prefetch_released
    })
    .await;
    gated.open();
    // Past the redelivery delay of the released ones.
    clock.advance(Duration::from_secs(10));
    dispatcher.wake();
    wait_until("all 8 acknowledged", || {
        metrics.snapshot().acknowledgements == 8
    })
    .await;
    dispatcher.shutdown(Duration::from_secs(5)).await;
    assert_all_completed(&b, 8).await;
}

/// Shutdown releases the held leases before it waits for the running delivery, which
/// finishes and is acknowledged.
#[tokio::test]
async fn shutdown_releases_the_held_leases() {
    let (_clock, b) = setup();
    admit(&b, 8).await;
    let gated = Gated::new();
    // A long hold (lease 30 s, renewals every 10 s: held for up to 1 s).
    let options = options(1)
        .lease_duration(Duration::from_secs(30))
        .renew_every(Duration::from_secs(10));
    let dispatcher =
        Dispatcher::start(Arc::new(b.clone()), gated.worker(), options).expect("start");
    let metrics = dispatcher.metrics();
    // All 8 claimed: the quick one, the blocked one, and the rest held.
    wait_until("leases held", || {
        let s = metrics.snapshot();
        s.prefetched > 0 && s.claims == 8
    })
    .await;
    // Held now: every lease claimed but the two that ran (a held one may have been the
    // second to run).
    let held = 8 - 2;
    let shutdown = tokio::spawn(dispatcher.shutdown(Duration::from_secs(30)));
    wait_until("the held leases released", || {
        metrics.snapshot().prefetch_released == held
    })
    .await;
    assert_eq!(gated.runs.load(Ordering::SeqCst), 2, "no held lease ran");
    gated.open();
    let report = shutdown.await.expect("shutdown");
    assert_eq!(report.finished, 1, "{report:?}");
    assert_eq!(report.metrics.acknowledgements, 2, "{report:?}");
    assert_eq!(report.metrics.releases, held, "{report:?}");
}

/// A backend clock that moves with tokio's (paused) clock, so redelivery delays and lease
/// expiry run on the same time the dispatcher's holds and workers do.
#[derive(Debug)]
struct TokioClock {
    base: lease_core::Timestamp,
    start: tokio::time::Instant,
}

impl TokioClock {
    fn starting_now() -> Self {
        TokioClock {
            base: lease_core::Clock::now(&lease_core::ManualClock::starting_now()),
            start: tokio::time::Instant::now(),
        }
    }
}

impl lease_core::Clock for TokioClock {
    fn now(&self) -> lease_core::Timestamp {
        self.base.saturating_add(self.start.elapsed())
    }
}

/// Names of the scenario's executions in claim order: 40 quick ones, one long, 100 quick.
fn quick_long_quick() -> Vec<String> {
    let before = (0..40).map(|i| format!("a-{i:03}"));
    let after = (0..100).map(|i| format!("c-{i:03}"));
    before
        .chain(std::iter::once("b-long".to_owned()))
        .chain(after)
        .collect()
}

/// A worker that takes 5 s on `b-long` and 1 ms on the others; counts runs per execution
/// and notes when the long one started.
fn timed_worker(
    runs: Arc<Mutex<std::collections::HashMap<String, usize>>>,
    long_started: Arc<Mutex<Option<tokio::time::Instant>>>,
) -> impl Worker {
    move |d: Delivery| {
        let (runs, long_started) = (runs.clone(), long_started.clone());
        async move {
            let name = d.lease().execution_id.to_string();
            *runs.lock().expect("runs").entry(name.clone()).or_default() += 1;
            let took = if name == "b-long" {
                *long_started.lock().expect("long") = Some(tokio::time::Instant::now());
                Duration::from_secs(5)
            } else {
                Duration::from_millis(1)
            };
            tokio::time::sleep(took).await;
            Ok(done())
        }
    }
}

/// A new user's first run: concurrency 1, default options and redelivery policy, 40 quick
/// executions, one of 5 s, then 100 quick ones, all admitted up front. While the long one
/// runs its slot is not expected to free, so the dispatcher stops claiming leases to hold:
/// what it held when the long one started is released once at its hold bound, and nothing
/// is claimed, held and released again. No execution that never ran is released twice,
/// and every one runs exactly once and completes.
#[tokio::test(start_paused = true)]
async fn a_slot_busy_with_a_long_delivery_claims_nothing_more_to_hold() {
    let b = MemoryBackend::with_clock(Arc::new(TokioClock::starting_now()));
    let names = quick_long_quick();
    for name in &names {
        b.admit(&Admission::new(id(name))).await.expect("admit");
    }
    let runs = Arc::new(Mutex::new(std::collections::HashMap::new()));
    let long_started = Arc::new(Mutex::new(None));
    let worker = timed_worker(runs.clone(), long_started.clone());
    let options = DispatcherOptions::new().concurrency(1);
    let dispatcher = Dispatcher::start(Arc::new(b.clone()), worker, options).expect("start");
    let metrics = dispatcher.metrics();
    wait_until("the long delivery started", || {
        long_started.lock().expect("long").is_some()
    })
    .await;
    let started = long_started.lock().expect("long").expect("started");
    // The slot has overrun the quick deliveries' run time by far.
    tokio::time::sleep_until(started + Duration::from_millis(100)).await;
    let claims_once_overrun = metrics.snapshot().claims;
    tokio::time::sleep_until(started + Duration::from_millis(3500)).await;
    let s = metrics.snapshot();
    assert_eq!(
        s.claims, claims_once_overrun,
        "leases claimed to hold while the only slot was busy: {s:?}"
    );
    let ran = runs.lock().expect("runs").clone();
    // A lease released unstarted is no attempt (`Release::NotStarted`): nothing that never
    // ran may look like a failing execution.
    let failing = b.list_failing(1, 1000).await.expect("list_failing");
    assert!(failing.is_empty(), "{failing:?}");
    assert!(
        ran.len() <= 41,
        "only the first 40 and the long one ran yet: {ran:?}"
    );
    wait_until("all 141 acknowledged", || {
        metrics.snapshot().acknowledgements == 141
    })
    .await;
    dispatcher.shutdown(Duration::from_secs(5)).await;
    let ran = runs.lock().expect("runs").clone();
    for name in &names {
        assert_eq!(
            ran.get(name),
            Some(&1),
            "{name} ran {:?} times",
            ran.get(name)
        );
        let r = b.get(&id(name)).await.expect("get").expect("record");
        assert_eq!(r.status, ExecutionStatus::Completed, "{r:?}");
    }
}

/// Drains `n` admitted executions with a worker that answers at once; the final metrics.
async fn drain(options: DispatcherOptions, n: usize) -> MetricsSnapshot {
    let (_clock, b) = setup();
    admit(&b, n).await;
    let worker = |_d: Delivery| async move { Ok(done()) };
    let dispatcher = Dispatcher::start(Arc::new(b.clone()), worker, options).expect("start");
    let metrics = dispatcher.metrics();
    wait_until("the backlog acknowledged", || {
        metrics.snapshot().acknowledgements == n as u64
    })
    .await;
    let report = dispatcher.shutdown(Duration::from_secs(5)).await;
    assert_all_completed(&b, n).await;
    report.metrics
}

/// Unless the application fixed them, the claim batch and the prefetch bound grow with a
/// backlog: the same drain takes far fewer claims than with both fixed at their starting
/// value, and still runs each execution once, never releasing a held lease unrun.
#[tokio::test(start_paused = true)]
async fn a_long_backlog_is_claimed_in_growing_batches() {
    let fixed = drain(options(2).claim_batch(32).prefetch(32), 999).await;
    let adaptive = drain(options(2), 999).await;
    assert_eq!((fixed.claims, adaptive.claims), (999, 999), "{adaptive:?}");
    assert_eq!(adaptive.prefetch_released, 0, "{adaptive:?}");
    assert!(
        adaptive.claim_calls * 2 < fixed.claim_calls,
        "adaptive {adaptive:?}, fixed {fixed:?}"
    );
}
