//! `list_executions` on PostgreSQL (schema v16): pages newest admitted first through every
//! filter shape, cursors chained and refused, and each page one backward walk of an index
//! in admission order, read with the library's generic plans.

mod common;

use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, ConcurrencyKey, ExecutionClient, ExecutionClientExt, ExecutionFilter,
    ExecutionId, ExecutionStatus, LeaseError, ListCursor, ManualClock, RedeliveryPolicy, Timestamp,
    WorkflowName, WorkflowRunOutcome,
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

async fn connect(schema: &str) -> PostgresBackend {
    let clock = ManualClock::new(Timestamp::from_millis(1_000_000));
    PostgresBackend::connect(common::config(clock, RedeliveryPolicy::default()).schema(schema))
        .await
        .expect("connect")
}

/// Every page of `filter` at `limit`, following the cursors: the ids in order.
async fn all_pages(b: &PostgresBackend, filter: &ExecutionFilter, limit: usize) -> Vec<String> {
    let mut ids = Vec::new();
    let mut after: Option<ListCursor> = None;
    loop {
        let page = b
            .list_executions(filter, after.as_ref(), limit)
            .await
            .expect("page");
        assert!(page.records.len() <= limit);
        ids.extend(page.records.iter().map(|r| r.id.as_str().to_owned()));
        match page.next {
            Some(next) => after = Some(next),
            None => return ids,
        }
    }
}

/// 12 executions: `e00`..`e03` admitted one by one, then `e11` down to `e04` in one batch
/// (a batch keeps its item order, not its id order), workflow `even`/`odd`, key `k0`..`k2` (none for every fourth), two
/// claimed and one of them completed.
#[test]
fn pages_list_newest_admitted_first_through_every_filter() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let b = connect(&schema).await;
        let admission = |i: usize| {
            let workflow = if i.is_multiple_of(2) { "even" } else { "odd" };
            let a = Admission::new(ExecutionId::new(format!("e{i:02}")).expect("id"))
                .workflow(WorkflowName::new(workflow).expect("workflow"));
            if i % 4 == 3 {
                a
            } else {
                a.concurrency_key(ConcurrencyKey::new(format!("k{}", i % 3)).expect("key"))
            }
        };
        for i in 0..4 {
            b.admit(&admission(i)).await.expect("admit");
        }
        // A batch whose ids run backwards: admission order is the item order.
        let order: Vec<usize> = (0..4).chain((4..12).rev()).collect();
        let batch: Vec<Admission> = order[4..].iter().map(|i| admission(*i)).collect();
        b.admit_batch(&batch).await.expect("batch");
        let now = b.now().await.expect("now");
        let leases = b
            .claim_due(ClaimRequest {
                now,
                limit: 2,
                duration: Duration::from_secs(30),
            })
            .await
            .expect("claim");
        assert_eq!(leases.len(), 2);
        let done = WorkflowRunOutcome::Completed(lease_core::Json::from_stored("1".to_owned()));
        assert!(
            !b.acknowledge(&leases[0], &done)
                .await
                .expect("ack")
                .is_lost()
        );

        let newest_first: Vec<String> = order.iter().rev().map(|i| format!("e{i:02}")).collect();
        for limit in [1, 5, 12, 1000] {
            let got = all_pages(&b, &ExecutionFilter::default(), limit).await;
            assert_eq!(got, newest_first, "limit {limit}");
        }
        let expect = |keep: &dyn Fn(usize) -> bool| -> Vec<String> {
            order
                .iter()
                .rev()
                .filter(|i| keep(**i))
                .map(|i| format!("e{i:02}"))
                .collect()
        };
        let even = WorkflowName::new("even").expect("w");
        let k1 = ConcurrencyKey::new("k1").expect("k");
        let filters: Vec<(ExecutionFilter, Vec<String>)> = vec![
            (
                ExecutionFilter {
                    workflow: Some(even.clone()),
                    ..Default::default()
                },
                expect(&|i| i.is_multiple_of(2)),
            ),
            (
                ExecutionFilter {
                    key: Some(k1.clone()),
                    ..Default::default()
                },
                expect(&|i| i % 4 != 3 && i % 3 == 1),
            ),
            (
                ExecutionFilter {
                    workflow: Some(even.clone()),
                    key: Some(k1.clone()),
                    ..Default::default()
                },
                expect(&|i| i.is_multiple_of(2) && i % 4 != 3 && i % 3 == 1),
            ),
            (
                ExecutionFilter {
                    status: Some(ExecutionStatus::Completed),
                    ..Default::default()
                },
                vec![leases[0].execution_id.as_str().to_owned()],
            ),
            (
                ExecutionFilter {
                    status: Some(ExecutionStatus::Running),
                    ..Default::default()
                },
                vec![leases[1].execution_id.as_str().to_owned()],
            ),
        ];
        for (filter, want) in filters {
            for limit in [1, 2, 1000] {
                assert_eq!(
                    all_pages(&b, &filter, limit).await,
                    want,
                    "{filter:?} {limit}"
                );
            }
        }
        let admitted = ExecutionFilter {
            status: Some(ExecutionStatus::Admitted),
            workflow: Some(even),
            key: Some(k1),
        };
        let got = all_pages(&b, &admitted, 3).await;
        let claimed: Vec<&str> = leases.iter().map(|l| l.execution_id.as_str()).collect();
        let want: Vec<String> = expect(&|i| i.is_multiple_of(2) && i % 4 != 3 && i % 3 == 1)
            .into_iter()
            .filter(|id| !claimed.contains(&id.as_str()))
            .collect();
        assert_eq!(got, want);
        // Records come back as `get` returns them.
        let page = b
            .list_executions(&ExecutionFilter::default(), None, 12)
            .await
            .expect("page");
        for record in &page.records {
            assert_eq!(Some(record), b.get(&record.id).await.expect("get").as_ref());
        }
        assert!(page.next.is_none(), "the oldest is on this page");
        b.close().await;
    }));
}

