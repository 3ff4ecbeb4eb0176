//! Retention: `purge_terminal` removes terminal executions older than a cutoff with
//! everything that names them, in one atomic step per call, and never touches a live or
//! suspended execution. A harness whose backend does not implement it
//! ([`lease_core::Capabilities::retention`] `false`) checks only that it says so and changes nothing.

use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    ExecutionClient, ExecutionLease, ExecutionStatus, Fenced, HeapClient, LeaseError, RequestId,
    StartClient, StartRequest, StoreClient, StoreId, StoreKey, StoreOp, StoreReceipt, Timestamp,
    WorkflowName, WorkflowRunOutcome, limits::MAX_CLAIM_LIMIT,
};

use crate::context::{Ctx, json, key, plus};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __retention_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, retention, [
            purge_removes_old_terminal_executions_and_what_names_them, purge_respects_its_limit,
            purged_id_is_unknown_then_new, purge_limit_out_of_range_rejected,
        ] }
    };
}

/// Claims `id` and acknowledges it with `outcome`; returns the lease.
async fn finish<H: Harness>(ctx: &Ctx<H>, id: &str, outcome: WorkflowRunOutcome) -> ExecutionLease {
    let lease = ctx.claim_one(id).await;
    let acked = ctx
        .backend()
        .acknowledge(&lease, &outcome)
        .await
        .expect("acknowledge");
    assert!(!acked.is_lost());
    lease
}

fn done() -> WorkflowRunOutcome {
    WorkflowRunOutcome::Completed(json("1"))
}

/// Returns `true` (and checks the refusal changed nothing) when the harness has no
/// retention: the case then ends.
async fn unsupported<H: Harness>(ctx: &Ctx<H>) -> bool {
    if ctx.caps().retention {
        return false;
    }
    let err = ctx
        .backend()
        .purge_terminal(Timestamp::MAX, 10)
        .await
        .expect_err("no retention");
    ctx.assert_unsupported(&err);
    ctx.refusal_only()
}

/// Old terminal executions go, with their step records, store receipts and start records;
/// terminal ones after the cutoff, suspended, running and admitted ones stay unchanged.
pub async fn purge_removes_old_terminal_executions_and_what_names_them<H: Harness>(
    ctx: Arc<Ctx<H>>,
) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    let store = StoreId::new("shop").expect("store");
    b.get_or_create(&store, &[]).await.expect("store");
    let request = StartRequest::new(
        RequestId::new("req-1").expect("request"),
        WorkflowName::new("wf").expect("workflow"),
        json("{}"),
    );
    let started = b.start(&request).await.expect("start");
    let old = started.target.as_str().to_owned();
    let lease = ctx.claim_one(&old).await;
    assert!(
        !ctx.write(&b, &lease, "charge", r#"{"r":1}"#)
            .await
            .is_lost()
    );
    let receipt = StoreReceipt {
        store: store.clone(),
        execution_id: ctx.id(&old),
        step_key: key("reserve"),
    };
    let put = StoreOp::Put {
        key: StoreKey::new("stock").expect("key"),
        value: json("9"),
    };
    assert!(!b.update(&receipt, &put).await.expect("update").replayed);
    assert!(!b.acknowledge(&lease, &done()).await.expect("ack").is_lost());
    ctx.admit("failed").await;
    finish(&*ctx, "failed", WorkflowRunOutcome::Failed(json("2"))).await;
    ctx.admit("suspended").await;
    finish(&*ctx, "suspended", WorkflowRunOutcome::Suspended).await;
    let cutoff = plus(ctx.now(), Duration::from_millis(1));
    ctx.set_clock(plus(cutoff, Duration::from_millis(10)));
    ctx.admit("recent").await;
    finish(&*ctx, "recent", done()).await;
    ctx.admit("running").await;
    ctx.claim_one("running").await;
    ctx.admit("admitted").await;
    let kept = ["recent", "running", "admitted", "suspended"];
    let mut before = Vec::new();
    for id in kept {
        before.push(ctx.snapshot(id).await);
    }

    let purged = b.purge_terminal(cutoff, 10).await.expect("purge");
    let mut want = vec![ctx.id("failed"), ctx.id(&old)];
    want.sort();
    assert_eq!(purged.ids, want);
    for id in [old.as_str(), "failed"] {
        assert!(ctx.try_get(id).await.is_none(), "{id} still readable");
        assert!(ctx.steps(id).await.is_empty(), "{id}'s steps remain");
    }
    for (id, snapshot) in kept.iter().zip(before) {
        assert_eq!(ctx.snapshot(id).await, snapshot, "{id} changed");
    }
    // The receipt and the start record are gone with the execution.
    assert!(!b.update(&receipt, &put).await.expect("update").replayed);
    let again = b.start(&request).await.expect("start again");
    assert!(again.created, "the start request id was forgotten");
    assert!(
        b.purge_terminal(cutoff, 10)
            .await
            .expect("purge")
            .ids
            .is_empty()
    );
}

/// At most `limit` per call, in id order; repeated calls purge the rest.
pub async fn purge_respects_its_limit<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    for i in 0..5 {
        let id = format!("e-{i}");
        ctx.admit(&id).await;
        finish(&*ctx, &id, done()).await;
    }
    let cutoff = plus(ctx.now(), Duration::from_millis(1));
    let b = ctx.backend();
    let first = b.purge_terminal(cutoff, 2).await.expect("purge");
    assert_eq!(first.ids, [ctx.id("e-0"), ctx.id("e-1")]);
    let rest = b.purge_terminal(cutoff, 10).await.expect("purge");
    assert_eq!(rest.ids, [ctx.id("e-2"), ctx.id("e-3"), ctx.id("e-4")]);
}

/// A purged id is unknown to a stale holder (typed error, nothing re-created); admitted
/// again it is a new execution whose claim outranks every old token.
pub async fn purged_id_is_unknown_then_new<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    ctx.admit("order-42").await;
    let stale = finish(&*ctx, "order-42", done()).await;
    let cutoff = plus(ctx.now(), Duration::from_millis(1));
    b.purge_terminal(cutoff, 10).await.expect("purge");
    let err = b
        .write_step(&stale, &crate::context::step("charge", "1"))
        .await
        .expect_err("unknown");
    assert!(matches!(err, LeaseError::UnknownExecution(_)), "{err}");
    assert!(
        ctx.try_get("order-42").await.is_none(),
        "a write re-created it"
    );
    let fresh = ctx.admit("order-42").await;
    assert_eq!(fresh.status, ExecutionStatus::Admitted);
    let lease = ctx.claim_one("order-42").await;
    assert!(lease.token > stale.token);
    assert_eq!(
        b.write_step(&stale, &crate::context::step("charge", "1"))
            .await
            .expect("stale write"),
        Fenced::Lost
    );
}

/// A limit outside 1..=1000 is `InvalidInput` and purges nothing.
pub async fn purge_limit_out_of_range_rejected<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("a").await;
    finish(&*ctx, "a", done()).await;
    for limit in [0, MAX_CLAIM_LIMIT + 1] {
        let err = ctx
            .backend()
            .purge_terminal(Timestamp::MAX, limit)
            .await
            .expect_err("bad limit");
        assert!(
            matches!(err, LeaseError::InvalidInput { .. }),
            "{limit}: {err}"
        );
    }
    assert!(ctx.try_get("a").await.is_some());
}
