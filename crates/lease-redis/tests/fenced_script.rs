//! Fencing the application's own Redis writes: `fenced_script` and
//! `step_in_script`.
//!
//! The race: each round A claims an execution (token t1); the shared manual clock passes the
//! lease's expiry; then, released together by a barrier, A runs a script that increments an
//! application counter and appends its token to an application list, while peer B reclaims
//! the execution (t2) and runs the same script with t2. B's reclaim is the library's claim
//! script and an `LRANGE` of the list inside one `MULTI`, so B sees the list exactly as it
//! stood when the higher token came to exist. Redis runs each script alone, so:
//!
//! - A's call is accepted only if it ran before the claim: then t1 is in B's snapshot, and
//!   before t2 in the final list; t1 appearing in the final list but not in the snapshot is
//!   a stale write applied after the higher token existed.
//! - A call of A invoked after B's reclaim returned must be `Lost`.
//! - The counter equals the number of accepted calls (A's 0 or 1, plus B's 1), and the list
//!   holds exactly the accepted tokens.
//!
//! The same rounds run against a deliberately non-atomic variant (check the token with one
//! call, then `EVAL` the bare body), which these checks must catch.
//! `LEASE_RACE_ROUNDS` overrides the number of rounds (default 500).
//!
//! One partition whatever `LEASE_REDIS_PARTITIONS` says (`common::fresh_with(.., 1)`): their keys
//! carry the home hash tag, the one-partition rule.

mod common;

use lease_core::ExecutionClientExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, Clock, ExecutionClient, ExecutionId, ExecutionLease, Fenced,
    FencingToken, HeapClient, Json, LeaseError, ManualClock, RedeliveryPolicy, SharedBackend,
    StepKey, Timestamp, WorkflowRunOutcome,
};
use lease_redis::{FencedScript, MAX_TOKEN, RedisBackend, ScriptBodyError};
use lease_runtime::{Delivery, DeliveryError};
use redis::Value;
use tokio::sync::Barrier;
use tokio_util::sync::CancellationToken;

const LEASE: Duration = Duration::from_secs(30);

/// The race's application script: count the call, log the caller's token.
const COUNT_AND_LOG: &str = "\
redis.call('INCR', KEYS[1])
redis.call('RPUSH', KEYS[2], ARGV[1])
return redis.call('LLEN', KEYS[2])";

fn rounds() -> usize {
    std::env::var("LEASE_RACE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500)
}

fn policy() -> RedeliveryPolicy {
    RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_secs(2)).expect("policy")
}

/// The application keys of a test: `app:{<namespace>}:<name>`, removed when dropped.
struct AppKeys {
    prefix: String,
    _cleanup: common::Cleanup,
}

impl AppKeys {
    fn of(backend: &RedisBackend) -> Self {
        let prefix = format!("app:{}:", backend.hash_tag());
        AppKeys {
            _cleanup: common::Cleanup(prefix.clone()),
            prefix,
        }
    }

    fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }
}

async fn get_string(key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(key)
        .query_async(&mut common::admin().await)
        .await
        .expect("GET")
}

async fn list(key: &str) -> Vec<String> {
    redis::cmd("LRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query_async(&mut common::admin().await)
        .await
        .expect("LRANGE")
}

async fn admit_and_claim(b: &RedisBackend, clock: &ManualClock, id: &str) -> ExecutionLease {
    let id = ExecutionId::new(id).expect("id");
    b.admit(&Admission::new(id.clone())).await.expect("admit");
    let leases = b
        .claim_due(ClaimRequest {
            now: clock.now(),
            limit: 1,
            duration: LEASE,
        })
        .await
        .expect("claim");
    assert_eq!(leases.len(), 1, "claims {id}");
    assert_eq!(leases[0].execution_id, id);
    leases[0].clone()
}

/// Expires `lease` on the shared clock and reclaims it on `b` (a peer).
async fn reclaim(b: &RedisBackend, clock: &ManualClock, lease: &ExecutionLease) -> ExecutionLease {
    clock.advance(LEASE + policy().delay(1));
    let leases = b
        .claim_due(ClaimRequest {
            now: clock.now(),
            limit: 1,
            duration: LEASE,
        })
        .await
        .expect("reclaim");
    assert_eq!(leases.len(), 1, "reclaims {}", lease.execution_id);
    assert!(leases[0].token > lease.token);
    leases[0].clone()
}

// ---- the race -------------------------------------------------------------------------------

/// How the stale holder runs its script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// `fenced_script`: the check and the body in one script.
    Fenced,
    /// The broken variant: the check as one call, then the bare body as another.
    NonAtomic,
}

