//! The claim's split indexes (schema v7): a claim reads only rows it can take (no walk past
//! live leases or terminal rows), and still takes waiting executions and expired leases
//! together in (due, id) order.

mod common;

use lease_core::ExecutionClientExt;
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, Clock, ExecutionClient, ExecutionId, ExecutionLease, ManualClock,
    RedeliveryPolicy, Timestamp,
};
use lease_postgres::PostgresBackend;
use sqlx::{AssertSqlSafe, Connection, PgConnection};

const LEASE: Duration = Duration::from_secs(1);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn policy() -> RedeliveryPolicy {
    RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_secs(2)).expect("policy")
}

async fn claim(backend: &PostgresBackend, clock: &ManualClock, limit: usize) -> Vec<String> {
    let leases: Vec<ExecutionLease> = backend
        .claim_due(ClaimRequest {
            now: clock.now(),
            limit,
            duration: LEASE,
        })
        .await
        .expect("claim");
    leases
        .iter()
        .map(|l| l.execution_id.as_str().to_owned())
        .collect()
}

/// Statements filling schema `s` (quoted) with 3,000 live leases (tokens 1..=3000, expiring
/// far ahead) and 3,000 completed executions (tokens 5001..=8000): rows a claim must not read.
fn live_and_done(s: &str) -> String {
    format!(
        "INSERT INTO {s}.executions (id, status, token, due_at, lease_expires_at, \
             claimable_at) \
         SELECT 'live' || g, 'running', g, 0, 10000000, 10000000 \
         FROM generate_series(1, 3000) g; \
         INSERT INTO {s}.executions (id, status, token, last_delivery_ended_at, outcome) \
         SELECT 'done' || g, 'completed', 5000 + g, g, 'null' \
         FROM generate_series(1, 3000) g;"
    )
}

/// A statement admitting 5,000 executions due at 101..=5100 into schema `s` (quoted).
fn due_rows(s: &str) -> String {
    format!(
        "INSERT INTO {s}.executions (id, status, due_at, claimable_at) \
         SELECT 'due' || g, 'admitted', 100 + g, 100 + g FROM generate_series(1, 5000) g;"
    )
}

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

/// A backend on `schema` over `clock`, and a connection of its own to fill it, with the
/// library's session settings (so its plans are the library's).
async fn open(schema: &str, clock: ManualClock) -> (PostgresBackend, PgConnection) {
    let config = common::config(clock, policy()).schema(schema.to_owned());
    let backend = PostgresBackend::connect(config).await.expect("connect");
    let options: sqlx::postgres::PgConnectOptions = common::url().parse().expect("url");
    let conn = PgConnection::connect_with(&options.options(lease_postgres::raw::SESSION_OPTIONS))
        .await
        .expect("connection");
    (backend, conn)
}

/// EXPLAIN ANALYZE of the library's own claim statement, prepared and run with its generic
/// plan (as sqlx's statement cache ends up running it), over 3,000 live leases (due long
/// ago), 3,000 terminal rows and 5,000 due executions: a claim of 10 reads 10 rows.
#[test]
fn a_claim_reads_no_live_lease_and_no_terminal_row() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let clock = ManualClock::new(Timestamp::from_millis(1_000));
        let (backend, mut conn) = open(&schema, clock).await;
        let s = format!("\"{schema}\"");
        let (live_and_done, due) = (live_and_done(&s), due_rows(&s));
        sqlx::raw_sql(AssertSqlSafe(format!(
            "{live_and_done} \
             {due} \
             SELECT setval('{s}.fencing_tokens', 10000); \
             ANALYZE {s}.executions"
        )))
        .execute(&mut conn)
        .await
        .expect("fill");
        let claim = lease_postgres::raw::statements(&schema).claim;
        let mut tx = conn.begin().await.expect("begin");
        let plan = generic_plan(
            &mut tx,
            "claim",
            "bigint, bigint, bigint, bigint, bigint[]",
            &claim,
            "100000, 100000, 10, 30000, ARRAY[100, 200]::bigint[]",
        )
        .await;
        tx.rollback().await.expect("rollback");
        assert!(
            plan.contains("executions_claim_waiting_by_priority"),
            "{plan}"
        );
        assert!(plan.contains("executions_claim_expired"), "{plan}");
        // The pause gate reads the (tiny) paused_scopes table once, by a seq scan; the
        // executions table is never scanned.
        assert!(!plan.contains("Seq Scan on executions"), "{plan}");
        assert!(
            !plan.contains("rows=5000"),
            "the claim read every due row: {plan}"
        );
        assert!(
            !plan.contains("Rows Removed by Filter"),
            "the claim read rows it could not take: {plan}"
        );
        assert!(
            plan.contains("Update on executions e") && plan.contains("rows=10 loops=1"),
            "{plan}"
        );
        backend.drop_schema().await.expect("drop");
        backend.close().await;
    }));
}

