//! Hardening of the SQLite backend against what an outside review broke: a token counter
//! that went backwards, corrupt records, and the busy-wait bound. Each test failed on the
//! code before its fix.

use lease_core::{Clock, ExecutionClientExt};
use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, ExecutionClient, ExecutionId, ExecutionLease, HeapClient, Json,
    LeaseError, ManualClock, StepKey, StepWrite,
};
use lease_sqlite::{SqliteBackend, SqliteConfig};
use rusqlite::Connection;

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("valid id")
}

async fn claim(b: &SqliteBackend, limit: usize, lease: Duration) -> Vec<ExecutionLease> {
    b.claim_due(ClaimRequest {
        now: lease_core::Timestamp::MAX,
        limit,
        duration: lease,
    })
    .await
    .expect("claim")
}

/// Finding 3: with the counter row deleted (or the file partially restored) the next claim
/// would issue a token already stored, and the stale holder's writes would be accepted
/// again. The claim is refused with `TokenCounter` and changes nothing.
#[tokio::test]
async fn a_claim_whose_token_is_not_above_the_stored_one_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("counter.db");
    let clock = ManualClock::starting_now();
    let b = SqliteBackend::open(SqliteConfig::file(&path).clock(Arc::new(clock.clone())))
        .await
        .expect("open");
    b.admit(&Admission::new(id("order-42")))
        .await
        .expect("admit");
    let stale = claim(&b, 1, Duration::from_millis(100)).await;
    assert_eq!(stale.len(), 1);
    clock.advance(Duration::from_secs(60));
    Connection::open(&path)
        .expect("raw open")
        .execute("DELETE FROM lease_counters", [])
        .expect("delete the counter");
    let before = b.get(&id("order-42")).await.expect("get");

    let err = b
        .claim_due(ClaimRequest {
            now: lease_core::Timestamp::MAX,
            limit: 1,
            duration: Duration::from_secs(30),
        })
        .await
        .expect_err("the counter is behind the stored token");
    assert!(matches!(err, LeaseError::TokenCounter { .. }), "{err:?}");
    assert_eq!(
        b.get(&id("order-42")).await.expect("get"),
        before,
        "nothing changed"
    );
    let counters: i64 = Connection::open(&path)
        .expect("raw open")
        .query_row("SELECT count(*) FROM lease_counters", [], |r| r.get(0))
        .expect("count");
    assert_eq!(counters, 0, "the counter row was not written either");
    // The stale holder's token was not issued again: no second holder of it exists.
    let write = StepWrite {
        step_key: StepKey::new("charge").expect("key"),
        step_attempt: 1,
        done: true,
        response: Json::null(),
    };
    assert!(
        !b.write_step(&stale[0], &write)
            .await
            .expect("write")
            .is_lost(),
        "only the one holder of token {} exists",
        stale[0].token
    );
}

/// Finding 5: one record the library cannot decode used to fail every claim, so nothing
/// else was ever claimed. Claims skip it (and quarantine it so later claims do not walk it
/// again), the rest are claimed, and `list_corrupt` names it.
#[tokio::test]
async fn corrupt_records_are_skipped_quarantined_and_listed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("corrupt.db");
    let b = SqliteBackend::open(SqliteConfig::file(&path))
        .await
        .expect("open");
    for name in ["a-bad-status", "b-good", "c-bad-type", "d-good"] {
        b.admit(&Admission::new(id(name))).await.expect("admit");
    }
    Connection::open(&path)
        .expect("raw open")
        .execute_batch(
            "UPDATE lease_executions SET status = 'exploded' WHERE id = 'a-bad-status';
             UPDATE lease_executions SET token = 'not a number' WHERE id = 'c-bad-type';",
        )
        .expect("corrupt rows");
    let claimed: Vec<String> = claim(&b, 10, Duration::from_secs(30))
        .await
        .iter()
        .map(|l| l.execution_id.to_string())
        .collect();
    assert_eq!(claimed, ["b-good", "d-good"], "the rest are claimed");
    let corrupt = b.list_corrupt(10).await.expect("list_corrupt");
    let ids: Vec<&str> = corrupt.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["a-bad-status", "c-bad-type"]);
    assert!(corrupt[0].problem.contains("status"), "{:?}", corrupt[0]);
    assert!(corrupt.iter().all(|c| !c.problem.is_empty()), "{corrupt:?}");
    // Counted as corrupt, whatever status they hold (one an unknown one), and nowhere else.
    let counts = b.status_counts().await.expect("status_counts");
    assert_eq!(
        (counts.running, counts.corrupt, counts.admitted),
        (2, 2, 0),
        "{counts:?}"
    );
    // Quarantined: out of the claim index, so later claims (and the horizon) skip it.
    b.admit(&Admission::new(id("e-later")))
        .await
        .expect("admit");
    let batch = b
        .claim_due_with_horizon(ClaimRequest {
            now: lease_core::Timestamp::MAX,
            limit: 10,
            duration: Duration::from_secs(30),
        })
        .await
        .expect("claim");
    let ids: Vec<&str> = batch
        .claimed
        .iter()
        .map(|c| c.lease.execution_id.as_str())
        .collect();
    assert_eq!(ids, ["e-later"]);
    assert_eq!(b.list_corrupt(1).await.expect("list").len(), 1, "limit");
    let err = b.list_corrupt(0).await.expect_err("limit 0");
    assert!(matches!(err, LeaseError::InvalidInput { .. }), "{err:?}");
}