/// The non-atomic variant (test only): reads the execution's status and token with one
/// call (`HMGET`, the fields `write_step`'s check reads), and if the lease looks held runs
/// the bare body with `EVAL` as a second call. Returns whether the body ran.
async fn nonatomic_fenced_script(
    backend: &RedisBackend,
    lease: &ExecutionLease,
    script: &FencedScript,
    keys: &[&str],
    args: &[&str],
) -> bool {
    let mut conn = backend.connection();
    let exec = format!("{}exec:{}", backend.key_prefix(), lease.execution_id);
    let (status, token): (Option<String>, Option<u64>) = redis::cmd("HMGET")
        .arg(&exec)
        .arg("st")
        .arg("tk")
        .query_async(&mut conn)
        .await
        .expect("HMGET");
    if status.as_deref() != Some("running") || token != Some(lease.token.get()) {
        return false;
    }
    let bare = redis::Script::new(script.body());
    let mut invocation = bare.prepare_invoke();
    for key in keys {
        invocation.key(*key);
    }
    for arg in args {
        invocation.arg(*arg);
    }
    let _: Value = invocation.invoke_async(&mut conn).await.expect("EVAL");
    true
}

/// A global order of invocations and completions, for the real-time check.
static SEQ: AtomicU64 = AtomicU64::new(0);

fn tick() -> u64 {
    SEQ.fetch_add(1, Ordering::SeqCst)
}

/// The library's claim script and `LRANGE list` in one `MULTI`: the lease it issued and the
/// list as it stood at that instant.
async fn reclaim_and_snapshot(
    b: &RedisBackend,
    clock: &ManualClock,
    list: &str,
) -> (ExecutionLease, Vec<String>) {
    let table: Vec<String> = policy().table_ms().iter().map(|d| d.to_string()).collect();
    let now = clock.now().as_millis().to_string();
    let lease_ms = LEASE.as_millis().to_string();
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("EVALSHA")
        .arg(lease_redis::raw::claim_due().get_hash())
        .arg(1)
        .arg(b.key_prefix())
        .arg(&now)
        .arg(table.join(","))
        .arg(&now)
        .arg(1)
        .arg(&lease_ms)
        .cmd("LRANGE")
        .arg(list)
        .arg(0)
        .arg(-1);
    let (claimed, snapshot): (Vec<String>, Vec<String>) = pipe
        .query_async(&mut b.connection())
        .await
        .expect("MULTI claim + LRANGE");
    let [id, token, expires] = claimed.as_slice() else {
        panic!("the reclaim claimed {claimed:?}");
    };
    let lease = ExecutionLease {
        execution_id: ExecutionId::new(id.as_str()).expect("id"),
        token: FencingToken::new(token.parse().expect("token")),
        expires_at: Timestamp::from_millis(expires.parse().expect("expiry")),
    };
    (lease, snapshot)
}

#[derive(Debug, Default)]
struct Tally {
    stale_applied: usize,
    stale_lost: usize,
    violations: Vec<String>,
}

struct Race {
    a: RedisBackend,
    b: RedisBackend,
    clock: ManualClock,
    app: AppKeys,
    script: FencedScript,
}

