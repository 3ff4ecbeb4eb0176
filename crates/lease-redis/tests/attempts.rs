//! Attempt limits on Redis beyond the conformance cases: every fenced script (the
//! application's `fenced_script`, `acknowledge_batch`, `acknowledge_and_claim`) refuses the
//! holder of a last attempt from its lease's expiry, and a claim stores such an execution as
//! dead (out of `running` and `running_last`, into `dead`) while every read (`get`,
//! `list_failing`, `list_live_leases`, `list_dead`) already saw it dead; the indexes follow
//! `retry_dead`.
//!
//! One partition whatever `LEASE_REDIS_PARTITIONS` says (`common::fresh_with(.., 1)`): the
//! application key carries the home hash tag, and the index keys are read by hand.

mod common;

use std::time::Duration;

use lease_core::{
    Acknowledgement, Admission, AttemptLimit, AttemptScope, ClaimRequest, Clock, ExecutionClient,
    ExecutionId, ExecutionLease, ExecutionStatus, Json, ManualClock, RedeliveryPolicy,
    WorkflowRunOutcome,
};
use lease_redis::{FencedScript, RedisBackend};

const LEASE: Duration = Duration::from_secs(30);

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

fn completed() -> WorkflowRunOutcome {
    WorkflowRunOutcome::Completed(Json::parse("t", "1").expect("json"))
}

/// A backend with an attempt limit of 1 and execution `job` claimed; the clock at the
/// lease's expiry.
async fn expired_last_attempt(clock: &ManualClock) -> (RedisBackend, ExecutionLease) {
    let b = common::fresh_with(clock, RedeliveryPolicy::default(), 1).await;
    let one = AttemptLimit::new(1).expect("limit");
    b.set_attempt_limit(&AttemptScope::Default, Some(one))
        .await
        .expect("set limit");
    b.admit(&Admission::new(id("job"))).await.expect("admit");
    let lease = common::claim(&b, clock, 1, LEASE).await.remove(0);
    clock.set(lease.expires_at);
    (b, lease)
}

/// The members of the sorted set `name` under `b`'s prefix.
async fn members(b: &RedisBackend, name: &str) -> Vec<String> {
    let mut admin = common::admin().await;
    redis::cmd("ZRANGE")
        .arg(format!("{}{name}", b.key_prefix()))
        .arg(0)
        .arg(-1)
        .query_async(&mut admin)
        .await
        .expect("ZRANGE")
}

#[tokio::test]
async fn every_fenced_script_refuses_an_expired_last_attempt() {
    let clock = ManualClock::starting_now();
    let (b, lease) = expired_last_attempt(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    let app_key = format!("app:{}:n", b.hash_tag());
    let _app = common::Cleanup(app_key.clone());

    let script = FencedScript::new("return redis.call('INCR', KEYS[1])");
    let ran = b
        .fenced_script(&lease, &script, &[&app_key], &[])
        .await
        .expect("fenced_script");
    assert!(ran.is_lost(), "fenced_script of an expired last attempt");
    let ack = Acknowledgement {
        lease: lease.clone(),
        outcome: completed(),
    };
    let batch = b
        .acknowledge_batch(std::slice::from_ref(&ack))
        .await
        .expect("acknowledge_batch");
    assert!(batch[0].is_lost(), "acknowledge_batch");
    let request = ClaimRequest {
        now: clock.now(),
        limit: 1,
        duration: LEASE,
    };
    let combined = b
        .acknowledge_and_claim(&ack, request)
        .await
        .expect("acknowledge_and_claim");
    assert!(combined.acknowledged.is_lost(), "acknowledge_and_claim");
    assert!(
        combined.next.claimed.is_empty(),
        "a dead execution is never claimed"
    );

    let mut admin = common::admin().await;
    let n: Option<i64> = redis::cmd("GET")
        .arg(&app_key)
        .query_async(&mut admin)
        .await
        .expect("GET");
    assert_eq!(n, None, "the body never ran");
    let record = b.get(&id("job")).await.expect("get").expect("job");
    assert_eq!(record.status, ExecutionStatus::Dead);
}

#[tokio::test]
async fn a_claim_stores_an_expired_last_attempt_as_dead_and_retry_reindexes_it() {
    let clock = ManualClock::starting_now();
    let (b, lease) = expired_last_attempt(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    assert_eq!(members(&b, "running_last").await, ["job"]);
    let seen = b.get(&id("job")).await.expect("get").expect("job");
    assert_eq!(seen.status, ExecutionStatus::Dead);
    let failing = b.list_failing(1, 10).await.expect("list_failing");
    assert_eq!(
        failing,
        vec![seen.clone()],
        "listed failing as dead at its expiry"
    );
    assert!(b.list_live_leases(10).await.expect("live").is_empty());
    assert_eq!(
        b.list_dead(None, 10).await.expect("dead"),
        vec![seen.clone()]
    );

    assert!(common::claim(&b, &clock, 10, LEASE).await.is_empty());
    assert_eq!(
        b.get(&id("job")).await.expect("get").expect("job"),
        seen,
        "stored as every read saw it"
    );
    assert!(members(&b, "running").await.is_empty());
    assert!(members(&b, "running_last").await.is_empty());
    assert_eq!(members(&b, "dead").await, ["job"]);
    let counts = b.status_counts().await.expect("counts");
    assert_eq!((counts.dead, counts.running), (1, 0));

    b.retry_dead(&[id("job")], None).await.expect("retry");
    assert!(members(&b, "dead").await.is_empty());
    assert_eq!(members(&b, "ready").await, ["job"]);
    let again = common::claim(&b, &clock, 1, LEASE).await;
    assert_eq!(again.len(), 1);
    assert!(again[0].token > lease.token);
    clock.advance(Duration::from_millis(1));
    assert!(
        !b.renew(&again[0], LEASE).await.expect("renew").is_lost(),
        "a live last attempt holds"
    );
}
