//! The console's live leases: `list_live_leases` lists exactly the executions holding a
//! live lease at the backend clock (stored status running, lease not expired), soonest
//! expiry first, then by id, at most `limit`, each as `get` returns it. A harness without
//! it ([`lease_core::Capabilities::live_leases`] `false`) checks only that it says so; a bad limit is
//! `InvalidInput` on every harness and changes nothing.

use std::sync::Arc;
use std::time::Duration;

use lease_core::limits::MAX_CLAIM_LIMIT;
use lease_core::{
    CancelReason, ExecutionClient, ExecutionLease, ExecutionRecord, LeaseError, WorkflowRunOutcome,
};

use crate::context::{Ctx, LEASE, json};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __live_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, live, [
            live_leases_are_exactly_the_unexpired_running_ones,
            live_leases_soonest_expiry_first_then_id_within_the_limit,
            live_leases_bad_limit_rejected_and_nothing_changes,
        ] }
    };
}

/// Returns `true` (after checking the refusal) when the harness does not list live leases.
async fn unsupported<H: Harness>(ctx: &Ctx<H>) -> bool {
    if ctx.caps().live_leases {
        return false;
    }
    let err = ctx
        .backend()
        .list_live_leases(10)
        .await
        .expect_err("no live-lease list");
    ctx.assert_unsupported(&err);
    ctx.refusal_only()
}

/// Admits `id` and claims it alone with a lease of `duration` at the clock's now.
async fn claim_for<H: Harness>(ctx: &Ctx<H>, id: &str, duration: Duration) -> ExecutionLease {
    ctx.admit(id).await;
    let b = ctx.backend();
    let leases = ctx
        .try_claim(&b, ctx.now(), MAX_CLAIM_LIMIT, duration)
        .await
        .expect("claim");
    assert_eq!(leases.len(), 1, "{id} alone: {leases:?}");
    leases.into_iter().next().expect("one lease")
}

/// The ids of a list, in its order.
fn ids(records: &[ExecutionRecord]) -> Vec<&str> {
    records.iter().map(|r| r.id.as_str()).collect()
}

/// Asserts `b` lists exactly `want` (by id, in order), each record as `get` reads it.
async fn assert_lists<H: Harness>(ctx: &Ctx<H>, b: &H::Backend, want: &[&str], why: &str) {
    let got = b.list_live_leases(MAX_CLAIM_LIMIT).await.expect("list");
    assert_eq!(ids(&got), want, "{why}");
    for r in &got {
        assert_eq!(*r, ctx.get(r.id.as_str()).await, "{why}: {} as get", r.id);
    }
}

/// Executions waiting, suspended, completed, released, cancelled or whose lease expired are
/// not listed; the live ones are, as `get` reads them (token, expiry, workflow, key), on
/// every connection; an expiry at exactly now is no longer live.
pub async fn live_leases_are_exactly_the_unexpired_running_ones<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    assert_lists(&*ctx, &b, &[], "a fresh store").await;
    let expiring = claim_for(&*ctx, "expiring", LEASE).await;
    ctx.advance(Duration::from_secs(1));
    claim_for(&*ctx, "live", LEASE).await;
    // The clock stays put from here on: the released one is claimable again after its
    // redelivery delay, and nothing may claim it meanwhile.
    let done = claim_for(&*ctx, "done", LEASE).await;
    let completed = WorkflowRunOutcome::Completed(json("1"));
    let acked = b.acknowledge(&done, &completed).await.expect("ack");
    assert!(!acked.is_lost());
    let parked = claim_for(&*ctx, "parked", LEASE).await;
    let acked = b.acknowledge(&parked, &WorkflowRunOutcome::Suspended);
    assert!(!acked.await.expect("ack").is_lost(), "parked");
    if ctx.caps().cancel {
        claim_for(&*ctx, "cancelled", LEASE).await;
        let reason = CancelReason::new("by the suite").expect("reason");
        b.cancel(&ctx.id("cancelled"), &reason)
            .await
            .expect("cancel");
    }
    let released = claim_for(&*ctx, "released", LEASE).await;
    assert!(!b.release(&released).await.expect("release").is_lost());
    ctx.admit("waiting").await;
    assert_lists(&*ctx, &b, &["expiring", "live"], "both leases live").await;
    let listed = b.list_live_leases(10).await.expect("list");
    assert_eq!(
        (listed[0].token, listed[0].lease_expires_at),
        (expiring.token, Some(expiring.expires_at)),
        "the lease's token and expiry"
    );
    ctx.set_clock(expiring.expires_at);
    assert_lists(&*ctx, &b, &["live"], "an expiry at now has ended").await;
    let peer = ctx.peer().await;
    assert_lists(&*ctx, &peer, &["live"], "a peer reads the same").await;
}

/// Leases come soonest expiry first, ties (one claim, one expiry) by id; a renewal moves a
/// lease to its new place; `limit` keeps the first ones of that order.
pub async fn live_leases_soonest_expiry_first_then_id_within_the_limit<H: Harness>(
    ctx: Arc<Ctx<H>>,
) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    // Ids sort against expiry: "z" expires first, "a" last.
    let z = claim_for(&*ctx, "z-short", Duration::from_secs(10)).await;
    claim_for(&*ctx, "a-long", Duration::from_secs(60)).await;
    ctx.admit("tie-y").await;
    ctx.admit("tie-x").await;
    let tied = ctx
        .try_claim(&b, ctx.now(), MAX_CLAIM_LIMIT, Duration::from_secs(30))
        .await
        .expect("claim the tie");
    assert_eq!(tied.len(), 2, "{tied:?}");
    let all = ["z-short", "tie-x", "tie-y", "a-long"];
    assert_lists(&*ctx, &b, &all, "by expiry, then id").await;
    for limit in 1..=all.len() {
        let got = b.list_live_leases(limit).await.expect("list");
        assert_eq!(ids(&got), all[..limit], "limit {limit}");
    }
    ctx.advance(Duration::from_secs(5));
    let renewed = b.renew(&z, Duration::from_secs(50)).await.expect("renew");
    assert!(!renewed.is_lost());
    let moved = ["tie-x", "tie-y", "z-short", "a-long"];
    assert_lists(&*ctx, &b, &moved, "renewed to expire after the tie").await;
    assert_eq!(
        b.list_live_leases(2).await.expect("list").len(),
        2,
        "the limit holds after a renewal"
    );
}

/// A limit of 0 or above 1000 is `InvalidInput` on every harness (with or without the
/// list) and changes nothing; 1000 is accepted where the list is.
pub async fn live_leases_bad_limit_rejected_and_nothing_changes<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("held").await;
    ctx.claim_one("held").await;
    let before = ctx.snapshot("held").await;
    let b = ctx.backend();
    for limit in [0, MAX_CLAIM_LIMIT + 1] {
        let r = b.list_live_leases(limit).await;
        assert!(
            matches!(r, Err(LeaseError::InvalidInput { .. })),
            "limit {limit}: {r:?}"
        );
    }
    assert_eq!(
        ctx.snapshot("held").await,
        before,
        "a refused list changes nothing"
    );
    if ctx.caps().live_leases {
        let got = b
            .list_live_leases(MAX_CLAIM_LIMIT)
            .await
            .expect("limit 1000");
        assert_eq!(ids(&got), ["held"]);
    }
}