async fn round(i: usize, race: &Race, variant: Variant, tally: &mut Tally) {
    let stale = admit_and_claim(&race.a, &race.clock, &format!("race-{i}")).await;
    race.clock.advance(LEASE + policy().delay(1));
    let (counter, log) = (
        race.app.key(&format!("n:{i}")),
        race.app.key(&format!("log:{i}")),
    );
    let barrier = Arc::new(Barrier::new(2));
    let holder = {
        let (a, lease, script, barrier) = (
            race.a.clone(),
            stale.clone(),
            race.script.clone(),
            barrier.clone(),
        );
        let (counter, log) = (counter.clone(), log.clone());
        tokio::spawn(async move {
            let keys = [counter.as_str(), log.as_str()];
            let token = lease.token.get().to_string();
            barrier.wait().await;
            let invoked = tick();
            let applied = match variant {
                Variant::Fenced => !a
                    .fenced_script(&lease, &script, &keys, &[&token])
                    .await
                    .expect("stale fenced_script")
                    .is_lost(),
                Variant::NonAtomic => {
                    nonatomic_fenced_script(&a, &lease, &script, &keys, &[&token]).await
                }
            };
            (invoked, applied)
        })
    };
    let peer = {
        let (b, clock, script, barrier) = (
            race.b.clone(),
            race.clock.clone(),
            race.script.clone(),
            barrier.clone(),
        );
        let (counter, log) = (counter.clone(), log.clone());
        tokio::spawn(async move {
            barrier.wait().await;
            let (lease, snapshot) = reclaim_and_snapshot(&b, &clock, &log).await;
            let returned = tick();
            let token = lease.token.get().to_string();
            let accepted = !b
                .fenced_script(&lease, &script, &[&counter, &log], &[&token])
                .await
                .expect("current fenced_script")
                .is_lost();
            // The current holder finishes, so the execution is not claimed again.
            let done = WorkflowRunOutcome::Completed(Json::null());
            let acked = !b.acknowledge(&lease, &done).await.expect("ack").is_lost();
            (lease, returned, snapshot, accepted && acked)
        })
    };
    let (invoked, stale_applied) = holder.await.expect("holder task");
    let (current, returned, snapshot, current_accepted) = peer.await.expect("peer task");
    let count: u64 = get_string(&counter)
        .await
        .map_or(0, |n| n.parse().expect("counter"));
    let logged = list(&log).await;

    let mut violation = |what: String| tally.violations.push(format!("round {i}: {what}"));
    let (t1, t2) = (
        stale.token.get().to_string(),
        current.token.get().to_string(),
    );
    if current.execution_id != stale.execution_id || current.token <= stale.token {
        violation(format!("the reclaim issued {current:?} after {stale:?}"));
    }
    if !current_accepted {
        violation("the current holder's script or acknowledgement was refused".into());
    }
    let expected_count = u64::from(stale_applied) + u64::from(current_accepted);
    if count != expected_count {
        violation(format!(
            "counter {count}, but {expected_count} calls were accepted"
        ));
    }
    let stale_logged = logged.iter().filter(|t| **t == t1).count();
    if stale_logged != usize::from(stale_applied) {
        violation(format!(
            "the list holds {t1} {stale_logged} times, the stale call applied: {stale_applied}"
        ));
    }
    if stale_logged > 0 && !snapshot.contains(&t1) {
        violation(format!(
            "the stale token {t1} was appended after {t2} existed (list at the reclaim \
             {snapshot:?}, at the end {logged:?})"
        ));
    }
    let expected_tail = if current_accepted {
        vec![t2.clone()]
    } else {
        vec![]
    };
    if logged
        .iter()
        .filter(|t| **t != t1)
        .cloned()
        .collect::<Vec<_>>()
        != expected_tail
        || (stale_logged > 0 && current_accepted && logged.last() != Some(&t2))
    {
        violation(format!(
            "the list after the reclaim is {logged:?}, not [..{t2}]"
        ));
    }
    if stale_applied && invoked > returned {
        violation("a stale call invoked after the reclaim returned was applied".into());
    }
    if stale_applied {
        tally.stale_applied += 1;
    } else {
        tally.stale_lost += 1;
    }
}

