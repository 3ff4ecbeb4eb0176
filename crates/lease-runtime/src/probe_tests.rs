//! Dispatcher tests that count backend calls: acknowledgement batching and the step
//! driver's saved reads, on the memory backend behind a counting, gateable wrapper.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::tests::{id, wait_until};
use super::*;
use lease_core::wakeup::WakeReceiver;
use lease_core::{
    AckAndClaim, Acknowledged, Acknowledgement, Admission, ClaimRequest, ExecutionClient,
    ExecutionClientExt, ExecutionId, ExecutionLease, ExecutionRecord, ExecutionStatus, Fenced,
    HeapClient, HeapRecord, Json, LeaseError, ManualClock, MemoryBackend, Result, StartClient,
    StepKey, StoreClient, Timestamp, WorkflowRunOutcome,
};

const LEASE: Duration = Duration::from_secs(30);

/// The memory backend, counting calls; `acknowledge` waits for a permit of `gate` when
/// `gated`, and `acknowledge_batch` fails with `Unavailable` while `fail_batches` is set.
#[derive(Clone)]
struct Probe {
    inner: MemoryBackend,
    gated: Arc<AtomicBool>,
    gate: Arc<Semaphore>,
    fail_batches: Arc<AtomicBool>,
    acks: Arc<AtomicUsize>,
    batches: Arc<std::sync::Mutex<Vec<usize>>>,
    step_reads: Arc<AtomicUsize>,
    gets: Arc<AtomicUsize>,
}

impl Probe {
    fn new() -> (ManualClock, Probe) {
        let clock = ManualClock::starting_now();
        let inner = MemoryBackend::with_clock(Arc::new(clock.clone()));
        let probe = Probe {
            inner,
            gated: Arc::default(),
            gate: Arc::new(Semaphore::new(0)),
            fail_batches: Arc::default(),
            acks: Arc::default(),
            batches: Arc::default(),
            step_reads: Arc::default(),
            gets: Arc::default(),
        };
        (clock, probe)
    }

