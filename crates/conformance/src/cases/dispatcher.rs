//! RFC 002 "Dispatcher tests" table, and the runtime rows that need a running dispatcher
//! (renewal, a worker crash, a dying runtime process, a paused holder), driven through
//! [`lease_runtime::Dispatcher`] on the backend under test.
//!
//! Leases and redelivery delays follow the harness's manual clock, which only the case
//! moves; renewals and polls run on real tokio time. Dispatchers here renew every 15 s of
//! real time (never, within a case) unless a case is about renewal, so a lease ends only
//! when the case says so. Nothing sleeps to wait for a condition: cases poll with a
//! deadline or observe through the worker.

use lease_core::ExecutionClientExt;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lease_core::{
    Clock, ExecutionClient, ExecutionLease, ExecutionOutcome, ExecutionRecord, ExecutionStatus,
    Fenced, FencingToken, HeapClient, HeapRecord, Json, LeaseBackend, ManualClock, SharedBackend,
    StepKey, StepWrite, Timestamp, WorkflowRunOutcome,
};
use lease_runtime::{
    Delivery, DeliveryError, Dispatcher, DispatcherMetrics, DispatcherOptions, Reply,
};
use tokio::sync::{Barrier, Notify, mpsc};

use crate::context::{Ctx, LEASE};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __dispatcher_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, dispatcher, [
            dispatcher_n_due_with_concurrency_n_run_at_once,
            dispatcher_never_runs_more_than_concurrency,
            dispatcher_several_share_a_backend_one_lease_each,
            dispatcher_retry_reply_releases_unacknowledged,
            dispatcher_repeated_retries_wait_growing_delays,
            dispatcher_expiry_after_retry_counts_both,
            dispatcher_ack_after_retries_resets_and_wakes_undelayed,
            dispatcher_renewal_keeps_lease_past_original_expiry,
            dispatcher_stops_a_cancelled_worker_at_its_next_renewal,
            dispatcher_worker_crash_redelivered_after_expiry,
            dispatcher_process_death_stops_fenced_writes,
            dispatcher_paused_holder_every_fenced_write_lost,
            dispatcher_prefetched_lease_past_its_hold_is_released_unrun,
            dispatcher_durable_sleep_suspends_until_its_instant,
        ] }
    };
}

/// How long a case waits for something the dispatcher should do promptly.
const DEADLINE: Duration = Duration::from_secs(20);

/// Options for the cases: [`LEASE`] leases renewed only every 15 s of real time, fast polls.
fn options(concurrency: usize) -> DispatcherOptions {
    DispatcherOptions::new()
        .concurrency(concurrency)
        .lease_duration(LEASE)
        .renew_every(LEASE / 2)
        .poll_interval(Duration::from_millis(5))
}

fn shared<B: LeaseBackend>(backend: B) -> SharedBackend {
    Arc::new(backend)
}

fn completed(value: serde_json::Value) -> Reply {
    Reply::Acknowledge(WorkflowRunOutcome::Completed(
        Json::from_value("outcome", &value).expect("valid outcome"),
    ))
}

fn step_write(key: &str, value: &str) -> StepWrite {
    StepWrite {
        step_key: StepKey::new(key).expect("valid key"),
        step_attempt: lease_runtime::STEP_ATTEMPT,
        done: true,
        response: Json::parse("test", value).expect("valid JSON"),
    }
}

/// When a lease was claimed: every case claims with [`LEASE`] and renews nothing it checks.
fn claimed_at(lease: &ExecutionLease) -> Timestamp {
    Timestamp::from_millis(lease.expires_at.as_millis() - LEASE.as_millis() as i64)
}

