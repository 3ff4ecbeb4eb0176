//! Attempt limits on PostgreSQL beyond the conformance cases: the fenced writes the suite
//! does not drive (the fenced transaction's commit, the acknowledgement batch,
//! acknowledge-and-claim) refuse the holder whose lease expired on its last attempt from
//! its expiry on, and a later claim stores the death exactly as `get` read it, out of the
//! claim's horizon.

mod common;

use std::time::Duration;

use lease_core::{
    Acknowledgement, Admission, AttemptLimit, AttemptScope, ClaimRequest, ExecutionClient,
    ExecutionClientExt, ExecutionId, ExecutionStatus, Json, ManualClock, RedeliveryPolicy,
    WorkflowRunOutcome,
};
use lease_postgres::PostgresBackend;
use sqlx::{AssertSqlSafe, Connection, PgConnection};

fn claim(now: lease_core::Timestamp) -> ClaimRequest {
    ClaimRequest {
        now,
        limit: 10,
        duration: Duration::from_secs(30),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_last_attempt_refuses_every_fenced_write_and_the_claim_stores_its_death() {
    let clock = ManualClock::starting_now();
    let config = common::config(clock.clone(), RedeliveryPolicy::default());
    let schema = config.schema_name().to_owned();
    let backend = PostgresBackend::connect(config).await.expect("connect");
    common::cleaning_up(schema.clone(), async move {
        let limit = AttemptLimit::new(1).expect("limit");
        backend
            .set_attempt_limit(&AttemptScope::Default, Some(limit))
            .await
            .expect("set limit");
        let id = ExecutionId::new("job").expect("id");
        backend
            .admit(&Admission::new(id.clone()))
            .await
            .expect("admit");
        let now = backend.now().await.expect("now");
        let lease = backend
            .claim_due(claim(now))
            .await
            .expect("claim")
            .remove(0);
        clock.set(lease.expires_at);
        let read_dead = backend.get(&id).await.expect("get").expect("record");
        assert_eq!(read_dead.status, ExecutionStatus::Dead);

        let tx = backend.begin_fenced(&lease).await.expect("begin");
        assert!(
            tx.commit().await.expect("commit").is_lost(),
            "fenced commit"
        );
        let done = WorkflowRunOutcome::Completed(Json::parse("o", "1").expect("json"));
        let ack = Acknowledgement {
            lease: lease.clone(),
            outcome: done,
        };
        let batch = backend
            .acknowledge_batch(std::slice::from_ref(&ack))
            .await
            .expect("batch");
        assert!(batch[0].is_lost(), "acknowledge_batch");
        // The claim stores the death once the row's `claimable_at` (the expiry plus the
        // redelivery delay) has passed.
        clock.advance(Duration::from_secs(3600));
        let later = backend.now().await.expect("now");
        let both = backend
            .acknowledge_and_claim(&ack, claim(later))
            .await
            .expect("ack and claim");
        assert!(both.acknowledged.is_lost(), "acknowledge_and_claim");
        assert!(
            both.next.claimed.is_empty(),
            "a dead execution is never claimed"
        );

        // That claim stored the death: the row is dead, out of the claim indexes, and reads
        // exactly as it did while only `get` made it dead.
        let mut admin = PgConnection::connect(&common::url()).await.expect("admin");
        let (status, claimable): (String, Option<i64>) = sqlx::query_as(AssertSqlSafe(format!(
            "SELECT status, claimable_at FROM \"{schema}\".executions WHERE id = 'job'"
        )))
        .fetch_one(&mut admin)
        .await
        .expect("stored row");
        assert_eq!((status.as_str(), claimable), ("dead", None));
        assert_eq!(backend.get(&id).await.expect("get"), Some(read_dead));
        let after = backend
            .claim_due_with_horizon(claim(later))
            .await
            .expect("claim");
        assert_eq!(after.next_claimable_at, None, "nothing left to wake for");
    })
    .await;
}

/// A claim that takes over an expired lease (no limit) stores the expiry's last error, as
/// `get` read it just before (`effective`), and copies no limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_stores_the_expiry_as_the_last_error() {
    let clock = ManualClock::starting_now();
    let config = common::config(clock.clone(), RedeliveryPolicy::default());
    let schema = config.schema_name().to_owned();
    let backend = PostgresBackend::connect(config).await.expect("connect");
    common::cleaning_up(schema, async move {
        let id = ExecutionId::new("job").expect("id");
        backend
            .admit(&Admission::new(id.clone()))
            .await
            .expect("admit");
        let now = backend.now().await.expect("now");
        let first = backend
            .claim_due(claim(now))
            .await
            .expect("claim")
            .remove(0);
        clock.advance(Duration::from_secs(3600));
        let read = backend.get(&id).await.expect("get").expect("record");
        let expired = read.last_error.clone().expect("the expiry's last error");
        assert_eq!((expired.attempt, expired.at), (1, first.expires_at));
        let later = backend.now().await.expect("now");
        let claimed = backend
            .claim_due_with_records(claim(later))
            .await
            .expect("claim");
        let taken = backend.get(&id).await.expect("get").expect("record");
        assert_eq!(claimed.len(), 1);
        assert_eq!(taken.last_error, Some(expired), "stored by the takeover");
        assert_eq!(taken.attempt_limit, None, "no limit stored");
        assert_eq!(taken.unacknowledged_deliveries, 1);
    })
    .await;
}

/// `list_dead` at 10^5 executions (2,000 dead, 2,000 running on their last attempt of which
/// half expired, the rest completed), with the library's session settings and its generic
/// plan: a walk of `executions_dead` (schema v15) by id that stops after the page, with no
/// sort and no other rows read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_dead_walks_its_index() {
    let clock = ManualClock::starting_now();
    let config = common::config(clock, RedeliveryPolicy::default());
    let schema = config.schema_name().to_owned();
    let backend = PostgresBackend::connect(config).await.expect("connect");
    common::cleaning_up(schema.clone(), async move {
        let mut conn = PgConnection::connect(&common::url()).await.expect("admin");
        let s = format!("\"{schema}\"");
        sqlx::raw_sql(AssertSqlSafe(format!(
            "INSERT INTO {s}.executions (id, status, token, unacknowledged_deliveries, \
                 attempt_limit) \
             SELECT 'dead' || g, 'dead', g, 3, 3 FROM generate_series(1, 2000) g; \
             INSERT INTO {s}.executions (id, status, token, due_at, lease_expires_at, \
                 unacknowledged_deliveries, attempt_limit) \
             SELECT 'last' || g, 'running', 10000 + g, 0, g * 1000, 2, 3 \
             FROM generate_series(1, 2000) g; \
             INSERT INTO {s}.executions (id, status, token, last_delivery_ended_at, outcome) \
             SELECT 'done' || g, 'completed', 20000 + g, g, 'null' \
             FROM generate_series(1, 96000) g; \
             ANALYZE {s}.executions"
        )))
        .execute(&mut conn)
        .await
        .expect("fill");
        let sql = lease_postgres::raw::statements(&schema).list_dead;
        let mut tx = conn.begin().await.expect("begin");
        sqlx::raw_sql(AssertSqlSafe(format!(
            "SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL jit = off; \
             SET LOCAL enable_bitmapscan = off; PREPARE dead(text, bigint, bigint) AS {sql}"
        )))
        .execute(&mut *tx)
        .await
        .expect("prepare");
        // Running rows whose lease expired by 1,000,000 (the first 1,000) are dead.
        let plan: Vec<String> = sqlx::query_scalar(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) \
             EXECUTE dead('dead5', 50, 1000000)",
        )
        .fetch_all(&mut *tx)
        .await
        .expect("explain");
        tx.rollback().await.expect("rollback");
        let plan = plan.join("\n");
        assert!(plan.contains("Index Scan using executions_dead"), "{plan}");
        for absent in ["Sort", "Seq Scan", "Bitmap"] {
            assert!(!plan.contains(absent), "{absent}: {plan}");
        }
        assert!(plan.contains("rows=50 loops=1"), "{plan}");
        let page = backend
            .list_dead(Some(&ExecutionId::new("dead5").expect("id")), 3)
            .await
            .expect("list_dead");
        let ids: Vec<&str> = page.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(
            ids,
            ["dead50", "dead500", "dead501"],
            "by id, after the cursor"
        );
    })
    .await;
}