/// Runs up to `rounds` rounds of `variant` (stopping after `stop_after` violations);
/// returns the number of rounds run and the tally.
fn run_race(variant: Variant, rounds: usize, stop_after: usize) -> (usize, Tally) {
    common::runtime(4).block_on(async {
        let clock = ManualClock::starting_now();
        let [a, b] = common::connections_with(&clock, policy(), 1).await;
        let _cleanup = common::Cleanup::of(&a);
        let race = Race {
            app: AppKeys::of(&a),
            script: FencedScript::new(COUNT_AND_LOG),
            a,
            b,
            clock,
        };
        let mut tally = Tally::default();
        let mut n = 0;
        for i in 0..rounds {
            round(i, &race, variant, &mut tally).await;
            n += 1;
            if tally.violations.len() >= stop_after {
                break;
            }
        }
        race.a.delete_namespace().await.expect("delete namespace");
        (n, tally)
    })
}

#[test]
fn stale_fenced_script_never_applies_after_a_reclaim() {
    let (n, tally) = run_race(Variant::Fenced, rounds(), 20);
    let summary = format!(
        "stale call applied before the reclaim {}, refused {}",
        tally.stale_applied, tally.stale_lost
    );
    common::assert_no_violations(n, &summary, &tally.violations);
    assert!(
        tally.stale_applied > 0 && tally.stale_lost > 0,
        "the calls never raced: {tally:?}"
    );
}

#[test]
fn nonatomic_check_then_run_is_caught() {
    let (n, tally) = run_race(Variant::NonAtomic, rounds(), 1);
    eprintln!(
        "non-atomic variant: {n} rounds, violations {}: {:?}",
        tally.violations.len(),
        tally.violations.first()
    );
    assert!(
        !tally.violations.is_empty(),
        "the race checks did not catch a check-then-run script in {n} rounds: {tally:?}"
    );
}

// ---- fenced_script --------------------------------------------------------------------------

struct Fixture {
    backend: RedisBackend,
    clock: ManualClock,
    app: AppKeys,
    _cleanup: common::Cleanup,
}

async fn fixture() -> Fixture {
    let clock = ManualClock::starting_now();
    let backend = common::fresh_with(&clock, policy(), 1).await;
    Fixture {
        app: AppKeys::of(&backend),
        _cleanup: common::Cleanup::of(&backend),
        backend,
        clock,
    }
}

fn bulk(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Int(i) => i.to_string(),
        other => panic!("not a string: {other:?}"),
    }
}

#[tokio::test]
async fn the_body_sees_only_its_keys_and_args_and_its_value_is_returned() {
    let f = fixture().await;
    let lease = admit_and_claim(&f.backend, &f.clock, "x").await;
    let (k1, k2) = (f.app.key("one"), f.app.key("two"));
    let script = FencedScript::new(
        "redis.call('SET', KEYS[1], ARGV[2]) \
         return {#KEYS, #ARGV, KEYS[1], KEYS[2], ARGV[1], ARGV[2]}",
    );
    let v = f
        .backend
        .fenced_script(&lease, &script, &[&k1, &k2], &["a", "b"])
        .await
        .expect("fenced_script")
        .accepted()
        .expect("accepted");
    let Value::Array(items) = v else {
        panic!("{v:?}")
    };
    let items: Vec<String> = items.iter().map(bulk).collect();
    assert_eq!(items, ["2", "2", &k1, &k2, "a", "b"]);
    assert_eq!(get_string(&k1).await.as_deref(), Some("b"));
    // None of the library's helpers is in the body's scope (Redis 7 refuses unknown
    // globals).
    for helper in ["P", "fence", "insert_step", "check_lease"] {
        let peek = FencedScript::new(format!("return type({helper})"));
        let e = f
            .backend
            .fenced_script(&lease, &peek, &[], &[])
            .await
            .expect_err(helper);
        let inner = body_error(&e).unwrap_or_else(|| panic!("{helper}: {e:?}"));
        assert!(
            inner.message().contains(&format!("'{helper}'")),
            "{helper}: {inner}"
        );
    }

    let nothing = FencedScript::new("redis.call('DEL', KEYS[1])");
    let v = f
        .backend
        .fenced_script(&lease, &nothing, &[&k1], &[])
        .await
        .expect("fenced_script");
    assert_eq!(v, Fenced::Accepted(Value::Nil));
    assert_eq!(get_string(&k1).await, None);
    assert!(script.body().starts_with("redis.call('SET'"));
    assert_ne!(script.hash(), nothing.hash());
}

