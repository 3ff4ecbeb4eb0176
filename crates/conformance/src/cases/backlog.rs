//! Held-back backlogs (pause, concurrency limits): a backlog the gates hold back, larger than
//! any budget a claim spends examining candidates, never holds back the work behind it. A
//! claim returns the later executions of another key, of no key or of another workflow at
//! once, and the held-back ones come back in claim order as their gate opens (a lease of the
//! key ends, by acknowledgement, expiry or cancel; the limit rises or goes; the workflow is
//! resumed). Gated like [`crate::cases::pause`] and [`crate::cases::limits`].

use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, CancelReason, ClaimRequest, ConcurrencyKey, ConcurrencyLimit, ExecutionClient,
    ExecutionLease, LimitScope, PauseScope, Priority, WorkflowName, WorkflowRunOutcome,
};

use crate::cases::priority::limits_unsupported;
use crate::context::{Ctx, LEASE, json, plus};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __backlog_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, backlog, [
            a_key_backlog_past_every_claim_budget_holds_back_no_other_key,
            a_paused_backlog_past_every_claim_budget_holds_back_no_other_work,
        ] }
    };
}

/// More held-back executions than any claim of a few examines (a claim of 4 on Redis looked
/// at 104 candidates before parking) and than one admission batch holds twice over.
const BACKLOG: usize = 600;

fn ids_of(leases: &[ExecutionLease]) -> Vec<String> {
    leases
        .iter()
        .map(|l| l.execution_id.as_str().to_owned())
        .collect()
}

fn limit(n: u32) -> Option<ConcurrencyLimit> {
    Some(ConcurrencyLimit::new(n).expect("limit"))
}

fn hot(i: usize) -> String {
    format!("hot-{i:03}")
}

/// Admits `admissions` in batches the backends accept.
async fn admit_all<H: Harness>(ctx: &Ctx<H>, admissions: Vec<Admission>) {
    for chunk in admissions.chunks(lease_core::limits::MAX_ADMIT_BATCH / 2) {
        ctx.backend().admit_batch(chunk).await.expect("admit");
    }
}

/// A claim on a peer leaves nothing claimable now, and its horizon (when the backend
/// reports one) does not say "now": an idle dispatcher sleeps instead of spinning on the
/// held-back backlog.
async fn assert_backlog_left_out_of_the_horizon<H: Harness>(ctx: &Ctx<H>) {
    let peer = ctx.probe_peer().await;
    let now = peer.now().await.expect("now");
    let request = ClaimRequest {
        now,
        limit: 4,
        duration: LEASE,
    };
    let batch = peer.claim_due_with_horizon(request).await.expect("claim");
    assert!(batch.claimed.is_empty(), "nothing is claimable now");
    if ctx.caps().wakeups
        && let Some(next) = batch.next_claimable_at
    {
        assert!(next > now, "the held-back backlog is not pending: {next:?}");
    }
}

