//! Admission inside the application's own script (`admit_script`): the application's
//! writes and the executions it admits happen in one script; a body that fails admits
//! nothing and publishes nothing; only admitted work wakes a dispatcher.
//!
//! Absence of a wake-up is checked without waiting: a later probe follows, and the
//! receiver keeps the earliest instant signalled since it last looked, so an unwanted
//! earlier message would show instead. One partition whatever `LEASE_REDIS_PARTITIONS`
//! says: the application keys carry the home hash tag.

mod common;

use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, Clock, ExecutionClient, ExecutionClientExt, ExecutionId, LeaseError,
    ManualClock, RedeliveryPolicy, Timestamp, WakeReceiver, WorkflowName,
};
use lease_redis::{AdmitScript, RedisBackend, ScriptBodyError};
use redis::Value;

const DEADLINE: Duration = Duration::from_secs(20);

/// The application's sign-up: refuses a user that exists (before writing), else stores it.
const SIGN_UP: &str = "\
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return redis.error_reply('user exists')
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return redis.call('HLEN', KEYS[1])";

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

fn t(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms)
}

/// An admission due at the fixed past instant `at` ms.
fn due(name: &str, at: i64) -> Admission {
    Admission::new(id(name)).not_before(t(at))
}

async fn next(rx: &WakeReceiver, what: &str) -> Timestamp {
    tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("no wake-up for {what} within {DEADLINE:?}"))
}

struct Fixture {
    clock: ManualClock,
    backend: RedisBackend,
    rx: WakeReceiver,
    users: String,
    script: AdmitScript,
    _cleanup: (common::Cleanup, common::Cleanup),
}

impl Fixture {
    async fn new() -> Self {
        let clock = ManualClock::starting_now();
        let backend = common::fresh_with(&clock, RedeliveryPolicy::default(), 1).await;
        let rx = backend.wakeups().expect("the redis backend sends wake-ups");
        tokio::time::timeout(DEADLINE, backend.wakeups_subscribed())
            .await
            .expect("subscribed");
        let app = format!("app:{}:", backend.hash_tag());
        Fixture {
            clock,
            users: format!("{app}users"),
            rx,
            script: AdmitScript::new(SIGN_UP),
            _cleanup: (common::Cleanup::of(&backend), common::Cleanup(app.clone())),
            backend,
        }
    }

    async fn sign_up(&self, name: &str, admissions: &[Admission]) -> lease_core::Result<Value> {
        self.backend
            .admit_script(&self.script, &[&self.users], &[name, "{}"], admissions)
            .await
            .map(|admitted| admitted.value)
    }

    async fn user_count(&self) -> i64 {
        redis::cmd("HLEN")
            .arg(&self.users)
            .query_async(&mut common::admin().await)
            .await
            .expect("HLEN")
    }

    async fn exists(&self, name: &str) -> bool {
        self.backend.get(&id(name)).await.expect("get").is_some()
    }

    async fn claimed_ids(&self) -> Vec<String> {
        let leases = self
            .backend
            .claim_due(ClaimRequest {
                now: self.clock.now(),
                limit: 10,
                duration: Duration::from_secs(30),
            })
            .await
            .expect("claim");
        let mut ids: Vec<String> = leases
            .iter()
            .map(|l| l.execution_id.as_str().to_owned())
            .collect();
        ids.sort_unstable();
        ids
    }
}

/// The newcomer's case: a user and its workflow in one script. A body that refuses admits
/// nothing and wakes nobody; one that succeeds admits (claimable) and wakes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_body_s_writes_and_the_admissions_happen_together_or_not_at_all() {
    let f = Fixture::new().await;
    assert_eq!(
        f.sign_up("bob", &[due("welcome-bob", 700)])
            .await
            .expect("sign up"),
        Value::Int(1)
    );
    assert_eq!(next(&f.rx, "bob's sign-up").await, t(700));

    let refused = f
        .sign_up("bob", &[due("welcome-bob-again", 300)])
        .await
        .expect_err("bob exists");
    let body_failed = match &refused {
        LeaseError::Backend { source, .. } => source.downcast_ref::<ScriptBodyError>(),
        _ => None,
    };
    assert!(
        body_failed.is_some_and(|e| e.message().contains("user exists")),
        "{refused}"
    );
    f.sign_up("cat", &[due("welcome-cat", 900)])
        .await
        .expect("sign up");
    // Had the refused call admitted or published, its earlier 300 would come out first.
    assert_eq!(next(&f.rx, "cat's sign-up").await, t(900));
    assert!(!f.exists("welcome-bob-again").await);
    assert_eq!(f.user_count().await, 2);
    assert_eq!(f.claimed_ids().await, ["welcome-bob", "welcome-cat"]);
}

/// An id that exists is returned as stored and wakes nobody; the new items are admitted
/// and wake once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_id_is_returned_unchanged_and_wakes_nobody() {
    let f = Fixture::new().await;
    let first = due("x", 500).workflow(WorkflowName::new("first").expect("name"));
    f.backend.admit(&first).await.expect("admit");
    assert_eq!(next(&f.rx, "the plain admit").await, t(500));

    let again = due("x", 400).workflow(WorkflowName::new("second").expect("name"));
    let admitted = f
        .backend
        .admit_script(
            &f.script,
            &[&f.users],
            &["dan", "{}"],
            &[again, due("y", 800)],
        )
        .await
        .expect("admit_script");
    let x = &admitted.records[0];
    assert_eq!(x.workflow.as_ref().map(|w| w.as_str()), Some("first"));
    assert_eq!(x.due_at, Some(t(500)), "x unchanged");
    assert_eq!(admitted.records[1].id, id("y"));
    assert_eq!(next(&f.rx, "the script").await, t(800), "x woke nobody");
    assert_eq!(f.claimed_ids().await, ["x", "y"]);
}

/// Bad input is `InvalidInput` before anything runs: the body wrote nothing, nothing was
/// admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_runs_nothing() {
    let f = Fixture::new().await;
    let invalid = |r: lease_core::Result<Value>, what: &str| match r {
        Err(LeaseError::InvalidInput { .. }) => {}
        other => panic!("{what}: {other:?}"),
    };
    invalid(
        f.sign_up("eve", &[due("a", 1), due("a", 2)]).await,
        "an id twice",
    );
    invalid(f.sign_up("eve", &[]).await, "no admission");
    let untagged = f
        .backend
        .admit_script(&f.script, &["users"], &["eve", "{}"], &[due("b", 1)])
        .await
        .map(|a| a.value);
    invalid(untagged, "a key without the namespace's hash tag");
    let broken = AdmitScript::new("return (");
    let uncompiled = f
        .backend
        .admit_script(&broken, &[], &[], &[due("c", 1)])
        .await
        .map(|a| a.value);
    invalid(uncompiled, "a body that does not compile");

    assert_eq!(f.user_count().await, 0);
    for name in ["a", "b", "c"] {
        assert!(!f.exists(name).await, "{name} was not admitted");
    }
}