/// Polls `f` every few milliseconds until it holds; panics after [`DEADLINE`].
async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !f() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {DEADLINE:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Receives the next value a worker reports; panics after [`DEADLINE`].
async fn next<T>(rx: &mut mpsc::UnboundedReceiver<T>, what: &str) -> T {
    match tokio::time::timeout(DEADLINE, rx.recv()).await {
        Ok(Some(v)) => v,
        Ok(None) => panic!("workers gone before {what}"),
        Err(_) => panic!("timed out after {DEADLINE:?} waiting for {what}"),
    }
}

/// Sets a flag when dropped: proves a worker's future was dropped (the worker stopped).
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Row "N executions are due and concurrency is N": all are delivered without waiting for
/// each other. Every worker waits at a barrier of N before replying, so the case completes
/// only if all N deliveries run at the same time.
pub async fn dispatcher_n_due_with_concurrency_n_run_at_once<H: Harness>(ctx: Arc<Ctx<H>>) {
    const N: usize = 6;
    for i in 0..N {
        ctx.admit(&format!("order-{i}")).await;
    }
    let barrier = Arc::new(Barrier::new(N));
    let b = barrier.clone();
    let dispatcher = Dispatcher::start(
        shared(ctx.backend()),
        move |_d: Delivery| {
            let b = b.clone();
            async move {
                b.wait().await;
                Ok(completed(serde_json::Value::Null))
            }
        },
        options(N),
    )
    .expect("start");
    let m = dispatcher.metrics();
    wait_for("all N acknowledged", || {
        m.snapshot().acknowledgements == N as u64
    })
    .await;
    let report = dispatcher.shutdown(DEADLINE).await;
    assert_eq!(report.metrics.claims, N as u64, "one claim each");
    assert_eq!(report.metrics.max_in_flight, N);
    for i in 0..N {
        let r = ctx.get(&format!("order-{i}")).await;
        assert_eq!(r.status, ExecutionStatus::Completed);
    }
}

/// Row "More executions are due than concurrency": no more than concurrency deliveries run
/// at once. The first `C` deliveries meet at a barrier (so `C` do run together); the worker
/// counts how many run and records the peak.
pub async fn dispatcher_never_runs_more_than_concurrency<H: Harness>(ctx: Arc<Ctx<H>>) {
    const N: usize = 12;
    const C: usize = 3;
    for i in 0..N {
        ctx.admit(&format!("order-{i:02}")).await;
    }
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(Barrier::new(C));
    let (r, p, s, b) = (
        running.clone(),
        peak.clone(),
        started.clone(),
        barrier.clone(),
    );
    let dispatcher = Dispatcher::start(
        shared(ctx.backend()),
        move |d: Delivery| {
            let (r, p, s, b) = (r.clone(), p.clone(), s.clone(), b.clone());
            async move {
                let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                p.fetch_max(now, Ordering::SeqCst);
                if s.fetch_add(1, Ordering::SeqCst) < C {
                    b.wait().await;
                }
                let token = d.token().get();
                let _: u64 = d
                    .step("work", || async move { Ok::<_, DeliveryError>(token) })
                    .await?;
                tokio::task::yield_now().await;
                r.fetch_sub(1, Ordering::SeqCst);
                Ok(completed(serde_json::Value::Null))
            }
        },
        options(C).claim_batch(32),
    )
    .expect("start");
    let m = dispatcher.metrics();
    wait_for("all acknowledged", || {
        m.snapshot().acknowledgements == N as u64
    })
    .await;
    let report = dispatcher.shutdown(DEADLINE).await;
    assert_eq!(peak.load(Ordering::SeqCst), C, "workers seen at once");
    assert!(report.metrics.max_in_flight <= C, "{:?}", report.metrics);
    assert_eq!(report.metrics.claims, N as u64);
    for i in 0..N {
        assert_eq!(
            ctx.get(&format!("order-{i:02}")).await.status,
            ExecutionStatus::Completed
        );
    }
}

/// Row "Several dispatchers share one backend": no execution ever has two live leases.
/// Three dispatchers on separate peers deliver 24 executions; the clock never moves, so no
/// lease can end but by acknowledgement. Each execution must be claimed exactly once in
/// total, no two workers ever hold one execution at the same time, and every step record
/// carries the token of the only delivery.
pub async fn dispatcher_several_share_a_backend_one_lease_each<H: Harness>(ctx: Arc<Ctx<H>>) {
    const N: usize = 24;
    const DISPATCHERS: usize = 3;
    for i in 0..N {
        ctx.admit(&format!("order-{i:02}")).await;
    }
    let live: Arc<Mutex<HashMap<String, FencingToken>>> = Arc::default();
    let overlaps = Arc::new(AtomicUsize::new(0));
    let mut dispatchers = Vec::new();
    for _ in 0..DISPATCHERS {
        let (live, overlaps) = (live.clone(), overlaps.clone());
        let worker = move |d: Delivery| {
            let (live, overlaps) = (live.clone(), overlaps.clone());
            async move {
                let id = d.execution_id().to_string();
                let earlier = live
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id.clone(), d.token());
                if earlier.is_some() {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                let token = d.token().get();
                let recorded: u64 = d
                    .step("work", || async move { Ok::<_, DeliveryError>(token) })
                    .await?;
                tokio::task::yield_now().await;
                live.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                Ok(completed(serde_json::json!(recorded)))
            }
        };
        let backend = shared(ctx.peer().await);
        dispatchers.push(Dispatcher::start(backend, worker, options(3)).expect("start"));
    }
    let metrics: Vec<_> = dispatchers.iter().map(Dispatcher::metrics).collect();
    wait_for("all acknowledged", || {
        metrics
            .iter()
            .map(|m| m.snapshot().acknowledgements)
            .sum::<u64>()
            == N as u64
    })
    .await;
    let mut claims = 0;
    for d in dispatchers {
        let report = d.shutdown(DEADLINE).await;
        assert_eq!(report.metrics.lost, 0);
        claims += report.metrics.claims;
    }
    assert_eq!(
        claims, N as u64,
        "each execution claimed exactly once across dispatchers"
    );
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "two workers held one execution at once"
    );
    for i in 0..N {
        let id = format!("order-{i:02}");
        let r = ctx.get(&id).await;
        assert_eq!(r.status, ExecutionStatus::Completed);
        let steps = ctx.backend().list_steps(&ctx.id(&id)).await.expect("steps");
        assert_eq!(steps.len(), 1);
        assert_eq!(
            steps[0].token, r.token,
            "the step was written by the only delivery"
        );
        assert_eq!(
            r.outcome,
            Some(ExecutionOutcome::Completed(
                Json::from_value("t", &serde_json::json!(r.token.get())).expect("json")
            ))
        );
    }
}

