//! Hardening of the claim script, against real Redis: the token counter is checked
//! against the stored tokens and its exact range before anything is written, corrupt records
//! are skipped and listed instead of stopping every claim, a claim that issued leases is
//! never reported as an error, and the waiting->ready move is bounded per call.
//!
//! One partition whatever `LEASE_REDIS_PARTITIONS` says (`common::fresh_with(.., 1)`): they edit
//! the one-partition token counter and records by hand.

mod common;

use lease_core::ExecutionClientExt;
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, Clock, ExecutionClient, ExecutionId, ExecutionLease, FencingToken,
    LeaseError, ManualClock, RedeliveryPolicy, Timestamp, WorkflowRunOutcome,
};
use lease_redis::RedisBackend;

const LEASE: Duration = Duration::from_secs(30);
/// 2^53 - 1, the largest integer a Lua number (double) holds exactly.
const MAX_EXACT_TOKEN: u64 = (1 << 53) - 1;

fn policy() -> RedeliveryPolicy {
    RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_millis(1600))
        .expect("policy")
}

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

async fn fresh(clock: &ManualClock) -> RedisBackend {
    common::fresh_with(clock, policy(), 1).await
}

async fn redis_cmd(args: &[&str]) -> redis::Value {
    let mut admin = common::admin().await;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(&mut admin).await.expect("admin command")
}

fn request(clock: &ManualClock, limit: usize) -> ClaimRequest {
    ClaimRequest {
        now: clock.now(),
        limit,
        duration: LEASE,
    }
}

async fn claim(b: &RedisBackend, clock: &ManualClock, limit: usize) -> Vec<ExecutionLease> {
    b.claim_due(request(clock, limit)).await.expect("claim")
}

fn ids(leases: &[ExecutionLease]) -> Vec<&str> {
    leases.iter().map(|l| l.execution_id.as_str()).collect()
}

async fn release(b: &RedisBackend, lease: &ExecutionLease) {
    assert!(!b.release(lease).await.expect("release").is_lost());
}

fn is_token_counter<T: std::fmt::Debug>(r: &lease_core::Result<T>) -> bool {
    matches!(r, Err(LeaseError::TokenCounter { .. }))
}

/// Finding (3): a claim after the token counter was deleted (or rolled back) issued old
/// tokens again, so a stale holder's writes were accepted. Now every candidate's next token
/// is checked against its stored token before the first write: `TokenCounter`, nothing
/// changed (not even a candidate whose own check would pass, nor the index moves).
#[tokio::test]
async fn a_counter_behind_a_stored_token_refuses_the_claim_and_changes_nothing() {
    let clock = ManualClock::starting_now();
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    b.admit(&Admission::new(id("z"))).await.expect("admit");
    // z is delivered three times (tokens 1, 2, 3) and released each time.
    let mut stale = None;
    for _ in 0..3 {
        let lease = claim(&b, &clock, 1).await.remove(0);
        release(&b, &lease).await;
        clock.advance(Duration::from_secs(5));
        stale = Some(lease);
    }
    let stale = stale.expect("a lease");
    assert_eq!(stale.token, FencingToken::new(3));
    // b (never claimed, due first) would get token 1, which is fine for b; z would get
    // 2 <= 3.
    let first = Timestamp::from_millis(clock.now().as_millis() - 60_000);
    b.admit(&Admission::new(id("b")).not_before(first))
        .await
        .expect("admit");
    let token_key = format!("{}token", b.key_prefix());
    redis_cmd(&["DEL", &token_key]).await;
    let before = common::snapshot(&b).await;
    let r = b.claim_due(request(&clock, 10)).await;
    assert!(is_token_counter(&r), "{r:?}");
    assert_eq!(
        common::snapshot(&b).await,
        before,
        "the refused claim wrote"
    );
    // The same with the counter set just below z's token, and through the other paths.
    redis_cmd(&["SET", &token_key, "1"]).await;
    let before = common::snapshot(&b).await;
    let r = b.claim_due_with_records(request(&clock, 10)).await;
    assert!(is_token_counter(&r), "{r:?}");
    let r = b.claim_due_with_horizon(request(&clock, 10)).await;
    assert!(is_token_counter(&r), "{r:?}");
    assert_eq!(
        common::snapshot(&b).await,
        before,
        "the refused claim wrote"
    );
    // Repaired (set above the highest stored token), claims go on and fence z's old holder.
    redis_cmd(&["SET", &token_key, "3"]).await;
    let leases = claim(&b, &clock, 10).await;
    assert_eq!(ids(&leases), ["b", "z"]);
    assert!(leases.iter().all(|l| l.token > FencingToken::new(3)));
    assert!(b.renew(&stale, LEASE).await.expect("renew").is_lost());
}

