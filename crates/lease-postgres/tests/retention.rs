//! Retention, PostgreSQL specifics: the purge walks the terminal index, and skips rows
//! another transaction holds locked instead of waiting for them.

mod common;

use lease_core::ExecutionClientExt;
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, ExecutionClient, ExecutionId, Json, ManualClock, RedeliveryPolicy,
    Timestamp, WorkflowRunOutcome,
};
use lease_postgres::PostgresBackend;
use sqlx::{AssertSqlSafe, Connection, PgConnection};

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

async fn admin() -> PgConnection {
    PgConnection::connect(&common::url())
        .await
        .expect("admin connection")
}

/// A backend on a fresh schema with `names` admitted, claimed and completed.
async fn completed(names: &[&str]) -> (PostgresBackend, ManualClock) {
    let clock = ManualClock::starting_now();
    let backend =
        PostgresBackend::connect(common::config(clock.clone(), RedeliveryPolicy::default()))
            .await
            .expect("connect");
    for name in names {
        backend
            .admit(&Admission::new(id(name)))
            .await
            .expect("admit");
        let lease = backend
            .claim_due(ClaimRequest {
                now: Timestamp::MAX,
                limit: 1,
                duration: Duration::from_secs(30),
            })
            .await
            .expect("claim")
            .remove(0);
        let done = WorkflowRunOutcome::Completed(Json::parse("o", "1").expect("json"));
        assert!(
            !backend
                .acknowledge(&lease, &done)
                .await
                .expect("ack")
                .is_lost()
        );
    }
    (backend, clock)
}

/// The purge's row selection is an index scan of `executions_terminal` (no sequential scan
/// of the executions, which are mostly live), in the index's order (no sort).
#[test]
fn purge_uses_the_terminal_index() {
    runtime().block_on(async {
        let (backend, _clock) = completed(&["t1"]).await;
        let schema = backend.schema().to_owned();
        common::cleaning_up(schema.clone(), async move {
            let mut conn = admin().await;
            sqlx::raw_sql(AssertSqlSafe(format!(
                "INSERT INTO \"{schema}\".executions (id, status, due_at, claimable_at) \
                 SELECT 'x' || g, 'suspended', NULL, NULL FROM generate_series(1, 5000) g; \
                 ANALYZE \"{schema}\".executions"
            )))
            .execute(&mut conn)
            .await
            .expect("rows");
            let plan: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!(
                "EXPLAIN SELECT e.id FROM \"{schema}\".executions e \
                 WHERE e.status IN ('completed', 'failed') AND e.last_delivery_ended_at < 5 \
                 ORDER BY e.last_delivery_ended_at, e.id LIMIT 1000 FOR UPDATE SKIP LOCKED"
            )))
            .fetch_all(&mut conn)
            .await
            .expect("explain");
            let plan = plan.join("\n");
            assert!(
                plan.contains("Index Scan using executions_terminal"),
                "{plan}"
            );
            assert!(
                !plan.contains("Sort") && !plan.contains("Seq Scan"),
                "{plan}"
            );
            backend.close().await;
        })
        .await;
    });
}

/// A terminal row another transaction holds locked (here `FOR SHARE`, as a stale holder's
/// step write holds it) is skipped, not waited for; the purge takes the others, and the
/// row goes in a later call once the lock is released.
#[test]
fn purge_skips_rows_held_by_another_transaction() {
    runtime().block_on(async {
        let (backend, _clock) = completed(&["a", "b"]).await;
        let schema = backend.schema().to_owned();
        common::cleaning_up(schema.clone(), async move {
            let mut conn = admin().await;
            let mut tx = conn.begin().await.expect("begin");
            sqlx::raw_sql(AssertSqlSafe(format!(
                "SELECT 1 FROM \"{schema}\".executions WHERE id = 'a' FOR SHARE"
            )))
            .execute(&mut *tx)
            .await
            .expect("lock");
            let first = backend
                .purge_terminal(Timestamp::MAX, 10)
                .await
                .expect("purge");
            assert_eq!(first.ids, [id("b")]);
            tx.commit().await.expect("commit");
            let second = backend
                .purge_terminal(Timestamp::MAX, 10)
                .await
                .expect("purge");
            assert_eq!(second.ids, [id("a")]);
            backend.close().await;
        })
        .await;
    });
}
