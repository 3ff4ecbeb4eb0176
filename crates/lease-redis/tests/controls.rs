//! Priorities and concurrency limits on Redis, beyond the
//! conformance rows: the wake-ups a freed key place and a raised limit publish, the horizon
//! leaving work held back by its key out, the index keys a priority level and a key use
//! (gone again once their executions are), and a namespace split into partitions (priorities
//! across partitions, keys refused).
//!
//! One partition whatever `LEASE_REDIS_PARTITIONS` says (`common::fresh_with(.., 1)`): concurrency
//! keys and limits need one partition; the split namespace's test sets its own count.

mod common;

use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, CancelReason, ClaimRequest, Clock, ConcurrencyKey, ConcurrencyLimit,
    ConcurrencyLimits, ExecutionClient, ExecutionId, ExecutionLease, Json, LeaseError, LimitScope,
    ManualClock, Priority, RedeliveryPolicy, Timestamp, WakeReceiver, WorkflowRunOutcome,
};
use lease_redis::RedisBackend;

const LEASE: Duration = Duration::from_secs(30);
const DEADLINE: Duration = Duration::from_secs(10);
const START_MS: i64 = 1_700_000_000_000;

fn policy() -> RedeliveryPolicy {
    RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_millis(1600))
        .expect("policy")
}

fn keyed(name: &str, key: &str) -> Admission {
    Admission::new(ExecutionId::new(name).expect("id"))
        .concurrency_key(ConcurrencyKey::new(key).expect("key"))
}

fn limit_of(key: &str, n: Option<u32>) -> (LimitScope, Option<ConcurrencyLimit>) {
    (
        LimitScope::Key(ConcurrencyKey::new(key).expect("key")),
        n.map(|n| ConcurrencyLimit::new(n).expect("limit")),
    )
}

async fn set_limit(b: &RedisBackend, key: &str, n: Option<u32>) {
    let (scope, limit) = limit_of(key, n);
    b.set_concurrency_limit(&scope, limit).await.expect("limit");
}

async fn claim(b: &RedisBackend, clock: &ManualClock, limit: usize) -> Vec<ExecutionLease> {
    common::claim(b, clock, limit, LEASE).await
}

/// The earliest instant signalled since the receiver last looked, failing after DEADLINE.
async fn signal(rx: &WakeReceiver, what: &str) -> Timestamp {
    tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("no wake-up after {what}"))
}

/// The namespace's keys after its prefix.
async fn key_names(b: &RedisBackend) -> Vec<String> {
    common::snapshot(b)
        .await
        .into_keys()
        .map(|k| k[b.key_prefix().len()..].to_owned())
        .collect()
}

/// Acknowledging, releasing and cancelling a keyed lease and raising or removing a limit
/// publish "now" (the clock); lowering one publishes nothing.
#[tokio::test]
async fn freed_places_and_raised_limits_publish_now() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = common::fresh_with(&clock, policy(), 1).await;
    let _cleanup = common::Cleanup::of(&b);
    let now = clock.now();
    set_limit(&b, "acme", Some(1)).await;
    let names = ["a", "b", "c", "d"];
    let admissions: Vec<Admission> = names.iter().map(|n| keyed(n, "acme")).collect();
    b.admit_batch(&admissions).await.expect("admit");
    let rx = b.wakeups().expect("wake-ups");
    tokio::time::timeout(DEADLINE, b.wakeups_subscribed())
        .await
        .expect("subscribed");

    let lease = claim(&b, &clock, 10).await.remove(0);
    assert!(signal(&rx, "the claim").await > now);
    let done = WorkflowRunOutcome::Completed(Json::parse("t", "1").expect("json"));
    assert!(!b.acknowledge(&lease, &done).await.expect("ack").is_lost());
    assert_eq!(signal(&rx, "the acknowledgement").await, now);

    let lease = claim(&b, &clock, 10).await.remove(0);
    signal(&rx, "the claim").await;
    assert!(!b.release(&lease).await.expect("release").is_lost());
    assert_eq!(signal(&rx, "the release").await, now);

    let lease = claim(&b, &clock, 10).await.remove(0);
    signal(&rx, "the claim").await;
    let reason = CancelReason::new("stop").expect("reason");
    b.cancel(&lease.execution_id, &reason)
        .await
        .expect("cancel");
    assert_eq!(signal(&rx, "the cancel").await, now);

    set_limit(&b, "acme", Some(3)).await;
    assert_eq!(signal(&rx, "the raised limit").await, now);
    set_limit(&b, "acme", Some(2)).await;
    set_limit(&b, "acme", None).await;
    assert_eq!(signal(&rx, "the removed limit").await, now);
    // Nothing published in between: the lowered limit left no earlier signal pending, so
    // a probe far in the future arrives alone.
    let probe = Timestamp::from_millis(lease_core::limits::MAX_SCHEDULED_MS);
    b.admit(&Admission::new(ExecutionId::new("probe").expect("id")).not_before(probe))
        .await
        .expect("probe");
    assert_eq!(signal(&rx, "the probe").await, probe);
}

