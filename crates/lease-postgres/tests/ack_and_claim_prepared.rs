//! `acknowledge_and_claim` runs two per-connection prepared statements: a connection that
//! lacks one of them (first use, or deallocated behind the backend's back) prepares what is
//! missing and sends the message again, and the failed first send changed nothing: the
//! acknowledgement is applied once and the claim issues exactly one token.

mod common;

use lease_core::ExecutionClientExt;
use std::time::Duration;

use lease_core::{
    Acknowledgement, Admission, ClaimRequest, ExecutionClient, ExecutionId, ExecutionLease,
    ExecutionStatus, FencingToken, Json, ManualClock, RedeliveryPolicy, Timestamp,
    WorkflowRunOutcome,
};
use lease_postgres::PostgresBackend;
use sqlx::AssertSqlSafe;

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

fn next() -> ClaimRequest {
    ClaimRequest {
        now: Timestamp::MAX,
        limit: 1,
        duration: Duration::from_secs(30),
    }
}

fn done() -> WorkflowRunOutcome {
    WorkflowRunOutcome::Completed(Json::parse("outcome", "1").expect("json"))
}

/// The names of this session's prepared statements matching `pattern` (the pool has one
/// connection, so this is the connection `acknowledge_and_claim` uses).
async fn prepared(backend: &PostgresBackend, pattern: &str) -> Vec<String> {
    sqlx::query_scalar("SELECT name FROM pg_prepared_statements WHERE name LIKE $1")
        .bind(pattern)
        .fetch_all(backend.pool())
        .await
        .expect("pg_prepared_statements")
}

/// Acknowledges `lease` and claims the next; checks that exactly `expected` was claimed,
/// with the token right after `lease`'s, and that `lease`'s execution completed.
async fn ack_and_claim(
    backend: &PostgresBackend,
    lease: &ExecutionLease,
    expected: &str,
) -> ExecutionLease {
    let r = backend
        .acknowledge_and_claim(
            &Acknowledgement {
                lease: lease.clone(),
                outcome: done(),
            },
            next(),
        )
        .await
        .expect("acknowledge_and_claim");
    assert!(!r.acknowledged.is_lost(), "{r:?}");
    let acked = backend
        .get(&lease.execution_id)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(acked.status, ExecutionStatus::Completed);
    assert_eq!(r.next.claimed.len(), 1, "{r:?}");
    let claimed = r.next.claimed[0].lease.clone();
    assert_eq!(claimed.execution_id, id(expected));
    assert_eq!(
        claimed.token,
        FencingToken::new(lease.token.get() + 1),
        "the retried message issued exactly one token"
    );
    claimed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_missing_the_statements_prepares_them_and_changes_nothing_twice() {
    let config =
        common::config(ManualClock::starting_now(), RedeliveryPolicy::default()).max_connections(1);
    let schema = config.schema_name().to_owned();
    let backend = PostgresBackend::connect(config).await.expect("connect");
    common::cleaning_up(schema, async move {
        for name in ["a", "b", "c", "d", "e"] {
            backend
                .admit(&Admission::new(id(name)))
                .await
                .expect("admit");
        }
        let a = backend.claim_due(next()).await.expect("claim").remove(0);
        assert!(prepared(&backend, "lease\\_%").await.is_empty());

        // First use on this connection: both are prepared.
        let b = ack_and_claim(&backend, &a, "b").await;
        assert_eq!(prepared(&backend, "lease\\_ack\\_%").await.len(), 1);
        assert_eq!(
            prepared(&backend, "lease\\_claim\\_after\\_ack\\_%")
                .await
                .len(),
            1
        );

        // Deallocated behind the backend's back: the claim only (the acknowledgement ran
        // and was rolled back with the failed EXECUTE), the acknowledgement only, both.
        let mut lease = b;
        for (pattern, expected) in [
            ("lease\\_claim\\_after\\_ack\\_%", "c"),
            ("lease\\_ack\\_%", "d"),
            ("lease\\_%", "e"),
        ] {
            for name in prepared(&backend, pattern).await {
                sqlx::raw_sql(AssertSqlSafe(format!("DEALLOCATE {name}")))
                    .execute(backend.pool())
                    .await
                    .expect("deallocate");
            }
            lease = ack_and_claim(&backend, &lease, expected).await;
            assert_eq!(prepared(&backend, "lease\\_%").await.len(), 2);
        }
    })
    .await;
}
