//! Ordered keys and start rates on Redis (lease-core's `keyed`), beyond the conformance
//! rows: an ordered key runs one at a time in admission order whatever the priorities and
//! due times, its later executions parked (no examination budget spent on them) and the
//! next one brought back when the first ends, is cancelled or dies; a redelivered one
//! keeps its place and a dead one an operator retries takes it back; a rate lets at most
//! N claims of a key through per sliding window, counting a batch claim's own, the
//! horizon saying when the key may start again; a split namespace refuses both.
//!
//! One partition whatever `LEASE_REDIS_PARTITIONS` says: concurrency keys need one.

mod common;

use std::time::Duration;

use lease_core::{
    Admission, AttemptLimit, AttemptScope, CancelReason, ClaimRequest, Clock, ConcurrencyKey,
    ExecutionClient, ExecutionId, ExecutionLease, Json, KeyOrdering, LeaseError, LimitScope,
    ManualClock, Priority, RateLimit, RedeliveryPolicy, Release, Timestamp, WorkflowRunOutcome,
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

fn key(name: &str) -> ConcurrencyKey {
    ConcurrencyKey::new(name).expect("key")
}

fn keyed(name: &str, k: &str) -> Admission {
    Admission::new(id(name)).concurrency_key(key(k))
}

fn done() -> WorkflowRunOutcome {
    WorkflowRunOutcome::Completed(Json::parse("t", "1").expect("json"))
}

async fn fresh(clock: &ManualClock) -> RedisBackend {
    common::fresh_with(clock, policy(), 1).await
}

async fn claim_ids(b: &RedisBackend, clock: &ManualClock, limit: usize) -> Vec<String> {
    common::claim(b, clock, limit, LEASE)
        .await
        .iter()
        .map(|l| l.execution_id.as_str().to_owned())
        .collect()
}

async fn claim_one(b: &RedisBackend, clock: &ManualClock) -> ExecutionLease {
    let mut leases = common::claim(b, clock, 10, LEASE).await;
    assert_eq!(leases.len(), 1, "{leases:?}");
    leases.remove(0)
}

async fn ack(b: &RedisBackend, lease: &ExecutionLease) {
    let r = b.acknowledge(lease, &done()).await.expect("ack");
    assert!(!r.is_lost());
}

async fn order(b: &RedisBackend, k: &str) {
    b.set_key_ordering(&LimitScope::Key(key(k)), true)
        .await
        .expect("order");
}

async fn horizon(b: &RedisBackend, clock: &ManualClock) -> (usize, Option<Timestamp>) {
    let batch = b
        .claim_due_with_horizon(ClaimRequest {
            now: clock.now(),
            limit: 10,
            duration: LEASE,
        })
        .await
        .expect("claim");
    (batch.claimed.len(), batch.next_claimable_at)
}

/// Admission order beats priority and due order; later ones wait for the first to end,
/// parked (the next claim examines none of them); another key goes meanwhile.
#[tokio::test]
async fn an_ordered_key_runs_one_at_a_time_in_admission_order() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    order(&b, "acme").await;
    let later = Timestamp::from_millis(START_MS - 10);
    b.admit(&keyed("c", "acme").not_before(later))
        .await
        .expect("admit");
    b.admit(&keyed("a", "acme").priority(Priority::new(-5).expect("p")))
        .await
        .expect("admit");
    b.admit(&keyed("b", "acme").priority(Priority::new(9).expect("p")))
        .await
        .expect("admit");
    b.admit(&keyed("x", "other")).await.expect("admit");
    let first = common::claim(&b, &clock, 10, LEASE).await;
    let names: Vec<&str> = first.iter().map(|l| l.execution_id.as_str()).collect();
    assert_eq!(names, ["c", "x"]);
    ack(&b, &first[1]).await;
    let prefix = b.key_prefix().to_owned();
    let snap = common::snapshot(&b).await;
    assert!(
        snap.contains_key(&format!("{prefix}parked:k:acme")),
        "{snap:?}"
    );
    assert_eq!(horizon(&b, &clock).await.0, 0);
    let c = b.get(&id("c")).await.expect("get").expect("c");
    let lease = ExecutionLease {
        execution_id: id("c"),
        token: c.token,
        expires_at: c.lease_expires_at.expect("lease"),
    };
    ack(&b, &lease).await;
    assert_eq!(claim_ids(&b, &clock, 10).await, ["a"]);
    let a = b.get(&id("a")).await.expect("get").expect("a");
    let lease = ExecutionLease {
        execution_id: id("a"),
        token: a.token,
        expires_at: a.lease_expires_at.expect("lease"),
    };
    // A lapse keeps a's place: b waits for a's redelivery.
    clock.set(lease.expires_at);
    assert!(claim_ids(&b, &clock, 10).await.is_empty());
    clock.advance(Duration::from_millis(100));
    let again = claim_one(&b, &clock).await;
    assert_eq!(again.execution_id.as_str(), "a");
    ack(&b, &again).await;
    assert_eq!(claim_ids(&b, &clock, 10).await, ["b"]);
}

