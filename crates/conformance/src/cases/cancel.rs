//! Cancel: one atomic step ends the execution for good and its live lease with it; from
//! that commit on every fenced write of the holder is `Lost`, nothing claims it and nothing
//! a stale holder does undoes it. A harness without cancel ([`lease_core::Capabilities::cancel`] `false`)
//! checks only that it says so and changes nothing.

use std::sync::Arc;

use lease_core::{
    CancelOutcome, CancelReason, ExecutionClient, ExecutionOutcome, ExecutionStatus, Fenced,
    LeaseError, Timestamp, WorkflowRunOutcome, control::MAX_REASON_BYTES,
};

use crate::context::{Ctx, LEASE, json, plus};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __cancel_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, cancel, [
            cancel_ends_the_live_lease_and_refuses_its_holder,
            cancel_waiting_execution_is_never_claimed, cancel_twice_keeps_the_first_reason,
            cancel_terminal_execution_changes_nothing,
            cancel_after_expiry_counts_the_ended_delivery, cancel_bad_input_rejected,
            cancelled_counts_and_purges_as_terminal,
        ] }
    };
}

fn reason(text: &str) -> CancelReason {
    CancelReason::new(text).expect("reason")
}

/// Returns `true` (after checking the refusal changed nothing) when the harness has no
/// cancel: the case then ends.
async fn unsupported<H: Harness>(ctx: &Ctx<H>) -> bool {
    if ctx.caps().cancel {
        return false;
    }
    let before = ctx.admit("plain").await;
    let err = ctx
        .backend()
        .cancel(&ctx.id("plain"), &reason("no"))
        .await
        .expect_err("no cancel");
    ctx.assert_unsupported(&err);
    assert_eq!(
        ctx.get("plain").await,
        before,
        "a refused cancel changes nothing"
    );
    ctx.refusal_only()
}

/// Cancelling a running execution ends its lease in the same step: renew, step writes,
/// release and acknowledge of the holder are `Lost`, the record says cancelled and why,
/// and no claim takes it again.
pub async fn cancel_ends_the_live_lease_and_refuses_its_holder<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    ctx.admit("job").await;
    let lease = ctx.claim_one("job").await;
    assert!(!ctx.write(&b, &lease, "before", "1").await.is_lost());
    let peer = ctx.peer().await;
    let got = peer
        .cancel(&ctx.id("job"), &reason("operator: duplicate order"))
        .await
        .expect("cancel");
    assert_eq!(got, CancelOutcome::Cancelled { ended_lease: true });
    let steps = ctx.steps("job").await;

    assert!(b.renew(&lease, LEASE).await.expect("renew").is_lost());
    assert!(ctx.write(&b, &lease, "after", "2").await.is_lost());
    assert!(b.release(&lease).await.expect("release").is_lost());
    let ack = b
        .acknowledge(&lease, &WorkflowRunOutcome::Completed(json("1")))
        .await
        .expect("acknowledge");
    assert!(ack.is_lost(), "a cancelled delivery cannot complete");

    let record = ctx.get("job").await;
    assert_eq!(record.status, ExecutionStatus::Cancelled);
    assert_eq!(
        record.outcome,
        Some(ExecutionOutcome::Cancelled(reason(
            "operator: duplicate order"
        )))
    );
    assert_eq!(record.lease_expires_at, None);
    assert_eq!(record.due_at, None);
    assert_eq!(record.token, lease.token, "cancel issues no token");
    assert_eq!(ctx.steps("job").await, steps, "no write after the cancel");
    ctx.assert_nothing_claimable("a cancelled execution").await;
}

/// A waiting (admitted or suspended) execution cancelled is never claimed, and a wake
/// requested afterwards does not make it due.
pub async fn cancel_waiting_execution_is_never_claimed<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    ctx.suspended_delivery("parked").await;
    ctx.admit("fresh").await;
    for id in ["fresh", "parked"] {
        let got = b
            .cancel(&ctx.id(id), &reason("not needed"))
            .await
            .expect("cancel");
        assert_eq!(got, CancelOutcome::Cancelled { ended_lease: false }, "{id}");
        b.request_wake(&ctx.id(id), ctx.now()).await.expect("wake");
        let record = ctx.get(id).await;
        assert_eq!(record.status, ExecutionStatus::Cancelled, "{id}");
        assert_eq!(record.due_at, None, "{id}: a wake cannot revive it");
    }
    ctx.assert_nothing_claimable("cancelled executions").await;
}