    fn batch_sizes(&self) -> Vec<usize> {
        self.batches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Forwards everything to the memory backend, counting gets, step reads, acknowledgements
/// and batches (and polls: no wake-ups, as an adapter without them).
#[async_trait]
impl lease_core::ForwardExecution for Probe {
    fn inner_execution(&self) -> &dyn ExecutionClient {
        &self.inner
    }
    fn wakeups(&self) -> Option<WakeReceiver> {
        None
    }
    async fn get(&self, id: &ExecutionId) -> Result<Option<ExecutionRecord>> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        self.inner.get(id).await
    }
    async fn acknowledge(
        &self,
        lease: &ExecutionLease,
        outcome: &WorkflowRunOutcome,
    ) -> Result<Fenced<Acknowledged>> {
        self.acks.fetch_add(1, Ordering::SeqCst);
        if self.gated.load(Ordering::SeqCst) {
            let _permit = self.gate.acquire().await.expect("gate open");
        }
        self.inner.acknowledge(lease, outcome).await
    }
    async fn acknowledge_and_claim(
        &self,
        ack: &Acknowledgement,
        next: ClaimRequest,
    ) -> Result<AckAndClaim> {
        super::test_backend::ack_then_claim(self, ack, next).await
    }
    async fn acknowledge_batch(
        &self,
        acks: &[Acknowledgement],
    ) -> Result<Vec<Fenced<Acknowledged>>> {
        self.batches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(acks.len());
        if self.fail_batches.load(Ordering::SeqCst) {
            return Err(LeaseError::Unavailable {
                backend: "probe",
                operation: "acknowledge_batch",
                source: "injected".into(),
            });
        }
        self.inner.acknowledge_batch(acks).await
    }
}

/// Counts step reads; forwards the rest.
#[async_trait]
impl lease_core::ForwardHeap for Probe {
    fn inner_heap(&self) -> &dyn HeapClient {
        &self.inner
    }
    async fn read_step(
        &self,
        id: &ExecutionId,
        step_key: &StepKey,
        step_attempt: u32,
    ) -> Result<Option<HeapRecord>> {
        self.step_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read_step(id, step_key, step_attempt).await
    }
}

/// Forwards stores and starts.
impl lease_core::ForwardStore for Probe {
    fn inner_store(&self) -> &dyn StoreClient {
        &self.inner
    }
}

/// Forwards starts.
impl lease_core::ForwardStart for Probe {
    fn inner_start(&self) -> &dyn StartClient {
        &self.inner
    }
}

fn options(concurrency: usize) -> DispatcherOptions {
    DispatcherOptions::new()
        .concurrency(concurrency)
        .lease_duration(LEASE)
        .renew_every(Duration::from_secs(15))
        .poll_interval(Duration::from_millis(5))
}

async fn admit(b: &Probe, ids: &[&str]) {
    for i in ids {
        b.admit(&Admission::new(id(i))).await.expect("admit");
    }
}

async fn status(b: &Probe, name: &str) -> ExecutionStatus {
    b.inner
        .get(&id(name))
        .await
        .expect("get")
        .expect("record")
        .status
}

async fn completing(d: Delivery) -> std::result::Result<Reply, DeliveryError> {
    let v: u32 = d
        .step("one", || async { Ok::<_, DeliveryError>(1) })
        .await?;
    Ok(Reply::Acknowledge(WorkflowRunOutcome::Completed(
        Json::to_json("result", &v).expect("json"),
    )))
}

/// Acknowledgements arriving while one is in flight wait for it, then go out as one
/// `acknowledge_batch`; each is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledgements_queued_behind_one_in_flight_go_as_one_batch() {
    let (_clock, b) = Probe::new();
    b.gated.store(true, Ordering::SeqCst);
    let names = ["a", "b", "c", "d", "e"];
    admit(&b, &names).await;
    let d = Dispatcher::start(Arc::new(b.clone()), completing, options(5)).expect("start");
    // The leader's acknowledge is held at the gate; the other four queue behind it.
    wait_until("four queued acknowledgements", || d.queued_acks() == 4).await;
    assert_eq!(b.acks.load(Ordering::SeqCst), 1, "only the leader called");
    assert!(b.batch_sizes().is_empty());
    b.gated.store(false, Ordering::SeqCst);
    b.gate.add_permits(1);
    wait_until("five acknowledged", || d.snapshot().acknowledgements == 5).await;
    assert_eq!(b.batch_sizes(), vec![4], "one batch of the four queued");
    assert_eq!(b.acks.load(Ordering::SeqCst), 1);
    for n in names {
        assert_eq!(status(&b, n).await, ExecutionStatus::Completed, "{n}");
    }
    let report = d.shutdown(Duration::from_secs(5)).await;
    assert_eq!(report.metrics.lost, 0);
}

/// An acknowledgement that waited in the queue past its delivery's local deadline is not
/// sent (the lease may have expired: RFC 002, a holder whose lease may have expired stops
/// writing); the lease is left to expire, the delivery counts as lost, the leader's
/// acknowledgement is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledgements_queued_past_the_local_deadline_are_not_sent() {
    let (_clock, b) = Probe::new();
    b.gated.store(true, Ordering::SeqCst);
    let names = ["a", "b", "c"];
    admit(&b, &names).await;
    let lease = Duration::from_millis(300);
    let opts = options(3)
        .lease_duration(lease)
        .renew_every(Duration::from_millis(100));
    let d = Dispatcher::start(Arc::new(b.clone()), completing, opts).expect("start");
    wait_until("two queued acknowledgements", || d.queued_acks() == 2).await;
    // The workers have returned, so nothing renews: every local deadline (claim sent, which
    // was before now, + 0.9 lease) passes while the leader's acknowledgement is held.
    let queued = tokio::time::Instant::now();
    wait_until("the leases' local deadlines", || {
        tokio::time::Instant::now() >= queued + lease
    })
    .await;
    b.gated.store(false, Ordering::SeqCst);
    b.gate.add_permits(1);
    // The late ones are counted when the leader's call returns, just before the leader's
    // own acknowledgement is: wait for both.
    wait_until("two lost and the leader's acknowledgement", || {
        let s = d.snapshot();
        s.lost == 2 && s.acknowledgements >= 1
    })
    .await;
    assert_eq!(
        d.snapshot().acknowledgements,
        1,
        "the leader's, sent in time"
    );
    assert!(b.batch_sizes().is_empty(), "no batch was sent");
    assert_eq!(b.acks.load(Ordering::SeqCst), 1, "only the leader called");
    let mut completed = 0;
    for n in names {
        if status(&b, n).await == ExecutionStatus::Completed {
            completed += 1;
        }
    }
    assert_eq!(completed, 1, "only the leader's execution completed");
    d.abort();
}

