//! Admission from a delivery's fenced script (`fenced_script_admitting`,
//! `step_in_script_admitting`): the lease check, the application's writes, the children it
//! admits and (for a step) the step record are one script. A stale holder or a failing body
//! admits nothing and wakes nobody; a call that went through admits claimable children and
//! wakes an idle dispatcher as a plain admit does.
//!
//! Wake-ups: each test subscribes only after its claims (whose own messages would
//! otherwise be pending), and waits for the subscription's first signal. Absence of a
//! wake-up is checked without waiting: a later probe follows, and the receiver keeps the
//! earliest instant signalled since it last looked, so an unwanted earlier message would
//! show instead. The children are due at fixed instants long past, below every instant the
//! library's own scripts publish (the manual clock starts at the real time).
//!
//! One partition whatever `LEASE_REDIS_PARTITIONS` says, but for the split namespace's test,
//! which uses 3: the application keys carry the lease's hash tag.

mod common;

use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, Clock, ConcurrencyKey, ExecutionClient, ExecutionClientExt,
    ExecutionId, ExecutionLease, FencingToken, HeapClient, Json, LeaseError, ManualClock,
    RedeliveryPolicy, SharedBackend, StepKey, Timestamp, WakeReceiver,
};
use lease_redis::{FencedScript, RedisBackend, ScriptBodyError};
use lease_runtime::{Delivery, DeliveryError};
use redis::Value;
use tokio_util::sync::CancellationToken;

const LEASE: Duration = Duration::from_secs(30);
const DEADLINE: Duration = Duration::from_secs(20);

/// The parent's own write: counts the call in `KEYS[1]` and returns the count, refusing
/// (before writing) when `ARGV[1]` is `refuse`.
const COUNT: &str = "\
if ARGV[1] == 'refuse' then return redis.error_reply('refused') end
return redis.call('INCR', KEYS[1])";

/// The step's body: counts in `KEYS[1]`, answers JSON naming the count.
const SPLIT_ORDER: &str = "\
local n = redis.call('INCR', KEYS[1])
return cjson.encode({parts = n})";

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

fn t(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms)
}

/// A child due at the fixed past instant `at` ms.
fn due(name: &str, at: i64) -> Admission {
    Admission::new(id(name)).not_before(t(at))
}

async fn next(rx: &WakeReceiver, what: &str) -> Timestamp {
    tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("no wake-up for {what} within {DEADLINE:?}"))
}

async fn get_string(key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(key)
        .query_async(&mut common::admin_for(key).await)
        .await
        .expect("GET")
}

fn body_error(e: &LeaseError) -> Option<&ScriptBodyError> {
    match e {
        LeaseError::Backend { source, .. } => source.downcast_ref::<ScriptBodyError>(),
        _ => None,
    }
}

struct Fixture {
    clock: ManualClock,
    backend: RedisBackend,
    /// The application's counter, under the parent's hash tag.
    counter: String,
    _cleanup: (common::Cleanup, common::Cleanup),
}

impl Fixture {
    /// A fresh namespace of `partitions` partitions, with execution `parent` admitted.
    async fn new(partitions: u16) -> Self {
        let clock = ManualClock::starting_now();
        let backend = common::fresh_with(&clock, RedeliveryPolicy::default(), partitions).await;
        backend
            .admit(&Admission::new(id("parent")))
            .await
            .expect("admit the parent");
        let app = format!("app:{}:", backend.hash_tag());
        let tag = backend.hash_tag_for(&id("parent"));
        Fixture {
            clock,
            counter: format!("app:{tag}:n"),
            _cleanup: (common::Cleanup::of(&backend), common::Cleanup(app)),
            backend,
        }
    }

    /// The parent's next claim on `b`.
    async fn claim(&self, b: &RedisBackend) -> ExecutionLease {
        let leases = b.claim_due(self.request()).await.expect("claim the parent");
        assert_eq!(leases.len(), 1, "claims the parent");
        leases[0].clone()
    }