/// Finding (4): at 2^53 the counter's INCR result is rounded by Lua, so a token would be
/// issued twice. A claim whose tokens would pass 2^53 - 1 is `TokenCounter` with nothing
/// changed; the last exact token is still issued.
#[tokio::test]
async fn a_counter_at_the_end_of_the_exact_range_refuses_the_claim() {
    let clock = ManualClock::starting_now();
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    for name in ["a", "b", "c"] {
        b.admit(&Admission::new(id(name))).await.expect("admit");
    }
    let token_key = format!("{}token", b.key_prefix());
    redis_cmd(&["SET", &token_key, &(MAX_EXACT_TOKEN - 2).to_string()]).await;
    let before = common::snapshot(&b).await;
    // Three tokens would reach 2^53: refused as a whole.
    let r = b.claim_due(request(&clock, 3)).await;
    assert!(is_token_counter(&r), "{r:?}");
    assert_eq!(common::snapshot(&b).await, before);
    // Two tokens end exactly at 2^53 - 1.
    let leases = claim(&b, &clock, 2).await;
    let tokens: Vec<u64> = leases.iter().map(|l| l.token.get()).collect();
    assert_eq!(tokens, [MAX_EXACT_TOKEN - 1, MAX_EXACT_TOKEN]);
    let record = b.get(&id("b")).await.expect("get").expect("record");
    assert_eq!(record.token.get(), MAX_EXACT_TOKEN);
    let before = common::snapshot(&b).await;
    let r = b.claim_due(request(&clock, 1)).await;
    assert!(is_token_counter(&r), "{r:?}");
    assert_eq!(common::snapshot(&b).await, before);
    // A counter that is not an integer is refused the same way.
    redis_cmd(&["SET", &token_key, "twelve"]).await;
    let r = b.claim_due(request(&clock, 1)).await;
    assert!(is_token_counter(&r), "{r:?}");
}

/// Finding (4), the lease side: a token above 2^53 - 1 was rounded by Lua onto a stored
/// token and accepted. Such a token is never issued: `InvalidInput` before any script.
#[tokio::test]
async fn lease_tokens_beyond_the_exact_range_are_refused_before_any_script() {
    let clock = ManualClock::starting_now();
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    b.admit(&Admission::new(id("a"))).await.expect("admit");
    let token_key = format!("{}token", b.key_prefix());
    redis_cmd(&["SET", &token_key, &(MAX_EXACT_TOKEN - 1).to_string()]).await;
    let lease = claim(&b, &clock, 1).await.remove(0);
    assert_eq!(lease.token.get(), MAX_EXACT_TOKEN);
    let before = common::snapshot(&b).await;
    for token in [MAX_EXACT_TOKEN + 1, MAX_EXACT_TOKEN + 2, u64::MAX] {
        let forged = ExecutionLease {
            token: FencingToken::new(token),
            ..lease.clone()
        };
        let r = b.renew(&forged, LEASE).await;
        assert!(
            matches!(r, Err(LeaseError::InvalidInput { .. })),
            "{token}: {r:?}"
        );
        let r = b.release(&forged).await;
        assert!(
            matches!(r, Err(LeaseError::InvalidInput { .. })),
            "{token}: {r:?}"
        );
        let outcome = WorkflowRunOutcome::Completed(lease_core::Json::null());
        let r = b.acknowledge(&forged, &outcome).await;
        assert!(
            matches!(r, Err(LeaseError::InvalidInput { .. })),
            "{token}: {r:?}"
        );
        let batch = [lease_core::Acknowledgement {
            lease: forged.clone(),
            outcome: outcome.clone(),
        }];
        let r = b.acknowledge_batch(&batch).await;
        assert!(
            matches!(r, Err(LeaseError::InvalidInput { .. })),
            "{token}: {r:?}"
        );
        let write = lease_core::StepWrite {
            step_key: lease_core::StepKey::new("s").expect("key"),
            step_attempt: 1,
            done: true,
            response: lease_core::Json::null(),
        };
        let r = lease_core::HeapClient::write_step(&b, &forged, &write).await;
        assert!(
            matches!(r, Err(LeaseError::InvalidInput { .. })),
            "{token}: {r:?}"
        );
    }
    assert_eq!(common::snapshot(&b).await, before);
    assert!(!b.renew(&lease, LEASE).await.expect("renew").is_lost());
}

