//! Priorities and concurrency limits on SQLite beyond the conformance cases: the claim
//! order holds across the waiting and running indexes (an expired lease of a higher
//! priority level comes before waiting rows of lower levels), and a candidate skipped for
//! its key is left out of the horizon (lease_core::selection rule 4).

use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, ConcurrencyKey, ConcurrencyLimit, ExecutionClient, ExecutionId,
    LimitScope, ManualClock, PauseScope, Priority, Timestamp,
};
use lease_sqlite::{SqliteBackend, SqliteConfig};

const START: i64 = 1_000_000;
const LEASE: Duration = Duration::from_secs(10);

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("valid id")
}

async fn open() -> (SqliteBackend, ManualClock) {
    let clock = ManualClock::new(Timestamp::from_millis(START));
    let b = SqliteBackend::open(SqliteConfig::in_memory().clock(Arc::new(clock.clone())))
        .await
        .expect("open");
    (b, clock)
}

/// A claim at the backend clock (`now` is min(requested, backend clock)).
fn request(now: Timestamp, limit: usize) -> ClaimRequest {
    ClaimRequest {
        now,
        limit,
        duration: LEASE,
    }
}

/// A claim of up to `limit` at the backend clock, as the claimed ids in claim order.
async fn claim_ids(b: &SqliteBackend, limit: usize) -> (Vec<String>, Option<Timestamp>) {
    let batch = b
        .claim_due_with_horizon(request(Timestamp::MAX, limit))
        .await
        .expect("claim");
    let ids = batch
        .claimed
        .iter()
        .map(|c| c.lease.execution_id.as_str().to_owned())
        .collect();
    (ids, batch.next_claimable_at)
}

fn at_priority(name: &str, p: i32) -> Admission {
    Admission::new(id(name)).priority(Priority::new(p).expect("priority"))
}

#[tokio::test]
async fn an_expired_high_priority_lease_comes_before_lower_levels() {
    let (b, clock) = open().await;
    b.admit(&at_priority("high", 5)).await.expect("admit");
    assert_eq!(claim_ids(&b, 1).await.0, ["high"]);
    b.admit(&at_priority("low", -3)).await.expect("admit");
    b.admit(&at_priority("mid", 2)).await.expect("admit");
    b.admit(&at_priority("mid-later", 2).not_before(Timestamp::from_millis(START + 1)))
        .await
        .expect("admit");
    clock.advance(Duration::from_secs(3600));
    let (order, _) = claim_ids(&b, 10).await;
    assert_eq!(order, ["high", "mid", "mid-later", "low"]);
}

#[tokio::test]
async fn a_candidate_blocked_by_its_key_is_not_in_the_horizon() {
    let (b, _clock) = open().await;
    let key = ConcurrencyKey::new("tenant").expect("key");
    b.set_concurrency_limit(
        &LimitScope::Key(key.clone()),
        Some(ConcurrencyLimit::new(1).expect("limit")),
    )
    .await
    .expect("set limit");
    for name in ["a", "b"] {
        b.admit(&Admission::new(id(name)).concurrency_key(key.clone()))
            .await
            .expect("admit");
    }
    let later = Timestamp::from_millis(START + 5_000);
    b.admit(&Admission::new(id("later")).not_before(later))
        .await
        .expect("admit");
    let (taken, horizon) = claim_ids(&b, 10).await;
    assert_eq!(taken, ["a"], "the key's one place is taken once");
    assert_eq!(horizon, Some(later), "b waits for a's place, not for now");
}

/// Deleting a namespace removes its pauses and limits too: a namespace used again starts
/// with nothing paused and no limits, while another namespace in the same file keeps its own.
#[tokio::test]
async fn delete_namespace_removes_its_pauses_and_limits() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("leases.db");
    let open_ns = |ns: &'static str| {
        let path = path.clone();
        async move {
            SqliteBackend::open(SqliteConfig::file(&path).namespace(ns))
                .await
                .expect("open")
        }
    };
    let (gone, kept) = (open_ns("gone").await, open_ns("kept").await);
    let limit = ConcurrencyLimit::new(2).expect("limit");
    for b in [&gone, &kept] {
        b.pause(&PauseScope::Namespace).await.expect("pause");
        b.set_concurrency_limit(&LimitScope::Default, Some(limit))
            .await
            .expect("limit");
    }
    gone.delete_namespace().await.expect("delete");
    let again = open_ns("gone").await;
    assert!(again.list_paused().await.expect("paused").is_empty());
    assert_eq!(
        again.concurrency_limits().await.expect("limits").default,
        None
    );
    assert_eq!(
        kept.list_paused().await.expect("paused"),
        [PauseScope::Namespace]
    );
    assert_eq!(
        kept.concurrency_limits().await.expect("limits").default,
        Some(limit)
    );
}
