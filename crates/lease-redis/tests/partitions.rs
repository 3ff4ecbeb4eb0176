//! A namespace split into partitions (issue 22 item 2), beyond the conformance rows (which
//! run on `LEASE_REDIS_PARTITIONS` partitions): a wake queued at home by a settle or store
//! update whose writer died is delivered by the next one. Every test uses 3 partitions on
//! its own namespace, on `LEASE_REDIS_CLUSTER_URL` when set, else on the standalone server.

mod common;

use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, Clock, ExecutionClient, ExecutionClientExt, ExecutionId,
    ExecutionLease, Fenced, Json, ManualClock, RedeliveryPolicy, StepKey, StoreClient, StoreId,
    StoreKey, StoreOp, StoreReceipt, Timestamp, WorkflowRunOutcome,
};
use lease_redis::RedisBackend;

const LEASE: Duration = Duration::from_secs(30);
const START_MS: i64 = 1_700_000_000_000;
const PARTITIONS: u16 = 3;

/// A backend on a fresh namespace of [`PARTITIONS`] partitions over `clock`.
async fn split(clock: &ManualClock) -> RedisBackend {
    RedisBackend::connect(
        common::config(&common::random_namespace())
            .partitions(PARTITIONS)
            .clock(Arc::new(clock.clone()))
            .policy(RedeliveryPolicy::default()),
    )
    .await
    .expect("connect")
}

fn id(name: &str) -> ExecutionId {
    ExecutionId::new(name).expect("id")
}

async fn claim(b: &RedisBackend, clock: &ManualClock, limit: usize) -> Vec<ExecutionLease> {
    let request = ClaimRequest {
        now: clock.now(),
        limit,
        duration: LEASE,
    };
    b.claim_due(request).await.expect("claim")
}

/// Admits `name`, claims it and acknowledges it suspended with no wake: not due.
async fn suspended(b: &RedisBackend, clock: &ManualClock, name: &str) {
    b.admit(&Admission::new(id(name))).await.expect("admit");
    let lease = claim(b, clock, 1).await.remove(0);
    let ack = b
        .acknowledge(&lease, &WorkflowRunOutcome::Suspended)
        .await
        .expect("ack");
    assert!(matches!(ack, Fenced::Accepted(_)));
    assert_eq!(
        b.get(&id(name)).await.expect("get").expect("x").due_at,
        None
    );
}

/// A wake a writer queued at home and died before delivering (put into `wakes` by hand) is
/// delivered by the next store update of the namespace, and leaves the queue.
#[tokio::test]
async fn a_queued_wake_is_delivered_by_the_next_write() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = split(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    suspended(&b, &clock, "sleeper").await;
    let queue = format!("{}wakes", b.key_prefix());
    let mut admin = common::admin_for(&queue).await;
    let queued: i64 = redis::cmd("ZADD")
        .arg(&queue)
        .arg(7)
        .arg("sleeper")
        .query_async(&mut admin)
        .await
        .expect("queue a wake");
    assert_eq!(queued, 1);
    clock.advance(Duration::from_secs(3));
    let store = StoreId::new("s").expect("store");
    b.get_or_create(&store, &[]).await.expect("store");
    let receipt = StoreReceipt {
        store: store.clone(),
        execution_id: id("writer"),
        step_key: StepKey::new("step").expect("step key"),
    };
    let put = StoreOp::Put {
        key: StoreKey::new("k").expect("key"),
        value: Json::parse("value", "1").expect("json"),
    };
    b.update(&receipt, &put).await.expect("update");
    let woken = b.get(&id("sleeper")).await.expect("get").expect("record");
    assert_eq!(woken.due_at, Some(clock.now()));
    let left: i64 = redis::cmd("ZCARD")
        .arg(&queue)
        .query_async(&mut admin)
        .await
        .expect("zcard");
    assert_eq!(left, 0, "the delivered wake left the queue");
}
