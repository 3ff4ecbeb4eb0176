//! Bad input and bad state: typed errors that change nothing, never a panic. Covers what the
//! conformance suite cannot know about Redis: connect-time checks, timestamps outside the
//! range Lua represents exactly, corrupt stored values and foreign keys in the namespace.
//!
//! One partition whatever `LEASE_REDIS_PARTITIONS` says (`common::fresh_with(.., 1)`): they corrupt
//! keys of the one-partition layout by hand.

mod common;

use lease_core::ExecutionClientExt;
use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Acknowledgement, Admission, ClaimRequest, Clock, ExecutionClient, ExecutionId, ExecutionLease,
    FencingToken, HeapClient, Json, LeaseError, ManualClock, RedeliveryPolicy, StepKey, StepWrite,
    StoreClient, StoreId, StoreKey, StoreOp, StoreReceipt, Timestamp, WorkflowRunOutcome,
};
use lease_redis::{RedisBackend, RedisConfig};

const LEASE: Duration = Duration::from_secs(30);

fn policy() -> RedeliveryPolicy {
    RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_millis(1600))
        .expect("policy")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

fn is_protocol<T: std::fmt::Debug>(r: &lease_core::Result<T>) -> bool {
    matches!(r, Err(LeaseError::Protocol { .. }))
}

async fn claim(b: &RedisBackend, clock: &ManualClock) -> lease_core::Result<Vec<ExecutionLease>> {
    claim_n(b, clock, 100).await
}

async fn claim_n(
    b: &RedisBackend,
    clock: &ManualClock,
    limit: usize,
) -> lease_core::Result<Vec<ExecutionLease>> {
    b.claim_due(ClaimRequest {
        now: clock.now(),
        limit,
        duration: LEASE,
    })
    .await
}

async fn redis_cmd(args: &[&str]) -> redis::Value {
    let mut admin = common::admin().await;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(&mut admin).await.expect("admin command")
}

#[test]
fn connect_rejects_bad_urls_and_namespaces() {
    runtime().block_on(async {
        let err = RedisBackend::connect(RedisConfig::new("not a url"))
            .await
            .expect_err("bad url");
        assert!(matches!(err, LeaseError::InvalidInput { .. }), "{err:?}");
        for ns in ["", "a{b}", "with space", "star*", &"n".repeat(129)] {
            let err = RedisBackend::connect(RedisConfig::new(common::redis_url()).namespace(ns))
                .await
                .expect_err("bad namespace");
            assert!(
                matches!(err, LeaseError::InvalidInput { .. }),
                "{ns:?}: {err:?}"
            );
        }
    });
}

#[test]
fn connect_rejects_a_namespace_of_another_layout_or_type() {
    runtime().block_on(async {
        let ns = common::random_namespace();
        let _cleanup = common::Cleanup(format!("lease:{{{ns}}}:"));
        let meta = format!("lease:{{{ns}}}:meta");
        redis_cmd(&["HSET", &meta, "layout", "99"]).await;
        let err = RedisBackend::connect(RedisConfig::new(common::redis_url()).namespace(&ns))
            .await
            .expect_err("foreign layout");
        assert!(matches!(err, LeaseError::Schema { .. }), "{err:?}");
        redis_cmd(&["DEL", &meta]).await;
        redis_cmd(&["SET", &meta, "a string"]).await;
        let err = RedisBackend::connect(RedisConfig::new(common::redis_url()).namespace(&ns))
            .await
            .expect_err("foreign key type");
        assert!(matches!(err, LeaseError::Schema { .. }), "{err:?}");
        redis_cmd(&["DEL", &meta]).await;
    });
}

