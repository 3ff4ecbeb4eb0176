//! Dispatcher and step-driver tests on the memory backend.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::*;
use lease_core::ExecutionClientExt;
use lease_core::{
    Admission, ClaimRequest, ExecutionClient, ExecutionId, ExecutionStatus, HeapClient, Json,
    ManualClock, MemoryBackend, RedeliveryPolicy, StepKey, StepWrite, WorkflowRunOutcome,
};

const LEASE: Duration = Duration::from_secs(30);

pub(super) fn setup() -> (ManualClock, MemoryBackend) {
    let clock = ManualClock::starting_now();
    let policy = RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_secs(2))
        .expect("policy");
    let backend = MemoryBackend::with_clock(Arc::new(clock.clone())).with_policy(policy);
    (clock, backend)
}

pub(super) fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

fn json(s: &str) -> Json {
    Json::parse("test", s).expect("json")
}

/// Options for tests: renewals effectively off unless asked, fast polling.
fn options() -> DispatcherOptions {
    DispatcherOptions::new()
        .concurrency(4)
        .lease_duration(LEASE)
        .renew_every(Duration::from_secs(15))
        .poll_interval(Duration::from_millis(5))
}

pub(super) async fn wait_until<F: FnMut() -> bool>(what: &str, mut f: F) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn claim(b: &MemoryBackend) -> Vec<lease_core::ExecutionLease> {
    let now = b.now().await.expect("now");
    b.claim_due(ClaimRequest {
        now,
        limit: 10,
        duration: LEASE,
    })
    .await
    .expect("claim")
}

async fn manual_delivery(b: &MemoryBackend, name: &str) -> Delivery {
    b.admit(&Admission::new(id(name))).await.expect("admit");
    let lease = claim(b).await.pop().expect("one lease");
    let record = b.get(&id(name)).await.expect("get").expect("record");
    Delivery::new(Arc::new(b.clone()), lease, record, CancellationToken::new())
}

#[tokio::test]
async fn step_replays_a_recorded_step_without_running_it() {
    let (_clock, b) = setup();
    let d = manual_delivery(&b, "order-42").await;
    let first: String = d
        .step("charge", || async {
            Ok::<_, DeliveryError>("receipt-1".to_owned())
        })
        .await
        .expect("step");
    assert_eq!(first, "receipt-1");
    let ran = AtomicBool::new(false);
    let again: String = d
        .step("charge", || async {
            ran.store(true, Ordering::SeqCst);
            Ok::<_, DeliveryError>("receipt-2".to_owned())
        })
        .await
        .expect("replayed");
    assert_eq!(again, "receipt-1");
    assert!(
        !ran.load(Ordering::SeqCst),
        "a recorded step must not run again"
    );
}

#[tokio::test]
async fn step_continues_with_the_recorded_value_not_the_closures() {
    let (_clock, b) = setup();
    let d = manual_delivery(&b, "order-42").await;
    let lease = d.lease();
    let b2 = b.clone();
    let value: String = d
        .step("charge", || async move {
            // Another write of the same step lands while the closure runs.
            let write = StepWrite {
                step_key: StepKey::new("charge").expect("key"),
                step_attempt: STEP_ATTEMPT,
                done: true,
                response: json("\"recorded\""),
            };
            assert!(
                !b2.write_step(&lease, &write)
                    .await
                    .expect("write")
                    .is_lost()
            );
            Ok::<_, DeliveryError>("mine".to_owned())
        })
        .await
        .expect("step");
    assert_eq!(value, "recorded");
}

#[tokio::test]
async fn lost_step_write_aborts_the_delivery() {
    let (clock, b) = setup();
    let d = manual_delivery(&b, "order-42").await;
    clock.advance(LEASE + Duration::from_millis(100));
    let newer = claim(&b).await;
    assert_eq!(newer.len(), 1);
    let err = d
        .step("charge", || async { Ok::<_, DeliveryError>(1) })
        .await
        .expect_err("stale holder");
    assert!(matches!(err, DeliveryError::Lost), "{err:?}");
    assert!(d.is_lost() && d.is_cancelled());
    let ran = AtomicBool::new(false);
    let err = d
        .step("load", || async {
            ran.store(true, Ordering::SeqCst);
            Ok::<_, DeliveryError>(1)
        })
        .await
        .expect_err("still lost");
    assert!(matches!(err, DeliveryError::Lost));
    assert!(!ran.load(Ordering::SeqCst), "nothing runs after Lost");
    assert!(
        b.list_steps(&id("order-42"))
            .await
            .expect("steps")
            .is_empty()
    );
}