/// Work skipped for its key is left out of the horizon: the earliest instant left is the
/// unkeyed execution due later, not "now".
#[tokio::test]
async fn work_held_back_by_its_key_is_left_out_of_the_horizon() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = common::fresh_with(&clock, policy(), 1).await;
    let _cleanup = common::Cleanup::of(&b);
    set_limit(&b, "acme", Some(1)).await;
    let admissions = [keyed("a", "acme"), keyed("b", "acme"), keyed("c", "acme")];
    b.admit_batch(&admissions).await.expect("admit");
    let later = Timestamp::from_millis(START_MS + 5_000);
    b.admit(&Admission::new(ExecutionId::new("later").expect("id")).not_before(later))
        .await
        .expect("admit");
    let batch = b
        .claim_due_with_horizon(ClaimRequest {
            now: clock.now(),
            limit: 10,
            duration: LEASE,
        })
        .await
        .expect("claim");
    assert_eq!(batch.claimed.len(), 1, "one lease of the key");
    assert_eq!(batch.next_claimable_at, Some(later));
}

/// A priority level other than 0 has its ready set, listed in `levels`, and a keyed lease
/// sits in `live:<key>`; each key goes once its executions no longer need it, and purging
/// leaves none of them.
#[tokio::test]
async fn level_and_live_keys_come_and_go_with_their_executions() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = common::fresh_with(&clock, policy(), 1).await;
    let _cleanup = common::Cleanup::of(&b);
    let high = keyed("high", "acme").priority(Priority::new(7).expect("priority"));
    let low = Admission::new(ExecutionId::new("low").expect("id"))
        .priority(Priority::new(-2).expect("priority"));
    b.admit_batch(&[high, low]).await.expect("admit");
    let names = key_names(&b).await;
    for want in ["levels", "ready:7", "ready:-2"] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    let leases = claim(&b, &clock, 10).await;
    let order: Vec<&str> = leases.iter().map(|l| l.execution_id.as_str()).collect();
    assert_eq!(order, ["high", "low"]);
    let names = key_names(&b).await;
    assert!(names.iter().any(|n| n == "live:acme"), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("ready:") || n == "levels"),
        "{names:?}"
    );
    let done = WorkflowRunOutcome::Completed(Json::parse("t", "1").expect("json"));
    for lease in &leases {
        assert!(!b.acknowledge(lease, &done).await.expect("ack").is_lost());
    }
    assert!(!key_names(&b).await.iter().any(|n| n.starts_with("live:")));
    clock.advance(Duration::from_secs(1));
    let purged = b.purge_terminal(clock.now(), 10).await.expect("purge");
    assert_eq!(purged.ids.len(), 2);
    let left = key_names(&b).await;
    assert!(
        left.iter()
            .all(|n| ["meta", "token", "done", "counts", "seq"].contains(&n.as_str())),
        "{left:?}"
    );
}

/// On a namespace split into partitions a claim takes the highest priority over every
/// partition first; concurrency keys and limits are refused and change nothing.
#[tokio::test]
async fn a_split_namespace_orders_priorities_and_refuses_keys() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = RedisBackend::connect(
        common::config(&common::random_namespace())
            .partitions(4)
            .clock(Arc::new(clock.clone()))
            .policy(policy()),
    )
    .await
    .expect("connect");
    let admissions: Vec<Admission> = (0..12)
        .map(|i| {
            Admission::new(ExecutionId::new(format!("e{i:02}")).expect("id"))
                .priority(Priority::new(i % 4).expect("priority"))
        })
        .collect();
    b.admit_batch(&admissions).await.expect("admit");
    let mut order = Vec::new();
    for _ in 0..12 {
        let lease = claim(&b, &clock, 1).await.remove(0);
        order.push(lease.execution_id.as_str().to_owned());
    }
    let mut want: Vec<(std::cmp::Reverse<i32>, String)> = (0..12)
        .map(|i| (std::cmp::Reverse(i % 4), format!("e{i:02}")))
        .collect();
    want.sort();
    let want: Vec<String> = want.into_iter().map(|(_, id)| id).collect();
    let refused_admit = b.admit(&keyed("k", "acme")).await;
    let refused_batch = b.admit_batch(&[keyed("k", "acme")]).await;
    let (scope, limit) = limit_of("acme", Some(1));
    let refused_limit = b.set_concurrency_limit(&scope, limit).await;
    let known = b.get(&ExecutionId::new("k").expect("id")).await;
    let limits = b.concurrency_limits().await;
    b.delete_namespace().await.expect("delete");
    assert_eq!(order, want);
    for refused in [
        refused_admit.map(drop),
        refused_batch.map(drop),
        refused_limit,
    ] {
        assert!(
            matches!(
                refused,
                Err(LeaseError::Unsupported {
                    backend: "redis",
                    ..
                })
            ),
            "{refused:?}"
        );
    }
    assert!(known.expect("get").is_none());
    assert_eq!(limits.expect("limits"), ConcurrencyLimits::default());
}
