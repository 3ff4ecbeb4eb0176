//! A worker must not outlive a lease it can no longer renew, and a failing adapter must not
//! wedge the dispatcher or its driver: the memory backend behind a wrapper whose renewals
//! fail, hang or are refused and whose batch acknowledgement panics. Time is tokio's
//! paused clock, so deadlines are exact and nothing waits in real time.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::*;
use lease_core::wakeup::WakeReceiver;
use lease_core::{
    AckAndClaim, Acknowledged, Acknowledgement, Admission, ClaimRequest, ExecutionClient,
    ExecutionId, ExecutionLease, ExecutionStatus, Fenced, HeapClient, LeaseError, ManualClock,
    MemoryBackend, Result, WorkflowRunOutcome,
};

const LEASE: Duration = Duration::from_millis(300);
const RENEW_OK: u8 = 0;
const RENEW_UNAVAILABLE: u8 = 1;
const RENEW_HANGS: u8 = 2;
const RENEW_FOREIGN: u8 = 3;

/// The memory backend with injectable renewal and batch faults.
#[derive(Clone)]
struct Faulty {
    inner: MemoryBackend,
    renew_mode: Arc<AtomicU8>,
    renewals: Arc<AtomicUsize>,
    panic_batches: Arc<AtomicBool>,
    slow_acks: Arc<AtomicBool>,
}

impl Faulty {
    fn new(renew_mode: u8) -> (ManualClock, Faulty) {
        let clock = ManualClock::starting_now();
        let inner = MemoryBackend::with_clock(Arc::new(clock.clone()));
        let f = Faulty {
            inner,
            renew_mode: Arc::new(AtomicU8::new(renew_mode)),
            renewals: Arc::default(),
            panic_batches: Arc::default(),
            slow_acks: Arc::default(),
        };
        (clock, f)
    }
}

/// Forwards everything to the memory backend but renewals, acknowledgements and batches
/// (and polls: no wake-ups, as an adapter without them).
#[async_trait]
impl lease_core::ForwardExecution for Faulty {
    fn inner_execution(&self) -> &dyn ExecutionClient {
        &self.inner
    }
    fn wakeups(&self) -> Option<WakeReceiver> {
        None
    }
    async fn renew(
        &self,
        lease: &ExecutionLease,
        duration: Duration,
    ) -> Result<Fenced<ExecutionLease>> {
        self.renewals.fetch_add(1, Ordering::SeqCst);
        match self.renew_mode.load(Ordering::SeqCst) {
            RENEW_UNAVAILABLE => Err(LeaseError::Unavailable {
                backend: "faulty",
                operation: "renew",
                source: "injected partition".into(),
            }),
            RENEW_HANGS => std::future::pending().await,
            RENEW_FOREIGN => Err(LeaseError::ForeignToken {
                execution: lease.execution_id.clone(),
                token: lease.token,
            }),
            _ => self.inner.renew(lease, duration).await,
        }
    }
    async fn acknowledge(
        &self,
        lease: &ExecutionLease,
        outcome: &WorkflowRunOutcome,
    ) -> Result<Fenced<Acknowledged>> {
        if self.slow_acks.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
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
        if self.panic_batches.swap(false, Ordering::SeqCst) {
            panic!("injected adapter panic in acknowledge_batch");
        }
        self.inner.acknowledge_batch(acks).await
    }
}

super::test_backend::forward_rest!(Faulty);

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

fn options() -> DispatcherOptions {
    DispatcherOptions::new()
        .concurrency(4)
        .lease_duration(LEASE)
        .renew_every(LEASE / 3)
        .poll_interval(Duration::from_millis(5))
}

/// What a worker saw: when its future was dropped (virtual time since the test started;
/// the dispatcher drops a cancelled worker), and whether a fenced write through its
/// delivery after that was refused locally.
#[derive(Debug)]
struct Stopped {
    after: Duration,
    write_refused: bool,
}