    /// The parent's next claim on `b` as a delivery, as a dispatcher would build it (a
    /// claim also takes the children due by then, which come first).
    async fn deliver(&self, b: &RedisBackend) -> Delivery {
        let claimed = b
            .claim_due_with_records(self.request())
            .await
            .expect("claim the parent");
        let c = claimed
            .into_iter()
            .find(|c| c.lease.execution_id == id("parent"))
            .expect("the parent's claim");
        let backend: SharedBackend = Arc::new(b.clone());
        Delivery::new(backend, c.lease, c.record, CancellationToken::new())
    }

    fn request(&self) -> ClaimRequest {
        ClaimRequest {
            now: self.clock.now(),
            limit: 10,
            duration: LEASE,
        }
    }

    /// Lets the parent's lease lapse, so a peer's claim takes it over.
    fn expire(&self) {
        self.clock
            .advance(LEASE + RedeliveryPolicy::default().delay(1));
    }

    /// A receiver subscribed after the setup's claims.
    async fn subscribe(&self) -> WakeReceiver {
        let rx = self
            .backend
            .wakeups()
            .expect("the redis backend sends wake-ups");
        tokio::time::timeout(DEADLINE, self.backend.wakeups_subscribed())
            .await
            .expect("subscribed");
        rx
    }

    /// A plain admission due at `at`, whose wake-up must be the next one.
    async fn probe(&self, rx: &WakeReceiver, name: &str, at: i64) {
        self.backend.admit(&due(name, at)).await.expect("probe");
        assert_eq!(next(rx, name).await, t(at), "an earlier wake-up was sent");
    }

    async fn exists(&self, name: &str) -> bool {
        self.backend.get(&id(name)).await.expect("get").is_some()
    }

    /// The ids a claim takes now (the parent's running lease excluded), sorted.
    async fn claimable(&self) -> Vec<String> {
        let leases = self.backend.claim_due(self.request()).await.expect("claim");
        let mut ids: Vec<String> = leases
            .iter()
            .map(|l| l.execution_id.as_str().to_owned())
            .collect();
        ids.sort_unstable();
        ids
    }
}

/// A call that went through: the body's write and the children exist together, the
/// children are claimable, and one wake-up with the earliest child's instant goes out as
/// for a plain admit. An id that exists comes back as stored and wakes nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_script_admits_its_children_with_its_writes_and_wakes() {
    let f = Fixture::new(1).await;
    let lease = f.claim(&f.backend).await;
    let rx = f.subscribe().await;
    let script = FencedScript::new(COUNT);
    let made = f
        .backend
        .fenced_script_admitting(
            &lease,
            &script,
            &[&f.counter],
            &["go"],
            &[due("child-b", 800), due("child-a", 700)],
        )
        .await
        .expect("fenced_script_admitting")
        .accepted()
        .expect("the lease is held");
    assert_eq!(made.value, Value::Int(1));
    let ids: Vec<&str> = made.records.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["child-b", "child-a"]);
    assert_eq!(made.records[1].due_at, Some(t(700)));
    assert_eq!(next(&rx, "the children").await, t(700));
    assert_eq!(get_string(&f.counter).await.as_deref(), Some("1"));

    // Again with an existing child: returned unchanged, no wake-up for it.
    let again = f
        .backend
        .fenced_script_admitting(
            &lease,
            &script,
            &[&f.counter],
            &["go"],
            &[due("child-a", 300), due("child-c", 900)],
        )
        .await
        .expect("again")
        .accepted()
        .expect("held");
    assert_eq!(again.records[0].due_at, Some(t(700)), "child-a unchanged");
    assert_eq!(next(&rx, "child-c").await, t(900), "child-a woke somebody");
    // None at all: the body runs alone.
    let alone = f
        .backend
        .fenced_script_admitting(&lease, &script, &[&f.counter], &["go"], &[])
        .await
        .expect("no admissions")
        .accepted()
        .expect("held");
    assert_eq!((alone.value, alone.records.len()), (Value::Int(3), 0));
    assert_eq!(f.claimable().await, ["child-a", "child-b", "child-c"]);
    assert_ne!(script.admitting_hash(), script.hash());
}