/// A bad limit or a cursor this store did not write is `InvalidInput`.
#[test]
fn bad_limits_and_foreign_cursors_are_refused() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let b = connect(&schema).await;
        let all = ExecutionFilter::default();
        for limit in [0, 1001] {
            let err = b
                .list_executions(&all, None, limit)
                .await
                .expect_err("limit");
            assert!(matches!(err, LeaseError::InvalidInput { .. }), "{err}");
        }
        for text in ["12", "a", "a-3", "ax", "a99999999999999999999", "next:abc"] {
            let cursor = ListCursor::new(text).expect("cursor text");
            let err = b
                .list_executions(&all, Some(&cursor), 10)
                .await
                .expect_err("foreign cursor");
            assert!(
                matches!(err, LeaseError::InvalidInput { .. }),
                "{text}: {err}"
            );
        }
        b.close().await;
    }));
}

async fn admin() -> PgConnection {
    PgConnection::connect(&common::url())
        .await
        .expect("admin connection")
}

/// The plan of one page statement with the library's session settings (generic plans, no
/// JIT, no bitmap or sequential scans), executed with `args`.
async fn page_plan(conn: &mut PgConnection, sql: &str, args: &str) -> String {
    let mut tx = conn.begin().await.expect("begin");
    sqlx::raw_sql(AssertSqlSafe(format!(
        "SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL jit = off; \
         SET LOCAL enable_bitmapscan = off; SET LOCAL enable_seqscan = off; \
         PREPARE page(text, text, text, bigint, bigint, bigint) AS {sql}"
    )))
    .execute(&mut *tx)
    .await
    .expect("prepare");
    let plan: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!(
        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE page({args})"
    )))
    .fetch_all(&mut *tx)
    .await
    .expect("explain");
    tx.rollback().await.expect("rollback");
    sqlx::raw_sql("DEALLOCATE page")
        .execute(&mut *conn)
        .await
        .expect("deallocate");
    plan.join("\n")
}

