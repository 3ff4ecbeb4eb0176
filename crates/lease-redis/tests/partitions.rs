//! A namespace split into partitions, beyond the conformance rows (which
//! run on `LEASE_REDIS_PARTITIONS` partitions): a wake queued at home by a settle or store
//! update whose writer died is delivered by the next one; `admit_batch` and
//! `purge_terminal` failing half-way (a partition's script refused: a foreign key of the
//! wrong type put there by hand) name what they did, and their retries complete the rest.
//! Every test uses 3 partitions on its own namespace, on `LEASE_REDIS_CLUSTER_URL` when set,
//! else on the standalone server.

mod common;

use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, Clock, ExecutionClient, ExecutionId, ExecutionLease, Fenced, Json, LeaseError,
    ManualClock, RedeliveryPolicy, StepKey, StoreClient, StoreId, StoreKey, StoreOp, StoreReceipt,
    Timestamp, WorkflowRunOutcome,
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
    common::claim(b, clock, limit, LEASE).await
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

/// `n` ids (`<name>-<k>`) whose records live in partition `i`.
fn ids_in(b: &RedisBackend, i: usize, name: &str, n: usize) -> Vec<ExecutionId> {
    let tag = b.hash_tag_for(&id("x"));
    let want = format!("{}#{i}}}", &tag[..tag.rfind('#').expect("split")]);
    (0..)
        .map(|k| id(&format!("{name}-{k}")))
        .filter(|x| b.hash_tag_for(x) == want)
        .take(n)
        .collect()
}

/// Key `name` of partition `i` (`lease:{<ns>#<i>}:<name>`), or of the home prefix.
fn key_of(b: &RedisBackend, partition: Option<usize>, name: &str) -> String {
    let home = b.key_prefix();
    match partition {
        Some(i) => format!("{}#{i}}}:{name}", &home[..home.len() - "}:".len()]),
        None => format!("{home}{name}"),
    }
}

/// Puts a string at `key` (a foreign key of the wrong type: the scripts refuse with
/// WRONGTYPE before their first write) or, with `None`, removes it.
async fn poison(key: &str, value: Option<&str>) {
    let mut conn = common::admin_for(key).await;
    let mut cmd = redis::cmd(if value.is_some() { "SET" } else { "DEL" });
    cmd.arg(key);
    if let Some(v) = value {
        cmd.arg(v);
    }
    let _: redis::Value = cmd.query_async(&mut conn).await.expect("poison");
}

/// Whether `key` exists (on its primary).
async fn exists(key: &str) -> bool {
    let mut conn = common::admin_for(key).await;
    redis::cmd("EXISTS")
        .arg(key)
        .query_async(&mut conn)
        .await
        .expect("exists")
}

/// The text of an `OutcomeUnknown`, failing on any other error.
fn unknown_text(e: LeaseError) -> String {
    match e {
        LeaseError::OutcomeUnknown { source, .. } => source.to_string(),
        other => panic!("OutcomeUnknown expected: {other}"),
    }
}

/// Asserts that the error `text` names each id of `done` (as `"<id>"`) and none of
/// `not_done`, and that `b` holds the records of `done` exactly when `done_exist` (and
/// those of `not_done` when it does not).
async fn assert_done_half_way(
    b: &RedisBackend,
    text: &str,
    done: &[ExecutionId],
    not_done: &[ExecutionId],
    done_exist: bool,
) {
    for (ids, named, stored) in [(done, true, done_exist), (not_done, false, !done_exist)] {
        for x in ids {
            let quoted = format!("{:?}", x.as_str());
            assert_eq!(text.contains(&quoted), named, "{x} named in {text}?");
            let got = b.get(x).await.expect("get");
            assert_eq!(got.is_some(), stored, "{x} stored?");
        }
    }
}

