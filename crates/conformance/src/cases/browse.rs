//! Browsing ([`lease_core::browse`]): executions by stored status, workflow name and
//! concurrency key, newest admitted first, a page at a time behind an opaque cursor that
//! neither repeats nor skips an execution, each record as `get` returns it. A harness
//! without it ([`lease_core::Capabilities::browse`] `false`) checks only that a bad limit is `InvalidInput`
//! and the rest `Unsupported`.

use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, ConcurrencyKey, ExecutionClient, ExecutionFilter, ExecutionPage, ExecutionStatus,
    LeaseError, ListCursor, WorkflowName, WorkflowRunOutcome,
};

use crate::context::{Ctx, json};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __browse_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, browse, [
            browse_empty_store_lists_nothing,
            browse_filters_by_status_workflow_and_key,
            browse_pages_neither_repeat_nor_skip,
            browse_bad_limit_and_foreign_cursor_refused,
            browse_records_are_what_get_returns,
        ] }
    };
}

/// Returns `true` when the harness cannot browse, after checking a bad limit is
/// `InvalidInput` and a good one `Unsupported`: the case then ends.
async fn unsupported<H: Harness>(ctx: &Ctx<H>) -> bool {
    if ctx.caps().browse {
        return false;
    }
    let b = ctx.backend();
    let all = ExecutionFilter::default();
    let err = b.list_executions(&all, None, 0).await.expect_err("limit 0");
    assert!(matches!(err, LeaseError::InvalidInput { .. }), "{err}");
    let err = b
        .list_executions(&all, None, 10)
        .await
        .expect_err("no browse");
    ctx.assert_unsupported(&err);
    ctx.refusal_only()
}

fn key(name: &str) -> ConcurrencyKey {
    ConcurrencyKey::new(name).expect("key")
}

fn workflow(name: &str) -> WorkflowName {
    WorkflowName::new(name).expect("workflow")
}

/// One page on a peer, each record checked against `get` at the same clock.
async fn page<H: Harness>(
    ctx: &Ctx<H>,
    filter: &ExecutionFilter,
    after: Option<&ListCursor>,
    limit: usize,
) -> ExecutionPage {
    let peer = ctx.probe_peer().await;
    let page = peer
        .list_executions(filter, after, limit)
        .await
        .expect("list");
    assert!(page.records.len() <= limit, "at most the limit");
    for record in &page.records {
        assert_eq!(
            record,
            &ctx.get(record.id.as_str()).await,
            "as get returns it"
        );
    }
    page
}

/// The ids of one page (of at most 1000) of what `filter` matches, asserted to be all of it.
async fn listed<H: Harness>(ctx: &Ctx<H>, filter: &ExecutionFilter) -> Vec<String> {
    let page = page(ctx, filter, None, 1000).await;
    assert_eq!(page.next, None, "one page holds everything");
    page.records
        .iter()
        .map(|r| r.id.as_str().to_owned())
        .collect()
}

/// Every page of `filter` at `limit` per page: the ids, newest first.
async fn every_page<H: Harness>(
    ctx: &Ctx<H>,
    filter: &ExecutionFilter,
    limit: usize,
) -> Vec<String> {
    let mut ids = Vec::new();
    let mut after = None;
    loop {
        let page = page(ctx, filter, after.as_ref(), limit).await;
        assert!(
            after.is_none() || !page.records.is_empty(),
            "a page with a next page does not hold the oldest match"
        );
        ids.extend(page.records.iter().map(|r| r.id.as_str().to_owned()));
        match page.next {
            Some(next) => {
                assert_eq!(page.records.len(), limit, "only a last page is short");
                after = Some(next);
            }
            None => return ids,
        }
    }
}

/// A fresh store lists nothing, whatever the filter, and says there is no next page.
pub async fn browse_empty_store_lists_nothing<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let narrow = ExecutionFilter {
        status: Some(ExecutionStatus::Admitted),
        workflow: Some(workflow("mail")),
        key: Some(key("acme")),
    };
    for filter in [ExecutionFilter::default(), narrow] {
        assert_eq!(
            page(&*ctx, &filter, None, 10).await,
            ExecutionPage::default()
        );
    }
}