/// Finding 15: each whole-transaction retry used to wait a full `busy_timeout` again (five
/// attempts: 25 s with the 5 s default). A write behind another connection's long
/// transaction now gives up after one `busy_timeout` in total: the first attempt's busy
/// handler waits it out and no retry is made (counted, not timed, so a slow machine cannot
/// fail it; with every retry waiting a full `busy_timeout` again, all four are made).
async fn busy_wait_is_bounded_by_one_busy_timeout() {
    const BUSY: Duration = Duration::from_millis(400);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("busy.db");
    let b = SqliteBackend::open(SqliteConfig::file(&path).busy_timeout(BUSY))
        .await
        .expect("open");
    let mut holder = Connection::open(&path).expect("raw open");
    let tx = holder
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .expect("take the write lock");
    let retries_before = b.busy_retries_for_tests();
    let started = std::time::Instant::now();
    let err = b
        .admit(&Admission::new(id("blocked")))
        .await
        .expect_err("the write lock is held");
    // A lower bound only: a loaded machine can make it later, never earlier.
    let waited = started.elapsed();
    assert!(matches!(err, LeaseError::Unavailable { .. }), "{err:?}");
    assert!(waited >= BUSY, "gave up early: {waited:?}");
    let retries = b.busy_retries_for_tests() - retries_before;
    assert_eq!(
        retries, 0,
        "the first attempt waited the whole busy_timeout; a retry waits past it"
    );
    tx.rollback().expect("release");
    b.admit(&Admission::new(id("blocked")))
        .await
        .expect("the connection's own busy_timeout is back for later operations");
}

#[tokio::test]
async fn busy_wait_is_bounded_queued() {
    busy_wait_is_bounded_by_one_busy_timeout().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_wait_is_bounded_inline() {
    busy_wait_is_bounded_by_one_busy_timeout().await;
}

/// A write's busy-wait budget runs from its submission, not from when the connection thread
/// reaches it. A renew queued behind a job that kept the connection for longer than
/// `busy_timeout` (here a held connection; in the field a group waiting out another
/// process's lock) is refused `Unavailable` without an attempt, even though the lock is
/// free by the time it is reached. It used to start a budget of its own there and wait for
/// the lock, so its caller waited up to twice the configured bound.
async fn a_write_queued_past_its_busy_timeout_is_refused_unattempted() {
    const BUSY: Duration = Duration::from_millis(300);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("queued.db");
    let b = SqliteBackend::open(SqliteConfig::file(&path).busy_timeout(BUSY))
        .await
        .expect("open");
    b.admit(&Admission::new(id("order-42")))
        .await
        .expect("admit");
    let lease = claim(&b, 1, Duration::from_secs(3600)).await.remove(0);
    let mut holder = Connection::open(&path).expect("raw open");
    let locked = holder
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .expect("another process takes the write lock");
    let hold = b.hold_connection_for_tests();
    let renewer = b.clone();
    let renewed = lease.clone();
    let renew = tokio::spawn(async move { renewer.renew(&renewed, Duration::from_secs(60)).await });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while b.queued_operations_for_tests() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the renew never queued"
        );
        tokio::task::yield_now().await;
    }
    // Submitted before now: its whole budget is over once BUSY has passed from here.
    tokio::time::sleep(BUSY).await;
    drop(hold);
    // The lock is free from here on: a renew that still attempts succeeds.
    locked.rollback().expect("release the lock");
    let err = renew
        .await
        .expect("join")
        .expect_err("its busy_timeout went by in the queue");
    assert!(matches!(err, LeaseError::Unavailable { .. }), "{err:?}");
    assert!(err.to_string().contains("not attempted"), "{err}");
    let r = b
        .renew(&lease, Duration::from_secs(60))
        .await
        .expect("renew");
    assert!(!r.is_lost(), "nothing changed: the lease still holds");
}

