//! The claim's decodability test (`statements/decodable.sql`, written out inline for speed)
//! agrees with `record_problem` (migrations v5, v9, v11, v15: what `list_corrupt` reports)
//! on rows at and just beyond every rule's edge, for due rows (the pick) and for rows not
//! yet due (the horizon).

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use lease_core::{ClaimRequest, ExecutionClient, ManualClock, RedeliveryPolicy, Timestamp};
use lease_postgres::PostgresBackend;
use sqlx::{AssertSqlSafe, Connection, PgConnection};

/// (id, workflow, status, unacknowledged count, outcome), each an SQL expression; the
/// expected verdict is in the id's prefix (`g` decodable, `b` not).
const ROWS: &[(&str, &str, &str, &str, &str)] = &[
    ("'g-null-workflow'", "NULL", "'admitted'", "0", "NULL"),
    ("'g' || repeat('x', 254)", "'w'", "'admitted'", "0", "NULL"),
    ("'g' || repeat('é', 127)", "'w'", "'admitted'", "0", "NULL"),
    ("'g-wf-255'", "repeat('w', 255)", "'admitted'", "0", "NULL"),
    ("'g-unacked-max'", "'w'", "'admitted'", "4294967295", "NULL"),
    ("E'g-nbsp\\u00a0'", "E'w\\u00a0'", "'admitted'", "0", "NULL"),
    ("'g space'", "'w w'", "'admitted'", "0", "NULL"),
    ("'g-suspended'", "'w'", "'suspended'", "1", "'1'"),
    ("'g-failed-with-outcome'", "'w'", "'failed'", "0", "'2'"),
    ("'g-dead-without-outcome'", "'w'", "'dead'", "2", "NULL"),
    ("''", "'w'", "'admitted'", "0", "NULL"),
    ("'b' || repeat('x', 255)", "'w'", "'admitted'", "0", "NULL"),
    ("'b' || repeat('é', 128)", "'w'", "'admitted'", "0", "NULL"),
    ("E'b-\\x01'", "'w'", "'admitted'", "0", "NULL"),
    ("E'b-\\x1f'", "'w'", "'admitted'", "0", "NULL"),
    ("E'b-\\x7f'", "'w'", "'admitted'", "0", "NULL"),
    ("E'b-\\u009f'", "'w'", "'admitted'", "0", "NULL"),
    ("'b-wf-empty'", "''", "'admitted'", "0", "NULL"),
    ("'b-wf-256'", "repeat('w', 256)", "'admitted'", "0", "NULL"),
    ("'b-wf-ctl'", "E'w\\x01'", "'admitted'", "0", "NULL"),
    ("'b-wf-c1'", "E'w\\u0085'", "'admitted'", "0", "NULL"),
    ("'b-unacked'", "'w'", "'admitted'", "4294967296", "NULL"),
    (
        "'b-completed-no-outcome'",
        "'w'",
        "'completed'",
        "0",
        "NULL",
    ),
    ("'b-failed-no-outcome'", "'w'", "'failed'", "0", "NULL"),
];

/// (id, concurrency key), each an SQL expression, on an admitted row of workflow `w`; the
/// verdict is in the id's prefix as in [`ROWS`] (schema v11: the key follows the name rules).
const KEYED_ROWS: &[(&str, &str)] = &[
    ("'g-key-255'", "repeat('k', 255)"),
    ("'g-key-nbsp'", "E'k\\u00a0'"),
    ("'b-key-empty'", "''"),
    ("'b-key-256'", "repeat('k', 256)"),
    ("'b-key-ctl'", "E'k\\x01'"),
    ("'b-key-c1'", "E'k\\u0085'"),
];

/// Every row's id expression, [`ROWS`] then [`KEYED_ROWS`].
fn ids() -> impl Iterator<Item = &'static str> {
    ROWS.iter()
        .map(|r| r.0)
        .chain(KEYED_ROWS.iter().map(|r| r.0))
}

const LEASE: Duration = Duration::from_secs(30);