/// Admits `a1` (workflow `mail`, key `acme` when the store takes keys), `a2` (`mail`),
/// `a3` (`bill`, `acme`) and `a4` (neither) in one batch, then leaves them suspended,
/// running, completed and admitted (released). Returns whether the keys were set.
async fn four_statuses<H: Harness>(ctx: &Ctx<H>) -> bool {
    let b = ctx.backend();
    let mut admissions = vec![
        Admission::new(ctx.id("a1")).workflow(workflow("mail")),
        Admission::new(ctx.id("a2")).workflow(workflow("mail")),
        Admission::new(ctx.id("a3")).workflow(workflow("bill")),
        Admission::new(ctx.id("a4")),
    ];
    let keyed = ctx.caps().concurrency_limits;
    if keyed {
        admissions[0] = admissions[0].clone().concurrency_key(key("acme"));
        admissions[2] = admissions[2].clone().concurrency_key(key("acme"));
    }
    b.admit_batch(&admissions).await.expect("admit");
    let leases = ctx.claim(&b, 10).await;
    assert_eq!(leases.len(), 4);
    let lease = |id: &str| {
        leases
            .iter()
            .find(|l| l.execution_id.as_str() == id)
            .expect("claimed")
    };
    let suspended = b.acknowledge(lease("a1"), &WorkflowRunOutcome::Suspended);
    assert!(!suspended.await.expect("ack").is_lost());
    let done = WorkflowRunOutcome::Completed(json("1"));
    assert!(
        !b.acknowledge(lease("a3"), &done)
            .await
            .expect("ack")
            .is_lost()
    );
    assert!(!b.release(lease("a4")).await.expect("release").is_lost());
    keyed
}

/// Four executions in four statuses: each filter field narrows, fields combine, and
/// matches come newest admitted first.
pub async fn browse_filters_by_status_workflow_and_key<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let keyed = four_statuses(&*ctx).await;
    let by_status = |status| ExecutionFilter {
        status: Some(status),
        ..ExecutionFilter::default()
    };
    let all = ExecutionFilter::default();
    assert_eq!(listed(&*ctx, &all).await, ["a4", "a3", "a2", "a1"]);
    assert_eq!(
        listed(&*ctx, &by_status(ExecutionStatus::Running)).await,
        ["a2"]
    );
    assert_eq!(
        listed(&*ctx, &by_status(ExecutionStatus::Suspended)).await,
        ["a1"]
    );
    assert_eq!(
        listed(&*ctx, &by_status(ExecutionStatus::Completed)).await,
        ["a3"]
    );
    assert_eq!(
        listed(&*ctx, &by_status(ExecutionStatus::Admitted)).await,
        ["a4"]
    );
    assert!(
        listed(&*ctx, &by_status(ExecutionStatus::Failed))
            .await
            .is_empty()
    );
    let mail = ExecutionFilter {
        workflow: Some(workflow("mail")),
        ..ExecutionFilter::default()
    };
    assert_eq!(listed(&*ctx, &mail).await, ["a2", "a1"]);
    let mail_running = ExecutionFilter {
        status: Some(ExecutionStatus::Running),
        ..mail.clone()
    };
    assert_eq!(listed(&*ctx, &mail_running).await, ["a2"]);
    if keyed {
        let acme = ExecutionFilter {
            key: Some(key("acme")),
            ..ExecutionFilter::default()
        };
        assert_eq!(listed(&*ctx, &acme).await, ["a3", "a1"]);
        let mail_acme = ExecutionFilter {
            key: Some(key("acme")),
            ..mail.clone()
        };
        assert_eq!(listed(&*ctx, &mail_acme).await, ["a1"]);
        let running_acme = ExecutionFilter {
            status: Some(ExecutionStatus::Running),
            ..acme.clone()
        };
        assert!(listed(&*ctx, &running_acme).await.is_empty());
    }
}