/// Row "A delivery replies retry": its lease is released, and unacknowledgedDeliveries
/// increases by one.
pub async fn dispatcher_retry_reply_releases_unacknowledged<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let dispatcher = Dispatcher::start(
        shared(ctx.backend()),
        |_d: Delivery| async { Ok(Reply::Retry) },
        options(1),
    )
    .expect("start");
    let m = dispatcher.metrics();
    wait_for("the release", || m.snapshot().releases == 1).await;
    let r = ctx.get("order-42").await;
    assert_eq!(r.unacknowledged_deliveries, 1);
    assert_eq!(r.status, ExecutionStatus::Admitted, "released, not running");
    assert_eq!(r.last_delivery_ended_at, Some(ctx.clock.now()));
    let report = dispatcher.shutdown(DEADLINE).await;
    assert_eq!(
        report.metrics.claims, 1,
        "not redelivered before the redelivery delay"
    );
    assert_eq!(report.metrics.acknowledgements, 0);
}

/// Row "A delivery replies retry several times in a row": each redelivery waits a non-zero
/// delay, no shorter than the one before. After each release the execution is probed one
/// millisecond before the gate opens (nothing claimable), then the clock moves to the gate
/// and the dispatcher redelivers; the gap is measured from the release to the next claim.
pub async fn dispatcher_repeated_retries_wait_growing_delays<H: Harness>(ctx: Arc<Ctx<H>>) {
    const RETRIES: u64 = 5;
    ctx.admit("order-42").await;
    let (tx, mut claims) = mpsc::unbounded_channel();
    let dispatcher = Dispatcher::start(
        shared(ctx.backend()),
        move |d: Delivery| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(claimed_at(d.claimed_lease()));
                Ok(Reply::Retry)
            }
        },
        options(1),
    )
    .expect("start");
    let m = dispatcher.metrics();
    let probe = ctx.peer().await;
    let mut previous_gap = Duration::ZERO;
    next(&mut claims, "the first delivery").await;
    for k in 1..=RETRIES {
        wait_for("the release", || m.snapshot().releases == k).await;
        let r = ctx.get("order-42").await;
        assert_eq!(u64::from(r.unacknowledged_deliveries), k);
        let ended = r.last_delivery_ended_at.expect("release time");
        let gate = r
            .redelivery_not_before(&ctx.policy)
            .expect("a gate after an unacknowledged delivery");
        ctx.clock.set(Timestamp::from_millis(gate.as_millis() - 1));
        assert!(
            ctx.claim(&probe, 10).await.is_empty(),
            "retry {k}: claimable before its delay"
        );
        ctx.clock.set(gate);
        dispatcher.wake();
        let again = next(&mut claims, "the redelivery").await;
        let gap = again.saturating_since(ended);
        assert!(gap > Duration::ZERO, "retry {k}: zero delay");
        assert!(
            gap >= previous_gap,
            "retry {k}: {gap:?} shorter than {previous_gap:?}"
        );
        previous_gap = gap;
    }
    dispatcher.shutdown(DEADLINE).await;
}

/// Row "A lease expires after a retry reply": both count; unacknowledgedDeliveries is two.
pub async fn dispatcher_expiry_after_retry_counts_both<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let (tx, mut leases) = mpsc::unbounded_channel();
    let dispatcher = Dispatcher::start(
        shared(ctx.backend()),
        move |d: Delivery| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(d.claimed_lease().clone());
                if d.record().unacknowledged_deliveries == 0 {
                    return Ok(Reply::Retry);
                }
                // The second delivery hangs and is never renewed: its lease expires.
                futures::future::pending::<()>().await;
                Ok(Reply::Retry)
            }
        },
        options(1),
    )
    .expect("start");
    let m = dispatcher.metrics();
    next(&mut leases, "the first delivery").await;
    wait_for("the release", || m.snapshot().releases == 1).await;
    let gate = ctx
        .get("order-42")
        .await
        .redelivery_not_before(&ctx.policy)
        .expect("gate");
    ctx.clock.set(gate);
    dispatcher.wake();
    let second = next(&mut leases, "the second delivery").await;
    ctx.clock.set(second.expires_at);
    let r = ctx.get("order-42").await;
    assert_eq!(r.unacknowledged_deliveries, 2, "a release and an expiry");
    assert_eq!(r.status, ExecutionStatus::Admitted);
    assert_eq!(r.last_delivery_ended_at, Some(second.expires_at));
    dispatcher.abort();
}