#[tokio::test]
async fn a_write_queued_past_its_busy_timeout_is_refused_queued() {
    a_write_queued_past_its_busy_timeout_is_refused_unattempted().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_queued_past_its_busy_timeout_is_refused_inline() {
    a_write_queued_past_its_busy_timeout_is_refused_unattempted().await;
}

/// `acknowledge_and_claim` whose claim meets a counter behind a stored token keeps the
/// acknowledgement (applied exactly as `acknowledge`), claims nothing, and issues no token
/// again; a plain claim still reports `TokenCounter`.
#[tokio::test]
async fn a_counter_refusal_after_an_acknowledgement_keeps_it_and_claims_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ack-counter.db");
    let clock = ManualClock::starting_now();
    let b = SqliteBackend::open(SqliteConfig::file(&path).clock(Arc::new(clock.clone())))
        .await
        .expect("open");
    for name in ["a", "b"] {
        b.admit(&Admission::new(id(name))).await.expect("admit");
    }
    let a = claim(&b, 1, Duration::from_secs(3600)).await;
    let stale_b = claim(&b, 1, Duration::from_millis(100)).await;
    assert_eq!((a.len(), stale_b.len()), (1, 1));
    clock.advance(Duration::from_secs(60));
    Connection::open(&path)
        .expect("raw open")
        .execute("DELETE FROM lease_counters", [])
        .expect("delete the counter");
    let before_b = b.get(&id("b")).await.expect("get");

    let ack = lease_core::Acknowledgement {
        lease: a[0].clone(),
        outcome: lease_core::WorkflowRunOutcome::Completed(Json::null()),
    };
    let r = b
        .acknowledge_and_claim(
            &ack,
            ClaimRequest {
                now: lease_core::Timestamp::MAX,
                limit: 1,
                duration: Duration::from_secs(30),
            },
        )
        .await
        .expect("the acknowledgement applies");
    assert!(!r.acknowledged.is_lost(), "{r:?}");
    assert!(r.next.claimed.is_empty(), "{r:?}");
    let a_now = b.get(&id("a")).await.expect("get").expect("a");
    assert!(a_now.status.is_terminal(), "{a_now:?}");
    assert_eq!(b.get(&id("b")).await.expect("get"), before_b, "b unchanged");
    let err = b
        .claim_due(ClaimRequest {
            now: lease_core::Timestamp::MAX,
            limit: 1,
            duration: Duration::from_secs(30),
        })
        .await
        .expect_err("still refused");
    assert!(matches!(err, LeaseError::TokenCounter { .. }), "{err:?}");
}

