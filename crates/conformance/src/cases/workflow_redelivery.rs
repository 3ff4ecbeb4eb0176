//! Workflows' own redelivery policies ([`lease_core::RedeliveryPolicies`]): stored in the
//! namespace, kept on the record by each claim, and the delay after that delivery is the
//! one the claim kept, so a change applies from each execution's next claim; executions of
//! other workflows (or of none) keep the handle's policy. A harness without them
//! ([`lease_core::Capabilities::workflow_redelivery`] `false`) checks only the typed `Unsupported` answers.

use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, ExecutionClient, ExecutionLease, LeaseError, RedeliveryPolicies, RedeliveryPolicy,
    Release, WorkflowName,
};

use crate::cases::rates::{assert_horizon, claim_batch, expect_signal_now};
use crate::context::{Ctx, just_before, plus};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __workflow_redelivery_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, workflow_redelivery, [
            workflow_redelivery_policies_round_trip_sorted_on_peers,
            workflow_redelivery_claim_keeps_the_workflows_policy,
            workflow_redelivery_release_waits_the_workflows_delay,
            workflow_redelivery_expiry_waits_the_workflows_delay,
            workflow_redelivery_change_applies_from_the_next_claim,
            workflow_redelivery_horizon_reflects_the_workflows_delay,
            workflow_redelivery_shorter_or_removed_signals_wakeups,
        ] }
    };
}

fn workflow(name: &str) -> WorkflowName {
    WorkflowName::new(name).expect("workflow")
}

fn policy(base_ms: u64, factor: u32, cap_ms: u64) -> RedeliveryPolicy {
    RedeliveryPolicy::from_parts(base_ms, factor, cap_ms).expect("valid policy")
}

/// Slower than the handle's test policy (100 ms, doubling, 1.6 s) at every count.
fn slow() -> RedeliveryPolicy {
    policy(500, 3, 20_000)
}

/// Returns `true` when the harness keeps no workflow policies, after checking both
/// operations answer `Unsupported`: the case then ends.
async fn unsupported<H: Harness>(ctx: &Ctx<H>) -> bool {
    if ctx.caps().workflow_redelivery {
        return false;
    }
    let b = ctx.backend();
    let is_unsupported = |e: LeaseError| ctx.assert_unsupported(&e);
    is_unsupported(
        b.set_redelivery_policy(&workflow("w"), Some(slow()))
            .await
            .expect_err("no workflow policies"),
    );
    is_unsupported(
        b.set_redelivery_policy(&workflow("w"), None)
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

/// Sets `name`'s policy on the first connection.
async fn set<H: Harness>(ctx: &Ctx<H>, name: &str, p: Option<RedeliveryPolicy>) {
    ctx.backend()
        .set_redelivery_policy(&workflow(name), p)
        .await
        .expect("set redelivery policy");
}

/// Admits `id` as an execution of `name` (or of no workflow).
async fn admit_of<H: Harness>(ctx: &Ctx<H>, id: &str, name: Option<&str>) {
    let mut admission = Admission::new(ctx.id(id));
    if let Some(name) = name {
        admission = admission.workflow(workflow(name));
    }
    ctx.backend().admit(&admission).await.expect("admit");
}

/// Releases `lease` as a started attempt (a retry reply), asserting it was accepted.
async fn retry<H: Harness>(ctx: &Ctx<H>, lease: &ExecutionLease) {
    let got = ctx
        .backend()
        .release_with(lease, &Release::Retry)
        .await
        .expect("release");
    assert!(!got.is_lost(), "release of a current lease");
}

/// Asserts `id` is not claimable 1 ms before `gate` and is claimed (alone) at `gate`.
async fn claimable_from<H: Harness>(ctx: &Ctx<H>, id: &str, gate: lease_core::Timestamp) {
    ctx.set_clock(just_before(gate));
    ctx.assert_nothing_claimable(&format!("{id}: 1 ms before its gate"))
        .await;
    ctx.set_clock(gate);
}

/// What is set reads back on a peer, sorted by name; a policy is replaced and removed;
/// removing one never set is no error.
pub async fn workflow_redelivery_policies_round_trip_sorted_on_peers<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let peer = ctx.peer().await;
    assert_eq!(
        peer.redelivery_policies().await.expect("list"),
        RedeliveryPolicies::default(),
        "none at first"
    );
    set(&*ctx, "zeta", Some(slow())).await;
    set(&*ctx, "alpha", Some(policy(10, 1, 10))).await;
    set(&*ctx, "mid", Some(policy(250, 2, 4000))).await;
    let listed = peer.redelivery_policies().await.expect("list");
    assert_eq!(
        listed.workflows,
        vec![
            (workflow("alpha"), policy(10, 1, 10)),
            (workflow("mid"), policy(250, 2, 4000)),
            (workflow("zeta"), slow()),
        ],
        "every peer reads the same, sorted by name"
    );
    set(&*ctx, "mid", Some(policy(300, 4, 9000))).await;
    set(&*ctx, "alpha", None).await;
    set(&*ctx, "never-set", None).await;
    let listed = peer.redelivery_policies().await.expect("list");
    assert_eq!(
        listed.workflows,
        vec![
            (workflow("mid"), policy(300, 4, 9000)),
            (workflow("zeta"), slow()),
        ]
    );
}

/// A claim keeps the policy of the execution's workflow on the record (in the claim's
/// records and through `get`); executions of other workflows and of none keep `None`.
pub async fn workflow_redelivery_claim_keeps_the_workflows_policy<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    set(&*ctx, "slow", Some(slow())).await;
    admit_of(&*ctx, "a-slow", Some("slow")).await;
    admit_of(&*ctx, "b-other", Some("other")).await;
    admit_of(&*ctx, "c-none", None).await;
    let batch = claim_batch(&ctx.backend(), 10).await;
    assert_eq!(batch.claimed.len(), 3, "all three are due: {batch:?}");
    for claimed in &batch.claimed {
        let expected = (claimed.record.id.as_str() == "a-slow").then(slow);
        assert_eq!(
            claimed.record.redelivery_policy, expected,
            "{}: the claim's record",
            claimed.record.id
        );
        let got = ctx.get(claimed.record.id.as_str()).await;
        assert_eq!(got.redelivery_policy, expected, "{}: get", got.id);
    }
}

