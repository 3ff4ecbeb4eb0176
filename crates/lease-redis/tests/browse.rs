//! Browsing on Redis (`list_executions`), beyond the conformance rows: filters by status,
//! workflow, key and their combinations read newest admitted first in pages that follow a
//! cursor; a status change moves a record between the status's sets in the same script; a
//! cursor this backend did not write is `InvalidInput`; a stale entry (put in by hand) never
//! lists a record the filter does not match; purging leaves no browse entry behind.

mod common;

use std::time::Duration;

use lease_core::{
    Admission, Clock, ConcurrencyKey, ExecutionClient, ExecutionFilter, ExecutionId,
    ExecutionStatus, Json, LeaseError, ListCursor, ManualClock, RedeliveryPolicy, Timestamp,
    WorkflowName, WorkflowRunOutcome,
};
use lease_redis::RedisBackend;

const LEASE: Duration = Duration::from_secs(30);
const START_MS: i64 = 1_700_000_000_000;

fn id(name: &str) -> ExecutionId {
    ExecutionId::new(name).expect("id")
}

fn admission(name: &str, workflow: &str, key: Option<&str>) -> Admission {
    let a = Admission::new(id(name)).workflow(WorkflowName::new(workflow).expect("workflow"));
    match key {
        Some(k) => a.concurrency_key(ConcurrencyKey::new(k).expect("key")),
        None => a,
    }
}

/// Every page of `filter`, `limit` at a time: the ids in order.
async fn all_pages(b: &RedisBackend, filter: &ExecutionFilter, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut after: Option<ListCursor> = None;
    loop {
        let page = b
            .list_executions(filter, after.as_ref(), limit)
            .await
            .expect("list");
        assert!(page.records.len() <= limit);
        out.extend(page.records.iter().map(|r| r.id.as_str().to_owned()));
        match page.next {
            Some(next) => after = Some(next),
            None => return out,
        }
    }
}

fn filter(
    status: Option<ExecutionStatus>,
    workflow: Option<&str>,
    key: Option<&str>,
) -> ExecutionFilter {
    ExecutionFilter {
        status,
        workflow: workflow.map(|w| WorkflowName::new(w).expect("workflow")),
        key: key.map(|k| ConcurrencyKey::new(k).expect("key")),
    }
}

#[tokio::test]
async fn filters_read_newest_first_in_pages_and_follow_status_changes() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = common::fresh_with(&clock, RedeliveryPolicy::default(), 1).await;
    let _cleanup = common::Cleanup::of(&b);
    b.admit(&admission("a", "bill", Some("acme")))
        .await
        .expect("admit");
    b.admit(&admission("b", "ship", None)).await.expect("admit");
    b.admit(&admission("c", "bill", None)).await.expect("admit");
    b.admit(&admission("d", "bill", Some("acme")))
        .await
        .expect("admit");
    b.admit(&Admission::new(id("e"))).await.expect("admit");
    for limit in [1, 2, 10] {
        assert_eq!(
            all_pages(&b, &ExecutionFilter::default(), limit).await,
            ["e", "d", "c", "b", "a"]
        );
    }
    assert_eq!(
        all_pages(&b, &filter(None, Some("bill"), None), 1).await,
        ["d", "c", "a"]
    );
    assert_eq!(
        all_pages(&b, &filter(None, None, Some("acme")), 1).await,
        ["d", "a"]
    );
    // a is claimed and completed: it moves from admitted to completed.
    let leases = common::claim(&b, &clock, 1, LEASE).await;
    assert_eq!(leases[0].execution_id.as_str(), "a");
    let running = Some(ExecutionStatus::Running);
    assert_eq!(all_pages(&b, &filter(running, None, None), 2).await, ["a"]);
    let done = WorkflowRunOutcome::Completed(Json::parse("t", "1").expect("json"));
    assert!(
        !b.acknowledge(&leases[0], &done)
            .await
            .expect("ack")
            .is_lost()
    );
    let completed = Some(ExecutionStatus::Completed);
    let admitted = Some(ExecutionStatus::Admitted);
    assert!(
        all_pages(&b, &filter(running, None, None), 2)
            .await
            .is_empty()
    );
    assert_eq!(
        all_pages(&b, &filter(completed, Some("bill"), Some("acme")), 2).await,
        ["a"]
    );
    assert_eq!(
        all_pages(&b, &filter(admitted, Some("bill"), None), 1).await,
        ["d", "c"]
    );
    assert_eq!(
        all_pages(&b, &filter(admitted, None, Some("acme")), 1).await,
        ["d"]
    );
    let page = b
        .list_executions(&filter(completed, None, None), None, 10)
        .await
        .expect("list");
    assert_eq!(page.records[0].status, ExecutionStatus::Completed);
    assert_eq!(
        page.records[0],
        b.get(&id("a")).await.expect("get").expect("a")
    );

    // A stale entry put in by hand is skipped: c is admitted, not failed.
    let failed_set = format!("{}ls:failed", b.key_prefix());
    let mut admin = common::admin().await;
    let _: i64 = redis::cmd("ZADD")
        .arg(&failed_set)
        .arg(3)
        .arg("c")
        .query_async(&mut admin)
        .await
        .expect("zadd");
    let failed = Some(ExecutionStatus::Failed);
    assert!(
        all_pages(&b, &filter(failed, None, None), 1)
            .await
            .is_empty()
    );

    // Purged: no browse entry names a.
    clock.advance(Duration::from_secs(1));
    let purged = b.purge_terminal(clock.now(), 10).await.expect("purge");
    assert_eq!(purged.ids.len(), 1);
    let snap = common::snapshot(&b).await;
    assert!(!snap.keys().any(|k| k.contains("ls:completed")), "{snap:?}");
    assert_eq!(
        all_pages(&b, &ExecutionFilter::default(), 3).await,
        ["e", "d", "c", "b"]
    );
}

