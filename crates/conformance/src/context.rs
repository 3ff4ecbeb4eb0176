//! The per-case context: the harness, its manual clock and small helpers.

use lease_core::ExecutionClientExt;
use std::future::Future;
use std::time::Duration;

use lease_core::{
    Acknowledged, Admission, Capabilities, ClaimRequest, Clock, ExecutionClient, ExecutionId,
    ExecutionLease, ExecutionRecord, Fenced, HeapClient, HeapRecord, Json, LeaseBackend,
    LeaseError, ManualClock, RedeliveryPolicy, Result, StepKey, StepWrite, Timestamp,
    WorkflowRunOutcome,
};

use crate::harness::Harness;

/// The redelivery policy every case runs with: 100 ms, doubling, capped at 1.6 s.
pub fn test_policy() -> RedeliveryPolicy {
    RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_millis(1600))
        .unwrap_or_default()
}

/// Lease duration used by the cases.
pub const LEASE: Duration = Duration::from_secs(30);

/// `t` plus `d`.
pub fn plus(t: Timestamp, d: Duration) -> Timestamp {
    t.saturating_add(d)
}

/// `t` plus `ms` milliseconds (negative moves back).
pub fn plus_ms(t: Timestamp, ms: i64) -> Timestamp {
    Timestamp::from_millis(t.as_millis() + ms)
}

/// One millisecond before `t`: the last instant at which a gate opening at `t` is still shut.
pub fn just_before(t: Timestamp) -> Timestamp {
    plus_ms(t, -1)
}

/// Canonical JSON from text (panics on invalid test input, which is a bug in the suite).
pub fn json(text: &str) -> Json {
    Json::parse("test payload", text).expect("valid test JSON")
}

/// A step key (panics on invalid test input).
pub fn key(s: &str) -> StepKey {
    StepKey::new(s).expect("valid test step key")
}

/// A finished step write of attempt 0 with `response` (JSON text).
pub fn step(step_key: &str, response: &str) -> StepWrite {
    StepWrite {
        step_key: key(step_key),
        step_attempt: 0,
        done: true,
        response: json(response),
    }
}

/// Awaits a spawned task, re-raising its panic in the case.
pub async fn join<T>(handle: tokio::task::JoinHandle<T>) -> T {
    match handle.await {
        Ok(v) => v,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => panic!("spawned task failed: {e}"),
    }
}

/// What a case compares before and after an operation that must change nothing: the
/// effective record and every step record of one execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// `get` of the execution.
    pub record: Option<ExecutionRecord>,
    /// `list_steps` of the execution.
    pub steps: Vec<HeapRecord>,
}

/// One case's world: a fresh store, its clock, and helpers.
pub struct Ctx<H: Harness> {
    /// The harness (fresh store).
    pub harness: H,
    /// The manual clock the backend reads.
    pub clock: ManualClock,
    /// The redelivery policy the backend uses.
    pub policy: RedeliveryPolicy,
    /// A peer opened on first use by [`Ctx::probe_peer`] and kept for the whole case, so
    /// probes do not open a connection (pool) each time.
    probe: tokio::sync::OnceCell<H::Backend>,
    /// The libtest name of the running case (its thread's name), for [`Ctx::refusal_only`].
    test: String,
    /// What the backend declares it can do, read once at setup.
    caps: Capabilities,
}

impl<H: Harness> Ctx<H> {
    /// Marks this case as one that, on this harness, only checked a capability's refusal
    /// (or absence) and ends: recorded for `cargo xtask test-all`'s summary, which counts
    /// such cases apart from behaviour cases ([`crate::refusals`]). Returns `true`, so a
    /// module's `unsupported` check can end with it.
    pub fn refusal_only(&self) -> bool {
        crate::refusals::record(std::any::type_name::<H>(), &self.test);
        true
    }