/// Row "A delivery is acknowledged after several retry replies": unacknowledgedDeliveries
/// returns to zero, and the next wake is not delayed. Three retries, then a suspended
/// acknowledgement; a wake requested at the same instant is delivered without moving the
/// clock.
pub async fn dispatcher_ack_after_retries_resets_and_wakes_undelayed<H: Harness>(ctx: Arc<Ctx<H>>) {
    const RETRIES: u32 = 3;
    ctx.admit("order-42").await;
    let (tx, mut seen) = mpsc::unbounded_channel();
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let dispatcher = Dispatcher::start(
        shared(ctx.backend()),
        move |d: Delivery| {
            let (tx, c) = (tx.clone(), c.clone());
            async move {
                let n = c.fetch_add(1, Ordering::SeqCst) as u32 + 1;
                let _ = tx.send((
                    claimed_at(d.claimed_lease()),
                    d.record().unacknowledged_deliveries,
                ));
                Ok(match n {
                    n if n <= RETRIES => Reply::Retry,
                    n if n == RETRIES + 1 => Reply::Acknowledge(WorkflowRunOutcome::Suspended),
                    _ => completed(serde_json::json!("done")),
                })
            }
        },
        options(1),
    )
    .expect("start");
    let m = dispatcher.metrics();
    for k in 1..=RETRIES {
        let (_, unacked) = next(&mut seen, "a delivery").await;
        assert_eq!(unacked, k - 1);
        wait_for("the release", || m.snapshot().releases == u64::from(k)).await;
        let gate = ctx
            .get("order-42")
            .await
            .redelivery_not_before(&ctx.policy)
            .expect("gate");
        ctx.clock.set(gate);
        dispatcher.wake();
    }
    let (_, unacked) = next(&mut seen, "the acknowledged delivery").await;
    assert_eq!(unacked, RETRIES);
    wait_for("the acknowledgement", || m.snapshot().acknowledgements == 1).await;
    let r = ctx.get("order-42").await;
    assert_eq!(r.unacknowledged_deliveries, 0);
    assert_eq!(r.status, ExecutionStatus::Suspended);
    assert_eq!(r.due_at, None);

    let now = ctx.clock.now();
    ctx.backend()
        .request_wake(&ctx.id("order-42"), now)
        .await
        .expect("wake");
    dispatcher.wake();
    let (at, unacked) = next(&mut seen, "the woken delivery").await;
    assert_eq!(
        at, now,
        "the wake is delivered without any redelivery delay"
    );
    assert_eq!(unacked, 0);
    wait_for("the completion", || m.snapshot().acknowledgements == 2).await;
    assert_eq!(ctx.get("order-42").await.status, ExecutionStatus::Completed);
    dispatcher.shutdown(DEADLINE).await;
}

/// Cancel while running: an execution cancelled while a dispatcher runs it is `Lost` at the
/// next renewal, and the dispatcher cancels its worker (which sees
/// [`Delivery::cancelled`]); nothing is acknowledged and the record stays cancelled.
/// Without cancel ([`lease_core::Capabilities::cancel`] `false`) it checks the refusal instead.
pub async fn dispatcher_stops_a_cancelled_worker_at_its_next_renewal<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let reason = lease_core::CancelReason::new("customer withdrew").expect("reason");
    if !ctx.caps().cancel {
        let err = ctx.backend().cancel(&ctx.id("order-42"), &reason).await;
        ctx.assert_unsupported(&err.expect_err("no cancel"));
        ctx.refusal_only();
        return;
    }
    let (tx, mut report) = mpsc::unbounded_channel();
    let dispatcher = Dispatcher::start(
        shared(ctx.backend()),
        move |d: Delivery| {
            let tx = tx.clone();
            async move {
                // Reports when the worker stops, by returning or by the dispatcher dropping
                // its future.
                struct Stopped(mpsc::UnboundedSender<&'static str>);
                impl Drop for Stopped {
                    fn drop(&mut self) {
                        let _ = self.0.send("stopped");
                    }
                }
                let _stopped = Stopped(tx.clone());
                let _ = tx.send("started");
                d.cancelled().await;
                assert!(d.is_lost(), "cancelled because the lease was lost");
                Err(DeliveryError::Cancelled)
            }
        },
        options(1).renew_every(Duration::from_millis(10)),
    )
    .expect("start");
    assert_eq!(next(&mut report, "the delivery").await, "started");
    let got = ctx.peer().await.cancel(&ctx.id("order-42"), &reason).await;
    assert_eq!(
        got.expect("cancel"),
        lease_core::CancelOutcome::Cancelled { ended_lease: true }
    );
    assert_eq!(
        next(&mut report, "the worker's cancellation").await,
        "stopped"
    );
    let m = dispatcher.metrics();
    wait_for("the lost renewal", || m.snapshot().lost == 1).await;
    let report = dispatcher.shutdown(DEADLINE).await;
    assert_eq!(report.metrics.acknowledgements, 0);
    let r = ctx.get("order-42").await;
    assert_eq!(r.status, ExecutionStatus::Cancelled);
    assert_eq!(
        r.outcome,
        Some(lease_core::ExecutionOutcome::Cancelled(reason))
    );
}