#[test]
fn timestamps_outside_the_exact_range_are_typed_errors_that_change_nothing() {
    runtime().block_on(async {
        let clock = ManualClock::starting_now();
        let b = common::fresh_with(&clock, policy(), 1).await;
        let _cleanup_b = common::Cleanup::of(&b);
        b.admit(&Admission::new(id("x"))).await.expect("admit");
        let before = common::snapshot(&b).await;
        for at in [i64::MIN, i64::MAX, (1 << 52) + 1, -(1 << 52) - 1] {
            let err = b
                .request_wake(&id("x"), Timestamp::from_millis(at))
                .await
                .expect_err("out of range");
            assert!(
                matches!(err, LeaseError::InvalidInput { .. }),
                "{at}: {err:?}"
            );
        }
        let err = b
            .claim_due(ClaimRequest {
                now: Timestamp::from_millis(i64::MIN),
                limit: 1,
                duration: LEASE,
            })
            .await
            .expect_err("out of range");
        assert!(matches!(err, LeaseError::InvalidInput { .. }), "{err:?}");
        assert_eq!(common::snapshot(&b).await, before);
        // A caller's now far in the future is capped by the backend clock, as min() says.
        let leases = b
            .claim_due(ClaimRequest {
                now: Timestamp::from_millis(i64::MAX),
                limit: 1,
                duration: LEASE,
            })
            .await
            .expect("claim");
        assert_eq!(leases.len(), 1);
        assert_eq!(leases[0].expires_at, clock.now().saturating_add(LEASE));
        // A manual clock outside the range is refused before anything is sent.
        let far = ManualClock::new(Timestamp::from_millis(i64::MAX));
        let c = RedisBackend::connect(
            RedisConfig::new(common::redis_url())
                .namespace(common::random_namespace())
                .clock(Arc::new(far)),
        )
        .await
        .expect_err("clock out of range");
        assert!(matches!(c, LeaseError::InvalidInput { .. }), "{c:?}");
        b.delete_namespace().await.expect("cleanup");
    });
}

#[test]
fn corrupt_records_are_protocol_errors_that_change_nothing() {
    runtime().block_on(async {
        let clock = ManualClock::starting_now();
        let b = common::fresh_with(&clock, policy(), 1).await;
        let _cleanup_b = common::Cleanup::of(&b);
        for name in ["a", "b"] {
            b.admit(&Admission::new(id(name))).await.expect("admit");
        }
        let lease = claim_n(&b, &clock, 1).await.expect("claim").remove(0);
        assert_eq!(lease.execution_id.as_str(), "a");
        b.release(&lease)
            .await
            .expect("release")
            .accepted()
            .expect("held");
        clock.advance(Duration::from_secs(5));
        let exec_b = format!("{}exec:b", b.key_prefix());
        let corruptions: [&[&str]; 6] = [
            &["HSET", &exec_b, "st", "bogus"],
            &["HSET", &exec_b, "tk", "1.5"],
            &["HSET", &exec_b, "un", "-x"],
            &["HSET", &exec_b, "es", "maybe"],
            &["HDEL", &exec_b, "tk"],
            &["HSET", &exec_b, "du", "soon"],
        ];
        for corruption in corruptions {
            redis_cmd(&[
                "HSET", &exec_b, "st", "admitted", "tk", "0", "un", "0", "es", "0",
            ])
            .await;
            redis_cmd(&["HSET", &exec_b, "du", &clock.now().as_millis().to_string()]).await;
            redis_cmd(corruption).await;
            let before = common::snapshot(&b).await;
            assert!(is_protocol(&b.get(&id("b")).await), "{corruption:?}");
            let forged = ExecutionLease {
                execution_id: id("b"),
                token: FencingToken::new(1),
                expires_at: clock.now(),
            };
            let write = StepWrite {
                step_key: StepKey::new("s").expect("key"),
                step_attempt: 0,
                done: true,
                response: Json::null(),
            };
            if corruption[2] != "un" && corruption[2] != "es" && corruption[2] != "du" {
                assert!(
                    is_protocol(&b.write_step(&forged, &write).await),
                    "{corruption:?}"
                );
            }
            assert!(
                is_protocol(&b.renew(&forged, LEASE).await),
                "{corruption:?}"
            );
            assert!(is_protocol(&b.release(&forged).await), "{corruption:?}");
            assert!(
                is_protocol(&b.request_wake(&id("b"), clock.now()).await),
                "{corruption:?}"
            );
            assert_eq!(common::snapshot(&b).await, before, "{corruption:?}");
            // "a" (released, first in (due, id) order) is claimed; the corrupt "b" is
            // skipped, moved out of the indexes and listed, so the next claim
            // claims nothing and fails nothing.
            let leases = claim(&b, &clock).await.expect("claim");
            let ids: Vec<_> = leases.iter().map(|l| l.execution_id.as_str()).collect();
            assert_eq!(ids, ["a"], "{corruption:?}");
            let listed = b.list_corrupt(10).await.expect("list_corrupt");
            assert_eq!(listed.len(), 1, "{corruption:?}: {listed:?}");
            assert_eq!(listed[0].id, "b", "{corruption:?}");
            let again = claim(&b, &clock).await.expect("claim");
            assert!(again.is_empty(), "{corruption:?}: {again:?}");
            for l in leases {
                b.release(&l)
                    .await
                    .expect("release")
                    .accepted()
                    .expect("held");
            }
            clock.advance(Duration::from_secs(5));
            // Back into ready and off the corrupt list for the next corruption.
            let prefix = b.key_prefix().to_owned();
            redis_cmd(&[
                "DEL",
                &format!("{prefix}corrupt"),
                &format!("{prefix}corrupt_why"),
            ])
            .await;
            let now = clock.now().as_millis().to_string();
            redis_cmd(&["ZADD", &format!("{prefix}ready"), &now, "b"]).await;
        }
        b.delete_namespace().await.expect("cleanup");
    });
}