    /// What the backend under test declares it can do
    /// ([`lease_core::ExecutionClient::capabilities`]): the cases check the rules of what it
    /// declares, and the refusals of what it does not.
    pub fn caps(&self) -> Capabilities {
        self.caps
    }

    /// Asserts `err` is the refusal of a capability the backend declared absent:
    /// [`LeaseError::Unsupported`] naming the backend as its declaration does.
    pub fn assert_unsupported(&self, err: &LeaseError) {
        match err {
            LeaseError::Unsupported { backend, .. } => assert_eq!(
                *backend, self.caps.backend,
                "the refusal names the backend its declaration names: {err}"
            ),
            other => panic!(
                "expected Unsupported from {}, got {other}",
                self.caps.backend
            ),
        }
    }

    /// The first connection.
    pub fn backend(&self) -> H::Backend {
        self.harness.backend()
    }

    /// A second connection to the same store.
    pub async fn peer(&self) -> H::Backend {
        self.harness.peer().await.expect("open a peer")
    }

    /// A peer connection kept for the whole case (opened on first use): for probes that
    /// only need "another connection", not a new one.
    pub async fn probe_peer(&self) -> H::Backend {
        self.probe.get_or_init(|| self.peer()).await.clone()
    }

    /// An execution id (panics on invalid test input, which is a bug in the suite).
    pub fn id(&self, s: &str) -> ExecutionId {
        ExecutionId::new(s).expect("valid test id")
    }

    /// The manual clock's now (what the backend reads).
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Sets the manual clock to `t`.
    pub fn set_clock(&self, t: Timestamp) {
        self.clock.set(t);
    }

    /// Admits `id` on the first connection.
    pub async fn admit(&self, id: &str) -> ExecutionRecord {
        self.backend()
            .admit(&Admission::new(self.id(id)))
            .await
            .expect("admit")
    }

    /// `claim_due` with every argument explicit; the raw result.
    pub async fn try_claim(
        &self,
        b: &impl LeaseBackend,
        now: Timestamp,
        limit: usize,
        duration: Duration,
    ) -> Result<Vec<ExecutionLease>> {
        b.claim_due(ClaimRequest {
            now,
            limit,
            duration,
        })
        .await
    }

    /// Claims with the clock's now, limit and [`LEASE`].
    pub async fn claim(&self, b: &impl LeaseBackend, limit: usize) -> Vec<ExecutionLease> {
        let now = b.now().await.expect("now");
        self.try_claim(b, now, limit, LEASE)
            .await
            .expect("claim_due")
    }

    /// Claims on another connection and asserts nothing is claimable.
    pub async fn assert_nothing_claimable(&self, why: &str) {
        let peer = self.probe_peer().await;
        let got = self.claim(&peer, 1000).await;
        assert!(got.is_empty(), "{why}: expected no lease, got {got:?}");
    }

    /// Claims exactly one lease, for `id`.
    pub async fn claim_one(&self, id: &str) -> ExecutionLease {
        let leases = self.claim(&self.backend(), 1000).await;
        let mine: Vec<_> = leases
            .into_iter()
            .filter(|l| l.execution_id.as_str() == id)
            .collect();
        assert_eq!(mine.len(), 1, "expected one lease for {id}");
        mine.into_iter().next().expect("one lease")
    }

    /// Claims on `b` and asserts the result is exactly one lease, for `id`.
    pub async fn claim_only(&self, b: &impl LeaseBackend, id: &str) -> ExecutionLease {
        let leases = self.claim(b, 1000).await;
        assert_eq!(
            leases.len(),
            1,
            "expected exactly one lease (for {id}), got {leases:?}"
        );
        assert_eq!(
            leases[0].execution_id.as_str(),
            id,
            "lease for the wrong execution"
        );
        leases.into_iter().next().expect("one lease")
    }

    /// The effective record of `id`.
    pub async fn get(&self, id: &str) -> ExecutionRecord {
        self.backend()
            .get(&self.id(id))
            .await
            .expect("get")
            .expect("record exists")
    }