/// Row "Renewal keeps the lease past its original expiry": a delivery longer than one lease
/// period completes with one claim. The worker moves the clock 20 s at a time (two thirds
/// of the lease) and waits for the dispatcher to renew after each move; at 40 s, past the
/// original expiry, a peer finds nothing claimable and the worker's step write is accepted.
pub async fn dispatcher_renewal_keeps_lease_past_original_expiry<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let probe = ctx.peer().await;
    let clock: ManualClock = ctx.clock.clone();
    let (tx, mut report) = mpsc::unbounded_channel();
    let step_len = LEASE * 2 / 3;
    let dispatcher = Dispatcher::start(
        shared(ctx.backend()),
        move |d: Delivery| {
            let (probe, clock, tx) = (probe.clone(), clock.clone(), tx.clone());
            async move {
                let original = d.claimed_lease().expires_at;
                for _ in 0..2 {
                    let before = d.lease().expires_at;
                    clock.advance(step_len);
                    let deadline = tokio::time::Instant::now() + DEADLINE;
                    while d.lease().expires_at <= before {
                        if tokio::time::Instant::now() > deadline {
                            return Err(DeliveryError::worker("no renewal"));
                        }
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                }
                let now = clock.now();
                let stolen = probe
                    .claim_due(lease_core::ClaimRequest {
                        now,
                        limit: 10,
                        duration: LEASE,
                    })
                    .await?;
                let charged: String = d
                    .step("charge", || async {
                        Ok::<_, DeliveryError>("receipt".to_owned())
                    })
                    .await?;
                let _ = tx.send((original, now, stolen, charged));
                Ok(completed(serde_json::json!("charged")))
            }
        },
        options(1).renew_every(Duration::from_millis(10)),
    )
    .expect("start");
    let (original, now, stolen, charged) = next(&mut report, "the long delivery").await;
    assert!(now > original, "the delivery outlived its original lease");
    assert!(
        stolen.is_empty(),
        "the renewed lease was claimable: {stolen:?}"
    );
    assert_eq!(charged, "receipt");
    let m = dispatcher.metrics();
    wait_for("the acknowledgement", || m.snapshot().acknowledgements == 1).await;
    let report = dispatcher.shutdown(DEADLINE).await;
    assert_eq!(report.metrics.claims, 1, "one claim for the whole delivery");
    assert!(report.metrics.renewals >= 2);
    assert_eq!(report.metrics.lost, 0);
    let r = ctx.get("order-42").await;
    assert_eq!(r.status, ExecutionStatus::Completed);
    assert_eq!(r.unacknowledged_deliveries, 0);
}

/// Row "A worker crashes": the execution is delivered again after the lease expires. The
/// runtime running the worker dies mid-delivery (its dispatcher is aborted: nothing renews,
/// releases or acknowledges). The execution stays unclaimable until the lease expires and
/// the redelivery delay passes; then a second dispatcher delivers it, replaying the step
/// the crashed worker recorded, and completes it.
pub async fn dispatcher_worker_crash_redelivered_after_expiry<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let (tx, mut leases) = mpsc::unbounded_channel();
    let crashed = Dispatcher::start(
        shared(ctx.backend()),
        move |d: Delivery| {
            let tx = tx.clone();
            async move {
                let _: String = d
                    .step("load", || async {
                        Ok::<_, DeliveryError>("order".to_owned())
                    })
                    .await?;
                let _ = tx.send(d.claimed_lease().clone());
                futures::future::pending::<()>().await;
                Ok(Reply::Retry)
            }
        },
        options(1),
    )
    .expect("start");
    let first = next(&mut leases, "the first delivery").await;
    crashed.abort();

    let probe = ctx.peer().await;
    ctx.clock
        .set(Timestamp::from_millis(first.expires_at.as_millis() - 1));
    assert!(
        ctx.claim(&probe, 10).await.is_empty(),
        "claimable before the lease expired"
    );
    let gate = first.expires_at.saturating_add(ctx.policy.delay(1));
    ctx.clock.set(Timestamp::from_millis(gate.as_millis() - 1));
    assert!(
        ctx.claim(&probe, 10).await.is_empty(),
        "claimable before the redelivery delay"
    );

    let (tx, mut seen) = mpsc::unbounded_channel();
    let rescuer = Dispatcher::start(
        shared(ctx.peer().await),
        move |d: Delivery| {
            let tx = tx.clone();
            async move {
                let loaded: String = d
                    .step("load", || async {
                        Ok::<_, DeliveryError>("again".to_owned())
                    })
                    .await?;
                let _ = tx.send((d.claimed_lease().clone(), loaded));
                Ok(completed(serde_json::json!("charged")))
            }
        },
        options(1),
    )
    .expect("start");
    ctx.clock.set(gate);
    rescuer.wake();
    let (second, loaded) = next(&mut seen, "the redelivery").await;
    assert!(second.token > first.token);
    assert_eq!(claimed_at(&second), gate);
    assert_eq!(
        loaded, "order",
        "the recorded step is replayed, not run again"
    );
    let m = rescuer.metrics();
    wait_for("the acknowledgement", || m.snapshot().acknowledgements == 1).await;
    rescuer.shutdown(DEADLINE).await;
    let r = ctx.get("order-42").await;
    assert_eq!(r.status, ExecutionStatus::Completed);
    assert_eq!(r.unacknowledged_deliveries, 0);
}

