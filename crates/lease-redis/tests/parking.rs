//! Parking on Redis, beyond the conformance rows (`backlog`): a claim moves a member held
//! back by its key's limit or its paused workflow out of its ready set into the scope's
//! parked set, and every event that may open the gate makes the scope due again: a renewal
//! that moves the key's next expiry earlier (the horizon follows), a member brought back for
//! a free place that leaves unclaimed, a changed default limit; parked members come back in
//! claim order (priorities kept); a record that changes leaves its parked set; a backlog
//! past one claim's parking budget is parked over successive claims, the horizon saying
//! "now" meanwhile; racing claimers over a parked backlog keep the limit and finish.
//!
//! One partition whatever `LEASE_REDIS_PARTITIONS` says: concurrency keys need one. On one
//! server (as tests/controls.rs): the checks read the namespace's keys with an admin
//! connection.

mod common;

use std::time::Duration;

use lease_core::{
    Admission, CancelReason, ClaimBatch, ClaimRequest, Clock, ConcurrencyKey, ConcurrencyLimit,
    ExecutionClient, ExecutionId, ExecutionLease, Json, LimitScope, ManualClock, Priority,
    RedeliveryPolicy, Timestamp, WorkflowRunOutcome,
};
use lease_redis::RedisBackend;

const LEASE: Duration = Duration::from_secs(30);
const START_MS: i64 = 1_700_000_000_000;

fn policy() -> RedeliveryPolicy {
    RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_millis(1600))
        .expect("policy")
}

fn id(name: &str) -> ExecutionId {
    ExecutionId::new(name).expect("id")
}

fn keyed(name: &str, key: &str) -> Admission {
    Admission::new(id(name)).concurrency_key(ConcurrencyKey::new(key).expect("key"))
}

async fn set_limit(b: &RedisBackend, scope: LimitScope, n: Option<u32>) {
    let limit = n.map(|n| ConcurrencyLimit::new(n).expect("limit"));
    b.set_concurrency_limit(&scope, limit).await.expect("limit");
}

fn key_scope(key: &str) -> LimitScope {
    LimitScope::Key(ConcurrencyKey::new(key).expect("key"))
}

async fn claim_batch(b: &RedisBackend, clock: &ManualClock, limit: usize) -> ClaimBatch {
    let request = ClaimRequest {
        now: clock.now(),
        limit,
        duration: LEASE,
    };
    b.claim_due_with_horizon(request).await.expect("claim")
}

fn ids(leases: &[ExecutionLease]) -> Vec<String> {
    leases
        .iter()
        .map(|l| l.execution_id.as_str().to_owned())
        .collect()
}

async fn claim_ids(b: &RedisBackend, clock: &ManualClock, limit: usize) -> Vec<String> {
    ids(&common::claim(b, clock, limit, LEASE).await)
}

fn done() -> WorkflowRunOutcome {
    WorkflowRunOutcome::Completed(Json::parse("t", "1").expect("json"))
}

/// The namespace's parking keys (`parked`, `parked:<scope>`) after its prefix.
async fn parking_keys(b: &RedisBackend) -> Vec<String> {
    common::snapshot(b)
        .await
        .into_keys()
        .map(|k| k[b.key_prefix().len()..].to_owned())
        .filter(|k| k.starts_with("parked"))
        .collect()
}

async fn fresh(clock: &ManualClock) -> RedisBackend {
    common::fresh_with(clock, policy(), 1).await
}

/// With limit 1 the horizon of a claim that parked the key's backlog is the key's lease
/// expiry (its place frees then), and a renewal that shortens the lease moves it earlier.
#[tokio::test]
async fn the_horizon_follows_the_keys_next_expiry_also_when_a_renewal_shortens_it() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    set_limit(&b, key_scope("acme"), Some(1)).await;
    let admissions = [keyed("a", "acme"), keyed("b", "acme"), keyed("c", "acme")];
    b.admit_batch(&admissions).await.expect("admit");
    let first = claim_batch(&b, &clock, 10).await;
    assert_eq!(first.claimed.len(), 1);
    let lease = first.claimed[0].lease.clone();
    assert_eq!(parking_keys(&b).await, ["parked", "parked:k:acme"]);
    let idle = claim_batch(&b, &clock, 10).await;
    assert!(idle.claimed.is_empty());
    assert_eq!(idle.next_claimable_at, Some(lease.expires_at));

    let short = Duration::from_secs(2);
    let renewed = b.renew(&lease, short).await.expect("renew");
    let renewed = match renewed {
        lease_core::Fenced::Accepted(l) => l,
        lease_core::Fenced::Lost => panic!("renewal lost"),
    };
    assert!(renewed.expires_at < lease.expires_at);
    let idle = claim_batch(&b, &clock, 10).await;
    assert_eq!(idle.next_claimable_at, Some(renewed.expires_at));
    clock.set(renewed.expires_at);
    assert_eq!(claim_ids(&b, &clock, 10).await, ["b"]);
}

