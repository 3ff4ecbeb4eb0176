//! Where Redis keeps the delivery history, beyond what the conformance rows read back: a
//! completed execution's delivery stays in its record (the plain drain writes no history
//! list), a record completed when the acknowledgement still appended its delivery reads the
//! same, and a suspension's delivery goes to the list so the next claim can reuse the
//! record. One partition whatever `LEASE_REDIS_PARTITIONS` says: the test reads a key of
//! the one-partition layout by hand.

mod common;

use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, Clock, DeliveryEnd, ExecutionClient, ExecutionClientExt, ExecutionId,
    ExecutionLease, Json, ManualClock, RedeliveryPolicy, Timestamp, WorkflowRunOutcome,
};
use lease_redis::RedisBackend;
use redis::AsyncCommands;

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

async fn claim_one(b: &RedisBackend) -> ExecutionLease {
    let request = ClaimRequest {
        now: Timestamp::MAX,
        limit: 1,
        duration: Duration::from_secs(30),
    };
    b.claim_due(request).await.expect("claim").remove(0)
}

fn done() -> WorkflowRunOutcome {
    WorkflowRunOutcome::Completed(Json::parse("t", "1").expect("json"))
}

async fn list_len(b: &RedisBackend, name: &str) -> usize {
    let key = format!("{}hist:{name}", b.key_prefix());
    common::admin().await.llen(key).await.expect("LLEN")
}

#[tokio::test]
async fn a_completed_delivery_stays_in_its_record_and_reads_once_whatever_the_list_holds() {
    let clock = ManualClock::starting_now();
    let b = common::fresh_with(&clock, RedeliveryPolicy::default(), 1).await;
    let _cleanup = common::Cleanup::of(&b);
    b.admit(&Admission::new(id("a"))).await.expect("admit");
    let lease = claim_one(&b).await;
    assert!(!b.acknowledge(&lease, &done()).await.expect("ack").is_lost());
    assert_eq!(list_len(&b, "a").await, 0, "the drain wrote a history list");
    let history = b.deliveries(&id("a")).await.expect("deliveries");
    assert_eq!(history.deliveries.len(), 1, "{history:?}");
    let entry = &history.deliveries[0];
    assert_eq!(entry.token, lease.token);
    assert_eq!(entry.end, Some(DeliveryEnd::Acknowledged));
    assert!(entry.ended_at >= Some(entry.claimed_at), "{entry:?}");

    // What an acknowledgement appended before the record kept its delivery: the same entry
    // in the list. It must not read twice.
    let stored = format!(
        "{}\x1f{}\x1facknowledged\x1f{}",
        entry.token.get(),
        entry.claimed_at.as_millis(),
        entry.ended_at.expect("ended").as_millis()
    );
    let key = format!("{}hist:a", b.key_prefix());
    let _: i64 = common::admin()
        .await
        .rpush(&key, stored)
        .await
        .expect("RPUSH");
    assert_eq!(b.deliveries(&id("a")).await.expect("deliveries"), history);
}

#[tokio::test]
async fn a_suspension_goes_to_the_list_and_the_completion_after_it_stays_in_the_record() {
    let clock = ManualClock::starting_now();
    let b = common::fresh_with(&clock, RedeliveryPolicy::default(), 1).await;
    let _cleanup = common::Cleanup::of(&b);
    b.admit(&Admission::new(id("s"))).await.expect("admit");
    let first = claim_one(&b).await;
    let suspended = WorkflowRunOutcome::Suspended;
    assert!(
        !b.acknowledge(&first, &suspended)
            .await
            .expect("ack")
            .is_lost()
    );
    b.request_wake(&id("s"), clock.now()).await.expect("wake");
    let second = claim_one(&b).await;
    assert!(
        !b.acknowledge(&second, &done())
            .await
            .expect("ack")
            .is_lost()
    );
    assert_eq!(list_len(&b, "s").await, 1, "only the suspension is listed");
    let history = b.deliveries(&id("s")).await.expect("deliveries");
    let ends: Vec<_> = history
        .deliveries
        .iter()
        .map(|e| (e.token, e.end))
        .collect();
    assert_eq!(
        ends,
        [
            (first.token, Some(DeliveryEnd::Suspended)),
            (second.token, Some(DeliveryEnd::Acknowledged))
        ]
    );
}