/// Row "The runtime process holding a lease dies": its worker makes no further fenced
/// writes. The dispatcher is dropped while its worker waits between two steps; the worker
/// is then released from its wait while its token is still the current one, yet writes
/// nothing more. After expiry another dispatcher delivers the execution and records the
/// second step itself.
pub async fn dispatcher_process_death_stops_fenced_writes<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let gate = Arc::new(Notify::new());
    let stopped = Arc::new(AtomicBool::new(false));
    let (tx, mut leases) = mpsc::unbounded_channel();
    let (g, s) = (gate.clone(), stopped.clone());
    let dying = Dispatcher::start(
        shared(ctx.backend()),
        move |d: Delivery| {
            let (g, s, tx) = (g.clone(), s.clone(), tx.clone());
            async move {
                let _flag = DropFlag(s);
                let _: String = d
                    .step("load", || async {
                        Ok::<_, DeliveryError>("order".to_owned())
                    })
                    .await?;
                let _ = tx.send(d.claimed_lease().clone());
                g.notified().await;
                let _: String = d
                    .step("charge", || async {
                        Ok::<_, DeliveryError>("A".to_owned())
                    })
                    .await?;
                Ok(completed(serde_json::json!("A")))
            }
        },
        options(1),
    )
    .expect("start");
    let first = next(&mut leases, "the first delivery").await;
    drop(dying);
    gate.notify_one();
    wait_for("the worker to stop", || stopped.load(Ordering::SeqCst)).await;
    let steps = ctx
        .backend()
        .list_steps(&ctx.id("order-42"))
        .await
        .expect("steps");
    assert_eq!(steps.len(), 1, "no write after the process died: {steps:?}");
    let r = ctx.get("order-42").await;
    assert_eq!(
        r.status,
        ExecutionStatus::Running,
        "nothing released or acknowledged"
    );
    assert_eq!(r.token, first.token);

    another_dispatcher_records_the_second_step(&ctx, &first).await;
}

/// Row "A holder pauses past expiry, another claims, and the first resumes": every fenced
/// write from the first returns lost, and its worker stops. The first dispatcher's worker
/// pauses inside its charge step (and nothing renews) until its lease has expired and a
/// peer has claimed with a higher token and recorded the charge; when it resumes, its
/// receipt write returns `Lost`,
/// its dispatcher neither acknowledges nor releases, and renew, release, acknowledge and a
/// step write with its lease all return `Lost` and change nothing.
pub async fn dispatcher_paused_holder_every_fenced_write_lost<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let gate = Arc::new(Notify::new());
    let (tx, mut seen) = mpsc::unbounded_channel();
    let g = gate.clone();
    let paused = Dispatcher::start(
        shared(ctx.backend()),
        move |d: Delivery| {
            let (g, tx) = (g.clone(), tx.clone());
            let tx2 = tx.clone();
            async move {
                let _: String = d
                    .step("load", || async {
                        Ok::<_, DeliveryError>("order".to_owned())
                    })
                    .await?;
                let lease = d.claimed_lease().clone();
                let charged = d
                    .step("charge", || async move {
                        // The card is charged, then the holder freezes before recording it.
                        let _ = tx2.send(Ok(lease));
                        g.notified().await;
                        Ok::<_, DeliveryError>("A".to_owned())
                    })
                    .await;
                let lost = matches!(charged, Err(DeliveryError::Lost));
                let _ = tx.send(Err(lost));
                charged?;
                Ok(completed(serde_json::json!("A")))
            }
        },
        options(1),
    )
    .expect("start");
    let stale = match next(&mut seen, "the first delivery").await {
        Ok(lease) => lease,
        Err(_) => panic!("unexpected report"),
    };

    ctx.clock
        .set(stale.expires_at.saturating_add(ctx.policy.delay(1)));
    let current_holder = ctx.peer().await;
    let current = ctx.claim_one("order-42").await;
    assert!(current.token > stale.token);
    let charge = current_holder
        .write_step(&current, &step_write("charge", "\"B\""))
        .await
        .expect("write");
    assert!(!charge.is_lost());

    let before = (
        ctx.get("order-42").await,
        ctx.backend()
            .list_steps(&ctx.id("order-42"))
            .await
            .expect("steps"),
    );
    gate.notify_one();
    match next(&mut seen, "the resumed write").await {
        Err(lost) => assert!(lost, "the resumed step write must return Lost"),
        Ok(_) => panic!("unexpected report"),
    }
    let m = paused.metrics();
    wait_for("the paused delivery to stop", || {
        let s = m.snapshot();
        s.lost == 1 && s.in_flight == 0
    })
    .await;
    assert_every_stale_call_lost(&ctx, &stale, before).await;

    let report = paused.shutdown(DEADLINE).await;
    assert_eq!(report.metrics.acknowledgements, 0);
    assert_eq!(report.metrics.releases, 0);
    current_holder_completes(&ctx, &current_holder, &current).await;
}