/// A batch over two partitions whose second partition's script refuses: the error is
/// `OutcomeUnknown` naming exactly the first partition's items, which are admitted, and
/// none of the second's; the same batch retried (the fault gone) admits the rest, returns
/// the first ones as stored, and every item is claimed once.
#[tokio::test]
async fn an_admit_batch_failing_half_way_names_what_it_admitted_and_its_retry_completes() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = split(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    let (first, second) = (ids_in(&b, 0, "a", 3), ids_in(&b, 2, "b", 3));
    let batch: Vec<Admission> = first
        .iter()
        .chain(&second)
        .map(|x| Admission::new(x.clone()))
        .collect();
    let ready = key_of(&b, Some(2), "ready");
    poison(&ready, Some("foreign")).await;
    let text = unknown_text(b.admit_batch(&batch).await.expect_err("half way"));
    // The first partition's items are named and admitted, the second's neither.
    assert_done_half_way(&b, &text, &first, &second, true).await;
    poison(&ready, None).await;
    let earlier = clock.now();
    clock.advance(Duration::from_secs(1));
    let records = b.admit_batch(&batch).await.expect("retry");
    for (r, a) in records.iter().zip(&batch) {
        assert_eq!(r.id, a.id);
        let want = if first.contains(&r.id) {
            earlier
        } else {
            clock.now()
        };
        assert_eq!(r.due_at, Some(want), "{} due at its admission", r.id);
    }
    assert_eq!(b.admit_batch(&batch).await.expect("again"), records);
    let mut claimed: Vec<ExecutionId> = claim(&b, &clock, 100)
        .await
        .into_iter()
        .map(|l| l.execution_id)
        .collect();
    claimed.sort();
    let mut all: Vec<ExecutionId> = batch.into_iter().map(|a| a.id).collect();
    all.sort();
    assert_eq!(claimed, all);
}

/// Completes `x` with a store receipt (so the home prefix holds `rcpt:<x>`).
async fn complete_with_receipt(b: &RedisBackend, clock: &ManualClock, x: &ExecutionId) {
    b.admit(&Admission::new(x.clone())).await.expect("admit");
    let lease = claim(b, clock, 1).await.remove(0);
    assert_eq!(&lease.execution_id, x);
    let receipt = StoreReceipt {
        store: StoreId::new("s").expect("store"),
        execution_id: x.clone(),
        step_key: StepKey::new("step").expect("step key"),
    };
    let put = StoreOp::Put {
        key: StoreKey::new(x.as_str()).expect("key"),
        value: Json::parse("value", "1").expect("json"),
    };
    b.update(&receipt, &put).await.expect("update");
    let done = WorkflowRunOutcome::Completed(Json::parse("outcome", "1").expect("json"));
    let ack = b.acknowledge(&lease, &done).await.expect("ack");
    assert!(matches!(ack, Fenced::Accepted(_)));
}

/// A purge whose home step fails after the first partition's purge: `OutcomeUnknown`
/// naming exactly what it purged (gone from its partition, still named in its `purged`
/// set); the next purge (the fault gone) first finishes their home step (receipts gone,
/// `purged` empty), then purges the rest.
#[tokio::test]
async fn a_purge_failing_half_way_names_what_it_purged_and_the_next_finishes() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = split(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    b.get_or_create(&StoreId::new("s").expect("store"), &[])
        .await
        .expect("store");
    let (first, second) = (ids_in(&b, 0, "a", 2), ids_in(&b, 2, "b", 2));
    for x in first.iter().chain(&second) {
        complete_with_receipt(&b, &clock, x).await;
    }
    clock.advance(Duration::from_secs(10));
    let start_of = key_of(&b, None, "start_of");
    poison(&start_of, Some("foreign")).await;
    let text = unknown_text(b.purge_terminal(clock.now(), 100).await.expect_err("half"));
    // The first partition's items are named and purged, the second's neither.
    assert_done_half_way(&b, &text, &first, &second, false).await;
    assert!(exists(&key_of(&b, Some(0), "purged")).await);
    poison(&start_of, None).await;
    let purged = b.purge_terminal(clock.now(), 100).await.expect("purge");
    assert_eq!(purged.ids, second);
    for x in first.iter().chain(&second) {
        assert!(
            !exists(&key_of(&b, None, &format!("rcpt:{x}"))).await,
            "{x}"
        );
    }
    assert!(!exists(&key_of(&b, Some(0), "purged")).await);
    assert!(!exists(&key_of(&b, Some(2), "purged")).await);
}