#[tokio::test]
async fn a_stale_or_ended_lease_runs_nothing() {
    let f = fixture().await;
    let counter = f.app.key("n");
    let script = FencedScript::new(COUNT_AND_LOG);
    let log = f.app.key("log");
    let stale = admit_and_claim(&f.backend, &f.clock, "x").await;
    let peer = f.backend.peer().await.expect("peer");
    let current = reclaim(&peer, &f.clock, &stale).await;
    let r = f
        .backend
        .fenced_script(&stale, &script, &[&counter, &log], &["1"])
        .await
        .expect("stale call");
    assert!(r.is_lost(), "{r:?}");
    assert_eq!(get_string(&counter).await, None, "nothing of the body ran");

    let done = WorkflowRunOutcome::Completed(Json::parse("t", "true").expect("json"));
    assert!(
        !peer
            .acknowledge(&current, &done)
            .await
            .expect("ack")
            .is_lost()
    );
    let r = peer
        .fenced_script(&current, &script, &[&counter, &log], &["2"])
        .await
        .expect("after the delivery ended");
    assert!(r.is_lost(), "{r:?}");
    assert_eq!(get_string(&counter).await, None);
    assert!(list(&log).await.is_empty());
}

#[tokio::test]
async fn bad_input_is_typed_and_runs_nothing() {
    let f = fixture().await;
    let b = &f.backend;
    let lease = admit_and_claim(b, &f.clock, "x").await;
    let counter = f.app.key("n");
    let script = FencedScript::new("redis.call('INCR', KEYS[1]) return 1");
    let ns_prefix = b.key_prefix().to_owned();
    let with_token = |token: u64| ExecutionLease {
        token: FencingToken::new(token),
        ..lease.clone()
    };
    let unknown = ExecutionLease {
        execution_id: ExecutionId::new("nobody").expect("id"),
        ..lease.clone()
    };
    let other_tag = "app:{another-namespace}:n".to_owned();
    let untagged = "app:n".to_owned();
    let empty_first_tag = format!("app:{{}}{}:n", b.hash_tag());
    let library = format!("{ns_prefix}token");
    let library_new = format!("{ns_prefix}mine");
    let cases: Vec<(&str, ExecutionLease, Vec<&str>)> = vec![
        (
            "a key of another slot",
            lease.clone(),
            vec![&counter, &other_tag],
        ),
        ("a key without a hash tag", lease.clone(), vec![&untagged]),
        (
            "an empty first hash tag",
            lease.clone(),
            vec![&empty_first_tag],
        ),
        ("the token counter", lease.clone(), vec![&counter, &library]),
        (
            "a new key in the library prefix",
            lease.clone(),
            vec![&library_new],
        ),
        ("token 0", with_token(0), vec![&counter]),
        (
            "a foreign token",
            with_token(lease.token.get() + 1000),
            vec![&counter],
        ),
        (
            "a token Lua cannot hold",
            with_token(MAX_TOKEN + 1),
            vec![&counter],
        ),
        ("an unknown execution", unknown, vec![&counter]),
    ];
    let before = common::snapshot(b).await;
    for (what, lease, keys) in cases {
        let e = b
            .fenced_script(&lease, &script, &keys, &[])
            .await
            .expect_err(what);
        let named = keys.last().expect("a key");
        let typed = match &e {
            LeaseError::InvalidInput { field, reason } if *field == "script key" => {
                reason.contains(&format!("{named:?}"))
            }
            LeaseError::InvalidInput { field, .. } => *field == "lease token",
            LeaseError::ForeignToken { .. } => what == "a foreign token",
            LeaseError::UnknownExecution(id) => id.as_str() == "nobody",
            _ => false,
        };
        assert!(typed, "{what}: {e:?}");
        assert_eq!(get_string(&counter).await, None, "{what}: the body ran");
        assert_eq!(
            common::snapshot(b).await,
            before,
            "{what}: changed the namespace"
        );
    }
    // The body itself may not compile: nothing runs.
    let broken = FencedScript::new("redis.call('INCR', KEYS[1]) return (");
    let e = b
        .fenced_script(&lease, &broken, &[&counter], &[])
        .await
        .expect_err("syntax error");
    assert!(
        matches!(
            &e,
            LeaseError::InvalidInput {
                field: "fenced script",
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(get_string(&counter).await, None);
    assert_eq!(common::snapshot(b).await, before);
}

fn body_error(e: &LeaseError) -> Option<&ScriptBodyError> {
    match e {
        LeaseError::Backend { source, .. } => source.downcast_ref(),
        _ => None,
    }
}

#[tokio::test]
async fn a_failing_body_is_a_typed_error_and_keeps_its_earlier_writes() {
    let f = fixture().await;
    let lease = admit_and_claim(&f.backend, &f.clock, "x").await;
    let counter = f.app.key("n");
    for (body, says) in [
        (
            "redis.call('INCR', KEYS[1]) error('card declined')",
            "card declined",
        ),
        (
            "redis.call('INCR', KEYS[1]) return redis.error_reply('MYERR refused')",
            "MYERR refused",
        ),
        (
            "redis.call('INCR', KEYS[1]) redis.call('LPUSH', KEYS[1], 'x')",
            "WRONGTYPE",
        ),
    ] {
        let script = FencedScript::new(body);
        let e = f
            .backend
            .fenced_script(&lease, &script, &[&counter], &[])
            .await
            .expect_err(body);
        let inner = body_error(&e).unwrap_or_else(|| panic!("{body}: {e:?}"));
        assert!(inner.message().contains(says), "{body}: {inner}");
        assert!(!e.is_retryable());
    }
    // Redis does not roll a script back: each INCR before the failure stayed.
    assert_eq!(get_string(&counter).await.as_deref(), Some("3"));
}

// ---- step_in_script -------------------------------------------------------------------------

/// A delivery of `id`'s next claim on `b`, as a dispatcher would build it.
/// A step run through [`RedisBackend::step_in_script`].
struct Step<'a> {
    id: &'a ExecutionId,
    key: &'a str,
    script: &'a FencedScript,
    keys: &'a [&'a str],
    args: &'a [&'a str],
}