/// A stale holder's call is `Lost`: the body did not run, no child exists, nobody woke;
/// the current holder's call then admits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_holder_admits_nothing_and_wakes_nobody() {
    let f = Fixture::new(1).await;
    let stale = f.claim(&f.backend).await;
    f.expire();
    let peer = f.backend.peer().await.expect("peer");
    let current = f.claim(&peer).await;
    let rx = f.subscribe().await;
    let script = FencedScript::new(COUNT);
    let before = common::snapshot(&f.backend).await;
    let r = f
        .backend
        .fenced_script_admitting(&stale, &script, &[&f.counter], &["go"], &[due("c", 300)])
        .await
        .expect("the stale call");
    assert!(r.is_lost(), "{r:?}");
    assert_eq!(get_string(&f.counter).await, None, "the body ran");
    assert_eq!(common::snapshot(&f.backend).await, before, "it admitted");
    f.probe(&rx, "probe", 900).await;

    let r = peer
        .fenced_script_admitting(&current, &script, &[&f.counter], &["go"], &[due("c", 300)])
        .await
        .expect("the current holder's call");
    assert!(!r.is_lost(), "{r:?}");
    assert!(f.exists("c").await);
    assert_eq!(next(&rx, "c").await, t(300));
}

/// A body that fails (an error reply, or a Lua error after a write, which stays) admits
/// nothing and wakes nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_body_admits_nothing_and_wakes_nobody() {
    let f = Fixture::new(1).await;
    let lease = f.claim(&f.backend).await;
    let rx = f.subscribe().await;
    let refuses = FencedScript::new(COUNT);
    let e = f
        .backend
        .fenced_script_admitting(
            &lease,
            &refuses,
            &[&f.counter],
            &["refuse"],
            &[due("a", 100)],
        )
        .await
        .expect_err("refused");
    assert!(
        body_error(&e).is_some_and(|b| b.message().contains("refused")),
        "{e:?}"
    );
    let throws = FencedScript::new("redis.call('INCR', KEYS[1]) error('declined')");
    let e = f
        .backend
        .fenced_script_admitting(&lease, &throws, &[&f.counter], &[], &[due("b", 200)])
        .await
        .expect_err("declined");
    assert!(
        body_error(&e).is_some_and(|b| b.message().contains("declined")),
        "{e:?}"
    );
    assert_eq!(
        get_string(&f.counter).await.as_deref(),
        Some("1"),
        "the write before the error stays"
    );
    assert!(!f.exists("a").await && !f.exists("b").await);
    f.probe(&rx, "probe", 900).await;
    assert_eq!(f.claimable().await, ["probe"]);
}

/// A step and its children commit together, with one wake-up; a replay (the same delivery,
/// then a redelivery) returns the record and admits nothing more; a refused response
/// records and admits nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_and_its_children_commit_together_and_replay_admits_nothing() {
    let f = Fixture::new(1).await;
    let b = &f.backend;
    let first = f.deliver(b).await;
    let rx = f.subscribe().await;
    let script = FencedScript::new(SPLIT_ORDER);
    let bad = FencedScript::new("redis.call('INCR', KEYS[1]) return 42");
    let e = b
        .step_in_script_admitting(&first, "bad", &bad, &[&f.counter], &[], &[due("x", 100)])
        .await
        .expect_err("a number is no JSON text");
    assert!(matches!(e, DeliveryError::Step { .. }), "{e:?}");
    assert!(!f.exists("x").await);

    let children = [due("part-1", 700), due("part-2", 800)];
    let response = b
        .step_in_script_admitting(&first, "split", &script, &[&f.counter], &[], &children)
        .await
        .expect("split");
    assert_eq!(response.as_str(), r#"{"parts":2}"#);
    assert_eq!(next(&rx, "the step's children").await, t(700));
    let key = StepKey::new("split").expect("key");
    let record = b
        .read_step(&id("parent"), &key, 1)
        .await
        .expect("read")
        .expect("the step record");
    assert!(record.done);
    assert_eq!(record.token, first.token());
    assert!(f.exists("part-1").await && f.exists("part-2").await);

    // Replays, with other children: the same delivery, then a redelivery.
    let more = [due("part-3", 300)];
    let replay = async |delivery: &Delivery| {
        b.step_in_script_admitting(delivery, "split", &script, &[&f.counter], &[], &more)
            .await
            .expect("replay")
    };
    assert_eq!(replay(&first).await, response);
    f.probe(&rx, "probe", 900).await;
    f.expire();
    let second = f.deliver(&b.peer().await.expect("peer")).await;
    assert_eq!(replay(&second).await, response);
    assert!(!f.exists("part-3").await, "a replay admitted");
    assert_eq!(get_string(&f.counter).await.as_deref(), Some("2"));
}