#[tokio::test]
async fn bad_step_key_is_a_typed_error() {
    let (_clock, b) = setup();
    let d = manual_delivery(&b, "order-42").await;
    let err = d
        .step("", || async { Ok::<_, DeliveryError>(1) })
        .await
        .expect_err("empty key");
    assert!(matches!(
        err,
        DeliveryError::Backend(lease_core::LeaseError::InvalidInput { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panicking_and_failing_workers_are_released() {
    let (_clock, b) = setup();
    b.admit(&Admission::new(id("panics"))).await.expect("admit");
    b.admit(&Admission::new(id("fails"))).await.expect("admit");
    let dispatcher = Dispatcher::start(
        Arc::new(b.clone()),
        |d: Delivery| async move {
            if d.execution_id().as_str() == "panics" {
                panic!("worker crashed");
            }
            Err(DeliveryError::worker("boom"))
        },
        options(),
    )
    .expect("start");
    let metrics = dispatcher.metrics();
    wait_until("two releases", || metrics.snapshot().releases == 2).await;
    for name in ["panics", "fails"] {
        let r = b.get(&id(name)).await.expect("get").expect("record");
        assert_eq!(r.unacknowledged_deliveries, 1, "{name}");
        assert_eq!(r.status, ExecutionStatus::Admitted, "{name}");
    }
    let s = dispatcher.shutdown(Duration::from_secs(1)).await;
    assert_eq!(s.metrics.worker_failures, 2);
    assert_eq!(s.metrics.acknowledgements, 0);
}

/// A step whose value the library refuses (nested deeper than
/// `MAX_JSON_DEPTH`) fails its execution with a typed outcome, once, instead of being
/// released and delivered again forever; the worker saw `DeliveryError::Refused`.
#[tokio::test]
async fn a_refused_step_value_fails_the_execution_instead_of_redelivering() {
    let (_clock, b) = setup();
    b.admit(&Admission::new(id("too-deep")))
        .await
        .expect("admit");
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let dispatcher = Dispatcher::start(
        Arc::new(b.clone()),
        move |d: Delivery| {
            let log = log.clone();
            async move {
                let mut deep = serde_json::json!(1);
                for _ in 0..lease_core::limits::MAX_JSON_DEPTH + 1 {
                    deep = serde_json::json!([deep]);
                }
                let result = d
                    .step("deep", || async move { Ok::<_, DeliveryError>(deep) })
                    .await;
                let refused = matches!(result, Err(DeliveryError::Refused { .. }));
                log.lock().expect("log").push(refused);
                result.map(|_| Reply::Retry)
            }
        },
        options(),
    )
    .expect("start");
    let metrics = dispatcher.metrics();
    wait_until("the execution failed", || {
        metrics.snapshot().acknowledgements == 1
    })
    .await;
    let s = dispatcher.shutdown(Duration::from_secs(1)).await;
    assert_eq!(s.metrics.releases, 0, "{:?}", s.metrics);
    assert_eq!(
        *seen.lock().expect("log"),
        vec![true],
        "one delivery, refused"
    );
    let r = b.get(&id("too-deep")).await.expect("get").expect("record");
    assert_eq!(r.status, ExecutionStatus::Failed);
    let Some(lease_core::ExecutionOutcome::Failed(outcome)) = r.outcome else {
        panic!("no failed outcome: {r:?}");
    };
    let value: serde_json::Value = outcome.decode().expect("outcome");
    assert_eq!(value["error"], "step_refused");
    assert_eq!(value["step"], "deep");
    assert!(
        value["reason"]
            .as_str()
            .is_some_and(|r| r.contains("nested deeper")),
        "{value}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_for_deliveries_then_releases_the_rest() {
    let (_clock, b) = setup();
    b.admit(&Admission::new(id("quick"))).await.expect("admit");
    b.admit(&Admission::new(id("stuck"))).await.expect("admit");
    let gate = Arc::new(Notify::new());
    let g = gate.clone();
    let dispatcher = Dispatcher::start(
        Arc::new(b.clone()),
        move |d: Delivery| {
            let g = g.clone();
            async move {
                if d.execution_id().as_str() == "stuck" {
                    futures::future::pending::<()>().await;
                }
                g.notified().await;
                Ok(Reply::Acknowledge(WorkflowRunOutcome::Completed(
                    Json::null(),
                )))
            }
        },
        options(),
    )
    .expect("start");
    let metrics = dispatcher.metrics();
    wait_until("both running", || metrics.snapshot().in_flight == 2).await;
    // A grace long enough for the quick delivery to finish on a loaded 2-core CI machine
    // (300 ms was not: the quick one was cancelled too); the stuck one waits it out. The
    // quick one is let go only once the shutdown has begun, or it ends before the drain
    // and is not counted as finished by it.
    let stopping = dispatcher.stopping();
    let shutdown = tokio::spawn(dispatcher.shutdown(Duration::from_secs(3)));
    stopping.cancelled().await;
    gate.notify_one();
    let report = shutdown.await.expect("shutdown");
    assert_eq!(report.finished, 1);
    assert_eq!(report.cancelled, 1);
    assert_eq!(report.metrics.acknowledgements, 1);
    assert_eq!(report.metrics.releases, 1);
    assert_eq!(report.metrics.in_flight, 0);
    let quick = b.get(&id("quick")).await.expect("get").expect("record");
    assert_eq!(quick.status, ExecutionStatus::Completed);
    let stuck = b.get(&id("stuck")).await.expect("get").expect("record");
    assert_eq!(stuck.status, ExecutionStatus::Admitted);
    assert_eq!(stuck.unacknowledged_deliveries, 1);
}

struct SetOnDrop(Arc<AtomicBool>);
impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_dispatcher_cancels_workers_with_no_further_write() {
    let (_clock, b) = setup();
    b.admit(&Admission::new(id("order-42")))
        .await
        .expect("admit");
    let gate = Arc::new(Notify::new());
    let dropped = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicU32::new(0));
    let (g, dr, st) = (gate.clone(), dropped.clone(), started.clone());
    let dispatcher = Dispatcher::start(
        Arc::new(b.clone()),
        move |d: Delivery| {
            let (g, dr, st) = (g.clone(), dr.clone(), st.clone());
            async move {
                let _guard = SetOnDrop(dr);
                d.step("load", || async { Ok::<_, DeliveryError>(1) })
                    .await?;
                st.fetch_add(1, Ordering::SeqCst);
                g.notified().await;
                d.step("charge", || async { Ok::<_, DeliveryError>(2) })
                    .await?;
                Ok(Reply::Acknowledge(WorkflowRunOutcome::Completed(
                    Json::null(),
                )))
            }
        },
        options(),
    )
    .expect("start");
    wait_until("worker at the gate", || started.load(Ordering::SeqCst) == 1).await;
    drop(dispatcher);
    gate.notify_one();
    wait_until("worker future dropped", || dropped.load(Ordering::SeqCst)).await;
    let steps = b.list_steps(&id("order-42")).await.expect("steps");
    assert_eq!(steps.len(), 1, "only the step before the drop: {steps:?}");
    let r = b.get(&id("order-42")).await.expect("get").expect("record");
    assert_eq!(
        r.status,
        ExecutionStatus::Running,
        "nothing released: the lease expires"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_on_renewal_cancels_the_worker_at_once() {
    let (clock, b) = setup();
    b.admit(&Admission::new(id("order-42")))
        .await
        .expect("admit");
    let dropped = Arc::new(AtomicBool::new(false));
    let dr = dropped.clone();
    let dispatcher = Dispatcher::start(
        Arc::new(b.clone()),
        move |_d: Delivery| {
            let dr = dr.clone();
            async move {
                let _guard = SetOnDrop(dr);
                futures::future::pending::<()>().await;
                Ok(Reply::Retry)
            }
        },
        // One slot, so the dispatcher cannot reclaim the execution itself.
        options()
            .concurrency(1)
            .renew_every(Duration::from_millis(10)),
    )
    .expect("start");
    let metrics = dispatcher.metrics();
    wait_until("a renewal", || metrics.snapshot().renewals >= 1).await;
    // Another holder takes over: the lease is expired on the backend clock and reclaimed.
    // (Renewals keep extending from the clock's now, so jump far past it.)
    let mut reclaimed = Vec::new();
    for _ in 0..100 {
        clock.advance(LEASE * 2);
        reclaimed = claim(&b).await;
        if !reclaimed.is_empty() {
            break;
        }
    }
    assert_eq!(reclaimed.len(), 1, "a reclaim between two renewals");
    wait_until("worker cancelled", || dropped.load(Ordering::SeqCst)).await;
    wait_until("lost counted", || metrics.snapshot().lost == 1).await;
    let s = dispatcher.shutdown(Duration::from_secs(1)).await;
    assert_eq!(s.metrics.acknowledgements, 0);
    assert_eq!(s.metrics.releases, 0);
    let r = b.get(&id("order-42")).await.expect("get").expect("record");
    assert_eq!(r.token, reclaimed[0].token, "the new holder is untouched");
    assert_eq!(r.status, ExecutionStatus::Running);
}

#[tokio::test]
async fn start_rejects_bad_options() {
    let (_clock, b) = setup();
    let err = Dispatcher::start(
        Arc::new(b),
        |_d: Delivery| async { Ok(Reply::Retry) },
        options().renew_every(Duration::from_secs(20)),
    )
    .expect_err("renewal outside the lease");
    assert!(matches!(
        err,
        lease_core::LeaseError::InvalidInput {
            field: "renew_every",
            ..
        }
    ));
}

#[test]
fn start_outside_a_runtime_is_a_typed_error() {
    let (_clock, b) = setup();
    let err = Dispatcher::start(
        Arc::new(b),
        |_d: Delivery| async { Ok(Reply::Retry) },
        options(),
    )
    .expect_err("no runtime");
    assert!(matches!(
        err,
        lease_core::LeaseError::InvalidInput {
            field: "runtime",
            ..
        }
    ));
}

/// A `done: false` write must not make the driver run the closure again and return the
/// not-done value, or the step could never complete. The not-done attempt is passed over:
/// the closure's value is recorded at the next attempt and returned, and a redelivery
/// replays that record.
#[tokio::test]
async fn step_never_returns_a_not_done_value() {
    let (clock, b) = setup();
    let d = manual_delivery(&b, "order-42").await;
    d.write_step(&StepWrite {
        step_key: StepKey::new("charge").expect("key"),
        step_attempt: STEP_ATTEMPT,
        done: false,
        response: json(r#""pending""#),
    })
    .await
    .expect("write not-done");
    let runs = Arc::new(AtomicU32::new(0));
    let r = runs.clone();
    let got: String = d
        .step("charge", || async move {
            r.fetch_add(1, Ordering::SeqCst);
            Ok::<_, DeliveryError>("receipt-1".to_owned())
        })
        .await
        .expect("step");
    assert_eq!(got, "receipt-1");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let steps = b.list_steps(&id("order-42")).await.expect("steps");
    let attempts: Vec<(u32, bool)> = steps.iter().map(|s| (s.step_attempt, s.done)).collect();
    assert_eq!(attempts, [(1, false), (2, true)]);
    // A redelivery replays attempt 2 without running the closure.
    assert!(!b.release(&d.lease()).await.expect("release").is_lost());
    clock.advance(Duration::from_secs(1));
    let lease = claim(&b).await.pop().expect("reclaim");
    let record = b.get(&id("order-42")).await.expect("get").expect("record");
    let again = Delivery::new(Arc::new(b.clone()), lease, record, CancellationToken::new());
    let r = runs.clone();
    let replayed: String = again
        .step("charge", || async move {
            r.fetch_add(1, Ordering::SeqCst);
            Ok::<_, DeliveryError>("receipt-2".to_owned())
        })
        .await
        .expect("replay");
    assert_eq!(replayed, "receipt-1");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// At concurrency 1 each acknowledgement claims the next execution in the same
/// call (`acknowledge_and_claim`), so N executions cost one claim call of the loop plus N
/// acknowledgement-claims, and the slot the last one frees is not claimed for again.
#[tokio::test]
async fn acknowledgements_claim_the_next_execution_at_low_concurrency() {
    let (_clock, b) = setup();
    for i in 0..5 {
        b.admit(&Admission::new(id(&format!("e-{i}"))))
            .await
            .expect("admit");
    }
    let worker =
        |_d: Delivery| async { Ok(Reply::Acknowledge(WorkflowRunOutcome::Completed(json("1")))) };
    let dispatcher = Dispatcher::start(
        Arc::new(b.clone()),
        worker,
        // Prefetch off: this is the acknowledge_and_claim path (prefetch_tests.rs has the other).
        options()
            .concurrency(1)
            .prefetch(0)
            .poll_interval(Duration::from_secs(3600)),
    )
    .expect("start");
    let m = dispatcher.metrics();
    wait_until("all five acknowledged", || {
        m.snapshot().acknowledgements == 5
    })
    .await;
    let report = dispatcher.shutdown(LEASE).await;
    assert_eq!(report.metrics.claims, 5);
    assert_eq!(report.metrics.max_in_flight, 1);
    assert_eq!(
        report.metrics.claim_calls, 6,
        "one claim by the loop, then one acknowledge_and_claim per execution: {:?}",
        report.metrics
    );
    for i in 0..5 {
        let r = b
            .get(&id(&format!("e-{i}")))
            .await
            .expect("get")
            .expect("record");
        assert_eq!(r.status, ExecutionStatus::Completed);
    }
}

/// The dispatcher-side retention schedule purges terminal executions older than
/// the retention period, and nothing else.
#[tokio::test(start_paused = true)]
async fn the_retention_schedule_purges_old_terminal_executions() {
    let (clock, b) = setup();
    for name in ["old-1", "old-2", "suspended"] {
        b.admit(&Admission::new(id(name))).await.expect("admit");
    }
    for lease in claim(&b).await {
        let outcome = if lease.execution_id.as_str() == "suspended" {
            WorkflowRunOutcome::Suspended
        } else {
            WorkflowRunOutcome::Completed(json("1"))
        };
        assert!(
            !b.acknowledge(&lease, &outcome)
                .await
                .expect("ack")
                .is_lost()
        );
    }
    clock.advance(Duration::from_secs(2 * 24 * 3600));
    b.admit(&Admission::new(id("recent"))).await.expect("admit");
    let worker =
        |_d: Delivery| async { Ok(Reply::Acknowledge(WorkflowRunOutcome::Completed(json("2")))) };
    let day = Duration::from_secs(24 * 3600);
    let dispatcher = Dispatcher::start(
        Arc::new(b.clone()),
        worker,
        options().retain_terminal(day, Duration::from_secs(1)),
    )
    .expect("start");
    let m = dispatcher.metrics();
    wait_until("two purged", || m.snapshot().purged == 2).await;
    assert!(b.get(&id("old-1")).await.expect("get").is_none());
    assert!(b.get(&id("old-2")).await.expect("get").is_none());
    let kept = b.get(&id("suspended")).await.expect("get").expect("kept");
    assert_eq!(kept.status, ExecutionStatus::Suspended);
    // "recent" completed just now: kept.
    wait_until("recent acknowledged", || m.snapshot().acknowledgements == 1).await;
    dispatcher.shutdown(LEASE).await;
    assert!(b.get(&id("recent")).await.expect("get").is_some());
    let bad =
        DispatcherOptions::new().retain_terminal(Duration::from_secs(60), Duration::from_secs(60));
    assert!(
        bad.validate().is_err(),
        "a retention shorter than a day is refused"
    );
}