    /// The effective record of `id`, or `None`.
    pub async fn try_get(&self, id: &str) -> Option<ExecutionRecord> {
        self.backend().get(&self.id(id)).await.expect("get")
    }

    /// Every step record of `id`.
    pub async fn steps(&self, id: &str) -> Vec<HeapRecord> {
        self.backend()
            .list_steps(&self.id(id))
            .await
            .expect("list_steps")
    }

    /// The record and steps of `id`, for before/after comparisons.
    pub async fn snapshot(&self, id: &str) -> Snapshot {
        Snapshot {
            record: self.try_get(id).await,
            steps: self.steps(id).await,
        }
    }

    /// A fenced step write on `b`.
    pub async fn write(
        &self,
        b: &impl LeaseBackend,
        lease: &ExecutionLease,
        step_key: &str,
        response: &str,
    ) -> Fenced<HeapRecord> {
        b.write_step(lease, &step(step_key, response))
            .await
            .expect("write_step")
    }

    /// Admits `id`, claims it, requests a wake now and acknowledges the delivery as
    /// suspended (asserted accepted): the lease of that ended delivery.
    pub async fn suspended_delivery(&self, id: &str) -> ExecutionLease {
        self.admit(id).await;
        let b = self.backend();
        let lease = self.claim_one(id).await;
        b.request_wake(&self.id(id), self.now())
            .await
            .expect("wake");
        let ack = b
            .acknowledge(&lease, &WorkflowRunOutcome::Suspended)
            .await
            .expect("ack");
        assert_eq!(ack, Fenced::Accepted(Acknowledged::Suspended));
        lease
    }

    /// Moves the shared manual clock forward.
    pub fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }

    /// Lets `stale` expire unrenewed, waits out the redelivery delay, and claims the execution
    /// on a fresh peer: the new current lease (asserted to carry a higher token).
    pub async fn reclaim(&self, stale: &ExecutionLease) -> (H::Backend, ExecutionLease) {
        let id = stale.execution_id.as_str().to_owned();
        self.set_clock(stale.expires_at);
        let unacked = self.get(&id).await.unacknowledged_deliveries;
        assert!(unacked >= 1, "an expired lease counts as unacknowledged");
        self.set_clock(plus(stale.expires_at, self.policy.delay(unacked)));
        let peer = self.peer().await;
        let current = self.claim_only(&peer, &id).await;
        assert!(
            current.token > stale.token,
            "a reclaim issues a higher token"
        );
        (peer, current)
    }
}

/// Runs one case on a fresh store: builds a runtime, sets up, runs, tears down (even when
/// the case panics), then re-raises the case's panic.
pub fn run_case<H, F, Fut>(case: F)
where
    H: Harness,
    F: FnOnce(std::sync::Arc<Ctx<H>>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let test = std::thread::current().name().unwrap_or("?").to_owned();
    rt.block_on(async move {
        let clock = ManualClock::starting_now();
        let policy = test_policy();
        let harness = H::setup(clock.clone(), policy)
            .await
            .expect("harness setup");
        let caps = harness.backend().capabilities();
        let ctx = std::sync::Arc::new(Ctx {
            harness,
            caps,
            clock,
            policy,
            probe: tokio::sync::OnceCell::new(),
            test,
        });
        let result = tokio::spawn(case(ctx.clone())).await;
        let leaked = match std::sync::Arc::try_unwrap(ctx) {
            Ok(ctx) => {
                let Ctx { harness, probe, .. } = ctx;
                drop(probe);
                harness.teardown().await.expect("harness teardown");
                false
            }
            Err(_) => true,
        };
        if let Err(e) = result {
            if e.is_panic() {
                std::panic::resume_unwind(e.into_panic());
            }
            panic!("case task failed: {e}");
        }
        assert!(
            !leaked,
            "the case left tasks holding its context; store not torn down"
        );
    });
}