/// A stale step is `Lost`: no body, no record, no child, no wake-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_step_admits_nothing_and_wakes_nobody() {
    let f = Fixture::new(1).await;
    let stale = f.deliver(&f.backend).await;
    f.expire();
    let current = f.deliver(&f.backend.peer().await.expect("peer")).await;
    let rx = f.subscribe().await;
    let script = FencedScript::new(SPLIT_ORDER);
    let before = common::snapshot(&f.backend).await;
    let e = f
        .backend
        .step_in_script_admitting(
            &stale,
            "split",
            &script,
            &[&f.counter],
            &[],
            &[due("c", 300)],
        )
        .await
        .expect_err("stale");
    assert!(matches!(e, DeliveryError::Lost), "{e:?}");
    assert_eq!(get_string(&f.counter).await, None, "the body ran");
    assert_eq!(common::snapshot(&f.backend).await, before, "it wrote");
    f.probe(&rx, "probe", 900).await;
    let v = f
        .backend
        .step_in_script_admitting(
            &current,
            "split",
            &script,
            &[&f.counter],
            &[],
            &[due("c", 300)],
        )
        .await
        .expect("the current holder's step");
    assert_eq!(v.as_str(), r#"{"parts":1}"#);
    assert!(f.exists("c").await);
}

/// Bad input is `InvalidInput` before anything is sent: nothing ran, nothing admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_typed_and_changes_nothing() {
    let f = Fixture::new(1).await;
    let b = &f.backend;
    let delivery = f.deliver(b).await;
    let lease = delivery.claimed_lease().clone();
    let script = FencedScript::new(COUNT);
    let many: Vec<Admission> = (0..=lease_core::limits::MAX_ADMIT_BATCH)
        .map(|i| due(&format!("m{i}"), 1))
        .collect();
    let big = Json::parse("input", &format!("\"{}\"", "x".repeat(1024 * 1024 - 16)))
        .expect("a large input");
    let heavy: Vec<Admission> = (0..17)
        .map(|i| due(&format!("h{i}"), 1).input(big.clone()))
        .collect();
    let late = Timestamp::from_millis(lease_core::limits::MAX_SCHEDULED_MS + 1);
    let zero = ExecutionLease {
        token: FencingToken::new(0),
        ..lease.clone()
    };
    let cases: Vec<(&str, &ExecutionLease, Vec<&str>, Vec<Admission>)> = vec![
        ("too many", &lease, vec![&f.counter], many),
        ("over the byte cap", &lease, vec![&f.counter], heavy),
        (
            "an id twice",
            &lease,
            vec![&f.counter],
            vec![due("d", 1), due("d", 2)],
        ),
        (
            "a scheduled instant out of range",
            &lease,
            vec![&f.counter],
            vec![Admission::new(id("late")).not_before(late)],
        ),
        (
            "a key without the hash tag",
            &lease,
            vec!["app:n"],
            vec![due("k", 1)],
        ),
        ("token 0", &zero, vec![&f.counter], vec![due("z", 1)]),
    ];
    let before = common::snapshot(b).await;
    for (what, lease, keys, admissions) in &cases {
        let e = b
            .fenced_script_admitting(lease, &script, keys, &["go"], admissions)
            .await
            .expect_err(what);
        assert!(
            matches!(e, LeaseError::InvalidInput { .. }),
            "{what}: {e:?}"
        );
    }
    let e = b
        .step_in_script_admitting(
            &delivery,
            "split",
            &FencedScript::new(SPLIT_ORDER),
            &[&f.counter],
            &[],
            &[due("d", 1), due("d", 2)],
        )
        .await
        .expect_err("an id twice");
    assert!(
        matches!(e, DeliveryError::Backend(LeaseError::InvalidInput { .. })),
        "{e:?}"
    );
    assert_eq!(common::snapshot(b).await, before);
    assert_eq!(get_string(&f.counter).await, None);
}