/// A parked member brought back for a free place that a claim full of other work did not
/// take, then cancelled, leaves the place free: the next parked member comes back.
#[tokio::test]
async fn a_member_brought_back_and_cancelled_frees_its_place_again() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    set_limit(&b, key_scope("acme"), Some(1)).await;
    let admissions = [keyed("a", "acme"), keyed("b", "acme"), keyed("c", "acme")];
    b.admit_batch(&admissions).await.expect("admit");
    let first = common::claim(&b, &clock, 10, LEASE).await;
    assert_eq!(ids(&first), ["a"]);
    let urgent = Admission::new(id("urgent")).priority(Priority::new(5).expect("priority"));
    b.admit(&urgent).await.expect("admit");
    assert!(
        !b.acknowledge(&first[0], &done())
            .await
            .expect("ack")
            .is_lost()
    );
    // b comes back for the free place; the claim of one takes the higher priority.
    assert_eq!(claim_ids(&b, &clock, 1).await, ["urgent"]);
    let reason = CancelReason::new("stop").expect("reason");
    b.cancel(&id("b"), &reason).await.expect("cancel");
    assert_eq!(claim_ids(&b, &clock, 10).await, ["c"]);
}

/// A changed default limit makes every key parked under it due: the next claim takes what
/// the new default allows. A key's own limit set above the default does the same.
#[tokio::test]
async fn a_changed_default_or_own_limit_brings_parked_members_back() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    set_limit(&b, LimitScope::Default, Some(1)).await;
    let admissions: Vec<Admission> = ["a0", "a1", "a2", "b0", "b1"]
        .iter()
        .map(|n| keyed(n, &n[..1]))
        .collect();
    b.admit_batch(&admissions).await.expect("admit");
    assert_eq!(claim_ids(&b, &clock, 10).await, ["a0", "b0"]);
    set_limit(&b, LimitScope::Default, Some(2)).await;
    assert_eq!(claim_ids(&b, &clock, 10).await, ["a1", "b1"]);
    set_limit(&b, key_scope("a"), Some(3)).await;
    assert_eq!(claim_ids(&b, &clock, 10).await, ["a2"]);
    assert!(parking_keys(&b).await.is_empty());
}

/// Parked members come back in claim order: priority first, then due time, then id.
#[tokio::test]
async fn parked_members_come_back_in_claim_order() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    set_limit(&b, key_scope("acme"), Some(1)).await;
    let p = |n: i32| Priority::new(n).expect("priority");
    let admissions = [
        keyed("first", "acme").priority(p(10)),
        keyed("x0", "acme"),
        keyed("x1", "acme"),
        keyed("x2", "acme").priority(p(9)),
        keyed("x3", "acme").priority(p(-4)),
    ];
    b.admit_batch(&admissions).await.expect("admit");
    let mut held = common::claim(&b, &clock, 10, LEASE).await;
    assert_eq!(ids(&held), ["first"]);
    let mut order = Vec::new();
    for _ in 0..4 {
        assert!(
            !b.acknowledge(&held[0], &done())
                .await
                .expect("ack")
                .is_lost()
        );
        held = common::claim(&b, &clock, 10, LEASE).await;
        order.extend(ids(&held));
    }
    assert_eq!(order, ["x2", "x0", "x1", "x3"]);
}