#[tokio::test]
async fn a_cursor_this_store_did_not_write_is_invalid_input() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = common::fresh_with(&clock, RedeliveryPolicy::default(), 1).await;
    let _cleanup = common::Cleanup::of(&b);
    for bad in ["12:abc", "s", "s01", "x"] {
        let cursor = ListCursor::new(bad).expect("text");
        let r = b
            .list_executions(&ExecutionFilter::default(), Some(&cursor), 10)
            .await;
        assert!(
            matches!(r, Err(LeaseError::InvalidInput { .. })),
            "{bad}: {r:?}"
        );
    }
    let r = b
        .list_executions(&ExecutionFilter::default(), None, 0)
        .await;
    assert!(matches!(r, Err(LeaseError::InvalidInput { .. })), "{r:?}");
}

/// A split namespace's partitions share the namespace's admission order (each admission's
/// sequence reserved at home): pages merge them newest first, batches in item order.
#[tokio::test]
async fn a_split_namespace_lists_in_one_admission_order() {
    let clock = ManualClock::new(Timestamp::from_millis(START_MS));
    let b = common::fresh_with(&clock, RedeliveryPolicy::default(), 3).await;
    let _cleanup = common::Cleanup::of(&b);
    let names: Vec<String> = (0..12).map(|i| format!("e{i:02}")).collect();
    for name in &names[..4] {
        b.admit(&Admission::new(id(name))).await.expect("admit");
    }
    let batch: Vec<Admission> = names[4..10].iter().map(|n| Admission::new(id(n))).collect();
    b.admit_batch(&batch).await.expect("batch");
    for name in &names[10..] {
        b.admit(&Admission::new(id(name))).await.expect("admit");
    }
    let newest_first: Vec<String> = names.iter().rev().cloned().collect();
    for limit in [1, 5, 12, 100] {
        assert_eq!(
            all_pages(&b, &ExecutionFilter::default(), limit).await,
            newest_first
        );
    }
    let leases = common::claim(&b, &clock, 3, LEASE).await;
    assert_eq!(leases.len(), 3);
    let running = filter(Some(ExecutionStatus::Running), None, None);
    assert_eq!(all_pages(&b, &running, 2).await, ["e02", "e01", "e00"]);
}

/// Admissions made by an application's admitting script are listed in admission order
/// with the others, on one partition and on a split namespace.
#[tokio::test]
async fn admissions_of_an_admitting_script_are_listed_in_order() {
    for partitions in [1, 3] {
        let clock = ManualClock::new(Timestamp::from_millis(START_MS));
        let b = common::fresh_with(&clock, RedeliveryPolicy::default(), partitions).await;
        let _cleanup = common::Cleanup::of(&b);
        b.admit(&Admission::new(id("first"))).await.expect("admit");
        let script = lease_redis::AdmitScript::new("return 1");
        let made = b
            .admit_script(&script, &[], &[], &[Admission::new(id("scripted"))])
            .await
            .expect("admit script");
        assert_eq!(made.records.len(), 1);
        b.admit(&Admission::new(id("last"))).await.expect("admit");
        assert_eq!(
            all_pages(&b, &ExecutionFilter::default(), 1).await,
            ["last", "scripted", "first"],
            "{partitions} partition(s)"
        );
    }
}