/// Limit 1 on `hot`, 600 `hot` executions admitted first, then one of key `cold` and one
/// with no key: a claim of 4 takes the first `hot`, `cold` and the unkeyed one at once.
/// The rest of `hot` comes back one place at a time, in order, as a place frees:
/// acknowledgement, expiry observed by a claim, a raised limit, cancel, the limit removed.
pub async fn a_key_backlog_past_every_claim_budget_holds_back_no_other_key<H: Harness>(
    ctx: Arc<Ctx<H>>,
) {
    if limits_unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    let key = |name: &str| ConcurrencyKey::new(name).expect("key");
    b.set_concurrency_limit(&LimitScope::Key(key("hot")), limit(1))
        .await
        .expect("limit");
    let backlog = (0..BACKLOG)
        .map(|i| Admission::new(ctx.id(&hot(i))).concurrency_key(key("hot")))
        .collect();
    admit_all(&*ctx, backlog).await;
    // Due after the whole backlog, so claim order puts them last.
    ctx.advance(Duration::from_millis(1));
    let late = [
        Admission::new(ctx.id("cold")).concurrency_key(key("cold")),
        Admission::new(ctx.id("free")),
    ];
    b.admit_batch(&late).await.expect("admit");

    let first = ctx.claim(&b, 4).await;
    let mut got = ids_of(&first);
    got.sort();
    assert_eq!(got, ["cold", "free", &hot(0)], "the late ones at once");
    assert_backlog_left_out_of_the_horizon(&*ctx).await;

    let held = first
        .iter()
        .find(|l| l.execution_id.as_str() == hot(0))
        .expect("hot-000");
    let ack = b
        .acknowledge(held, &WorkflowRunOutcome::Completed(json("1")))
        .await
        .expect("ack");
    assert!(!ack.is_lost());
    let second = ctx.claim_only(&ctx.peer().await, &hot(1)).await;
    // Expiry frees the place; the redelivery delay keeps hot-001 itself back.
    ctx.set_clock(plus(second.expires_at, Duration::ZERO));
    ctx.claim_only(&b, &hot(2)).await;
    b.set_concurrency_limit(&LimitScope::Key(key("hot")), limit(3))
        .await
        .expect("raise");
    assert_eq!(ids_of(&ctx.claim(&b, 4).await), [hot(3), hot(4)]);
    let mut next = 5;
    if ctx.caps().cancel {
        let reason = CancelReason::new("stop").expect("reason");
        b.cancel(&ctx.id(&hot(3)), &reason).await.expect("cancel");
        ctx.claim_only(&b, &hot(5)).await;
        next = 6;
    }
    b.set_concurrency_limit(&LimitScope::Key(key("hot")), None)
        .await
        .expect("remove");
    let want: Vec<String> = (next..next + 4).map(hot).collect();
    assert_eq!(ids_of(&ctx.claim(&b, 4).await), want, "unlimited: in order");
}

/// 600 executions of workflow `bulk`, then the workflow paused, then one of another
/// workflow and one with none: a claim of 4 takes the two late ones at once, and the
/// horizon leaves the paused backlog out. After resume the backlog comes back in claim
/// order (a higher priority among it first, when the backend has priorities).
pub async fn a_paused_backlog_past_every_claim_budget_holds_back_no_other_work<H: Harness>(
    ctx: Arc<Ctx<H>>,
) {
    if !ctx.caps().pause {
        return;
    }
    let b = ctx.backend();
    let bulk = PauseScope::Workflow(WorkflowName::new("bulk").expect("workflow"));
    let last = format!("bulk-{:03}", BACKLOG - 1);
    let backlog = (0..BACKLOG)
        .map(|i| {
            let admission = Admission::new(ctx.id(&format!("bulk-{i:03}")))
                .workflow(WorkflowName::new("bulk").expect("workflow"));
            if ctx.caps().priorities && i == BACKLOG - 1 {
                admission.priority(Priority::new(5).expect("priority"))
            } else {
                admission
            }
        })
        .collect();
    admit_all(&*ctx, backlog).await;
    assert!(b.pause(&bulk).await.expect("pause"));
    ctx.advance(Duration::from_millis(1));
    let late = [
        Admission::new(ctx.id("other")).workflow(WorkflowName::new("mail").expect("workflow")),
        Admission::new(ctx.id("free")),
    ];
    b.admit_batch(&late).await.expect("admit");

    assert_eq!(
        ids_of(&ctx.claim(&b, 4).await),
        ["free", "other"],
        "the late ones at once"
    );
    assert_backlog_left_out_of_the_horizon(&*ctx).await;

    assert!(b.resume(&bulk).await.expect("resume"));
    let mut want = vec!["bulk-000", "bulk-001", "bulk-002", "bulk-003"];
    if ctx.caps().priorities {
        want = vec![&last, "bulk-000", "bulk-001", "bulk-002"];
    }
    assert_eq!(ids_of(&ctx.claim(&ctx.peer().await, 4).await), want);
    let taken = ctx.claim(&b, 1000).await.len() + want.len();
    assert_eq!(taken, BACKLOG, "every held-back execution came back");
}