/// Prefetch (a dispatcher claims ahead for a slot still busy, so a drain does not wait for
/// a claim between runs): a lease held for a busy slot is a live lease that is either run
/// by this dispatcher or released unrun, never both, and never run after its hold ended. At
/// concurrency 1 the first delivery answers at once (so the dispatcher knows a run time and
/// prefetches), the second blocks; the leases held meanwhile pass their hold bound (the
/// renewal interval, 100 ms of real time here) and are released: each then has one
/// unacknowledged delivery and no step record, and no worker saw it. Once the blocked one
/// is let go and the redelivery delay has passed, every execution runs exactly once and
/// completes; each acknowledgement went out with its own token (none lost).
pub async fn dispatcher_prefetched_lease_past_its_hold_is_released_unrun<H: Harness>(
    ctx: Arc<Ctx<H>>,
) {
    const N: usize = 6;
    for i in 0..N {
        ctx.admit(&format!("held-{i}")).await;
    }
    let ran: Arc<Mutex<Vec<String>>> = Arc::default();
    let gate = Arc::new(Notify::new());
    let open = Arc::new(AtomicBool::new(false));
    let (log, g, o) = (ran.clone(), gate.clone(), open.clone());
    let worker = move |d: Delivery| {
        let (log, g, o) = (log.clone(), g.clone(), o.clone());
        async move {
            let first = {
                let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
                log.push(d.execution_id().to_string());
                log.len() == 1
            };
            if !first {
                let opened = g.notified();
                if !o.load(Ordering::SeqCst) {
                    opened.await;
                }
            }
            let token = d.token().get();
            let _: u64 = d
                .step("work", || async move { Ok::<_, DeliveryError>(token) })
                .await?;
            Ok(completed(serde_json::Value::Null))
        }
    };
    let options = options(1).renew_every(Duration::from_millis(100));
    let dispatcher = Dispatcher::start(shared(ctx.backend()), worker, options).expect("start");
    let m = dispatcher.metrics();
    until_held_leases_released_unrun(&ctx, &m, &ran, N).await;
    open.store(true, Ordering::SeqCst);
    gate.notify_waiters();
    // Past every redelivery delay (at most 1.6 s). Under load a prefetched lease can outlive
    // its hold once more and be released again, so the manual clock keeps moving, 2 s at a
    // time (a 30 s lease renewed every 100 ms stays far ahead), until all are acknowledged.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while m.snapshot().acknowledgements < N as u64 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {DEADLINE:?} waiting for all acknowledged: {:?}",
            m.snapshot()
        );
        ctx.advance(Duration::from_secs(2));
        dispatcher.wake();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let report = dispatcher.shutdown(DEADLINE).await;
    assert_eq!(report.metrics.lost, 0, "{:?}", report.metrics);
    assert_each_ran_once(&ctx, &ran, N).await;
}

