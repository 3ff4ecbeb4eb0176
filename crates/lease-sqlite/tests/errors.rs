//! Error mapping: a database that stays locked, and rows this library did not write.

use std::time::{Duration, Instant};

use lease_core::{Admission, ExecutionClient, ExecutionId, HeapClient, LeaseError};
use lease_sqlite::{SqliteBackend, SqliteConfig};
use rusqlite::Connection;

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("valid id")
}

#[tokio::test]
async fn a_lock_held_past_the_busy_timeout_is_unavailable_and_changes_nothing() {
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
    // A claim meeting a corrupt row fails as a whole and changes nothing.
    let now = b.now().await.expect("now");
    let err = b
        .claim_due(lease_core::ClaimRequest {
            now,
            limit: 10,
            duration: Duration::from_secs(30),
        })
        .await
        .expect_err("corrupt candidate");
    assert!(matches!(err, LeaseError::Protocol { .. }), "{err:?}");
}

#[tokio::test]
async fn a_directory_that_does_not_exist_is_a_backend_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = SqliteBackend::open(SqliteConfig::file(dir.path().join("missing/dir/x.db")))
        .await
        .expect_err("cannot create");
    assert!(matches!(err, LeaseError::Backend { .. }), "{err:?}");
}
