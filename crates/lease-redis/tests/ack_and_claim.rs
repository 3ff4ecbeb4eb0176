//! `acknowledge_and_claim` against real Redis, beyond the conformance rows: what the one
//! script does when the token counter refuses its claim, and the one wake-up it publishes.
//! The one script exists only on a namespace of one partition (split, it is an
//! acknowledgement then a split claim), so these tests use one partition whatever
//! `LEASE_REDIS_PARTITIONS` says.

mod common;

use lease_core::ExecutionClientExt;
use std::time::Duration;

use lease_core::{
    Acknowledged, Acknowledgement, Admission, ClaimRequest, Clock, ExecutionClient, ExecutionId,
    ExecutionLease, ExecutionStatus, Fenced, FencingToken, Json, LeaseError, ManualClock,
    RedeliveryPolicy, Timestamp, WorkflowRunOutcome,
};
use lease_redis::RedisBackend;

const LEASE: Duration = Duration::from_secs(30);
const DEADLINE: Duration = Duration::from_secs(20);

fn policy() -> RedeliveryPolicy {
    RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_millis(1600))
        .expect("policy")
}

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

async fn fresh(clock: &ManualClock) -> RedisBackend {
    RedisBackend::connect(
        common::config(&common::random_namespace())
            .partitions(1)
            .clock(std::sync::Arc::new(clock.clone()))
            .policy(policy()),
    )
    .await
    .expect("connect")
}

fn request(limit: usize) -> ClaimRequest {
    ClaimRequest {
        now: Timestamp::MAX,
        limit,
        duration: LEASE,
    }
}

async fn claim_one(b: &RedisBackend) -> ExecutionLease {
    b.claim_due(request(1)).await.expect("claim").remove(0)
}

fn completed(lease: &ExecutionLease) -> Acknowledgement {
    Acknowledgement {
        lease: lease.clone(),
        outcome: WorkflowRunOutcome::Completed(Json::parse("t", "1").expect("json")),
    }
}

/// The snapshot without the keys an acknowledgement of `a` changes (its record, the
/// indexes it leaves and enters and the status counters).
fn without_ack_of_a(
    snapshot: &std::collections::BTreeMap<String, String>,
    prefix: &str,
) -> Vec<(String, String)> {
    let touched = [
        "exec:a",
        "hist:a",
        "running",
        "waiting",
        "done",
        "counts",
        "ls:running",
        "ls:completed",
    ]
    .map(|k| format!("{prefix}{k}"));
    snapshot
        .iter()
        .filter(|(k, _)| !touched.contains(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The counter refuses the claim (it is behind z's stored token) after the acknowledgement
/// was applied: the acknowledgement stands, the claim is empty and wrote nothing (z's record
/// and its `ready` entry are unchanged, the counter stays deleted). After a lost acknowledgement the refusal is
/// `TokenCounter` and nothing changed at all.
#[tokio::test]
async fn a_refused_claim_after_an_applied_ack_claims_nothing_and_keeps_the_ack() {
    let clock = ManualClock::starting_now();
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    b.admit(&Admission::new(id("z"))).await.expect("admit");
    for _ in 0..3 {
        let lease = claim_one(&b).await;
        assert!(!b.release(&lease).await.expect("release").is_lost());
        clock.advance(Duration::from_secs(5));
    }
    b.admit(&Admission::new(id("a")).not_before(Timestamp::from_millis(0)))
        .await
        .expect("admit");
    let a = claim_one(&b).await;
    assert_eq!(a.execution_id, id("a"));
    assert_eq!(a.token, FencingToken::new(4));
    redis_cmd(&["DEL", &format!("{}token", b.key_prefix())]).await;
    let before = common::snapshot(&b).await;

    let r = b
        .acknowledge_and_claim(&completed(&a), request(10))
        .await
        .expect("the acknowledgement was applied: no error");
    assert!(matches!(
        r.acknowledged,
        Fenced::Accepted(Acknowledged::Terminal(_))
    ));
    assert_eq!(r.next, lease_core::ClaimBatch::default(), "nothing claimed");
    let record = b.get(&id("a")).await.expect("get").expect("a");
    assert_eq!(record.status, ExecutionStatus::Completed);
    let after = common::snapshot(&b).await;
    assert_eq!(
        without_ack_of_a(&after, b.key_prefix()),
        without_ack_of_a(&before, b.key_prefix()),
        "the refused claim wrote"
    );

    let err = b
        .acknowledge_and_claim(&completed(&a), request(10))
        .await
        .expect_err("a lost acknowledgement and a refused claim");
    assert!(matches!(err, LeaseError::TokenCounter { .. }), "{err:?}");
    assert_eq!(common::snapshot(&b).await, after, "the refusal wrote");
}

/// A suspended acknowledgement whose wake lies ahead publishes that instant, once, when the
/// claim in the same script finds nothing.
#[tokio::test]
async fn the_acknowledgements_wake_is_published() {
    let clock = ManualClock::starting_now();
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    b.admit(&Admission::new(id("a"))).await.expect("admit");
    let lease = claim_one(&b).await;
    let wake = Timestamp::from_millis(clock.now().as_millis() + 5_000);
    b.request_wake(&id("a"), wake).await.expect("wake");
    let rx = b.wakeups().expect("wake-ups");
    tokio::time::timeout(DEADLINE, b.wakeups_subscribed())
        .await
        .expect("subscribed");
    let ack = Acknowledgement {
        lease,
        outcome: WorkflowRunOutcome::Suspended,
    };
    let r = b
        .acknowledge_and_claim(&ack, request(1))
        .await
        .expect("acknowledge_and_claim");
    assert_eq!(r.acknowledged, Fenced::Accepted(Acknowledged::Suspended));
    assert!(r.next.claimed.is_empty());
    assert_eq!(r.next.next_claimable_at, Some(wake));
    let signal = tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .expect("wake");
    assert_eq!(signal, wake);
}

async fn redis_cmd(args: &[&str]) -> redis::Value {
    let mut admin = common::admin().await;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(&mut admin).await.expect("admin command")
}