/// Polls until the quick and the blocked delivery ran and the held leases were released
/// unrun, as the store and the dispatcher's counters both show (the store shows a release
/// before the dispatcher counts it).
async fn until_held_leases_released_unrun<H: Harness>(
    ctx: &Arc<Ctx<H>>,
    m: &DispatcherMetrics,
    ran: &Arc<Mutex<Vec<String>>>,
    n: usize,
) {
    // The store shows a release before the dispatcher counts it: poll until both agree.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let s = m.snapshot();
        let seen = ran.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert!(
            seen.len() <= 2,
            "only the quick and the blocked delivery ran: {seen:?}"
        );
        let released = count_released_unrun(ctx, &seen, n).await;
        // With attempts ([`lease_core::Capabilities::attempts`]) a lease released unrun is due again at once
        // and may be claimed (and held, and released) again meanwhile: the store then shows
        // at least one, never more than the dispatcher released.
        let store_agrees = if ctx.caps().attempts {
            released > 0 && released <= s.prefetch_released
        } else {
            released == s.prefetch_released
        };
        if s.prefetch_released > 0
            && s.releases == s.prefetch_released
            && store_agrees
            && seen.len() == 2
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {DEADLINE:?}: {released} released in the store, {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A durable sleep (`Delivery::sleep`): the delivery is acknowledged as suspended, due at
/// the instant recorded as the sleep's step (the wake it requested during the delivery);
/// once the backend clock reaches it the execution is delivered again, the step before the
/// sleep replays without running, and the execution completes.
pub async fn dispatcher_durable_sleep_suspends_until_its_instant<H: Harness>(ctx: Arc<Ctx<H>>) {
    const NAP: Duration = Duration::from_secs(60);
    ctx.admit("order-42").await;
    let start = ctx.clock.now();
    let charges = Arc::new(AtomicUsize::new(0));
    let (tx, mut slept) = mpsc::unbounded_channel();
    let c = charges.clone();
    let worker = move |d: Delivery| {
        let (c, tx) = (c.clone(), tx.clone());
        async move {
            d.step("charge", || async {
                Ok::<_, DeliveryError>(c.fetch_add(1, Ordering::SeqCst))
            })
            .await?;
            let sleep = d.sleep("cool-off", NAP).await;
            let _ = tx.send(sleep.is_ok());
            sleep?;
            Ok(completed(serde_json::json!("emailed")))
        }
    };
    let dispatcher = Dispatcher::start(shared(ctx.backend()), worker, options(1)).expect("start");
    let m = dispatcher.metrics();
    assert!(!next(&mut slept, "the first delivery").await, "it sleeps");
    wait_for("the suspension", || m.snapshot().acknowledgements == 1).await;
    let r = ctx.get("order-42").await;
    assert_eq!(r.status, ExecutionStatus::Suspended);
    assert_eq!(r.due_at, Some(start.saturating_add(NAP)));
    assert_eq!(r.unacknowledged_deliveries, 0, "acknowledged, not released");

    ctx.clock.advance(NAP);
    dispatcher.wake();
    assert!(next(&mut slept, "the delivery at the instant").await);
    wait_for("the completion", || m.snapshot().acknowledgements == 2).await;
    dispatcher.shutdown(DEADLINE).await;
    assert_eq!(ctx.get("order-42").await.status, ExecutionStatus::Completed);
    assert_eq!(charges.load(Ordering::SeqCst), 1, "the charge replayed");
}

/// The second half of [`dispatcher_process_death_stops_fenced_writes`]: after `first`
/// expired, another dispatcher delivers the execution and records the charge itself.
async fn another_dispatcher_records_the_second_step<H: Harness>(
    ctx: &Ctx<H>,
    first: &ExecutionLease,
) {
    let (tx, mut seen) = mpsc::unbounded_channel();
    let other = Dispatcher::start(
        shared(ctx.peer().await),
        move |d: Delivery| {
            let tx = tx.clone();
            async move {
                let _: String = d
                    .step("load", || async {
                        Ok::<_, DeliveryError>("again".to_owned())
                    })
                    .await?;
                let charge: String = d
                    .step("charge", || async {
                        Ok::<_, DeliveryError>("B".to_owned())
                    })
                    .await?;
                let _ = tx.send(d.token());
                Ok(completed(serde_json::json!(charge)))
            }
        },
        options(1),
    )
    .expect("start");
    ctx.clock
        .set(first.expires_at.saturating_add(ctx.policy.delay(1)));
    other.wake();
    let token = next(&mut seen, "the redelivery").await;
    assert!(token > first.token);
    let m = other.metrics();
    wait_for("the acknowledgement", || m.snapshot().acknowledgements == 1).await;
    other.shutdown(DEADLINE).await;
    let steps = ctx
        .backend()
        .list_steps(&ctx.id("order-42"))
        .await
        .expect("steps");
    let by_key: HashMap<&str, FencingToken> = steps
        .iter()
        .map(|s| (s.step_key.as_str(), s.token))
        .collect();
    assert_eq!(by_key.get("load"), Some(&first.token));
    assert_eq!(
        by_key.get("charge"),
        Some(&token),
        "the charge is the new holder's"
    );
    assert_eq!(
        ctx.get("order-42").await.outcome,
        Some(ExecutionOutcome::Completed(
            Json::parse("t", "\"B\"").expect("json")
        ))
    );
}

/// Renew, release, acknowledge and a step write with the paused holder's `stale` lease all
/// return `Lost`, and the record and steps stay as `before`.
async fn assert_every_stale_call_lost<H: Harness>(
    ctx: &Ctx<H>,
    stale: &ExecutionLease,
    before: (ExecutionRecord, Vec<HeapRecord>),
) {
    let b = ctx.backend();
    assert!(b.renew(stale, LEASE).await.expect("renew").is_lost());
    assert!(b.release(stale).await.expect("release").is_lost());
    let done = WorkflowRunOutcome::Completed(Json::parse("t", "\"A\"").expect("json"));
    assert!(b.acknowledge(stale, &done).await.expect("ack").is_lost());
    assert!(
        b.write_step(stale, &step_write("refund", "1"))
            .await
            .expect("write")
            .is_lost()
    );
    let after = (
        ctx.get("order-42").await,
        b.list_steps(&ctx.id("order-42")).await.expect("steps"),
    );
    assert_eq!(before, after, "the stale holder changed nothing");
}

/// How many of the `n` executions `held-{i}` were claimed and released unrun (asserting each
/// was released once and has no step record); `seen` are the ones a worker ran.
async fn count_released_unrun<H: Harness>(ctx: &Ctx<H>, seen: &[String], n: usize) -> u64 {
    let mut released = 0;
    for i in 0..n {
        let id = format!("held-{i}");
        let r = ctx.get(&id).await;
        let ran_or_held =
            seen.contains(&ctx.id(&id).to_string()) || r.status == ExecutionStatus::Running;
        // Not claimed yet (no delivery), or claimed and released unrun: with attempts that
        // counts nothing (no attempt), without it one unacknowledged delivery.
        if ran_or_held || r.token == FencingToken::NONE {
            continue;
        }
        if ctx.caps().attempts {
            assert_eq!(
                r.unacknowledged_deliveries, 0,
                "{id}: unrun is no attempt, {r:?}"
            );
        } else if r.unacknowledged_deliveries == 0 {
            continue;
        } else {
            assert_eq!(r.unacknowledged_deliveries, 1, "{id}: released once, {r:?}");
        }
        released += 1;
        assert!(ctx.steps(&id).await.is_empty(), "{id} ran while held");
    }
    released
}

/// The holder of the `current` lease completes the execution with its own charge.
async fn current_holder_completes<H: Harness>(
    ctx: &Ctx<H>,
    current_holder: &H::Backend,
    current: &ExecutionLease,
) {
    let ack = current_holder
        .acknowledge(
            current,
            &WorkflowRunOutcome::Completed(Json::parse("t", "\"B\"").expect("json")),
        )
        .await
        .expect("ack");
    assert!(matches!(ack, Fenced::Accepted(_)));
    let r = ctx.get("order-42").await;
    assert_eq!(
        r.outcome,
        Some(ExecutionOutcome::Completed(
            Json::parse("t", "\"B\"").expect("json")
        ))
    );
}

/// Each of the `n` executions `held-{i}` ran exactly once (`ran` logs the runs), completed,
/// and holds its one step record.
async fn assert_each_ran_once<H: Harness>(ctx: &Ctx<H>, ran: &Mutex<Vec<String>>, n: usize) {
    let mut seen = ran.lock().unwrap_or_else(|p| p.into_inner()).clone();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), n, "each execution ran exactly once: {seen:?}");
    for i in 0..n {
        let id = format!("held-{i}");
        assert_eq!(
            ctx.get(&id).await.status,
            ExecutionStatus::Completed,
            "{id}"
        );
        assert_eq!(ctx.steps(&id).await.len(), 1, "{id}");
    }
}