/// A batch that certainly applied nothing (`Unavailable`) falls back to one
/// acknowledgement per item; every delivery is still acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_batch_falls_back_to_single_acknowledgements() {
    let (_clock, b) = Probe::new();
    b.gated.store(true, Ordering::SeqCst);
    b.fail_batches.store(true, Ordering::SeqCst);
    let names = ["a", "b", "c"];
    admit(&b, &names).await;
    let d = Dispatcher::start(Arc::new(b.clone()), completing, options(3)).expect("start");
    wait_until("two queued acknowledgements", || d.queued_acks() == 2).await;
    b.gated.store(false, Ordering::SeqCst);
    b.gate.add_permits(1);
    wait_until("three acknowledged", || d.snapshot().acknowledgements == 3).await;
    assert_eq!(b.batch_sizes(), vec![2]);
    assert_eq!(b.acks.load(Ordering::SeqCst), 3, "leader + two fallbacks");
    for n in names {
        assert_eq!(status(&b, n).await, ExecutionStatus::Completed, "{n}");
    }
    let report = d.shutdown(Duration::from_secs(5)).await;
    assert_eq!(report.metrics.backend_errors, 1);
}

/// Acknowledgements whose leases were reclaimed while they waited are `Lost`, in the
/// batch as for the leader, and leave the peer's deliveries running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_acknowledgements_in_a_batch_are_lost_and_change_nothing() {
    let (clock, b) = Probe::new();
    b.gated.store(true, Ordering::SeqCst);
    let names = ["a", "b", "c"];
    admit(&b, &names).await;
    let d = Dispatcher::start(Arc::new(b.clone()), completing, options(3)).expect("start");
    wait_until("two queued acknowledgements", || d.queued_acks() == 2).await;
    // Every lease expires; a peer reclaims all three (the redelivery delay passes too).
    clock.advance(LEASE + Duration::from_secs(60));
    let peer = b.inner.clone();
    let reclaimed = peer
        .claim_due(ClaimRequest {
            now: Timestamp::MAX,
            limit: 10,
            duration: LEASE,
        })
        .await
        .expect("claim");
    assert_eq!(reclaimed.len(), 3);
    b.gated.store(false, Ordering::SeqCst);
    b.gate.add_permits(1);
    wait_until("three lost", || d.snapshot().lost == 3).await;
    assert_eq!(b.batch_sizes(), vec![2]);
    for n in names {
        assert_eq!(status(&b, n).await, ExecutionStatus::Running, "{n}: peer's");
    }
    let report = d.shutdown(Duration::from_secs(5)).await;
    assert_eq!(report.metrics.acknowledgements, 0);
}