/// Names `prefix-0`, `prefix-1`, ... until one lies in `parent`'s partition (`same`) or in
/// another (`!same`).
fn child_of(b: &RedisBackend, parent: &ExecutionId, prefix: &str, same: bool) -> ExecutionId {
    (0..1000)
        .map(|i| id(&format!("{prefix}-{i}")))
        .find(|c| (b.hash_tag_for(c) == b.hash_tag_for(parent)) == same)
        .expect("a name in the partition asked for")
}

/// On a namespace split into partitions the script runs in the lease's partition: children
/// there are admitted, claimable and wake a dispatcher; a child of another partition is
/// `InvalidInput`, one with a concurrency key `Unsupported` (the split namespace declares no
/// keys), and nothing runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_namespace_admits_in_the_lease_s_partition_only() {
    let f = Fixture::new(3).await;
    let b = &f.backend;
    let parent = id("parent");
    let delivery = f.deliver(b).await;
    let lease = delivery.claimed_lease().clone();
    let rx = f.subscribe().await;
    let script = FencedScript::new(COUNT);
    let near = child_of(b, &parent, "near", true);
    let far = child_of(b, &parent, "far", false);
    let keyed = Admission::new(child_of(b, &parent, "keyed", true))
        .concurrency_key(ConcurrencyKey::new("k").expect("key"));
    for (what, admissions) in [
        (
            "another partition",
            vec![Admission::new(near.clone()), Admission::new(far.clone())],
        ),
        ("a concurrency key", vec![keyed.clone()]),
    ] {
        let e = b
            .fenced_script_admitting(&lease, &script, &[&f.counter], &["go"], &admissions)
            .await
            .expect_err(what);
        assert!(
            matches!(&e, LeaseError::InvalidInput { field, .. } if *field == "admissions")
                || matches!(&e, LeaseError::Unsupported { .. }),
            "{what}: {e:?}"
        );
        let e = b
            .step_in_script_admitting(&delivery, "s", &script, &[&f.counter], &[], &admissions)
            .await
            .expect_err(what);
        assert!(
            matches!(
                e,
                DeliveryError::Backend(
                    LeaseError::InvalidInput { .. } | LeaseError::Unsupported { .. }
                )
            ),
            "{what}: {e:?}"
        );
    }
    assert_eq!(get_string(&f.counter).await, None, "a refused call ran");
    assert!(!f.exists(near.as_str()).await && !f.exists(far.as_str()).await);

    let made = b
        .fenced_script_admitting(
            &lease,
            &script,
            &[&f.counter],
            &["go"],
            &[Admission::new(near.clone()).not_before(t(700))],
        )
        .await
        .expect("in the lease's partition")
        .accepted()
        .expect("held");
    assert_eq!((made.value, made.records.len()), (Value::Int(1), 1));
    assert_eq!(next(&rx, "the child").await, t(700));
    assert_eq!(f.claimable().await, [near.as_str()]);
}

/// A body that closes its function wrapper with `end` and goes on at the top level still
/// runs nothing before the lease check in the admitting script: a stale holder's escaped
/// write is not applied and nothing is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_closing_its_wrapper_runs_nothing_before_the_fence() {
    let f = Fixture::new(1).await;
    let stale = f.claim(&f.backend).await;
    f.expire();
    let peer = f.backend.peer().await.expect("peer");
    let current = f.claim(&peer).await;
    // The admitting script's KEYS: the prefix, its anchor, then the caller's.
    let escape = FencedScript::new(
        "return 1 end redis.call('SET', KEYS[3], 'escaped') local __tail = function()",
    );
    let r = f
        .backend
        .fenced_script_admitting(&stale, &escape, &[&f.counter], &[], &[due("c", 1)])
        .await
        .expect("the stale call");
    assert!(r.is_lost(), "{r:?}");
    assert_eq!(get_string(&f.counter).await, None, "the escaped write ran");
    assert!(!f.exists("c").await);
    let r = peer
        .fenced_script_admitting(&current, &escape, &[&f.counter], &[], &[due("c", 1)])
        .await
        .expect("the current holder's call");
    assert!(!r.is_lost(), "{r:?}");
    assert_eq!(get_string(&f.counter).await.as_deref(), Some("escaped"));
    assert!(f.exists("c").await);
}
