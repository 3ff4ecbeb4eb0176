//! Error mapping: a database that stays locked, and rows this library did not write.

use lease_core::ExecutionClientExt;
use std::time::{Duration, Instant};

use lease_core::{Admission, ExecutionClient, ExecutionId, HeapClient, LeaseError};
use lease_sqlite::{SqliteBackend, SqliteConfig};
use rusqlite::Connection;

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("valid id")
}

/// On a current_thread runtime every operation goes through the connection thread.
#[tokio::test]
async fn a_lock_held_past_the_busy_timeout_is_unavailable_and_changes_nothing() {
    lock_held_past_the_busy_timeout().await;
}

/// On a multi-thread runtime an idle connection runs operations inline: same outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_a_lock_held_past_the_busy_timeout_is_unavailable_and_changes_nothing() {
    lock_held_past_the_busy_timeout().await;
}

async fn lock_held_past_the_busy_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("locked.db");
    let b = SqliteBackend::open(SqliteConfig::file(&path).busy_timeout(Duration::from_millis(20)))
        .await
        .expect("open");
    b.admit(&Admission::new(id("before"))).await.expect("admit");

    let mut holder = Connection::open(&path).expect("raw open");
    let tx = holder
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .expect("take the write lock");
    let started = Instant::now();
    let err = b
        .admit(&Admission::new(id("blocked")))
        .await
        .expect_err("the write lock is held");
    assert!(
        matches!(
            err,
            LeaseError::Unavailable {
                backend: "sqlite",
                operation: "admit",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_retryable());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the retry is bounded"
    );
    // Reads are not blocked by a writer in WAL mode.
    assert!(b.get(&id("before")).await.expect("read").is_some());
    tx.rollback().expect("release the lock");

    assert!(
        b.get(&id("blocked")).await.expect("get").is_none(),
        "nothing changed"
    );
    b.admit(&Admission::new(id("blocked")))
        .await
        .expect("admit once the lock is free");
}

#[tokio::test]
async fn rows_this_library_did_not_write_are_protocol_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("corrupt.db");
    let b = SqliteBackend::open(SqliteConfig::file(&path))
        .await
        .expect("open");
    for name in ["bad-status", "bad-token", "bad-outcome"] {
        b.admit(&Admission::new(id(name))).await.expect("admit");
    }
    let raw = Connection::open(&path).expect("raw open");
    raw.execute_batch(
        "UPDATE lease_executions SET status = 'exploded' WHERE id = 'bad-status';
         UPDATE lease_executions SET token = -5 WHERE id = 'bad-token';
         UPDATE lease_executions SET status = 'completed', outcome = NULL
             WHERE id = 'bad-outcome';
         INSERT INTO lease_steps VALUES ('default', 'bad-status', '', 1, 1, 'null', 1);",
    )
    .expect("corrupt rows");
    for name in ["bad-status", "bad-token", "bad-outcome"] {
        let err = b.get(&id(name)).await.expect_err("corrupt row");
        assert!(
            matches!(
                err,
                LeaseError::Protocol {
                    backend: "sqlite",
                    operation: "get",
                    ..
                }
            ),
            "{name}: {err:?}"
        );
    }
    let err = b
        .list_steps(&id("bad-status"))
        .await
        .expect_err("empty step key");
    assert!(matches!(err, LeaseError::Protocol { .. }), "{err:?}");
    // A claim skips corrupt rows (one bad record must not stop every claim) and quarantines
    // them for list_corrupt.
    let now = b.now().await.expect("now");
    let leases = b
        .claim_due(lease_core::ClaimRequest {
            now,
            limit: 10,
            duration: Duration::from_secs(30),
        })
        .await
        .expect("corrupt candidates are skipped");
    assert!(leases.is_empty(), "{leases:?}");
    let corrupt: Vec<String> = b
        .list_corrupt(10)
        .await
        .expect("list_corrupt")
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(corrupt, ["bad-outcome", "bad-status", "bad-token"]);
}

#[tokio::test]
async fn a_directory_that_does_not_exist_is_a_backend_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = SqliteBackend::open(SqliteConfig::file(dir.path().join("missing/dir/x.db")))
        .await
        .expect_err("cannot create");
    assert!(matches!(err, LeaseError::Backend { .. }), "{err:?}");
}

/// Operations queued together share one group commit; a member that fails rolls back only
/// its own savepoint, never its neighbours'.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_operation_does_not_disturb_its_commit_group() {
    let b = SqliteBackend::open(SqliteConfig::in_memory())
        .await
        .expect("open");
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let b = b.clone();
            tokio::spawn(async move {
                if i % 2 == 0 {
                    b.admit(&Admission::new(id(&format!("ok-{i}"))))
                        .await
                        .map(|_| ())
                } else {
                    b.request_wake(
                        &id(&format!("missing-{i}")),
                        lease_core::Timestamp::from_millis(0),
                    )
                    .await
                }
            })
        })
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        let r = t.await.expect("join");
        if i % 2 == 0 {
            r.expect("admit succeeds");
        } else {
            let err = r.expect_err("unknown execution");
            assert!(matches!(err, LeaseError::UnknownExecution(_)), "{err:?}");
        }
    }
    for i in (0..200).step_by(2) {
        assert!(b.get(&id(&format!("ok-{i}"))).await.expect("get").is_some());
    }
}

/// A claim that fails after claiming others (its next token is not above a stored one)
/// undoes those claims (its savepoint rolls back) while the operations grouped with it
/// commit. The connection is held while they are submitted, so they run as one group
/// every time (a bare `RELEASE` instead of the savepoint rollback fails this test).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_half_done_claim_is_rolled_back_inside_its_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("half.db");
    let b = SqliteBackend::open(SqliteConfig::file(&path))
        .await
        .expect("open");
    for name in ["a-good", "b-good", "c-bad"] {
        b.admit(&Admission::new(id(name))).await.expect("admit");
    }
    Connection::open(&path)
        .expect("raw open")
        .execute(
            "UPDATE lease_executions SET token = 5 WHERE id = 'c-bad'",
            [],
        )
        .expect("a stored token above the counter");
    let hold = b.hold_connection_for_tests();
    let mut admits: Vec<_> = (0..20)
        .map(|i| {
            let b = b.clone();
            tokio::spawn(async move { b.admit(&Admission::new(id(&format!("z-{i}")))).await })
        })
        .collect();
    let claimer = b.clone();
    let claim = tokio::spawn(async move {
        claimer
            .claim_due(lease_core::ClaimRequest {
                now: lease_core::Timestamp::MAX,
                limit: 3,
                duration: Duration::from_secs(30),
            })
            .await
    });
    admits.extend((20..40).map(|i| {
        let b = b.clone();
        tokio::spawn(async move { b.admit(&Admission::new(id(&format!("z-{i}")))).await })
    }));
    let deadline = Instant::now() + Duration::from_secs(20);
    while b.queued_operations_for_tests() < 41 {
        assert!(Instant::now() < deadline, "the operations did not queue");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    drop(hold);
    let claim = claim.await.expect("join");
    assert!(
        matches!(claim, Err(LeaseError::TokenCounter { .. })),
        "{claim:?}"
    );
    for a in admits {
        a.await.expect("join").expect("grouped admit commits");
    }
    for name in ["a-good", "b-good"] {
        let r = b.get(&id(name)).await.expect("get").expect("exists");
        assert_eq!(r.status, lease_core::ExecutionStatus::Admitted, "{name}");
        assert_eq!(r.token, lease_core::FencingToken::NONE, "{name}");
    }
    assert!(b.get(&id("z-39")).await.expect("get").is_some());
}