/// Sends what the worker saw when the dispatcher drops its future.
struct OnDrop {
    delivery: Delivery,
    start: Instant,
    tx: mpsc::UnboundedSender<Stopped>,
}

impl Drop for OnDrop {
    fn drop(&mut self) {
        let write_refused = self.delivery.ensure_live().is_err() && self.delivery.is_lost();
        let _ = self.tx.send(Stopped {
            after: self.start.elapsed(),
            write_refused,
        });
    }
}

/// Starts a dispatcher whose worker never returns by itself ("charging the card").
fn waiting_dispatcher(b: &Faulty) -> (Dispatcher, mpsc::UnboundedReceiver<Stopped>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let start = Instant::now();
    let worker = move |d: Delivery| {
        let guard = OnDrop {
            delivery: d,
            start,
            tx: tx.clone(),
        };
        async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            Ok(Reply::Retry)
        }
    };
    let d = Dispatcher::start(Arc::new(b.clone()), worker, options()).expect("start");
    (d, rx)
}

/// Renewals that only fail (a partition) must still stop the worker: it is cancelled at
/// its local deadline, before the lease could expire, and writes nothing.
#[tokio::test(start_paused = true)]
async fn a_worker_whose_renewals_fail_stops_before_its_lease_expires() {
    for mode in [RENEW_UNAVAILABLE, RENEW_HANGS] {
        let (_clock, b) = Faulty::new(mode);
        b.admit(&Admission::new(id("order-42")))
            .await
            .expect("admit");
        let (dispatcher, mut rx) = waiting_dispatcher(&b);
        let stopped = tokio::time::timeout(LEASE * 10, rx.recv())
            .await
            .expect("the worker was never stopped")
            .expect("stopped");
        assert!(
            stopped.after < LEASE,
            "mode {mode}: stopped after {stopped:?}"
        );
        assert!(
            stopped.write_refused,
            "mode {mode}: a fenced write left the worker"
        );
        assert_eq!(dispatcher.snapshot().lost, 1, "mode {mode}");
        let record = b.get(&id("order-42")).await.expect("get").expect("record");
        assert_eq!(
            record.status,
            ExecutionStatus::Running,
            "neither released nor acked"
        );
        assert!(
            b.list_steps(&id("order-42"))
                .await
                .expect("steps")
                .is_empty()
        );
        dispatcher.abort();
    }
}

/// A permanent renewal error is not retried forever: one refused renewal ends the
/// delivery as lost.
#[tokio::test(start_paused = true)]
async fn a_permanent_renewal_error_ends_the_delivery_as_lost() {
    let (_clock, b) = Faulty::new(RENEW_FOREIGN);
    b.admit(&Admission::new(id("order-42")))
        .await
        .expect("admit");
    let (dispatcher, mut rx) = waiting_dispatcher(&b);
    let stopped = tokio::time::timeout(LEASE * 10, rx.recv())
        .await
        .expect("the worker was never stopped")
        .expect("stopped");
    assert!(stopped.write_refused);
    assert_eq!(
        b.renewals.load(Ordering::SeqCst),
        1,
        "no retry of a refused renewal"
    );
    assert!(
        stopped.after < LEASE / 3 + Duration::from_millis(5),
        "{stopped:?}"
    );
    assert_eq!(dispatcher.snapshot().lost, 1);
    dispatcher.abort();
}

