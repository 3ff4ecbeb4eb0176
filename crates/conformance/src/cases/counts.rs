//! The operator command's `status`: `status_counts` counts a namespace's executions by
//! effective status at the backend clock, in one atomic step, exactly as `get` of each
//! would report them, beside the namespace's takeover counter (claims that took over an
//! expired lease: raised by each such claim, by one per lease taken over, by nothing else,
//! and never lowered by a purge). A harness whose backend does not implement it
//! ([`lease_core::Capabilities::status_counts`] `false`) checks only that it says so.

use std::sync::Arc;

use lease_core::{
    Acknowledgement, ClaimRequest, ExecutionClient, ExecutionLease, ExecutionRecord, Release,
    StatusCounts, WorkflowRunOutcome,
};

use crate::context::{Ctx, LEASE, json, plus};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __counts_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, counts, [
            status_counts_by_effective_status, status_counts_change_nothing_and_follow_purge,
            status_counts_count_each_takeover_once, status_counts_count_batch_takeovers,
        ] }
    };
}

/// Returns `true` (after checking the refusal) when the harness has no status counts.
async fn unsupported<H: Harness>(ctx: &Ctx<H>) -> bool {
    if ctx.caps().status_counts {
        return false;
    }
    let err = ctx.backend().status_counts().await.expect_err("no counts");
    ctx.assert_unsupported(&err);
    ctx.refusal_only()
}

/// Claims `id` and acknowledges it with `outcome`.
async fn finish<H: Harness>(ctx: &Ctx<H>, id: &str, outcome: WorkflowRunOutcome) {
    let lease = ctx.claim_one(id).await;
    let acked = ctx
        .backend()
        .acknowledge(&lease, &outcome)
        .await
        .expect("acknowledge");
    assert!(!acked.is_lost(), "{id}");
}

/// The counts `get` of every id implies, at the backend clock.
async fn counted_by_get<H: Harness>(ctx: &Ctx<H>, ids: &[&str]) -> StatusCounts {
    let mut records: Vec<ExecutionRecord> = Vec::new();
    for id in ids {
        records.push(ctx.get(id).await);
    }
    StatusCounts::of_records(&records, ctx.now())
}

/// Every status is counted as `get` reads it: an expired lease as ended (admitted, or
/// suspended when a delivery was once acknowledged so), the others as stored; a fresh store
/// counts nothing, and a peer reads the same counts.
pub async fn status_counts_by_effective_status<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    assert_eq!(
        b.status_counts().await.expect("counts"),
        StatusCounts::default()
    );
    // One at a time: a claim takes every due execution.
    let ends = [
        ("done", WorkflowRunOutcome::Completed(json("1"))),
        ("failed", WorkflowRunOutcome::Failed(json("2"))),
        ("parked", WorkflowRunOutcome::Suspended),
        ("expired-parked", WorkflowRunOutcome::Suspended),
    ];
    for (id, outcome) in ends {
        ctx.admit(id).await;
        finish(&*ctx, id, outcome).await;
    }
    b.request_wake(&ctx.id("expired-parked"), ctx.now())
        .await
        .expect("wake");
    ctx.admit("expired").await;
    let expiring = ctx.claim(&b, 1000).await;
    assert_eq!(
        expiring.len(),
        2,
        "expired and expired-parked: {expiring:?}"
    );
    // Half-way through those leases "live" is claimed; then they expire and "live" holds.
    ctx.advance(LEASE / 2);
    ctx.admit("live").await;
    ctx.claim_one("live").await;
    ctx.set_clock(expiring[0].expires_at);
    ctx.admit("waiting").await;

    let want = StatusCounts {
        admitted: 2,
        running: 1,
        suspended: 2,
        completed: 1,
        failed: 1,
        cancelled: 0,
        dead: 0,
        corrupt: 0,
        takeovers: 0,
    };
    let ids = [
        "done",
        "failed",
        "parked",
        "expired",
        "expired-parked",
        "live",
        "waiting",
    ];
    assert_eq!(counted_by_get(&*ctx, &ids).await, want, "the reference");
    assert_eq!(b.status_counts().await.expect("counts"), want);
    let peer = ctx.peer().await;
    assert_eq!(peer.status_counts().await.expect("peer counts"), want);
    assert_eq!(want.total(), 7);
}

/// Counting changes nothing, and retention's purge takes its executions out of the counts.
pub async fn status_counts_change_nothing_and_follow_purge<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("old").await;
    finish(&*ctx, "old", WorkflowRunOutcome::Completed(json("1"))).await;
    ctx.admit("kept").await;
    let before = (ctx.snapshot("kept").await, ctx.snapshot("old").await);
    let b = ctx.backend();
    let counts = b.status_counts().await.expect("counts");
    assert_eq!(
        (counts.admitted, counts.completed, counts.total()),
        (1, 1, 2)
    );
    assert_eq!(
        (ctx.snapshot("kept").await, ctx.snapshot("old").await),
        before
    );
    if !ctx.caps().retention {
        return;
    }
    let cutoff = plus(ctx.now(), std::time::Duration::from_millis(1));
    b.purge_terminal(cutoff, 10).await.expect("purge");
    let after = b.status_counts().await.expect("counts");
    assert_eq!(
        after,
        StatusCounts {
            admitted: 1,
            ..StatusCounts::default()
        }
    );
}