/// Cancel is idempotent: a second cancel (any reason, any connection) changes nothing and
/// reports the first reason.
pub async fn cancel_twice_keeps_the_first_reason<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("job").await;
    let first = reason("first");
    let got = ctx
        .backend()
        .cancel(&ctx.id("job"), &first)
        .await
        .expect("cancel");
    assert_eq!(got, CancelOutcome::Cancelled { ended_lease: false });
    let after_first = ctx.get("job").await;
    let again = ctx
        .peer()
        .await
        .cancel(&ctx.id("job"), &reason("second"))
        .await
        .expect("cancel again");
    assert_eq!(again, CancelOutcome::AlreadyCancelled(first));
    assert_eq!(
        ctx.get("job").await,
        after_first,
        "a repeat changes nothing"
    );
}

/// A completed or failed execution is left as it is, and the answer names its outcome.
pub async fn cancel_terminal_execution_changes_nothing<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    for (id, outcome) in [
        ("done", WorkflowRunOutcome::Completed(json("7"))),
        ("broken", WorkflowRunOutcome::Failed(json("\"boom\""))),
    ] {
        ctx.admit(id).await;
        let lease = ctx.claim_one(id).await;
        assert!(
            !b.acknowledge(&lease, &outcome)
                .await
                .expect("ack")
                .is_lost()
        );
        let before = ctx.get(id).await;
        let got = b
            .cancel(&ctx.id(id), &reason("late"))
            .await
            .expect("cancel");
        let stored = before.outcome.clone().expect("terminal outcome");
        assert_eq!(got, CancelOutcome::AlreadyTerminal(stored), "{id}");
        assert_eq!(ctx.get(id).await, before, "{id}: unchanged");
    }
}

/// A delivery whose lease expired before the cancel counts as ended unacknowledged (as
/// `get` read it), and the cancel reports no live lease ended; its holder is `Lost` too.
pub async fn cancel_after_expiry_counts_the_ended_delivery<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    ctx.admit("job").await;
    let lease = ctx.claim_one("job").await;
    ctx.set_clock(plus(lease.expires_at, std::time::Duration::from_millis(1)));
    let got = b
        .cancel(&ctx.id("job"), &reason("stuck"))
        .await
        .expect("cancel");
    assert_eq!(got, CancelOutcome::Cancelled { ended_lease: false });
    let record = ctx.get("job").await;
    assert_eq!(record.status, ExecutionStatus::Cancelled);
    assert_eq!(record.unacknowledged_deliveries, 1);
    assert!(ctx.write(&b, &lease, "late", "1").await.is_lost());
    assert_eq!(b.renew(&lease, LEASE).await.expect("renew"), Fenced::Lost);
}

/// An unknown id is `UnknownExecution`; an empty, over-long or control-character reason is
/// `InvalidInput` before anything reaches the backend.
pub async fn cancel_bad_input_rejected<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let err = ctx
        .backend()
        .cancel(&ctx.id("nobody"), &reason("x"))
        .await
        .expect_err("unknown id");
    assert!(matches!(err, LeaseError::UnknownExecution(_)), "{err}");
    assert!(
        ctx.try_get("nobody").await.is_none(),
        "cancel creates nothing"
    );
    for bad in [
        String::new(),
        "x".repeat(MAX_REASON_BYTES + 1),
        "bell\u{7}".to_owned(),
    ] {
        let err = CancelReason::new(bad).expect_err("bad reason");
        assert!(matches!(err, LeaseError::InvalidInput { .. }), "{err}");
    }
    assert!(CancelReason::new("x".repeat(MAX_REASON_BYTES)).is_ok());
}

/// A cancelled execution counts as cancelled and retention removes it like any terminal
/// one (when the harness has those capabilities).
pub async fn cancelled_counts_and_purges_as_terminal<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    ctx.admit("job").await;
    b.cancel(&ctx.id("job"), &reason("gone"))
        .await
        .expect("cancel");
    if ctx.caps().status_counts {
        let counts = b.status_counts().await.expect("counts");
        assert_eq!((counts.cancelled, counts.admitted), (1, 0), "{counts:?}");
    }
    if ctx.caps().retention {
        ctx.advance(std::time::Duration::from_secs(1));
        let purged = b.purge_terminal(Timestamp::MAX, 10).await.expect("purge");
        assert_eq!(purged.ids, vec![ctx.id("job")]);
        assert!(ctx.try_get("job").await.is_none());
    }
}