/// Renewals that succeed keep moving the local deadline: a delivery longer than many
/// leases is never cancelled.
#[tokio::test(start_paused = true)]
async fn renewals_move_the_local_deadline() {
    let (_clock, b) = Faulty::new(RENEW_OK);
    b.admit(&Admission::new(id("long"))).await.expect("admit");
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    let worker = move |d: Delivery| {
        let flag = flag.clone();
        async move {
            tokio::time::sleep(LEASE * 5).await;
            d.ensure_live()?;
            flag.store(true, Ordering::SeqCst);
            Ok(Reply::Acknowledge(WorkflowRunOutcome::Suspended))
        }
    };
    let dispatcher = Dispatcher::start(Arc::new(b.clone()), worker, options()).expect("start");
    let report_deadline = Instant::now() + LEASE * 20;
    while !done.load(Ordering::SeqCst) {
        assert!(Instant::now() < report_deadline, "never finished");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let report = dispatcher.shutdown(LEASE).await;
    assert_eq!(report.metrics.lost, 0);
    assert!(report.metrics.renewals >= 10);
}

/// A panic in the adapter's `acknowledge_batch` must not wedge the dispatcher (in-flight
/// never cleared, later acknowledgements queued forever, shutdown hung): the panic is an
/// unknown outcome for that batch, and every later acknowledgement goes through.
#[tokio::test(start_paused = true)]
async fn a_panicking_acknowledge_batch_does_not_wedge_the_dispatcher() {
    let (_clock, b) = Faulty::new(RENEW_OK);
    b.slow_acks.store(true, Ordering::SeqCst);
    b.panic_batches.store(true, Ordering::SeqCst);
    for i in 0..8 {
        b.admit(&Admission::new(id(&format!("e-{i}"))))
            .await
            .expect("admit");
    }
    let worker = |_d: Delivery| async { Ok(Reply::Acknowledge(WorkflowRunOutcome::Suspended)) };
    let dispatcher = Dispatcher::start(
        Arc::new(b.clone()),
        worker,
        options().renew_every(LEASE / 2),
    )
    .expect("start");
    let m = dispatcher.metrics();
    let deadline = Instant::now() + Duration::from_secs(5);
    // Every delivery ends: acknowledged, or (the panicked batch) left to expire.
    while m.snapshot().in_flight > 0 || m.snapshot().claims < 8 {
        assert!(Instant::now() < deadline, "wedged: {:?}", m.snapshot());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        !b.panic_batches.load(Ordering::SeqCst),
        "a batch was sent and panicked"
    );
    // After the panic, acknowledgements still flow: admit one more and see it acknowledged.
    let acked = m.snapshot().acknowledgements;
    b.admit(&Admission::new(id("after"))).await.expect("admit");
    dispatcher.wake();
    while m.snapshot().acknowledgements == acked {
        assert!(
            Instant::now() < deadline,
            "no acknowledgement after the panic"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let report = tokio::time::timeout(Duration::from_secs(5), dispatcher.shutdown(LEASE))
        .await
        .expect("shutdown hung");
    assert_eq!(report.metrics.in_flight, 0);
}

/// Dropping the future of `shutdown` (under a timeout) must not leave the drain running
/// detached: it aborts like dropping the dispatcher: workers are cancelled at once and
/// nothing more is written.
#[tokio::test(start_paused = true)]
async fn dropping_the_shutdown_future_aborts_the_drain() {
    let (_clock, b) = Faulty::new(RENEW_OK);
    b.admit(&Admission::new(id("slow"))).await.expect("admit");
    let dropped = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let (flag, go) = (dropped.clone(), started.clone());
    struct SetOnDrop(Arc<AtomicBool>);
    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let worker = move |_d: Delivery| {
        let guard = SetOnDrop(flag.clone());
        go.store(true, Ordering::SeqCst);
        async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            Ok(Reply::Retry)
        }
    };
    let dispatcher = Dispatcher::start(Arc::new(b.clone()), worker, options()).expect("start");
    while !started.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let cut = tokio::time::timeout(
        Duration::from_millis(10),
        dispatcher.shutdown(Duration::from_secs(3600)),
    )
    .await;
    assert!(
        cut.is_err(),
        "the shutdown could not finish within the grace"
    );
    let deadline = Instant::now() + Duration::from_secs(1);
    while !dropped.load(Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "the worker still runs after the drop"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let record = b.get(&id("slow")).await.expect("get").expect("record");
    assert_eq!(
        record.status,
        ExecutionStatus::Running,
        "nothing released: like a crash"
    );
}
