//! Workflows' own redelivery policies ([`lease_core::RedeliveryPolicies`]): stored in the
//! namespace beside the handle's policy; a claim keeps the policy of the execution's
//! workflow on the record, and the delay after that delivery follows it (RFC 002
//! "Redelivery delay": non-zero, never decreasing while the count grows, for each policy).
//! Executions of other workflows, or of none, keep the handle's policy; a change applies
//! from each execution's next claim. A harness without them
//! ([`Harness::WORKFLOW_REDELIVERY`] `false`) checks only the typed `Unsupported` answers.

use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, ExecutionClient, LeaseError, RedeliveryPolicies, RedeliveryPolicy, Release,
    WorkflowName,
};

use crate::context::{Ctx, plus_ms};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __workflow_redelivery_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, workflow_redelivery, [
            workflow_policies_round_trip_on_a_peer,
            workflow_policy_sets_the_delay_after_its_delivery,
            other_workflows_keep_the_handles_policy,
            a_policy_change_applies_from_the_next_claim,
        ] }
    };
}

fn name(s: &str) -> WorkflowName {
    WorkflowName::new(s).expect("workflow name")
}

/// `base_ms`, doubling, capped at `cap_ms`.
fn policy(base_ms: u64, cap_ms: u64) -> RedeliveryPolicy {
    RedeliveryPolicy::new(
        Duration::from_millis(base_ms),
        2,
        Duration::from_millis(cap_ms),
    )
    .expect("policy")
}

/// Returns `true` when the harness keeps no workflow policies, after checking both
/// operations answer `Unsupported`: the case then ends.
async fn unsupported<H: Harness>(ctx: &Ctx<H>) -> bool {
    if H::WORKFLOW_REDELIVERY {
        return false;
    }
    let b = ctx.backend();
    let is_unsupported =
        |e: LeaseError| assert!(matches!(e, LeaseError::Unsupported { .. }), "{e}");
    is_unsupported(
        b.set_redelivery_policy(&name("mail"), Some(policy(500, 500)))
            .await
            .expect_err("no workflow policies"),
    );
    is_unsupported(
        b.redelivery_policies()
            .await
            .expect_err("no workflow policies"),
    );
    ctx.refusal_only()
}

/// Admits `id` of workflow `w` (or of none).
async fn admit<H: Harness>(ctx: &Ctx<H>, id: &str, w: Option<&str>) {
    let mut a = Admission::new(ctx.id(id));
    if let Some(w) = w {
        a = a.workflow(name(w));
    }
    ctx.backend().admit(&a).await.expect("admit");
}

/// Claims `id`, releases it as a failed attempt at the clock's now, and returns the instant.
async fn fail_once<H: Harness>(ctx: &Ctx<H>, id: &str) -> lease_core::Timestamp {
    let lease = ctx.claim_one(id).await;
    let ended = ctx.now();
    let release = Release::Failed(lease_core::ErrorNote::new("error", "boom"));
    let got = ctx
        .backend()
        .release_with(&lease, &release)
        .await
        .expect("release");
    assert!(!got.is_lost(), "the holder releases");
    ended
}

/// Set policies read back sorted on a peer; one is replaced and one removed.
pub async fn workflow_policies_round_trip_on_a_peer<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    assert_eq!(
        b.redelivery_policies().await.expect("read"),
        RedeliveryPolicies::default()
    );
    b.set_redelivery_policy(&name("zeta"), Some(policy(100, 800)))
        .await
        .expect("set");
    b.set_redelivery_policy(&name("alpha"), Some(policy(5000, 60_000)))
        .await
        .expect("set");
    b.set_redelivery_policy(&name("zeta"), Some(policy(200, 400)))
        .await
        .expect("replace");
    let peer = ctx.peer().await;
    let want = RedeliveryPolicies {
        workflows: vec![
            (name("alpha"), policy(5000, 60_000)),
            (name("zeta"), policy(200, 400)),
        ],
    };
    assert_eq!(peer.redelivery_policies().await.expect("read"), want);
    b.set_redelivery_policy(&name("alpha"), None)
        .await
        .expect("remove");
    let want = RedeliveryPolicies {
        workflows: vec![(name("zeta"), policy(200, 400))],
    };
    assert_eq!(peer.redelivery_policies().await.expect("read"), want);
}