/// A suspended first execution holds its key until woken; cancelling it lets the next go.
#[tokio::test]
async fn a_suspended_first_holds_the_key_and_a_cancelled_one_leaves_the_line() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    order(&b, "acme").await;
    for name in ["a", "b", "c"] {
        b.admit(&keyed(name, "acme")).await.expect("admit");
    }
    let a = claim_one(&b, &clock).await;
    let r = b
        .acknowledge(&a, &WorkflowRunOutcome::Suspended)
        .await
        .expect("ack");
    assert!(!r.is_lost());
    assert_eq!(horizon(&b, &clock).await, (0, None));
    b.cancel(&id("a"), &CancelReason::new("no").expect("reason"))
        .await
        .expect("cancel");
    assert_eq!(claim_ids(&b, &clock, 10).await, ["b"]);
    // b's lease holds c back; cancelling the running b frees it.
    b.cancel(&id("b"), &CancelReason::new("no").expect("reason"))
        .await
        .expect("cancel");
    assert_eq!(claim_ids(&b, &clock, 10).await, ["c"]);
}

/// A dead first leaves the line; retried, it takes its place back after the live lease.
#[tokio::test]
async fn a_dead_one_retried_takes_its_place_back_after_the_live_lease() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    order(&b, "acme").await;
    let one = AttemptLimit::new(1).expect("limit");
    b.set_attempt_limit(&AttemptScope::Default, Some(one))
        .await
        .expect("attempts");
    for name in ["a", "b", "c"] {
        b.admit(&keyed(name, "acme")).await.expect("admit");
    }
    let a = claim_one(&b, &clock).await;
    let failed = b
        .release_with(&a, &Release::Failed(lease_core::ErrorNote::new("k", "m")))
        .await
        .expect("release");
    assert!(!failed.is_lost());
    let lease_b = claim_one(&b, &clock).await;
    assert_eq!(lease_b.execution_id.as_str(), "b");
    b.retry_dead(&[id("a")], None).await.expect("retry");
    assert!(claim_ids(&b, &clock, 10).await.is_empty());
    ack(&b, &lease_b).await;
    assert_eq!(claim_ids(&b, &clock, 10).await, ["a"]);
}

/// Unmarking the key lets its parked executions go together.
#[tokio::test]
async fn unmarking_an_ordered_key_lets_its_parked_executions_go() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    b.set_key_ordering(&LimitScope::Default, true)
        .await
        .expect("order");
    for name in ["a", "b", "c"] {
        b.admit(&keyed(name, "acme")).await.expect("admit");
    }
    assert_eq!(claim_ids(&b, &clock, 10).await, ["a"]);
    assert_eq!(
        b.key_ordering().await.expect("read"),
        KeyOrdering {
            default: true,
            keys: vec![]
        }
    );
    b.set_key_ordering(&LimitScope::Default, false)
        .await
        .expect("unorder");
    assert_eq!(claim_ids(&b, &clock, 10).await, ["b", "c"]);
}

/// At most N claims per sliding window, a batch's own counted; the horizon is the instant
/// the window has room again.
#[tokio::test]
async fn a_rate_lets_n_claims_through_per_window() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    let rate = RateLimit::new(2, Duration::from_secs(10)).expect("rate");
    b.set_rate_limit(&LimitScope::Key(key("acme")), Some(rate))
        .await
        .expect("rate");
    assert_eq!(
        b.rate_limits().await.expect("read").of(Some(&key("acme"))),
        Some(rate)
    );
    for name in ["a", "b", "c", "d"] {
        b.admit(&keyed(name, "acme")).await.expect("admit");
    }
    b.admit(&keyed("x", "other")).await.expect("admit");
    assert_eq!(claim_ids(&b, &clock, 10).await, ["a", "b", "x"]);
    let (n, next) = horizon(&b, &clock).await;
    assert_eq!(
        (n, next),
        (0, Some(Timestamp::from_millis(START_MS + 10_000)))
    );
    clock.advance(Duration::from_millis(9_999));
    assert!(claim_ids(&b, &clock, 10).await.is_empty());
    clock.advance(Duration::from_millis(1));
    assert_eq!(claim_ids(&b, &clock, 10).await, ["c", "d"]);
}