/// After a release the workflow's execution waits its workflow's delay, not the
/// handle's; the others wait the handle's.
pub async fn workflow_redelivery_release_waits_the_workflows_delay<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    set(&*ctx, "slow", Some(slow())).await;
    admit_of(&*ctx, "a-slow", Some("slow")).await;
    admit_of(&*ctx, "b-other", Some("other")).await;
    admit_of(&*ctx, "c-none", None).await;
    let leases = ctx.claim(&ctx.backend(), 10).await;
    assert_eq!(leases.len(), 3);
    ctx.advance(Duration::from_millis(40));
    let ended = ctx.now();
    for lease in &leases {
        retry(&*ctx, lease).await;
    }
    let handle_gate = plus(ended, ctx.policy.delay(1));
    claimable_from(&*ctx, "b-other", handle_gate).await;
    let mut ids: Vec<String> = ctx
        .claim(&ctx.backend(), 10)
        .await
        .iter()
        .map(|l| l.execution_id.as_str().to_owned())
        .collect();
    ids.sort();
    assert_eq!(ids, ["b-other", "c-none"], "the handle's delay");
    let slow_gate = plus(ended, slow().delay(1));
    assert_eq!(
        ctx.get("a-slow").await.redelivery_not_before(&ctx.policy),
        Some(slow_gate)
    );
    claimable_from(&*ctx, "a-slow", slow_gate).await;
    let again = ctx.claim_only(&ctx.backend(), "a-slow").await;
    ctx.advance(Duration::from_millis(7));
    let ended = ctx.now();
    retry(&*ctx, &again).await;
    claimable_from(&*ctx, "a-slow", plus(ended, slow().delay(2))).await;
    ctx.claim_only(&ctx.backend(), "a-slow").await;
}

/// An expired delivery of the workflow waits its workflow's delay after the expiry.
pub async fn workflow_redelivery_expiry_waits_the_workflows_delay<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    set(&*ctx, "slow", Some(slow())).await;
    admit_of(&*ctx, "a-slow", Some("slow")).await;
    let lease = ctx.claim_only(&ctx.backend(), "a-slow").await;
    ctx.set_clock(lease.expires_at);
    let record = ctx.get("a-slow").await;
    assert_eq!(record.unacknowledged_deliveries, 1);
    assert_eq!(record.redelivery_policy, Some(slow()));
    claimable_from(&*ctx, "a-slow", plus(lease.expires_at, slow().delay(1))).await;
    let next = ctx.claim_only(&ctx.backend(), "a-slow").await;
    assert!(next.token > lease.token);
}

