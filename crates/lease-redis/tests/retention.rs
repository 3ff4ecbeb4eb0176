//! Retention against real Redis, beyond the conformance rows: a namespace of key
//! layout 1 (no retention indexes) is migrated at connect to exactly the indexes layout 2
//! maintains, and stale `done` entries never make a purge remove a live execution.

mod common;

use lease_core::ExecutionClientExt;
use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, Clock, ExecutionClient, ExecutionId, ExecutionLease, HeapClient, Json,
    ManualClock, RedeliveryPolicy, RequestId, StartClient, StartRequest, StepKey, StepWrite,
    StoreClient, StoreId, StoreKey, StoreOp, StoreReceipt, Timestamp, WorkflowName,
    WorkflowRunOutcome,
};
use lease_redis::{RedisBackend, RedisConfig};

const LEASE: Duration = Duration::from_secs(30);

fn config(namespace: &str, clock: &ManualClock) -> RedisConfig {
    RedisConfig::new(common::redis_url())
        .namespace(namespace)
        .clock(Arc::new(clock.clone()))
        .policy(
            RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_millis(1600))
                .expect("policy"),
        )
}

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

fn json(s: &str) -> Json {
    Json::parse("t", s).expect("json")
}

async fn claim_one(b: &RedisBackend) -> ExecutionLease {
    let request = ClaimRequest {
        now: Timestamp::MAX,
        limit: 1,
        duration: LEASE,
    };
    b.claim_due(request).await.expect("claim").remove(0)
}

async fn redis_cmd(args: &[&str]) -> redis::Value {
    let mut admin = common::admin().await;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(&mut admin).await.expect("admin command")
}

/// Executions with steps, receipts and a start record, some terminal: what layout 1 held.
async fn populate(b: &RedisBackend) {
    let store = StoreId::new("shop").expect("store");
    b.get_or_create(&store, &[]).await.expect("store");
    let request = StartRequest {
        request_id: RequestId::new("req").expect("request"),
        workflow: WorkflowName::new("wf").expect("workflow"),
        input: json("{}"),
        target: id("started"),
    };
    b.start(&request).await.expect("start");
    for name in ["a", "b"] {
        b.admit(&Admission::new(id(name))).await.expect("admit");
    }
    for (i, outcome) in [
        WorkflowRunOutcome::Completed(json("1")),
        WorkflowRunOutcome::Suspended,
        WorkflowRunOutcome::Failed(json("2")),
    ]
    .into_iter()
    .enumerate()
    {
        let lease = claim_one(b).await;
        let write = StepWrite {
            step_key: StepKey::new("s").expect("key"),
            step_attempt: 0,
            done: true,
            response: json("{}"),
        };
        assert!(!b.write_step(&lease, &write).await.expect("step").is_lost());
        let receipt = StoreReceipt {
            store: store.clone(),
            execution_id: lease.execution_id.clone(),
            step_key: StepKey::new(format!("u{i}")).expect("key"),
        };
        let put = StoreOp::Put {
            key: StoreKey::new("k").expect("key"),
            value: json("1"),
        };
        b.update(&receipt, &put).await.expect("update");
        assert!(
            !b.acknowledge(&lease, &outcome)
                .await
                .expect("ack")
                .is_lost()
        );
    }
}

/// A layout-1 namespace (the retention indexes deleted, `meta` saying 1) is migrated by the
/// next connect to exactly the indexes layout 2 would have written, and then purges.
#[tokio::test]
async fn connect_migrates_layout_1_to_the_indexes_layout_2_keeps() {
    let clock = ManualClock::starting_now();
    let namespace = common::random_namespace();
    let b = RedisBackend::connect(config(&namespace, &clock))
        .await
        .expect("connect");
    let _cleanup = common::Cleanup::of(&b);
    populate(&b).await;
    let want = common::snapshot(&b).await;
    let prefix = b.key_prefix().to_owned();
    let indexes: Vec<String> = want
        .keys()
        .filter(|k| {
            let rest = &k[prefix.len()..];
            rest == "done" || rest == "start_of" || rest.starts_with("rcpt:")
        })
        .cloned()
        .collect();
    assert_eq!(
        indexes.len(),
        5,
        "done, start_of and three rcpt sets: {indexes:?}"
    );
    for key in &indexes {
        redis_cmd(&["DEL", key]).await;
    }
    redis_cmd(&["HSET", &format!("{prefix}meta"), "layout", "1"]).await;

    let migrated = RedisBackend::connect(config(&namespace, &clock))
        .await
        .expect("connect migrates");
    assert_eq!(common::snapshot(&migrated).await, want);
    let cutoff = Timestamp::from_millis(clock.now().as_millis() + 1);
    let purged = migrated.purge_terminal(cutoff, 10).await.expect("purge");
    assert_eq!(purged.ids.len(), 2, "{purged:?}");
    let left = common::snapshot(&migrated).await;
    assert!(
        left.keys()
            .all(|k| !k.contains("rcpt:")
                || purged.ids.iter().all(|p| !k.ends_with(&format!(":{p}")))),
        "{left:?}"
    );
}

/// A `done` entry whose record is not terminal (re-admitted after a purge, or written by
/// hand) is dropped from the index and never purges the record.
#[tokio::test]
async fn a_stale_done_entry_never_purges_a_live_execution() {
    let clock = ManualClock::starting_now();
    let b = RedisBackend::connect(config(&common::random_namespace(), &clock))
        .await
        .expect("connect");
    let _cleanup = common::Cleanup::of(&b);
    b.admit(&Admission::new(id("live"))).await.expect("admit");
    let done = format!("{}done", b.key_prefix());
    redis_cmd(&["ZADD", &done, "0", "live"]).await;
    let purged = b.purge_terminal(Timestamp::MAX, 10).await.expect("purge");
    assert!(purged.ids.is_empty());
    assert!(b.get(&id("live")).await.expect("get").is_some());
    assert_eq!(
        redis_cmd(&["ZCARD", &done]).await,
        redis::Value::Int(0),
        "the stale entry left the index"
    );
}