/// Inserts every row of [`ROWS`], claimable at `at`.
async fn insert(admin: &mut PgConnection, schema: &str, at: i64) {
    let values: Vec<String> = ROWS
        .iter()
        .map(|(id, workflow, status, unacked, outcome)| {
            format!("({id}, {workflow}, {status}, {at}, {at}, {unacked}, {outcome})")
        })
        .collect();
    sqlx::raw_sql(AssertSqlSafe(format!(
        "INSERT INTO \"{schema}\".executions (id, workflow, status, due_at, claimable_at, \
             unacknowledged_deliveries, outcome) VALUES {}",
        values.join(", ")
    )))
    .execute(&mut *admin)
    .await
    .expect("insert rows");
    let keyed: Vec<String> = KEYED_ROWS
        .iter()
        .map(|(id, key)| format!("({id}, 'w', 'admitted', {at}, {at}, 0, {key})"))
        .collect();
    sqlx::raw_sql(AssertSqlSafe(format!(
        "INSERT INTO \"{schema}\".executions (id, workflow, status, due_at, claimable_at, \
             unacknowledged_deliveries, concurrency_key) VALUES {}",
        keyed.join(", ")
    )))
    .execute(admin)
    .await
    .expect("insert keyed rows");
}

/// The ids `record_problem` accepts.
async fn accepted(admin: &mut PgConnection, schema: &str) -> BTreeSet<String> {
    sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT id FROM \"{schema}\".executions \
         WHERE \"{schema}\".record_problem(id, workflow, status, token, \
             unacknowledged_deliveries, outcome, concurrency_key) IS NULL"
    )))
    .fetch_all(admin)
    .await
    .expect("record_problem")
    .into_iter()
    .collect()
}

/// Makes the rows matching `filter` due and claimable at `at`.
async fn update(admin: &mut PgConnection, schema: &str, at: i64, filter: &str) {
    sqlx::raw_sql(AssertSqlSafe(format!(
        "UPDATE \"{schema}\".executions SET due_at = {at}, claimable_at = {at} WHERE {filter}"
    )))
    .execute(admin)
    .await
    .expect("update rows");
}

fn claim(now: Timestamp) -> ClaimRequest {
    ClaimRequest {
        now,
        limit: 1000,
        duration: LEASE,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_skips_exactly_the_rows_record_problem_rejects() {
    let clock = ManualClock::starting_now();
    let config = common::config(clock.clone(), RedeliveryPolicy::default());
    let schema = config.schema_name().to_owned();
    let backend = PostgresBackend::connect(config).await.expect("connect");
    common::cleaning_up(schema.clone(), async move {
        let mut admin = PgConnection::connect(&common::url())
            .await
            .expect("admin connection");
        let now = lease_core::Clock::now(&clock).as_millis();

        // Not yet due: the horizon is the decodable row's instant, never a corrupt one's.
        insert(&mut admin, &schema, now + 1_000).await;
        update(&mut admin, &schema, now + 2_000, "id LIKE 'g%'").await;
        let batch = backend
            .claim_due_with_horizon(claim(Timestamp::from_millis(now)))
            .await
            .expect("claim");
        assert!(batch.claimed.is_empty(), "{batch:?}");
        assert_eq!(
            batch.next_claimable_at,
            Some(Timestamp::from_millis(now + 2_000)),
            "the horizon counted an undecodable row"
        );

        // Due: exactly the rows record_problem accepts are claimed.
        update(&mut admin, &schema, now - 10, "true").await;
        let expected = accepted(&mut admin, &schema).await;
        let good = ids().filter(|id| id.contains("'g")).count();
        assert_eq!(
            expected.len(),
            good,
            "record_problem's verdicts: {expected:?}"
        );
        assert!(
            expected.iter().all(|id| id.starts_with('g')),
            "{expected:?}"
        );
        let batch = backend
            .claim_due_with_horizon(claim(Timestamp::from_millis(now)))
            .await
            .expect("claim");
        let claimed: BTreeSet<String> = batch
            .claimed
            .iter()
            .map(|c| c.lease.execution_id.as_str().to_owned())
            .collect();
        assert_eq!(claimed, expected);
        assert_eq!(
            backend
                .list_corrupt(1000)
                .await
                .expect("list_corrupt")
                .len(),
            ids().count() - good
        );
    })
    .await;
}
