//! The per-case context: the harness, its manual clock and small helpers.

use std::future::Future;
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, ExecutionClient, ExecutionId, ExecutionLease, ExecutionRecord,
    LeaseBackend,
    ManualClock, RedeliveryPolicy,
};

use crate::harness::Harness;

/// The redelivery policy every case runs with: 100 ms, doubling, capped at 1.6 s.
pub fn test_policy() -> RedeliveryPolicy {
    RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_millis(1600))
        .unwrap_or_default()
}

/// Lease duration used by the cases.
pub const LEASE: Duration = Duration::from_secs(30);

/// One case's world: a fresh store, its clock, and helpers.
pub struct Ctx<H: Harness> {
    /// The harness (fresh store).
    pub harness: H,
    /// The manual clock the backend reads.
    pub clock: ManualClock,
    /// The redelivery policy the backend uses.
    pub policy: RedeliveryPolicy,
}

impl<H: Harness> Ctx<H> {
    /// The first connection.
    pub fn backend(&self) -> H::Backend {
        self.harness.backend()
    }

    /// A second connection to the same store.
    pub async fn peer(&self) -> H::Backend {
        self.harness.peer().await.expect("open a peer")
    }

    /// An execution id (panics on invalid test input, which is a bug in the suite).
    pub fn id(&self, s: &str) -> ExecutionId {
        ExecutionId::new(s).expect("valid test id")
    }

    /// Admits `id` on the first connection.
    pub async fn admit(&self, id: &str) -> ExecutionRecord {
        self.backend()
            .admit(&Admission::new(self.id(id)))
            .await
            .expect("admit")
    }

    /// Claims with the clock's now, limit and [`LEASE`].
    pub async fn claim(&self, b: &impl LeaseBackend, limit: usize) -> Vec<ExecutionLease> {
        let now = b.now().await.expect("now");
        b.claim_due(ClaimRequest {
            now,
            limit,
            duration: LEASE,
        })
        .await
        .expect("claim_due")
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

    /// The effective record of `id`.
    pub async fn get(&self, id: &str) -> ExecutionRecord {
        self.backend()
            .get(&self.id(id))
            .await
            .expect("get")
            .expect("record exists")
    }

    /// Moves the shared manual clock forward.
    pub fn advance(&self, d: Duration) {
        self.clock.advance(d);
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
    rt.block_on(async move {
        let clock = ManualClock::starting_now();
        let policy = test_policy();
        let harness = H::setup(clock.clone(), policy).await.expect("harness setup");
        let ctx = std::sync::Arc::new(Ctx {
            harness,
            clock,
            policy,
        });
        let result = tokio::spawn(case(ctx.clone())).await;
        let leaked = match std::sync::Arc::try_unwrap(ctx) {
            Ok(ctx) => {
                ctx.harness.teardown().await.expect("harness teardown");
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
        assert!(!leaked, "the case left tasks holding its context; store not torn down");
    });
}