/// A quarantined record is listed by `list_corrupt` only: `list_failing` skips it (it used
/// to fail with `Protocol`, hiding every failing execution), and `get` of its id stays a
/// typed error that names the quarantine.
#[tokio::test]
async fn list_failing_skips_quarantined_records_and_get_names_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("failing.db");
    let clock = ManualClock::starting_now();
    let b = SqliteBackend::open(SqliteConfig::file(&path).clock(Arc::new(clock.clone())))
        .await
        .expect("open");
    for name in ["a-bad", "b-good"] {
        b.admit(&Admission::new(id(name))).await.expect("admit");
    }
    for lease in claim(&b, 2, Duration::from_secs(30)).await {
        assert!(!b.release(&lease).await.expect("release").is_lost());
    }
    Connection::open(&path)
        .expect("raw open")
        .execute(
            "UPDATE lease_executions SET status = 'exploded' WHERE id = 'a-bad'",
            [],
        )
        .expect("corrupt a row");
    clock.advance(Duration::from_secs(3600));
    let claimed = claim(&b, 10, Duration::from_secs(30)).await;
    assert_eq!(claimed.len(), 1, "a-bad is quarantined, b-good claimed");

    let failing: Vec<String> = b
        .list_failing(1, 10)
        .await
        .expect("list_failing skips the quarantined record")
        .into_iter()
        .map(|r| r.id.to_string())
        .collect();
    assert_eq!(failing, ["b-good"]);
    let corrupt = b.list_corrupt(10).await.expect("list_corrupt");
    assert_eq!(corrupt.len(), 1);
    assert_eq!(corrupt[0].id, "a-bad");
    let err = b.get(&id("a-bad")).await.expect_err("still undecodable");
    match err {
        LeaseError::Protocol { reason, .. } => {
            assert!(reason.contains("list_corrupt"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

/// A claim merges two indexes (rows not running; expired running leases), so its cost does
/// not grow with the leases running, and must still return (due, id) order across both, as
/// one index did.
#[tokio::test]
async fn claims_merge_expired_leases_and_waiting_rows_in_due_order() {
    let clock = ManualClock::starting_now();
    let b = SqliteBackend::open(SqliteConfig::in_memory().clock(Arc::new(clock.clone())))
        .await
        .expect("open");
    let t0 = lease_core::Clock::now(&clock);
    let name = |i: usize| format!("e{i:02}");
    // Even ids: admitted, claimed with a short lease that will expire (running rows).
    for i in (0..40).step_by(2) {
        b.admit(&Admission::new(id(&name(i))).not_before(t0))
            .await
            .expect("admit");
    }
    assert_eq!(claim(&b, 20, Duration::from_millis(1)).await.len(), 20);
    // Odd ids: admitted with the same due time, waiting (never claimed).
    for i in (1..40).step_by(2) {
        b.admit(&Admission::new(id(&name(i))).not_before(t0))
            .await
            .expect("admit");
    }
    clock.advance(Duration::from_secs(3600));
    let claimed: Vec<String> = claim(&b, 40, Duration::from_secs(30))
        .await
        .iter()
        .map(|l| l.execution_id.to_string())
        .collect();
    let want: Vec<String> = (0..40).map(name).collect();
    assert_eq!(claimed, want);
}

/// A renewal writes only the lease's columns, but a row still marked quarantined (it
/// decodes again, say after a repair) is written whole, so the renewal lifts the mark as
/// every other write does, and the renewed expiry is what a later claim sees.
#[tokio::test]
async fn a_renewal_lifts_a_quarantine_and_moves_the_expiry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("renew.db");
    let clock = ManualClock::starting_now();
    let b = SqliteBackend::open(SqliteConfig::file(&path).clock(Arc::new(clock.clone())))
        .await
        .expect("open");
    b.admit(&Admission::new(id("held"))).await.expect("admit");
    let lease = claim_at(&b, clock.now()).await.remove(0);
    Connection::open(&path)
        .expect("raw open")
        .execute(
            "UPDATE lease_executions SET corrupt = 'repaired since' WHERE id = 'held'",
            [],
        )
        .expect("mark the row");
    assert_eq!(b.list_corrupt(10).await.expect("list_corrupt").len(), 1);

    clock.advance(Duration::from_secs(20));
    let renewed = b
        .renew(&lease, Duration::from_secs(30))
        .await
        .expect("renew")
        .accepted()
        .expect("held");
    assert!(b.list_corrupt(10).await.expect("list_corrupt").is_empty());

    // Past the first expiry, before the renewed one: nothing to claim.
    clock.advance(Duration::from_secs(20));
    assert!(
        claim_at(&b, clock.now()).await.is_empty(),
        "renewed lease still live"
    );
    clock.advance(Duration::from_secs(60));
    let taken = claim_at(&b, clock.now()).await;
    assert_eq!(taken.len(), 1, "the renewed lease ran out");
    assert!(taken[0].token > renewed.token);
}

async fn claim_at(b: &SqliteBackend, now: lease_core::Timestamp) -> Vec<ExecutionLease> {
    b.claim_due(ClaimRequest {
        now,
        limit: 1,
        duration: Duration::from_secs(30),
    })
    .await
    .expect("claim")
}