/// Removing the rate lets the held-back executions go at once.
#[tokio::test]
async fn removing_a_rate_frees_the_key() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    let rate = RateLimit::new(1, Duration::from_secs(60)).expect("rate");
    b.set_rate_limit(&LimitScope::Default, Some(rate))
        .await
        .expect("rate");
    for name in ["a", "b", "c"] {
        b.admit(&keyed(name, "acme")).await.expect("admit");
    }
    assert_eq!(claim_ids(&b, &clock, 10).await, ["a"]);
    assert!(claim_ids(&b, &clock, 10).await.is_empty());
    b.set_rate_limit(&LimitScope::Default, None)
        .await
        .expect("remove");
    assert_eq!(claim_ids(&b, &clock, 10).await, ["b", "c"]);
}

/// A split namespace refuses rates and ordering (it refuses keys) and reads none.
#[tokio::test]
async fn a_split_namespace_refuses_rates_and_ordering() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = common::fresh_with(&clock, policy(), 3).await;
    let _cleanup = common::Cleanup::of(&b);
    let rate = RateLimit::new(1, Duration::from_secs(1)).expect("rate");
    let r = b.set_rate_limit(&LimitScope::Default, Some(rate)).await;
    assert!(matches!(r, Err(LeaseError::Unsupported { .. })), "{r:?}");
    let r = b.set_key_ordering(&LimitScope::Default, true).await;
    assert!(matches!(r, Err(LeaseError::Unsupported { .. })), "{r:?}");
    assert_eq!(b.rate_limits().await.expect("read"), Default::default());
    assert_eq!(b.key_ordering().await.expect("read"), Default::default());
}

/// A key no rate applies to any more forgets its claim instants (a rate set later counts
/// from then); one the default still covers keeps them.
#[tokio::test]
async fn a_key_without_a_rate_forgets_its_starts() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    let rate = RateLimit::new(1, Duration::from_secs(60)).expect("rate");
    let acme = LimitScope::Key(key("acme"));
    b.set_rate_limit(&LimitScope::Default, Some(rate))
        .await
        .expect("rate");
    b.set_rate_limit(&acme, Some(rate)).await.expect("rate");
    for name in ["a", "b", "c"] {
        b.admit(&keyed(name, "acme")).await.expect("admit");
    }
    assert_eq!(claim_ids(&b, &clock, 10).await, ["a"]);
    // The default still applies: a's start still counts.
    b.set_rate_limit(&acme, None).await.expect("remove");
    assert!(claim_ids(&b, &clock, 10).await.is_empty());
    // No rate applies: forgotten, and a rate set again counts from then.
    b.set_rate_limit(&LimitScope::Default, None)
        .await
        .expect("remove");
    b.set_rate_limit(&acme, Some(rate)).await.expect("rate");
    assert_eq!(claim_ids(&b, &clock, 10).await, ["b"]);
    assert!(claim_ids(&b, &clock, 10).await.is_empty());
}

/// An ordered key's backlog costs a claim no examination budget: its later executions are
/// parked, so a claim reaches the work after them (past `max(limit * 4, 100)` members).
#[tokio::test]
async fn an_ordered_backlog_costs_no_examination_budget() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    order(&b, "acme").await;
    let backlog: Vec<Admission> = (0..300)
        .map(|i| keyed(&format!("o{i:03}"), "acme"))
        .collect();
    b.admit_batch(&backlog).await.expect("admit");
    b.admit(&Admission::new(id("z"))).await.expect("admit");
    assert_eq!(claim_ids(&b, &clock, 2).await, ["o000", "z"]);
    // Nothing goes before the first one's lease expires.
    let expiry = Timestamp::from_millis(START_MS + 30_000);
    assert_eq!(horizon(&b, &clock).await, (0, Some(expiry)));
}