/// Finding (5): a corrupt record that was the first candidate made every claim fail, and a
/// corrupt member of `waiting` failed the move before any claim. Now corrupt records are
/// skipped, moved out of the indexes into the namespace's corrupt list (with the problem),
/// and the rest is claimed.
#[tokio::test]
async fn corrupt_records_are_skipped_listed_and_the_rest_claimed() {
    let clock = ManualClock::starting_now();
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    for name in ["a", "b", "c", "d"] {
        b.admit(&Admission::new(id(name))).await.expect("admit");
    }
    // "c" and "d" go to waiting (released: a redelivery delay), "a" is corrupt in ready.
    let held = claim(&b, &clock, 10).await;
    assert_eq!(ids(&held), ["a", "b", "c", "d"]);
    for lease in &held {
        release(&b, lease).await;
    }
    let prefix = b.key_prefix().to_owned();
    redis_cmd(&["HSET", &format!("{prefix}exec:a"), "un", "-x"]).await;
    redis_cmd(&["HSET", &format!("{prefix}exec:c"), "st", "bogus"]).await;
    // "a" into ready now (as an index a claim would meet first), the rest wait their delay.
    redis_cmd(&["ZADD", &format!("{prefix}ready"), "0", "a"]).await;
    clock.advance(Duration::from_secs(5));
    let leases = claim(&b, &clock, 10).await;
    assert_eq!(ids(&leases), ["b", "d"], "the valid ones are claimed");
    let corrupt = b.list_corrupt(10).await.expect("list_corrupt");
    let listed: Vec<&str> = corrupt.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(listed, ["a", "c"]);
    assert!(corrupt[0].problem.contains("unacknowledged"), "{corrupt:?}");
    assert!(corrupt[1].problem.contains("status"), "{corrupt:?}");
    // Out of the indexes: later claims and list_failing do not meet them again.
    let again = b.claim_due_with_horizon(request(&clock, 10)).await;
    assert!(again.expect("claim").claimed.is_empty());
    b.list_failing(1, 10).await.expect("list_failing");
    assert_eq!(b.list_corrupt(1).await.expect("list").len(), 1);
    assert!(b.list_corrupt(0).await.is_err());
}

/// Finding (6): the workflow name (and the id) of a claimed record were validated only
/// after the script issued the lease, so the caller got `Protocol` for leases that reached
/// nobody. Now the script treats such a record as corrupt (skipped, listed) and the valid
/// ones are returned.
#[tokio::test]
async fn a_claim_that_issued_leases_is_never_an_error() {
    let clock = ManualClock::starting_now();
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    for name in ["a", "b", "c", "d", "e"] {
        b.admit(&Admission::new(id(name))).await.expect("admit");
    }
    let prefix = b.key_prefix().to_owned();
    let long = "w".repeat(256);
    let bad_workflows: [&str; 4] = ["", "bad\u{1}name", &long, "bad\u{85}c1"];
    for (name, wf) in ["a", "c", "d", "e"].iter().zip(bad_workflows) {
        redis_cmd(&["HSET", &format!("{prefix}exec:{name}"), "wf", wf]).await;
    }
    // A member whose id is no valid execution id, with a record that is otherwise fine.
    let bad_id = "bad\u{1}id";
    redis_cmd(&[
        "HSET",
        &format!("{prefix}exec:{bad_id}"),
        "st",
        "admitted",
        "tk",
        "0",
        "un",
        "0",
        "es",
        "0",
        "du",
        "0",
    ])
    .await;
    redis_cmd(&["ZADD", &format!("{prefix}ready"), "0", bad_id]).await;
    let claimed = b
        .claim_due_with_records(request(&clock, 10))
        .await
        .expect("a claim that issued a lease succeeds");
    let got: Vec<&str> = claimed
        .iter()
        .map(|c| c.lease.execution_id.as_str())
        .collect();
    assert_eq!(got, ["b"]);
    let corrupt = b.list_corrupt(10).await.expect("list_corrupt");
    let mut listed: Vec<&str> = corrupt.iter().map(|c| c.id.as_str()).collect();
    listed.sort_unstable();
    assert_eq!(listed, ["a", bad_id, "c", "d", "e"]);
    // Nothing was issued to them.
    for name in ["a", "c", "d", "e"] {
        let tk = redis_cmd(&["HGET", &format!("{prefix}exec:{name}"), "tk"]).await;
        assert_eq!(tk, redis::Value::BulkString(b"0".to_vec()), "{name}");
    }
}