/// Waiting executions and expired leases come out of one claim order: due time, then id,
/// whichever side a row is on, also when a claim of one finds rows on both sides (the
/// row it does not take is claimable by the next claim).
#[test]
fn waiting_and_expired_rows_are_claimed_in_due_order() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let clock = ManualClock::new(Timestamp::from_millis(1_000_000));
        let config = common::config(clock.clone(), policy()).schema(schema.clone());
        let backend = PostgresBackend::connect(config).await.expect("connect");
        let peer = backend.peer().await.expect("peer");
        let at = |ms: i64| Timestamp::from_millis(ms);
        // "m" and "x" become running (due 1,000,000); "w" waits, due earlier; "y" and "n"
        // wait, due later.
        for name in ["m", "x"] {
            backend
                .admit(&Admission::new(id(name)))
                .await
                .expect("admit");
        }
        assert_eq!(claim(&backend, &clock, 10).await, ["m", "x"]);
        backend
            .admit(&Admission::new(id("w")).not_before(at(999_000)))
            .await
            .expect("admit");
        backend
            .admit(&Admission::new(id("y")).not_before(at(1_000_500)))
            .await
            .expect("admit");
        backend
            .admit(&Admission::new(id("n")).not_before(at(1_000_500)))
            .await
            .expect("admit");
        // The leases expire at 1,001,000; their redelivery gate opens 100 ms later.
        clock.set(at(1_001_100));
        assert_eq!(claim(&peer, &clock, 1).await, ["w"], "waiting, due first");
        assert_eq!(claim(&peer, &clock, 1).await, ["m"], "expired, due next");
        assert_eq!(
            claim(&peer, &clock, 2).await,
            ["x", "n"],
            "expired, then waiting"
        );
        assert_eq!(claim(&peer, &clock, 2).await, ["y"]);
        assert!(claim(&peer, &clock, 2).await.is_empty());
        backend.drop_schema().await.expect("drop");
        backend.close().await;
        peer.close().await;
    }));
}

/// EXPLAIN ANALYZE of `sql` prepared as `name(types)` with its generic plan and run with
/// `args`, inside `tx`: the plan's text.
async fn generic_plan(
    tx: &mut PgConnection,
    name: &str,
    types: &str,
    sql: &str,
    args: &str,
) -> String {
    sqlx::raw_sql(AssertSqlSafe(format!(
        "SET LOCAL plan_cache_mode = force_generic_plan; PREPARE {name}({types}) AS {sql}"
    )))
    .execute(&mut *tx)
    .await
    .expect("prepare");
    let plan: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!(
        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE {name}({args})"
    )))
    .fetch_all(&mut *tx)
    .await
    .expect("explain");
    plan.join("\n")
}

/// A generic plan is made once per connection with the table's size then, and kept: made
/// over an empty table (a new queue), `acknowledge_batch`'s read of its items' rows by id
/// was a sequential scan that stayed one as the table grew (3.4 ms over 20,000 rows for two
/// ids). With the library's session settings (`enable_seqscan = off`) the plan made over the
/// empty table reads the rows by key, and still does after 10,000 rows arrive.
#[test]
fn a_batch_acknowledgement_planned_over_an_empty_table_reads_by_key() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let clock = ManualClock::new(Timestamp::from_millis(1_000));
        let (backend, mut conn) = open(&schema, clock).await;
        let s = format!("\"{schema}\"");
        let sql = lease_postgres::raw::statements(&schema);
        let mut tx = conn.begin().await.expect("begin");
        let types = "text[], bigint[], text[], text[], bigint";
        let args = "ARRAY['r00005', 'r00007'], ARRAY[5, 7]::bigint[], \
                    ARRAY['completed', 'completed'], ARRAY['{}', '{}'], 1000";
        sqlx::raw_sql(AssertSqlSafe(format!(
            "SET LOCAL plan_cache_mode = force_generic_plan; \
             PREPARE ack_batch({types}) AS {}; EXECUTE ack_batch({args}); \
             INSERT INTO {s}.executions (id, status, token, due_at, claimable_at, \
                 lease_expires_at) \
             SELECT 'r' || lpad(g::text, 5, '0'), 'running', g, 100, 1000000, 1000000 \
             FROM generate_series(1, 10000) g",
            sql.acknowledge_batch
        )))
        .execute(&mut *tx)
        .await
        .expect("plan over the empty table, then fill");
        let plan: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE ack_batch({args})"
        )))
        .fetch_all(&mut *tx)
        .await
        .expect("explain");
        let plan = plan.join("\n");
        tx.rollback().await.expect("rollback");
        assert!(!plan.contains("Seq Scan on executions"), "{plan}");
        assert!(plan.contains("executions_pkey"), "{plan}");
        assert!(
            plan.contains("Update on executions e") && plan.contains("rows=2 loops=1"),
            "both items acknowledged: {plan}"
        );
        backend.drop_schema().await.expect("drop");
        backend.close().await;
    }));
}

