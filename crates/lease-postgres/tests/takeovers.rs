//! The schema's takeover counter (`status_counts`'s `takeovers`, schema v21) is written by
//! the claim statement only when the claim took over an expired lease: a batch claim of
//! fresh work neither locks nor updates its row, so it goes through while another
//! transaction holds that row, and the row's version (`xmin`) stays the same; a claim that
//! takes over two leases adds two, in its own statement.

mod common;

use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, Clock, ExecutionClient, ExecutionClientExt, ExecutionId, ManualClock,
};
use lease_postgres::PostgresBackend;
use sqlx::{AssertSqlSafe, Connection, PgConnection};

/// The counter row's (transaction id that wrote it, total).
async fn counter_row(conn: &mut PgConnection, schema: &str) -> (String, i64) {
    sqlx::query_as(AssertSqlSafe(format!(
        "SELECT xmin::text, total FROM \"{schema}\".takeovers"
    )))
    .fetch_one(conn)
    .await
    .expect("the counter row")
}

/// Claims up to 10 due executions at the clock's now with `lease`; how many.
async fn claim(backend: &PostgresBackend, clock: &ManualClock, lease: Duration) -> usize {
    let request = ClaimRequest {
        now: clock.now(),
        limit: 10,
        duration: lease,
    };
    backend.claim_due(request).await.expect("claim").len()
}

#[test]
fn only_a_takeover_claim_writes_the_counter_row() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let clock = ManualClock::starting_now();
    let config = common::config(clock.clone(), lease_core::RedeliveryPolicy::default());
    let schema = config.schema_name().to_owned();
    runtime.block_on(common::cleaning_up(schema.clone(), async move {
        let backend = PostgresBackend::connect(config).await.expect("connect");
        for name in ["a", "b"] {
            let id = ExecutionId::new(name).expect("id");
            backend.admit(&Admission::new(id)).await.expect("admit");
        }
        let mut admin = PgConnection::connect(&common::url()).await.expect("admin");
        let before = counter_row(&mut admin, &schema).await;

        // Another transaction holds the counter row while fresh work is claimed in a batch.
        let mut holder = PgConnection::connect(&common::url()).await.expect("holder");
        let mut held = holder.begin().await.expect("begin");
        sqlx::raw_sql(AssertSqlSafe(format!(
            "SELECT total FROM \"{schema}\".takeovers FOR UPDATE"
        )))
        .execute(&mut *held)
        .await
        .expect("lock the counter row");
        let lease = Duration::from_secs(1);
        let fresh = tokio::time::timeout(Duration::from_secs(20), claim(&backend, &clock, lease));
        let fresh = fresh
            .await
            .expect("a claim of fresh work waited for the counter row");
        assert_eq!(fresh, 2);
        held.rollback().await.expect("release the row");
        assert_eq!(
            counter_row(&mut admin, &schema).await,
            before,
            "no takeover, no write"
        );

        // Past both expiries and the default policy's first redelivery delay (1 s).
        clock.advance(Duration::from_secs(3));
        assert_eq!(claim(&backend, &clock, lease).await, 2);
        let (xmin, total) = counter_row(&mut admin, &schema).await;
        assert_eq!(total, 2, "two leases taken over in one claim");
        assert_ne!(xmin, before.0, "written by the claim");
        let counts = backend.status_counts().await.expect("counts");
        assert_eq!((counts.takeovers, counts.running), (2, 2));
        backend.close().await;
    }));
}