/// A workflow with a 5 s policy: its claim keeps the policy on the record, and after a
/// failed attempt it is claimable exactly 5 s later, not after the handle's 100 ms; the
/// second failure waits 10 s (the policy doubles).
pub async fn workflow_policy_sets_the_delay_after_its_delivery<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let slow = policy(5000, 60_000);
    ctx.backend()
        .set_redelivery_policy(&name("slow"), Some(slow))
        .await
        .expect("set");
    admit(&*ctx, "s-1", Some("slow")).await;
    let ended = fail_once(&*ctx, "s-1").await;
    assert_eq!(ctx.get("s-1").await.redelivery_policy, Some(slow));
    ctx.set_clock(plus_ms(ended, 4999));
    ctx.assert_nothing_claimable("inside the workflow's 5 s delay")
        .await;
    ctx.set_clock(plus_ms(ended, 5000));
    let ended = fail_once(&*ctx, "s-1").await;
    ctx.set_clock(plus_ms(ended, 9999));
    ctx.assert_nothing_claimable("inside the doubled 10 s delay")
        .await;
    ctx.set_clock(plus_ms(ended, 10_000));
    ctx.claim_one("s-1").await;
}

/// Executions of another workflow and of none use the handle's policy (the suite's
/// 100 ms base) and keep no policy on their record.
pub async fn other_workflows_keep_the_handles_policy<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.backend()
        .set_redelivery_policy(&name("slow"), Some(policy(5000, 60_000)))
        .await
        .expect("set");
    for (id, workflow) in [("o-1", Some("other")), ("o-2", None)] {
        admit(&*ctx, id, workflow).await;
        let ended = fail_once(&*ctx, id).await;
        assert_eq!(ctx.get(id).await.redelivery_policy, None, "{id}");
        let base = i64::try_from(ctx.policy.delay_ms(1)).expect("small");
        ctx.set_clock(plus_ms(ended, base - 1));
        ctx.assert_nothing_claimable("inside the handle's delay")
            .await;
        ctx.set_clock(plus_ms(ended, base));
        ctx.claim_one(id).await;
        assert_eq!(ctx.get(id).await.redelivery_policy, None, "{id}");
    }
}

/// A policy set while a delivery runs does not change that delivery's delay; the next
/// claim takes it. Removing it returns the workflow to the handle's policy from the claim
/// after.
pub async fn a_policy_change_applies_from_the_next_claim<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    admit(&*ctx, "c-1", Some("mail")).await;
    let lease = ctx.claim_one("c-1").await;
    b.set_redelivery_policy(&name("mail"), Some(policy(3000, 3000)))
        .await
        .expect("set while running");
    let ended = ctx.now();
    let release = Release::Failed(lease_core::ErrorNote::new("error", "boom"));
    assert!(
        !b.release_with(&lease, &release)
            .await
            .expect("release")
            .is_lost()
    );
    let base = i64::try_from(ctx.policy.delay_ms(1)).expect("small");
    ctx.set_clock(plus_ms(ended, base));
    ctx.claim_one("c-1").await;
    assert_eq!(
        ctx.get("c-1").await.redelivery_policy,
        Some(policy(3000, 3000)),
        "the new claim keeps the new policy"
    );
    // Removed while this delivery runs: its delay is still the 3 s it was claimed with.
    b.set_redelivery_policy(&name("mail"), None)
        .await
        .expect("remove");
    let ended = fail_once_held(&*ctx, "c-1").await;
    ctx.set_clock(plus_ms(ended, 2999));
    ctx.assert_nothing_claimable("inside the kept policy's delay (3 s, its cap)")
        .await;
    ctx.set_clock(plus_ms(ended, 3000));
    ctx.claim_one("c-1").await;
    assert_eq!(
        ctx.get("c-1").await.redelivery_policy,
        None,
        "removed from this claim on"
    );
}

/// Releases the live lease of `id` (claimed earlier) as a failed attempt at the clock's now.
async fn fail_once_held<H: Harness>(ctx: &Ctx<H>, id: &str) -> lease_core::Timestamp {
    let b = ctx.backend();
    let record = ctx.get(id).await;
    let lease = lease_core::ExecutionLease {
        execution_id: ctx.id(id),
        token: record.token,
        expires_at: record.lease_expires_at.expect("a live lease"),
    };
    let release = Release::Failed(lease_core::ErrorNote::new("error", "boom"));
    assert!(
        !b.release_with(&lease, &release)
            .await
            .expect("release")
            .is_lost()
    );
    ctx.now()
}