#[test]
fn corrupt_records_in_a_batch_or_a_claim_with_records_change_nothing_else() {
    runtime().block_on(async {
        let clock = ManualClock::starting_now();
        let b = common::fresh_with(&clock, policy(), 1).await;
        let _cleanup_b = common::Cleanup::of(&b);
        for name in ["a", "b", "c"] {
            b.admit(&Admission::new(id(name))).await.expect("admit");
        }
        let leases = claim(&b, &clock).await.expect("claim");
        assert_eq!(leases.len(), 3);
        let exec_b = format!("{}exec:b", b.key_prefix());
        redis_cmd(&["HSET", &exec_b, "un", "-x"]).await;
        let before = common::snapshot(&b).await;
        let acks: Vec<Acknowledgement> = leases
            .iter()
            .map(|l| Acknowledgement {
                lease: l.clone(),
                outcome: WorkflowRunOutcome::Completed(Json::null()),
            })
            .collect();
        let r = b.acknowledge_batch(&acks).await;
        assert!(is_protocol(&r), "{r:?}");
        assert_eq!(
            common::snapshot(&b).await,
            before,
            "the valid items were applied"
        );
        redis_cmd(&["HSET", &exec_b, "un", "0"]).await;
        let r = b.acknowledge_batch(&acks).await.expect("repaired batch");
        assert!(r.iter().all(|r| !r.is_lost()), "{r:?}");

        // A claim with records skips a corrupt record (listed): the valid lease
        // comes with its record, and the next claim meets the corrupt one no more.
        clock.advance(Duration::from_secs(1));
        for name in ["d", "e"] {
            b.admit(&Admission::new(id(name))).await.expect("admit");
        }
        redis_cmd(&["HSET", &format!("{}exec:e", b.key_prefix()), "es", "maybe"]).await;
        let request = ClaimRequest {
            now: Timestamp::MAX,
            limit: 10,
            duration: LEASE,
        };
        let got = b.claim_due_with_records(request).await.expect("claim");
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].lease.execution_id.as_str(), "d");
        let record = b.get(&id("d")).await.expect("get").expect("record");
        assert_eq!(got[0].record, record);
        let listed = b.list_corrupt(10).await.expect("list_corrupt");
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!(listed[0].id, "e");
        let again = b.claim_due_with_records(request).await.expect("claim");
        assert!(again.is_empty(), "{again:?}");
        b.delete_namespace().await.expect("cleanup");
    });
}

#[test]
fn corrupt_step_and_store_values_are_protocol_errors() {
    runtime().block_on(async {
        let clock = ManualClock::starting_now();
        let b = common::fresh_with(&clock, policy(), 1).await;
        let _cleanup_b = common::Cleanup::of(&b);
        b.admit(&Admission::new(id("x"))).await.expect("admit");
        let lease = claim(&b, &clock).await.expect("claim").remove(0);
        let key = StepKey::new("s").expect("key");
        let steps = format!("{}steps:x", b.key_prefix());
        redis_cmd(&["HSET", &steps, "s\u{1f}0", "not-a-record"]).await;
        redis_cmd(&["HSET", &steps, "no separator", "1|1|null"]).await;
        assert!(is_protocol(&b.read_step(&id("x"), &key, 0).await));
        assert!(is_protocol(&b.list_steps(&id("x")).await));
        let write = StepWrite {
            step_key: key.clone(),
            step_attempt: 0,
            done: true,
            response: Json::null(),
        };
        assert!(is_protocol(&b.write_step(&lease, &write).await));

        let store = StoreId::new("st").expect("store");
        b.get_or_create(&store, &[]).await.expect("create");
        let receipts = format!("{}receipts:st", b.key_prefix());
        redis_cmd(&["HSET", &receipts, "x\u{1f}s", "2"]).await;
        let receipt = StoreReceipt {
            store: store.clone(),
            execution_id: id("x"),
            step_key: key,
        };
        let op = StoreOp::Put {
            key: StoreKey::new("k").expect("key"),
            value: Json::null(),
        };
        assert!(is_protocol(&b.update(&receipt, &op).await));
        // A foreign value type at one of our keys is a schema error.
        redis_cmd(&["DEL", &steps]).await;
        redis_cmd(&["SET", &steps, "x"]).await;
        let err = b.list_steps(&id("x")).await.expect_err("wrong type");
        assert!(matches!(err, LeaseError::Schema { .. }), "{err:?}");
        let err = b.write_step(&lease, &write).await.expect_err("wrong type");
        assert!(matches!(err, LeaseError::Schema { .. }), "{err:?}");
        b.delete_namespace().await.expect("cleanup");
    });
}