/// 10^5 stored executions (20 workflows, 500 keys, 90% completed), ANALYZEd: each filter
/// shape's page of 50 from a cursor in the middle walks an index of every field it filters
/// on, backwards, reading no more rows than it returns (plus one, for the next cursor) and
/// none it skips: one walk with no sort for a filter with a status, one walk per
/// status for a filter without one. The pages that match nothing read nothing.
#[test]
fn every_page_is_one_backward_index_walk() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let b = connect(&schema).await;
        let mut conn = admin().await;
        let s = format!("\"{schema}\"");
        sqlx::raw_sql(AssertSqlSafe(format!(
            "INSERT INTO {s}.executions (id, workflow, status, token, due_at, \
                 last_delivery_ended_at, outcome, concurrency_key, claimable_at) \
             SELECT 'x' || g, 'w' || (g % 20), \
                 CASE WHEN g % 10 = 0 THEN 'admitted' ELSE 'completed' END, 0, 0, \
                 CASE WHEN g % 10 = 0 THEN NULL ELSE g END, \
                 CASE WHEN g % 10 = 0 THEN NULL ELSE 'null' END, 'k' || (g % 500), \
                 CASE WHEN g % 10 = 0 THEN 0 END \
             FROM generate_series(1, 100000) g; \
             ANALYZE {s}.executions"
        )))
        .execute(&mut conn)
        .await
        .expect("fill");
        let pages = lease_postgres::raw::statements(&schema).list_executions;
        // (mask, filter, index walked); 'admitted' with 'w3' matches nothing (odd rows are
        // never admitted), which a walk of the workflow's index testing the status would
        // learn only by reading every row of 'w3' below the cursor.
        let cases: [(usize, &str, &str); 8] = [
            (0, "NULL, NULL, NULL", "executions_browse_status"),
            (1, "'admitted', NULL, NULL", "executions_browse_status"),
            (2, "NULL, 'w3', NULL", "executions_browse_workflow"),
            (3, "'admitted', 'w3', NULL", "executions_browse_workflow"),
            (4, "NULL, NULL, 'k7'", "executions_browse_key"),
            (5, "'completed', NULL, 'k7'", "executions_browse_key"),
            (6, "NULL, 'w7', 'k7'", "executions_browse_key_workflow"),
            (
                7,
                "'completed', 'w7', 'k7'",
                "executions_browse_key_workflow",
            ),
        ];
        for (mask, filter, index) in cases {
            let plan = page_plan(
                &mut conn,
                &pages[mask],
                &format!("{filter}, 50000, 51, NULL"),
            )
            .await;
            let walk = format!("Scan Backward using {index} ");
            assert!(plan.contains(&walk), "{mask}: {plan}");
            for absent in ["Seq Scan", "Bitmap", "Rows Removed"] {
                assert!(!plan.contains(absent), "{mask} {absent}: {plan}");
            }
            // Rows read by the walk: at most one page (+1) per loop (one loop, or one per
            // status).
            let walked = plan
                .lines()
                .skip_while(|l| !l.contains(&walk))
                .find_map(|l| l.split("rows=").nth(1))
                .and_then(|r| r.split(' ').next())
                .and_then(|r| r.parse::<f64>().ok())
                .unwrap_or_else(|| panic!("{mask}: no row count in {plan}"));
            assert!(walked <= 51.0, "{mask}: {walked} rows per loop: {plan}");
            if mask & 1 != 0 {
                assert!(
                    plan.contains("rows=51 loops=1") || mask == 3,
                    "{mask}: {plan}"
                );
                assert!(!plan.contains("Sort"), "{mask}: {plan}");
            } else {
                assert!(plan.contains("loops=7"), "{mask}: {plan}");
            }
        }
        b.drop_schema().await.expect("drop");
        b.close().await;
    }));
}

/// A store where a status and a workflow are far from independent (the `stored list`
/// bench's shape): the rare workflow's 60 admitted executions are the oldest, below 40,000
/// admitted ones of another workflow, and the rare workflow's completed history is as large.
/// The planner, taking the two filters as independent, costed a walk of the status index
/// that tests the workflow on every row below the cursor a little under the walk of the
/// workflow's index (at 10^6: 46 against 49, and 15.7 ms against 0.2 ms per page); since
/// schema v20 only the status-alone page can walk the status index.
#[test]
fn a_status_with_a_workflow_walks_the_workflow_index_whatever_the_statistics() {
    let schema = common::fresh_schema();
    runtime().block_on(common::cleaning_up(schema.clone(), async move {
        let b = connect(&schema).await;
        let mut conn = admin().await;
        let s = format!("\"{schema}\"");
        sqlx::raw_sql(AssertSqlSafe(format!(
            "INSERT INTO {s}.executions (id, workflow, status, token, due_at, claimable_at) \
             SELECT 'r' || g, 'rare', 'admitted', 0, 0, 0 FROM generate_series(1, 60) g; \
             INSERT INTO {s}.executions (id, workflow, status, token, due_at, \
                 last_delivery_ended_at, outcome) \
             SELECT 'h' || g, 'rare', 'completed', 0, 0, g, 'null' \
             FROM generate_series(1, 40000) g; \
             INSERT INTO {s}.executions (id, workflow, status, token, due_at, claimable_at) \
             SELECT 'b' || g, 'bulk', 'admitted', 0, 0, 0 FROM generate_series(1, 40000) g; \
             ANALYZE {s}.executions"
        )))
        .execute(&mut conn)
        .await
        .expect("fill");
        let pages = lease_postgres::raw::statements(&schema).list_executions;
        let plan = page_plan(
            &mut conn,
            &pages[3],
            "'admitted', 'rare', NULL, NULL, 51, NULL",
        )
        .await;
        assert!(
            plan.contains("Scan Backward using executions_browse_workflow "),
            "{plan}"
        );
        assert!(!plan.contains("Rows Removed"), "{plan}");
        assert!(plan.contains("rows=51 loops=1"), "{plan}");
        b.drop_schema().await.expect("drop");
        b.close().await;
    }));
}