/// Priorities and the key gate at scale (schema v10): 3,000 live leases, 3,000 terminal
/// rows, 5,000 due rows at priority 0, 2,000 rows at priority 7 due later, and 5 due rows
/// of key "hot" at priority 3 (limit 2, one live lease). The generic plans of the claim
/// statement and the keyed claim read by index ranges that stop where the claim does: no
/// sequential scan of executions, no level's rows due later read. Then a claim of 10 takes
/// the key's one free place and the first 9 due rows, in claim order (a second round walks
/// on past the key's rows it could not take).
#[test]
fn a_prioritized_keyed_claim_reads_by_index() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let clock = ManualClock::new(Timestamp::from_millis(100_000));
        let (backend, mut conn) = open(&schema, clock.clone()).await;
        let s = format!("\"{schema}\"");
        let live_and_done = live_and_done(&s);
        sqlx::raw_sql(AssertSqlSafe(format!(
            "{live_and_done} \
             INSERT INTO {s}.executions (id, status, due_at, claimable_at) \
             SELECT 'due' || lpad(g::text, 4, '0'), 'admitted', 100 + g, 100 + g \
             FROM generate_series(1, 5000) g; \
             INSERT INTO {s}.executions (id, status, due_at, claimable_at, priority) \
             SELECT 'later' || g, 'admitted', 10000000 + g, 10000000 + g, 7 \
             FROM generate_series(1, 2000) g; \
             INSERT INTO {s}.executions (id, status, due_at, claimable_at, priority, \
                 concurrency_key) \
             SELECT 'hot' || g, 'admitted', 100 + g, 100 + g, 3, 'hot' \
             FROM generate_series(1, 5) g; \
             INSERT INTO {s}.executions (id, status, token, due_at, lease_expires_at, \
                 claimable_at, concurrency_key) \
             VALUES ('hot-live', 'running', 9000, 0, 10000000, 10000000, 'hot'); \
             INSERT INTO {s}.concurrency_limits (key, max_leases) VALUES ('hot', 2); \
             SELECT setval('{s}.fencing_tokens', 10000); \
             ANALYZE {s}.executions"
        )))
        .execute(&mut conn)
        .await
        .expect("fill");
        let sql = lease_postgres::raw::statements(&schema);
        let mut tx = conn.begin().await.expect("begin");
        let claim_plan = generic_plan(
            &mut tx,
            "claim",
            "bigint, bigint, bigint, bigint, bigint[]",
            &sql.claim,
            "100000, 100000, 10, 30000, ARRAY[100, 200]::bigint[]",
        )
        .await;
        let keyed = generic_plan(
            &mut tx,
            "keyed",
            "bigint, bigint, bigint, bigint, bigint[]",
            &sql.claim_keyed,
            "100000, 100000, 10, 30000, ARRAY[100, 200]::bigint[]",
        )
        .await;
        tx.rollback().await.expect("rollback");
        for plan in [&claim_plan, &keyed] {
            assert!(
                plan.contains("executions_claim_waiting_by_priority"),
                "{plan}"
            );
            assert!(!plan.contains("Seq Scan on executions"), "{plan}");
            assert!(
                !plan.contains("rows=2000") && !plan.contains("rows=5000"),
                "the claim read a level's rows past its limit: {plan}"
            );
        }
        // The first 10 in claim order are hot1..hot5 and due0001..due0005; the key has
        // room for 1 (limit 2, one live lease): hot1 and the five unkeyed rows.
        assert!(
            keyed.contains("Update on executions e") && keyed.contains("rows=6 loops=1"),
            "{keyed}"
        );
        let mut want = vec!["hot1".to_owned()];
        want.extend((1..=9).map(|g| format!("due{g:04}")));
        assert_eq!(claim(&backend, &clock, 10).await, want);
        backend.drop_schema().await.expect("drop");
        backend.close().await;
    }));
}