impl<'a> Step<'a> {
    fn new(
        id: &'a ExecutionId,
        key: &'a str,
        script: &'a FencedScript,
        keys: &'a [&'a str],
        args: &'a [&'a str],
    ) -> Self {
        Step {
            id,
            key,
            script,
            keys,
            args,
        }
    }

    /// Runs the step for `delivery`.
    async fn run(&self, b: &RedisBackend, delivery: &Delivery) -> Result<Json, DeliveryError> {
        b.step_in_script(delivery, self.key, self.script, self.keys, self.args)
            .await
    }

    /// Runs the step for `delivery`, checks it answers `want` and that its record (attempt
    /// 1) carries the delivery's token.
    async fn runs_under(&self, b: &RedisBackend, delivery: &Delivery, want: &str) {
        let value = self.run(b, delivery).await.expect("step");
        assert_eq!(value.as_str(), want);
        let record = b
            .read_step(self.id, &StepKey::new(self.key).expect("key"), 1)
            .await
            .expect("read")
            .expect("record");
        assert_eq!(record.token, delivery.token());
    }
}

/// Execution `id`, admitted on `b`.
async fn admitted(b: &RedisBackend, id: &str) -> ExecutionId {
    let id = ExecutionId::new(id).expect("id");
    b.admit(&Admission::new(id.clone())).await.expect("admit");
    id
}