/// 25 executions admitted in one batch (one instant), 10 a page: three pages, newest
/// first, each execution once; executions admitted between pages come only in a listing
/// started after them. A filtered listing pages the same way, its last page full.
pub async fn browse_pages_neither_repeat_nor_skip<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    let batch: Vec<Admission> = (0..25)
        .map(|i| {
            let admission = Admission::new(ctx.id(&format!("p-{i:02}")));
            let name = if i % 5 == 0 { "five" } else { "other" };
            admission.workflow(workflow(name))
        })
        .collect();
    b.admit_batch(&batch).await.expect("admit");
    let all = ExecutionFilter::default();
    let first = page(&*ctx, &all, None, 10).await;
    let cursor = first.next.clone().expect("more pages");
    for i in 0..3 {
        ctx.admit(&format!("late-{i}")).await;
    }
    let mut ids: Vec<String> = first.records.iter().map(|r| r.id.to_string()).collect();
    let second = page(&*ctx, &all, Some(&cursor), 10).await;
    ids.extend(second.records.iter().map(|r| r.id.to_string()));
    let third = page(&*ctx, &all, second.next.as_ref(), 10).await;
    assert_eq!(third.next, None, "the third page holds the oldest");
    ids.extend(third.records.iter().map(|r| r.id.to_string()));
    let want: Vec<String> = (0..25).rev().map(|i| format!("p-{i:02}")).collect();
    assert_eq!(ids, want, "newest first, each once");

    let mut want: Vec<String> = (0..3).rev().map(|i| format!("late-{i}")).collect();
    want.extend((0..25).rev().map(|i| format!("p-{i:02}")));
    assert_eq!(every_page(&*ctx, &all, 7).await, want);
    let five = ExecutionFilter {
        workflow: Some(workflow("five")),
        ..ExecutionFilter::default()
    };
    let want: Vec<String> = [20, 15, 10, 5, 0]
        .iter()
        .map(|i| format!("p-{i:02}"))
        .collect();
    assert_eq!(every_page(&*ctx, &five, 1).await, want);
    assert_eq!(every_page(&*ctx, &five, 5).await, want, "a full last page");
}

/// A limit of 0 or over 1000 and a cursor this store did not write are `InvalidInput`.
pub async fn browse_bad_limit_and_foreign_cursor_refused<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("one").await;
    let b = ctx.backend();
    let all = ExecutionFilter::default();
    for limit in [0, 1001] {
        let err = b
            .list_executions(&all, None, limit)
            .await
            .expect_err("limit");
        assert!(matches!(err, LeaseError::InvalidInput { .. }), "{err}");
    }
    for text in ["zzz", "~", "999999999999999999999999999999"] {
        let foreign = ListCursor::new(text).expect("cursor text");
        let err = b
            .list_executions(&all, Some(&foreign), 10)
            .await
            .expect_err("a cursor this store did not write");
        assert!(
            matches!(err, LeaseError::InvalidInput { .. }),
            "{text}: {err}"
        );
    }
    assert_eq!(page(&*ctx, &all, None, 1000).await.records.len(), 1);
}

/// A listed record is the effective record `get` returns: a lease that expired reads as
/// ended without acknowledgement in both.
pub async fn browse_records_are_what_get_returns<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("held").await;
    ctx.admit("expired").await;
    let b = ctx.backend();
    let expired = ctx
        .try_claim(&b, ctx.now(), 1, Duration::from_millis(50))
        .await
        .expect("claim");
    assert_eq!(crate::cases::rates::ids_of(&expired), ["expired"]);
    ctx.claim_only(&b, "held").await;
    ctx.advance(Duration::from_millis(50));
    let listed = page(&*ctx, &ExecutionFilter::default(), None, 10).await;
    let ids: Vec<&str> = listed.records.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["expired", "held"]);
    assert_eq!(listed.records[0].unacknowledged_deliveries, 1);
    assert_eq!(listed.records[1].status, ExecutionStatus::Running);
}