/// Finding (21): one claim moved every expired member of `waiting`, however many, in one
/// script. Now it moves at most max(limit * 4, 100) per call; the horizon then says "now"
/// and later calls move the rest, so everything is still claimed.
#[tokio::test]
async fn the_waiting_move_is_bounded_per_call() {
    const N: usize = 300;
    let clock = ManualClock::starting_now();
    let b = fresh(&clock).await;
    let _cleanup = common::Cleanup::of(&b);
    let admissions: Vec<Admission> = (0..N)
        .map(|i| Admission::new(id(&format!("e-{i:04}"))))
        .collect();
    b.admit_batch(&admissions).await.expect("admit_batch");
    let mut held = Vec::new();
    while held.len() < N {
        let leases = claim(&b, &clock, 1000).await;
        assert!(!leases.is_empty());
        held.extend(leases);
    }
    for lease in &held {
        release(&b, lease).await;
    }
    clock.advance(Duration::from_secs(5));
    let waiting = format!("{}waiting", b.key_prefix());
    let now = clock.now().as_millis().to_string();
    let expired = || {
        let (waiting, now) = (waiting.clone(), now.clone());
        async move {
            let v = redis_cmd(&["ZCOUNT", &waiting, "-inf", &now]).await;
            match v {
                redis::Value::Int(n) => n,
                other => panic!("ZCOUNT: {other:?}"),
            }
        }
    };
    assert_eq!(expired().await, N as i64);
    let batch = b
        .claim_due_with_horizon(request(&clock, 1))
        .await
        .expect("claim");
    assert_eq!(batch.claimed.len(), 1);
    assert_eq!(
        expired().await,
        (N - 100) as i64,
        "one claim with limit 1 moves 100 members"
    );
    assert!(
        batch
            .next_claimable_at
            .is_some_and(|t| t <= Timestamp::from_millis(clock.now().as_millis())),
        "moves remain, so the horizon is now: {batch:?}"
    );
    let mut claimed = batch.claimed.len();
    let mut calls = 1;
    while claimed < N {
        claimed += b
            .claim_due_with_horizon(request(&clock, 1))
            .await
            .expect("claim")
            .claimed
            .len();
        calls += 1;
        assert!(
            calls <= 2 * N,
            "{claimed} of {N} claimed after {calls} calls"
        );
    }
    let after = b
        .claim_due_with_horizon(request(&clock, 1))
        .await
        .expect("claim");
    assert!(after.claimed.is_empty());
    assert!(after.next_claimable_at.is_some_and(|t| t > clock.now()));
}

/// A recount of the status counters (for a namespace without them) walks the namespace
/// with SCAN pages (no KEYS inside a script, which would block the server), each record
/// counted once
/// across pages, claimed ones as running: the counts the counters kept.
#[tokio::test]
async fn status_counts_spans_scan_pages() {
    let clock = ManualClock::new(Timestamp::from_millis(1_000_000));
    let b = fresh(&clock).await;
    for batch in 0..3 {
        let admissions: Vec<Admission> = (0..1000)
            .map(|i| Admission::new(id(&format!("e{batch}-{i:04}"))))
            .collect();
        b.admit_batch(&admissions).await.expect("admit batch");
    }
    assert_eq!(claim(&b, &clock, 7).await.len(), 7);
    let counts = b.status_counts().await.expect("status_counts");
    assert_eq!(
        (counts.admitted, counts.running, counts.corrupt),
        (2993, 7, 0)
    );
    redis_cmd(&["DEL", &format!("{}counts", b.key_prefix())]).await;
    assert_eq!(b.status_counts().await.expect("recount"), counts);
    b.delete_namespace().await.expect("cleanup");
}