/// The namespace's takeover counter, read on a peer.
async fn takeovers<H: Harness>(ctx: &Ctx<H>) -> u64 {
    let counts = ctx.probe_peer().await.status_counts().await;
    counts.expect("counts").takeovers
}

/// Sets the clock past every lease of `leases` and the redelivery delay each then owes
/// (all are on their first unacknowledged delivery).
fn expire_all<H: Harness>(ctx: &Ctx<H>, leases: &[ExecutionLease]) {
    let last = leases.iter().map(|l| l.expires_at).max().expect("a lease");
    ctx.set_clock(plus(last, ctx.policy.delay(1)));
}

/// Completes `lease`'s delivery (asserted accepted).
async fn complete<H: Harness>(ctx: &Ctx<H>, lease: &ExecutionLease) {
    let done = WorkflowRunOutcome::Completed(json("1"));
    let acked = ctx.backend().acknowledge(lease, &done).await.expect("ack");
    assert!(!acked.is_lost(), "{}", lease.execution_id);
}

/// A first claim, its acknowledgement, a release and the claim after it take over nothing;
/// a claim after the lease expired unacknowledged raises the counter by exactly one, on the
/// plain claim and on `acknowledge_and_claim` alike.
pub async fn status_counts_count_each_takeover_once<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    assert_eq!(takeovers(&*ctx).await, 0, "a fresh store");
    ctx.admit("first").await;
    let first = ctx.claim_one("first").await;
    complete(&*ctx, &first).await;
    ctx.admit("released").await;
    let released = ctx.claim_one("released").await;
    let freed = ctx
        .backend()
        .release_with(&released, &Release::NotStarted)
        .await;
    assert!(!freed.expect("release").is_lost());
    let again = ctx.claim_one("released").await;
    complete(&*ctx, &again).await;
    assert_eq!(takeovers(&*ctx).await, 0, "no lease ran out");

    ctx.admit("lapsed").await;
    let stale = ctx.claim_one("lapsed").await;
    let (_, current) = ctx.reclaim(&stale).await;
    assert_eq!(takeovers(&*ctx).await, 1, "one lease taken over");
    complete(&*ctx, &current).await;
    assert_eq!(
        takeovers(&*ctx).await,
        1,
        "its acknowledgement adds nothing"
    );

    // "next" runs out while "held", claimed half a lease later, is still live.
    ctx.admit("next").await;
    let next = ctx.claim_one("next").await;
    ctx.advance(LEASE / 2);
    ctx.admit("held").await;
    let held = ctx.claim_one("held").await;
    expire_all(&*ctx, std::slice::from_ref(&next));
    let b = ctx.backend();
    let ack = Acknowledgement {
        lease: held,
        outcome: WorkflowRunOutcome::Completed(json("2")),
    };
    let request = ClaimRequest {
        now: ctx.now(),
        limit: 10,
        duration: LEASE,
    };
    let both = b.acknowledge_and_claim(&ack, request).await.expect("both");
    assert!(!both.acknowledged.is_lost(), "the held lease was live");
    let taken: Vec<_> = both.next.claimed.iter().map(|c| c.lease.clone()).collect();
    assert_eq!(taken.len(), 1, "{taken:?}");
    assert_eq!(taken[0].execution_id.as_str(), "next");
    assert_eq!(
        takeovers(&*ctx).await,
        2,
        "and one more, claimed after an ack"
    );
}

/// One claim taking over two expired leases (beside a first claim) raises the counter by
/// two; purging those executions lowers their statuses' counts, never the counter.
pub async fn status_counts_count_batch_takeovers<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("a").await;
    ctx.admit("b").await;
    let b = ctx.backend();
    let stale = ctx.claim(&b, 10).await;
    assert_eq!(stale.len(), 2, "{stale:?}");
    expire_all(&*ctx, &stale);
    ctx.admit("c").await;
    let taken = ctx.claim(&b, 10).await;
    assert_eq!(taken.len(), 3, "two takeovers and a first claim: {taken:?}");
    let counts = b.status_counts().await.expect("counts");
    assert_eq!((counts.takeovers, counts.running), (2, 3));
    for lease in &taken {
        complete(&*ctx, lease).await;
    }
    assert_eq!(takeovers(&*ctx).await, 2);
    if !ctx.caps().retention {
        return;
    }
    let cutoff = plus(ctx.now(), std::time::Duration::from_millis(1));
    let purged = b.purge_terminal(cutoff, 10).await.expect("purge");
    assert_eq!(purged.ids.len(), 3, "{purged:?}");
    let after = b.status_counts().await.expect("counts");
    assert_eq!(
        after,
        StatusCounts {
            takeovers: 2,
            ..StatusCounts::default()
        },
        "the counter outlives what it counted"
    );
}