/// A change applies from each execution's next claim: the running delivery keeps the
/// policy it was claimed with (a longer or a removed policy does not move its gate), and
/// the next claim keeps the new one (or none: the handle's policy).
pub async fn workflow_redelivery_change_applies_from_the_next_claim<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let longer = policy(2_000, 2, 60_000);
    set(&*ctx, "w", Some(slow())).await;
    admit_of(&*ctx, "x", Some("w")).await;
    let first = ctx.claim_only(&ctx.backend(), "x").await;
    set(&*ctx, "w", Some(longer)).await;
    assert_eq!(
        ctx.get("x").await.redelivery_policy,
        Some(slow()),
        "the running delivery keeps its policy"
    );
    let ended = ctx.now();
    retry(&*ctx, &first).await;
    claimable_from(&*ctx, "x", plus(ended, slow().delay(1))).await;
    let second = ctx.claim_only(&ctx.backend(), "x").await;
    assert_eq!(ctx.get("x").await.redelivery_policy, Some(longer));
    set(&*ctx, "w", None).await;
    let ended = ctx.now();
    retry(&*ctx, &second).await;
    claimable_from(&*ctx, "x", plus(ended, longer.delay(2))).await;
    let third = ctx.claim_only(&ctx.backend(), "x").await;
    assert_eq!(
        ctx.get("x").await.redelivery_policy,
        None,
        "removed: the handle's policy from this claim"
    );
    let ended = ctx.now();
    retry(&*ctx, &third).await;
    claimable_from(&*ctx, "x", plus(ended, ctx.policy.delay(3))).await;
    ctx.claim_only(&ctx.backend(), "x").await;
}

/// A claim that leaves only the workflow's released execution reports a horizon after now
/// (with wake-ups) and never after the end of the workflow's delay.
pub async fn workflow_redelivery_horizon_reflects_the_workflows_delay<H: Harness>(
    ctx: Arc<Ctx<H>>,
) {
    if unsupported(&*ctx).await {
        return;
    }
    set(&*ctx, "slow", Some(slow())).await;
    admit_of(&*ctx, "a-slow", Some("slow")).await;
    let lease = ctx.claim_only(&ctx.backend(), "a-slow").await;
    let ended = ctx.now();
    retry(&*ctx, &lease).await;
    let truth = plus(ended, slow().delay(1));
    // Past the handle's delay, before the workflow's: a horizon from the handle's policy
    // would say "now".
    ctx.set_clock(plus(ended, ctx.policy.delay(1)));
    let batch = claim_batch(&ctx.backend(), 10).await;
    assert_horizon(&*ctx, &batch, ctx.now(), truth);
    ctx.set_clock(truth);
    ctx.claim_only(&ctx.backend(), "a-slow").await;
}

/// Setting a shorter policy or removing one signals the wake-up path (when the backend
/// sends wake-ups), so an idle dispatcher looks again.
pub async fn workflow_redelivery_shorter_or_removed_signals_wakeups<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    set(&*ctx, "w", Some(slow())).await;
    let listener = ctx.peer().await;
    let wakeups = listener.wakeups();
    assert_eq!(
        wakeups.is_some(),
        ctx.caps().wakeups,
        "WAKEUPS says whether they come"
    );
    // A claim on the listening connection (nothing claimable) returns once its listener
    // listens, so the signal below cannot be sent before anyone listens.
    assert!(
        ctx.claim(&listener, 10).await.is_empty(),
        "nothing admitted"
    );
    set(&*ctx, "w", Some(policy(100, 2, 1000))).await;
    if let Some(wakeups) = &wakeups {
        expect_signal_now(wakeups, ctx.now(), "a shorter policy").await;
        while wakeups.try_recv().is_some() {}
    }
    set(&*ctx, "w", None).await;
    if let Some(wakeups) = &wakeups {
        expect_signal_now(wakeups, ctx.now(), "removing the policy").await;
    }
    assert_eq!(
        ctx.backend().redelivery_policies().await.expect("list"),
        RedeliveryPolicies::default()
    );
}