#[test]
fn delete_namespace_removes_every_key_and_only_those() {
    runtime().block_on(async {
        let clock = ManualClock::starting_now();
        let a = common::fresh_with(&clock, policy(), 1).await;
        let _cleanup_a = common::Cleanup::of(&a);
        let other = common::fresh_with(&clock, policy(), 1).await;
        let _cleanup_other = common::Cleanup::of(&other);
        for b in [&a, &other] {
            b.admit(&Admission::new(id("x"))).await.expect("admit");
            b.get_or_create(&StoreId::new("s").expect("id"), &[])
                .await
                .expect("store");
        }
        let lease = claim(&a, &clock).await.expect("claim").remove(0);
        a.release(&lease)
            .await
            .expect("release")
            .accepted()
            .expect("held");
        assert!(common::key_count(&a).await > 3);
        let others = common::snapshot(&other).await;
        a.delete_namespace().await.expect("delete");
        assert_eq!(common::key_count(&a).await, 0);
        assert_eq!(common::snapshot(&other).await, others);
        other.delete_namespace().await.expect("cleanup");
    });
}

/// A foreign key of the wrong type at an index key or the token counter: every
/// record-changing script refuses with `Schema` before its first write, so nothing in the
/// namespace changes (no half-applied acknowledgement, claim or admission).
#[test]
fn foreign_key_types_at_index_keys_are_schema_errors_that_change_nothing() {
    runtime().block_on(async {
        for name in [
            "ready",
            "waiting",
            "running",
            "failing",
            "corrupt",
            "corrupt_why",
            "token",
            "running_es",
            "counts",
        ] {
            let clock = ManualClock::starting_now();
            let b = common::fresh_with(&clock, policy(), 1).await;
            for e in ["a", "b"] {
                b.admit(&Admission::new(id(e))).await.expect("admit");
            }
            let leases = claim_n(&b, &clock, 1).await.expect("claim");
            let lease = leases.first().expect("one lease").clone();
            let key = format!("{}{name}", b.key_prefix());
            let saved = format!("{}saved-{name}", b.key_prefix());
            // Swap the real key out for a list (wrong for all of them) while the operations run.
            let had = matches!(redis_cmd(&["EXISTS", &key]).await, redis::Value::Int(1));
            if had {
                redis_cmd(&["RENAME", &key, &saved]).await;
            }
            redis_cmd(&["RPUSH", &key, "foreign"]).await;
            let before = common::snapshot(&b).await;
            let done = WorkflowRunOutcome::Completed(Json::null());
            let schema = |what: &str, r: lease_core::Result<()>| {
                assert!(
                    matches!(r, Err(LeaseError::Schema { .. })),
                    "{name}: {what}: {r:?}"
                );
            };
            schema("acknowledge", b.acknowledge(&lease, &done).await.map(drop));
            let batch = [Acknowledgement {
                lease: lease.clone(),
                outcome: done.clone(),
            }];
            schema(
                "acknowledge_batch",
                b.acknowledge_batch(&batch).await.map(drop),
            );
            schema("release", b.release(&lease).await.map(drop));
            schema("renew", b.renew(&lease, LEASE).await.map(drop));
            schema("claim_due", claim(&b, &clock).await.map(drop));
            schema("admit", b.admit(&Admission::new(id("c"))).await.map(drop));
            schema("request_wake", b.request_wake(&id("b"), clock.now()).await);
            assert_eq!(
                common::snapshot(&b).await,
                before,
                "{name}: nothing changed"
            );
            redis_cmd(&["DEL", &key]).await;
            if had {
                redis_cmd(&["RENAME", &saved, &key]).await;
            }
            // With the key restored the same lease acknowledges normally.
            let ack = b.acknowledge(&lease, &done).await.expect("ack");
            assert!(!ack.is_lost(), "{name}: {ack:?}");
            b.delete_namespace().await.expect("cleanup");
        }
    });
}