/// A queue filled after its statistics were taken (a new or emptied queue before
/// autovacuum's next ANALYZE; every benchmark store): statistics of an empty table, then
/// 10,000 due rows. The generic plans of the claim and of the keyed claim still walk the
/// due rows in order and stop after the 32 they take. The walk's `priority = level` is
/// estimated at ~1 row there, and with bitmap scans allowed the planner read all 10,000
/// through one and sorted them (`backend.rs` `SESSION_SETTINGS`).
#[test]
fn a_claim_walks_in_order_over_statistics_of_an_empty_table() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let clock = ManualClock::new(Timestamp::from_millis(1_000));
        let (backend, mut conn) = open(&schema, clock).await;
        let s = format!("\"{schema}\"");
        sqlx::raw_sql(AssertSqlSafe(format!(
            "ANALYZE {s}.executions; \
             INSERT INTO {s}.executions (id, status, due_at, claimable_at) \
             SELECT 'due' || lpad(g::text, 5, '0'), 'admitted', 100 + g, 100 + g \
             FROM generate_series(1, 10000) g"
        )))
        .execute(&mut conn)
        .await
        .expect("fill");
        let sql = lease_postgres::raw::statements(&schema);
        let mut tx = conn.begin().await.expect("begin");
        let args = "100000, 100000, 32, 30000, ARRAY[100, 200]::bigint[]";
        let types = "bigint, bigint, bigint, bigint, bigint[]";
        let claim_plan = generic_plan(&mut tx, "claim", types, &sql.claim, args).await;
        let keyed = generic_plan(&mut tx, "keyed", types, &sql.claim_keyed, args).await;
        tx.rollback().await.expect("rollback");
        for plan in [&claim_plan, &keyed] {
            assert!(
                plan.contains("Index Scan using executions_claim_waiting_by_priority"),
                "{plan}"
            );
            assert!(
                !plan.contains("rows=10000"),
                "the claim read every due row: {plan}"
            );
            assert!(
                plan.contains("Update on executions e") && plan.contains("rows=32 loops=1"),
                "{plan}"
            );
        }
        backend.drop_schema().await.expect("drop");
        backend.close().await;
    }));
}

/// The claim's summary row (schema v22: rows not running on `executions_horizon_waiting`,
/// running rows on `executions_claim_expired`), its generic plan made over an empty table
/// and kept: after 3,000 live leases, 3,000 terminal rows and 5,000 admitted rows arrive, a
/// full claim of 10 and a short one (3 due) each seek both indexes and read no more than a
/// few entries, never every waiting row or every lease.
#[test]
fn the_claims_horizon_planned_over_an_empty_table_seeks_both_sides() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let clock = ManualClock::new(Timestamp::from_millis(1_000));
        let (backend, mut conn) = open(&schema, clock).await;
        let s = format!("\"{schema}\"");
        let (live_and_done, due) = (live_and_done(&s), due_rows(&s));
        let sql = lease_postgres::raw::statements(&schema).claim_with_horizon;
        let mut tx = conn.begin().await.expect("begin");
        let types = "bigint, bigint, bigint, bigint, bigint[]";
        let full = "100000, 100000, 10, 30000, ARRAY[100, 200]::bigint[]";
        sqlx::raw_sql(AssertSqlSafe(format!(
            "SET LOCAL plan_cache_mode = force_generic_plan; \
             PREPARE claim({types}) AS {sql}; EXECUTE claim({full}); \
             {live_and_done} \
             {due} \
             SELECT setval('{s}.fencing_tokens', 10000)"
        )))
        .execute(&mut *tx)
        .await
        .expect("plan over the empty table, then fill");
        // The full claim takes 101..=110; the short one, at 113, the 3 left due by then.
        for args in [full, "113, 113, 10, 30000, ARRAY[100, 200]::bigint[]"] {
            let plan: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!(
                "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE claim({args})"
            )))
            .fetch_all(&mut *tx)
            .await
            .expect("explain");
            let plan = plan.join("\n");
            assert!(plan.contains("executions_horizon_waiting"), "{plan}");
            assert!(!plan.contains("Seq Scan on executions"), "{plan}");
            for many in ["rows=3000", "rows=4990", "rows=5000"] {
                assert!(!plan.contains(many), "{many}: {plan}");
            }
            assert!(!plan.contains("Sort Method: external"), "{plan}");
        }
        tx.rollback().await.expect("rollback");
        backend.drop_schema().await.expect("drop");
        backend.close().await;
    }));
}