/// A parked record that changes (here: cancelled) leaves its parked set; the scope goes
/// with its last member.
#[tokio::test]
async fn a_parked_record_that_changes_leaves_its_parked_set() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    set_limit(&b, key_scope("acme"), Some(1)).await;
    let admissions = [keyed("a", "acme"), keyed("b", "acme"), keyed("c", "acme")];
    b.admit_batch(&admissions).await.expect("admit");
    assert_eq!(claim_ids(&b, &clock, 10).await, ["a"]);
    assert_eq!(parking_keys(&b).await, ["parked", "parked:k:acme"]);
    let reason = CancelReason::new("stop").expect("reason");
    for name in ["b", "c"] {
        b.cancel(&id(name), &reason).await.expect("cancel");
    }
    assert!(parking_keys(&b).await.is_empty());
    let record = b.get(&id("b")).await.expect("get").expect("b");
    assert!(record.status.is_terminal());
}

/// A backlog admitted before its gate closed and larger than what one claim parks is
/// parked over successive claims; each short claim's horizon says "now", and the unkeyed
/// execution behind it is claimed within ceil(backlog / 1000) + 1 claims.
#[tokio::test]
async fn a_backlog_past_one_claims_parking_budget_is_parked_over_successive_claims() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    set_limit(&b, key_scope("hot"), Some(1)).await;
    let backlog: Vec<Admission> = (0..2_500)
        .map(|i| keyed(&format!("hot-{i:04}"), "hot"))
        .collect();
    for chunk in backlog.chunks(500) {
        b.admit_batch(chunk).await.expect("admit");
    }
    clock.advance(Duration::from_millis(1));
    b.admit(&Admission::new(id("free"))).await.expect("admit");
    let mut claims = 0;
    let got = loop {
        claims += 1;
        assert!(claims <= 4, "free not claimed within 4 claims");
        let batch = claim_batch(&b, &clock, 4).await;
        if batch
            .claimed
            .iter()
            .any(|c| c.lease.execution_id.as_str() == "free")
        {
            break batch;
        }
        assert!(
            batch.next_claimable_at.is_some_and(|t| t <= clock.now()),
            "more to judge now: {:?}",
            batch.next_claimable_at
        );
    };
    assert!(claims >= 3, "one claim parks at most 1000: {claims}");
    let leases: Vec<ExecutionLease> = got.claimed.into_iter().map(|c| c.lease).collect();
    assert!(ids(&leases).contains(&"free".to_owned()));
}

/// Four connections claiming and acknowledging at once over a keyed backlog with limit 2
/// (plus unkeyed work): never more than 2 live leases of the key, and every execution is
/// acknowledged, so no parked member is left behind by a lease ending during another
/// claim. A lease counts from its claim's return to just before its acknowledgement, when
/// it is live: a count above the limit is a real excess.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_claimers_over_a_parked_backlog_keep_the_limit_and_finish() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    set_limit(&b, key_scope("k"), Some(2)).await;
    let mut admissions: Vec<Admission> =
        (0..300).map(|i| keyed(&format!("k{i:03}"), "k")).collect();
    admissions.extend((0..50).map(|i| Admission::new(id(&format!("u{i:02}")))));
    b.admit_batch(&admissions).await.expect("admit");
    let live = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let acked = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..4 {
        let peer = b.peer().await.expect("peer");
        let (clock, live, most, acked) = (clock.clone(), live.clone(), most.clone(), acked.clone());
        workers.push(tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            while acked.load(Ordering::SeqCst) < 350 {
                assert!(tokio::time::Instant::now() < deadline, "stalled");
                let leases = common::claim(&peer, &clock, 4, LEASE).await;
                let keyed = |l: &ExecutionLease| l.execution_id.as_str().starts_with('k');
                let held = leases.iter().filter(|l| keyed(l)).count();
                let now = live.fetch_add(held, Ordering::SeqCst) + held;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::task::yield_now().await;
                for lease in leases {
                    if keyed(&lease) {
                        live.fetch_sub(1, Ordering::SeqCst);
                    }
                    let ack = peer.acknowledge(&lease, &done()).await.expect("ack");
                    assert!(!ack.is_lost());
                    acked.fetch_add(1, Ordering::SeqCst);
                }
            }
        }));
    }
    for worker in workers {
        worker.await.expect("worker");
    }
    assert!(
        most.load(Ordering::SeqCst) <= 2,
        "{} live leases of k",
        most.load(Ordering::SeqCst)
    );
    assert_eq!(acked.load(Ordering::SeqCst), 350);
    assert!(parking_keys(&b).await.is_empty());
}
