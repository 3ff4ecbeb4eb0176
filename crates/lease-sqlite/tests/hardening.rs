//! Issue 11 hardening of the SQLite backend: a token counter that went backwards, corrupt
//! records, and the busy-wait bound. Each test failed on the code before its fix.

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