async fn deliver(b: &RedisBackend, clock: &ManualClock) -> Delivery {
    let claimed = b
        .claim_due_with_records(ClaimRequest {
            now: clock.now(),
            limit: 1,
            duration: LEASE,
        })
        .await
        .expect("claim");
    let c = claimed.into_iter().next().expect("a claim");
    let backend: SharedBackend = Arc::new(b.clone());
    Delivery::new(backend, c.lease, c.record, CancellationToken::new())
}

/// Charges once: counts the charge, returns a receipt naming the count.
const CHARGE: &str = "\
local n = redis.call('INCR', KEYS[1])
return cjson.encode({receipt = ARGV[1] .. '-' .. n})";

#[tokio::test]
async fn step_in_script_records_with_its_effect_and_replay_skips_the_body() {
    let f = fixture().await;
    let b = &f.backend;
    let id = admitted(b, "order-42").await;
    let counter = f.app.key("charges");
    let (charge, keys) = (FencedScript::new(CHARGE), [counter.as_str()]);
    let step = Step::new(&id, "charge", &charge, &keys, &["r"]);
    let first = deliver(b, &f.clock).await;
    let receipt = step.run(b, &first).await.expect("charge");
    assert_eq!(receipt.as_str(), r#"{"receipt":"r-1"}"#);
    assert_eq!(get_string(&counter).await.as_deref(), Some("1"));
    // Effect and record together: the record is done, under this delivery's token.
    let key = StepKey::new("charge").expect("key");
    let record = b
        .read_step(&id, &key, 1)
        .await
        .expect("read")
        .expect("the step record");
    assert!(record.done);
    assert_eq!(record.token, first.token());
    assert_eq!(record.response, receipt);

    // The same delivery again: its own record, nothing runs.
    let again = step.run(b, &first).await.expect("replay");
    assert_eq!(again, receipt);
    // Another delivery object under the same lease, which reads nothing (a first
    // delivery): the script finds the record before the body.
    let twin = Delivery::new(
        Arc::new(b.clone()),
        first.claimed_lease().clone(),
        first.record().clone(),
        CancellationToken::new(),
    );
    let twin_value = step.run(b, &twin).await.expect("twin");
    assert_eq!(twin_value, receipt);
    assert_eq!(get_string(&counter).await.as_deref(), Some("1"));

    // A redelivery finds the record and skips the body.
    f.clock.advance(LEASE + policy().delay(1));
    let second = deliver(&b.peer().await.expect("peer"), &f.clock).await;
    assert!(second.token() > first.token());
    let replayed = step.run(b, &second).await.expect("redelivery");
    assert_eq!(replayed, receipt);
    assert_eq!(get_string(&counter).await.as_deref(), Some("1"));
    // A new step of the redelivery runs, under the new token.
    let ship = Step::new(&id, "ship", &charge, &keys, &["s"]);
    ship.runs_under(b, &second, r#"{"receipt":"s-2"}"#).await;
}

#[tokio::test]
async fn a_stale_step_in_script_applies_nothing() {
    let f = fixture().await;
    let b = &f.backend;
    let id = admitted(b, "order-7").await;
    let counter = f.app.key("charges");
    let (charge, keys) = (FencedScript::new(CHARGE), [counter.as_str()]);
    let step = Step::new(&id, "charge", &charge, &keys, &["r"]);
    let stale = deliver(b, &f.clock).await;
    f.clock.advance(LEASE + policy().delay(1));
    let current = deliver(&b.peer().await.expect("peer"), &f.clock).await;
    let before = common::snapshot(b).await;
    let e = step.run(b, &stale).await.expect_err("stale");
    assert!(matches!(e, DeliveryError::Lost), "{e:?}");
    assert_eq!(get_string(&counter).await, None, "the body ran");
    assert_eq!(common::snapshot(b).await, before, "a record was written");
    // The current holder charges once.
    step.runs_under(b, &current, r#"{"receipt":"r-1"}"#).await;
}

#[tokio::test]
async fn a_failed_step_body_records_nothing_and_runs_again() {
    let f = fixture().await;
    let b = &f.backend;
    let id = ExecutionId::new("order-9").expect("id");
    b.admit(&Admission::new(id.clone())).await.expect("admit");
    let counter = f.app.key("n");
    let d = deliver(b, &f.clock).await;
    let key = StepKey::new("charge").expect("key");
    for (body, says) in [
        ("return 'not json'", "not JSON"),
        ("return 42", "number"),
        ("return nil", "nil"),
        ("error('declined')", "declined"),
        (
            "return string.rep('[', 65) .. string.rep(']', 65)",
            "deeper",
        ),
    ] {
        let e = b
            .step_in_script(&d, "charge", &FencedScript::new(body), &[&counter], &[])
            .await
            .expect_err(body);
        let DeliveryError::Step { step, source } = &e else {
            panic!("{body}: {e:?}");
        };
        assert_eq!(step, &key);
        let inner = source
            .downcast_ref::<ScriptBodyError>()
            .unwrap_or_else(|| panic!("{body}: {source:?}"));
        assert!(inner.message().contains(says), "{body}: {inner}");
        assert_eq!(
            b.read_step(&id, &key, 1).await.expect("read"),
            None,
            "{body}"
        );
    }
    // Bad keys are refused before anything runs.
    let e = b
        .step_in_script(&d, "charge", &FencedScript::new(CHARGE), &["app:n"], &[])
        .await
        .expect_err("untagged key");
    assert!(
        matches!(e, DeliveryError::Backend(LeaseError::InvalidInput { .. })),
        "{e:?}"
    );
    // The step was never recorded, so it runs.
    let v = b
        .step_in_script(
            &d,
            "charge",
            &FencedScript::new(CHARGE),
            &[&counter],
            &["r"],
        )
        .await
        .expect("charge");
    assert_eq!(v.as_str(), r#"{"receipt":"r-1"}"#);
    // Non-canonical JSON text is recorded as returned and read back as canonical Json.
    let spaced = FencedScript::new(r#"return '{ "b": 1, "a": [1, 2] }'"#);
    let v = b
        .step_in_script(&d, "spaced", &spaced, &[], &[])
        .await
        .expect("spaced");
    assert_eq!(v.as_str(), r#"{"a":[1,2],"b":1}"#);
}

/// A body that closes its function wrapper with `end` and goes on at the
/// top level still runs nothing before the lease check: a stale holder's escaped write is
/// not applied; a live holder's is (it comes after the check).
#[tokio::test]
async fn a_body_closing_its_wrapper_runs_nothing_before_the_fence() {
    let f = fixture().await;
    let key = f.app.key("escaped");
    let escape = FencedScript::new(
        "return 1 end redis.call('SET', KEYS[2], ARGV[8]) local __tail = function()",
    );
    let stale = admit_and_claim(&f.backend, &f.clock, "x").await;
    let peer = f.backend.peer().await.expect("peer");
    let current = reclaim(&peer, &f.clock, &stale).await;
    let r = f
        .backend
        .fenced_script(&stale, &escape, &[&key], &["stale"])
        .await
        .expect("stale call");
    assert!(r.is_lost(), "{r:?}");
    assert_eq!(
        get_string(&key).await,
        None,
        "the escaped write ran unfenced"
    );
    let r = peer
        .fenced_script(&current, &escape, &[&key], &["held"])
        .await
        .expect("held call");
    assert!(!r.is_lost(), "{r:?}");
    assert_eq!(get_string(&key).await.as_deref(), Some("held"));
}