/// A first delivery neither reads the execution after the claim nor reads step records;
/// a step it wrote is replayed from memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_delivery_reads_neither_the_record_nor_steps() {
    let (_clock, b) = Probe::new();
    admit(&b, &["x"]).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let worker = {
        let runs = runs.clone();
        move |d: Delivery| {
            let runs = runs.clone();
            async move {
                for key in ["s1", "s2", "s3"] {
                    let _: u32 = d
                        .step(key, || async {
                            runs.fetch_add(1, Ordering::SeqCst);
                            Ok::<_, DeliveryError>(7)
                        })
                        .await?;
                }
                // Asking again for a step this delivery wrote replays it from memory.
                let again: u32 = d
                    .step("s1", || async { Ok::<_, DeliveryError>(99) })
                    .await?;
                assert_eq!(again, 7);
                Ok(Reply::Retry)
            }
        }
    };
    let d = Dispatcher::start(Arc::new(b.clone()), worker, options(1)).expect("start");
    wait_until("one release", || d.snapshot().releases >= 1).await;
    let report = d.shutdown(Duration::from_secs(5)).await;
    assert_eq!(report.metrics.releases, 1);
    assert_eq!(runs.load(Ordering::SeqCst), 3, "each step ran once");
    assert_eq!(b.step_reads.load(Ordering::SeqCst), 0, "no step reads");
    assert_eq!(b.gets.load(Ordering::SeqCst), 0, "no get after the claim");
}

/// On a redelivery the driver reads each step once, then answers from memory.
#[tokio::test]
async fn redelivery_reads_each_step_once() {
    let (clock, b) = Probe::new();
    admit(&b, &["x"]).await;
    let claim = |b: Probe| async move {
        b.claim_due_with_records(ClaimRequest {
            now: Timestamp::MAX,
            limit: 1,
            duration: LEASE,
        })
        .await
        .expect("claim")
        .pop()
        .expect("one")
    };
    let first = claim(b.clone()).await;
    assert!(first.record.is_first_delivery(&first.lease));
    let d1 = Delivery::new(
        Arc::new(b.clone()),
        first.lease.clone(),
        first.record,
        CancellationToken::new(),
    );
    let v: u32 = d1
        .step("s1", || async { Ok::<_, DeliveryError>(1) })
        .await
        .expect("step");
    assert_eq!(v, 1);
    assert_eq!(b.step_reads.load(Ordering::SeqCst), 0);
    assert_eq!(
        b.release(&first.lease).await.expect("release"),
        Fenced::Accepted(())
    );
    clock.advance(Duration::from_secs(60));
    let second = claim(b.clone()).await;
    assert!(!second.record.is_first_delivery(&second.lease));
    let d2 = Delivery::new(
        Arc::new(b.clone()),
        second.lease,
        second.record,
        CancellationToken::new(),
    );
    for _ in 0..3 {
        let v: u32 = d2
            .step("s1", || async { Ok::<_, DeliveryError>(2) })
            .await
            .expect("step");
        assert_eq!(v, 1, "replayed");
    }
    assert_eq!(
        b.step_reads.load(Ordering::SeqCst),
        1,
        "read once, then remembered"
    );
    let v: u32 = d2
        .step("s2", || async { Ok::<_, DeliveryError>(2) })
        .await
        .expect("step");
    assert_eq!(v, 2);
    assert_eq!(
        b.step_reads.load(Ordering::SeqCst),
        2,
        "a missing step is read"
    );
}

/// Queued acknowledgements whose outcomes together exceed 1 MiB go out in several batches,
/// each within the cap (one item at least).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_outcomes_split_batches_by_size() {
    let (_clock, b) = Probe::new();
    b.gated.store(true, Ordering::SeqCst);
    let names = ["a", "b", "c", "d", "e"];
    admit(&b, &names).await;
    // 400 KB each: two fit in 1 MiB, three do not.
    let big = Json::to_json("outcome", &"x".repeat(400 * 1024)).expect("json");
    let worker = move |_d: Delivery| {
        let big = big.clone();
        async move { Ok::<_, DeliveryError>(Reply::Acknowledge(WorkflowRunOutcome::Completed(big))) }
    };
    let d = Dispatcher::start(Arc::new(b.clone()), worker, options(5)).expect("start");
    wait_until("four queued acknowledgements", || d.queued_acks() == 4).await;
    b.gated.store(false, Ordering::SeqCst);
    b.gate.add_permits(1);
    wait_until("five acknowledged", || d.snapshot().acknowledgements == 5).await;
    assert_eq!(b.batch_sizes(), vec![2, 2], "two batches of two");
    d.shutdown(Duration::from_secs(5)).await;
}
