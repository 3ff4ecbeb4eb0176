//! `acknowledge_and_claim`, an acknowledgement and the next claim in one atomic step (at
//! low concurrency a delivery then costs one round trip and one commit, not two). The
//! acknowledgement keeps `acknowledge`'s fencing exactly; the claim is evaluated after it,
//! as `claim_due_with_horizon` would be.

use std::sync::Arc;

use lease_core::{
    Acknowledged, Acknowledgement, ClaimRequest, ExecutionClient, ExecutionLease, ExecutionOutcome,
    ExecutionStatus, Fenced, FencingToken, LeaseError, Timestamp, WorkflowRunOutcome,
};

use crate::context::{Ctx, LEASE, json};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __combined_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, combined, [
            ack_and_claim_acknowledges_then_claims_next,
            ack_and_claim_stale_ack_is_lost_and_still_claims,
            ack_and_claim_sees_its_own_acknowledgement, ack_and_claim_bad_input_changes_nothing,
        ] }
    };
}

fn completed(lease: &ExecutionLease) -> Acknowledgement {
    Acknowledgement {
        lease: lease.clone(),
        outcome: WorkflowRunOutcome::Completed(json(r#"{"ok":true}"#)),
    }
}

fn next(limit: usize) -> ClaimRequest {
    ClaimRequest {
        now: Timestamp::MAX,
        limit,
        duration: LEASE,
    }
}

/// The acknowledgement applies as `acknowledge` would, and the next due execution is
/// claimed in the same call with a higher token.
pub async fn ack_and_claim_acknowledges_then_claims_next<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    ctx.admit("a").await;
    let lease = ctx.claim_one("a").await;
    ctx.admit("b").await;
    ctx.admit("c").await;
    let r = b
        .acknowledge_and_claim(&completed(&lease), next(1))
        .await
        .expect("acknowledge_and_claim");
    assert_eq!(
        r.acknowledged,
        Fenced::Accepted(Acknowledged::Terminal(ExecutionOutcome::Completed(json(
            r#"{"ok":true}"#
        ))))
    );
    assert_eq!(r.next.claimed.len(), 1, "limit 1");
    let claimed = &r.next.claimed[0];
    assert_eq!(claimed.lease.execution_id.as_str(), "b", "(due, id) order");
    assert!(claimed.lease.token > lease.token);
    assert_eq!(
        ctx.get("b").await,
        claimed.record,
        "the record as the claim left it"
    );
    assert_eq!(ctx.get("a").await.status, ExecutionStatus::Completed);
    assert_eq!(ctx.get("c").await.status, ExecutionStatus::Admitted);
}

/// A stale acknowledgement is `Lost` and changes nothing; the claim is still made.
pub async fn ack_and_claim_stale_ack_is_lost_and_still_claims<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    ctx.admit("a").await;
    let stale = ctx.claim_one("a").await;
    let (_peer, current) = ctx.reclaim(&stale).await;
    let before = ctx.snapshot("a").await;
    ctx.admit("b").await;
    let r = b
        .acknowledge_and_claim(&completed(&stale), next(5))
        .await
        .expect("acknowledge_and_claim");
    assert!(r.acknowledged.is_lost());
    assert_eq!(
        ctx.snapshot("a").await,
        before,
        "the stale ack changed nothing"
    );
    let ids: Vec<&str> = r
        .next
        .claimed
        .iter()
        .map(|c| c.lease.execution_id.as_str())
        .collect();
    assert_eq!(ids, ["b"]);
    assert!(r.next.claimed[0].lease.token > current.token);
}

/// An acknowledgement that leaves its execution due (suspended, with a wake already due)
/// lets the claim of the same step take it again: the claim is evaluated after it.
pub async fn ack_and_claim_sees_its_own_acknowledgement<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    ctx.admit("a").await;
    let lease = ctx.claim_one("a").await;
    b.request_wake(&ctx.id("a"), ctx.now())
        .await
        .expect("request_wake");
    let ack = Acknowledgement {
        lease: lease.clone(),
        outcome: WorkflowRunOutcome::Suspended,
    };
    let r = b
        .acknowledge_and_claim(&ack, next(1))
        .await
        .expect("acknowledge_and_claim");
    assert_eq!(r.acknowledged, Fenced::Accepted(Acknowledged::Suspended));
    assert_eq!(r.next.claimed.len(), 1);
    assert_eq!(r.next.claimed[0].lease.execution_id.as_str(), "a");
    assert!(r.next.claimed[0].lease.token > lease.token);
    assert_eq!(ctx.get("a").await.unacknowledged_deliveries, 0);
}

/// Bad input in either part (a foreign or zero token, an unknown execution, a claim limit
/// or duration out of range) is a typed error and changes nothing: no acknowledgement, no
/// claim.
pub async fn ack_and_claim_bad_input_changes_nothing<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    ctx.admit("a").await;
    let lease = ctx.claim_one("a").await;
    ctx.admit("b").await;
    let before = (ctx.snapshot("a").await, ctx.snapshot("b").await);
    let forged = |token: u64| ExecutionLease {
        token: FencingToken::new(token),
        ..lease.clone()
    };
    let mut unknown = lease.clone();
    unknown.execution_id = ctx.id("nobody");
    let cases = [
        (
            "foreign token",
            completed(&forged(lease.token.get() + 1000)),
            next(1),
        ),
        ("token 0", completed(&forged(0)), next(1)),
        ("unknown execution", completed(&unknown), next(1)),
        ("limit 0", completed(&lease), next(0)),
        (
            "duration 0",
            completed(&lease),
            ClaimRequest {
                duration: std::time::Duration::ZERO,
                ..next(1)
            },
        ),
    ];
    for (what, ack, request) in cases {
        let err = b
            .acknowledge_and_claim(&ack, request)
            .await
            .expect_err(what);
        assert!(
            err.is_bad_input() || matches!(err, LeaseError::InvalidInput { .. }),
            "{what}: {err}"
        );
        assert_eq!(
            (ctx.snapshot("a").await, ctx.snapshot("b").await),
            before,
            "{what}: changed something"
        );
    }
}
