//! Delivery history ([`lease_core::history`]): each claim appends an open entry and each
//! step that ends a delivery closes it, in the same atomic step as the transition; a
//! takeover closes the expired lease's entry at its expiry; an expiry nobody acted on
//! reads as expired; a stale holder writes nothing; only the last
//! [`lease_core::MAX_DELIVERY_HISTORY`] entries are kept. A harness without it
//! ([`lease_core::Capabilities::delivery_history`] `false`) checks only the typed `Unsupported` answer.

use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Acknowledgement, AttemptLimit, AttemptScope, CancelReason, ClaimRequest, DeliveryEnd,
    DeliveryEntry, DeliveryHistory, ErrorNote, ExecutionClient, ExecutionLease, ExecutionStatus,
    FencingToken, LastError, LeaseError, MAX_DELIVERY_HISTORY, Release, Timestamp,
    WorkflowRunOutcome,
};

use crate::context::{Ctx, LEASE, json, plus};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __history_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, history, [
            history_unknown_execution_and_empty_before_a_claim,
            history_records_how_each_delivery_ended,
            history_expiry_reads_expired_and_a_takeover_closes_it,
            history_stale_holder_writes_nothing,
            history_cancel_ends_a_live_delivery_only,
            history_acknowledge_and_claim_writes_both,
            history_keeps_the_last_deliveries_and_counts_the_rest,
            history_kept_by_retry_dead_and_removed_by_purge,
            history_takeover_then_completion_keeps_both,
            history_bound_counts_the_live_and_the_completed_delivery,
        ] }
    };
}

/// Returns `true` when the harness keeps no history, after checking `deliveries` answers
/// `Unsupported`: the case then ends.
async fn unsupported<H: Harness>(ctx: &Ctx<H>) -> bool {
    if ctx.caps().delivery_history {
        return false;
    }
    ctx.admit("plain").await;
    let got = ctx.backend().deliveries(&ctx.id("plain")).await;
    ctx.assert_unsupported(&got.expect_err("no history"));
    ctx.refusal_only()
}

/// `id`'s history, read on a peer.
async fn history<H: Harness>(ctx: &Ctx<H>, id: &str) -> DeliveryHistory {
    ctx.probe_peer()
        .await
        .deliveries(&ctx.id(id))
        .await
        .expect("deliveries")
}

fn open(lease: &ExecutionLease, at: Timestamp) -> DeliveryEntry {
    DeliveryEntry::claimed(lease.token, at)
}

fn closed(
    lease: &ExecutionLease,
    claimed_at: Timestamp,
    end: DeliveryEnd,
    ended_at: Timestamp,
    error: Option<ErrorNote>,
) -> DeliveryEntry {
    DeliveryEntry {
        token: lease.token,
        claimed_at,
        ended_at: Some(ended_at),
        end: Some(end),
        error,
    }
}

fn expired(lease: &ExecutionLease, claimed_at: Timestamp) -> DeliveryEntry {
    closed(
        lease,
        claimed_at,
        DeliveryEnd::Expired,
        lease.expires_at,
        Some(LastError::expiry_note()),
    )
}

fn only(deliveries: Vec<DeliveryEntry>) -> DeliveryHistory {
    DeliveryHistory {
        deliveries,
        earlier: 0,
    }
}

/// Claims `id` alone once its redelivery delay (if any) has passed; returns the lease and
/// the claim's instant.
async fn deliver<H: Harness>(ctx: &Ctx<H>, id: &str) -> (ExecutionLease, Timestamp) {
    let record = ctx.get(id).await;
    if let Some(gate) = record
        .redelivery_not_before(&ctx.policy)
        .filter(|gate| *gate > ctx.now())
    {
        ctx.set_clock(gate);
    }
    let at = ctx.now();
    (ctx.claim_only(&ctx.backend(), id).await, at)
}

/// Releases `lease` as `how` says after `ms` milliseconds; returns when.
async fn release_after<H: Harness>(
    ctx: &Ctx<H>,
    lease: &ExecutionLease,
    ms: u64,
    how: Option<&Release>,
) -> Timestamp {
    ctx.advance(Duration::from_millis(ms));
    let b = ctx.backend();
    let got = match how {
        Some(how) => b.release_with(lease, how).await,
        None => b.release(lease).await,
    };
    assert!(!got.expect("release").is_lost(), "a current lease");
    ctx.now()
}

/// An unknown id is `UnknownExecution`; an execution never claimed has an empty history.
pub async fn history_unknown_execution_and_empty_before_a_claim<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let got = ctx.backend().deliveries(&ctx.id("nobody")).await;
    assert!(
        matches!(got, Err(LeaseError::UnknownExecution(ref id)) if id.as_str() == "nobody"),
        "{got:?}"
    );
    ctx.admit("x").await;
    assert_eq!(history(&*ctx, "x").await, DeliveryHistory::default());
}

/// Each end in order: a claim opens an entry at the claim's clock; a release with the
/// worker's error is `Released` with it; a retry reply and a plain release are `Released`
/// without one; an unstarted lease is `NotStarted`; a suspension is `Suspended`; a
/// terminal acknowledgement is `Acknowledged`; each at the instant it happened.
pub async fn history_records_how_each_delivery_ended<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("x").await;
    let mut want = Vec::new();
    let (l1, c1) = deliver(&*ctx, "x").await;
    assert_eq!(history(&*ctx, "x").await, only(vec![open(&l1, c1)]));
    let note = ErrorNote::new("error", "the payment service said no");
    let failed = Release::Failed(note.clone());
    let e1 = release_after(&*ctx, &l1, 30, Some(&failed)).await;
    want.push(closed(&l1, c1, DeliveryEnd::Released, e1, Some(note)));
    assert_eq!(history(&*ctx, "x").await, only(want.clone()));

    let (l2, c2) = deliver(&*ctx, "x").await;
    let e2 = release_after(&*ctx, &l2, 5, Some(&Release::NotStarted)).await;
    want.push(closed(&l2, c2, DeliveryEnd::NotStarted, e2, None));
    let (l3, c3) = deliver(&*ctx, "x").await;
    let e3 = release_after(&*ctx, &l3, 5, Some(&Release::Retry)).await;
    want.push(closed(&l3, c3, DeliveryEnd::Released, e3, None));
    let (l4, c4) = deliver(&*ctx, "x").await;
    let e4 = release_after(&*ctx, &l4, 5, None).await;
    want.push(closed(&l4, c4, DeliveryEnd::Released, e4, None));
    assert_eq!(history(&*ctx, "x").await, only(want.clone()));

    let (l5, c5) = deliver(&*ctx, "x").await;
    ctx.advance(Duration::from_millis(9));
    let b = ctx.backend();
    b.request_wake(&ctx.id("x"), ctx.now()).await.expect("wake");
    let ack = b.acknowledge(&l5, &WorkflowRunOutcome::Suspended).await;
    assert!(!ack.expect("ack").is_lost());
    want.push(closed(&l5, c5, DeliveryEnd::Suspended, ctx.now(), None));
    let (l6, c6) = deliver(&*ctx, "x").await;
    ctx.advance(Duration::from_millis(11));
    let done = WorkflowRunOutcome::Completed(json("1"));
    assert!(!b.acknowledge(&l6, &done).await.expect("ack").is_lost());
    want.push(closed(&l6, c6, DeliveryEnd::Acknowledged, ctx.now(), None));
    assert_eq!(history(&*ctx, "x").await, only(want));
    let tokens: Vec<FencingToken> = [&l1, &l2, &l3, &l4, &l5, &l6].map(|l| l.token).to_vec();
    assert!(tokens.is_sorted(), "tokens rise: {tokens:?}");
}

/// An expired lease nobody acted on reads as `Expired` at its expiry with the
/// lease-expired note (and open before it); the claim that takes the execution over
/// writes that end and appends its own entry.
pub async fn history_expiry_reads_expired_and_a_takeover_closes_it<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("x").await;
    let (stale, c1) = deliver(&*ctx, "x").await;
    ctx.set_clock(plus(c1, LEASE - Duration::from_millis(1)));
    assert_eq!(history(&*ctx, "x").await, only(vec![open(&stale, c1)]));
    ctx.set_clock(stale.expires_at);
    assert_eq!(history(&*ctx, "x").await, only(vec![expired(&stale, c1)]));
    let (_, current) = ctx.reclaim(&stale).await;
    let c2 = ctx.now();
    assert_eq!(
        history(&*ctx, "x").await,
        only(vec![expired(&stale, c1), open(&current, c2)])
    );
}

/// A holder whose lease was taken over writes nothing to the history: its renew,
/// acknowledgement and releases are `Lost` and the history is unchanged.
pub async fn history_stale_holder_writes_nothing<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("x").await;
    let (stale, _) = deliver(&*ctx, "x").await;
    let (_, current) = ctx.reclaim(&stale).await;
    let before = history(&*ctx, "x").await;
    let b = ctx.backend();
    let done = WorkflowRunOutcome::Completed(json("1"));
    assert!(b.acknowledge(&stale, &done).await.expect("ack").is_lost());
    let note = Release::Failed(ErrorNote::new("error", "late"));
    assert!(b.release_with(&stale, &note).await.expect("rel").is_lost());
    assert!(b.release(&stale).await.expect("release").is_lost());
    assert!(b.renew(&stale, LEASE).await.expect("renew").is_lost());
    assert_eq!(history(&*ctx, "x").await, before, "nothing written");
    assert!(history(&*ctx, "x").await.deliveries[1].token == current.token);
}

/// A cancel while the lease is live ends the entry as `Cancelled` at the cancel; a cancel
/// after the lease expired leaves it `Expired` at the expiry.
pub async fn history_cancel_ends_a_live_delivery_only<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await || !ctx.caps().cancel {
        return;
    }
    let b = ctx.backend();
    let reason = CancelReason::new("operator").expect("reason");
    ctx.admit("live").await;
    ctx.admit("late").await;
    let leases = ctx.claim(&b, 10).await;
    let c1 = ctx.now();
    assert_eq!(leases.len(), 2);
    let lease_of = |id: &str| {
        leases
            .iter()
            .find(|l| l.execution_id.as_str() == id)
            .expect("claimed")
            .clone()
    };
    ctx.advance(Duration::from_millis(20));
    b.cancel(&ctx.id("live"), &reason).await.expect("cancel");
    let live = lease_of("live");
    let want = closed(&live, c1, DeliveryEnd::Cancelled, ctx.now(), None);
    assert_eq!(history(&*ctx, "live").await, only(vec![want]));
    let late = lease_of("late");
    ctx.set_clock(plus(late.expires_at, Duration::from_millis(5)));
    b.cancel(&ctx.id("late"), &reason).await.expect("cancel");
    assert_eq!(ctx.get("late").await.status, ExecutionStatus::Cancelled);
    assert_eq!(history(&*ctx, "late").await, only(vec![expired(&late, c1)]));
}

/// `acknowledge_and_claim` closes the acknowledged entry and opens the claimed one in its
/// one step.
pub async fn history_acknowledge_and_claim_writes_both<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("a").await;
    let (first, c1) = deliver(&*ctx, "a").await;
    ctx.admit("b").await;
    ctx.advance(Duration::from_millis(15));
    let now = ctx.now();
    let ack = Acknowledgement {
        lease: first.clone(),
        outcome: WorkflowRunOutcome::Completed(json("1")),
    };
    let request = ClaimRequest {
        now,
        limit: 10,
        duration: LEASE,
    };
    let got = ctx
        .backend()
        .acknowledge_and_claim(&ack, request)
        .await
        .expect("ack and claim");
    assert!(!got.acknowledged.is_lost());
    let leases: Vec<&ExecutionLease> = got.next.claimed.iter().map(|c| &c.lease).collect();
    assert_eq!(leases.len(), 1, "b alone: {leases:?}");
    let want_a = closed(&first, c1, DeliveryEnd::Acknowledged, now, None);
    assert_eq!(history(&*ctx, "a").await, only(vec![want_a]));
    assert_eq!(history(&*ctx, "b").await, only(vec![open(leases[0], now)]));
}

/// Past [`MAX_DELIVERY_HISTORY`] deliveries the oldest are dropped and counted in
/// `earlier`; the kept ones are the latest, in order.
pub async fn history_keeps_the_last_deliveries_and_counts_the_rest<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("x").await;
    let total = MAX_DELIVERY_HISTORY + 5;
    let mut tokens = Vec::new();
    for _ in 0..total {
        // Unstarted leases: no attempt, no redelivery delay, no attempt limit reached.
        let (lease, _) = deliver(&*ctx, "x").await;
        release_after(&*ctx, &lease, 1, Some(&Release::NotStarted)).await;
        tokens.push(lease.token);
    }
    let got = history(&*ctx, "x").await;
    assert_eq!(got.earlier, 5);
    assert_eq!(got.total(), total as u64);
    let kept: Vec<FencingToken> = got.deliveries.iter().map(|e| e.token).collect();
    assert_eq!(kept, tokens[5..].to_vec(), "the latest, oldest first");
    assert!(
        got.deliveries
            .iter()
            .all(|e| e.end == Some(DeliveryEnd::NotStarted))
    );
}

/// `retry_dead` keeps the history (a death by expiry reads, and stays, `Expired`) and the
/// next claim appends to it; retention removes it with the record.
pub async fn history_kept_by_retry_dead_and_removed_by_purge<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    ctx.admit("x").await;
    if ctx.caps().attempts {
        let one = AttemptLimit::new(1).expect("limit");
        b.set_attempt_limit(&AttemptScope::Default, Some(one))
            .await
            .expect("set limit");
        let (died, c1) = deliver(&*ctx, "x").await;
        ctx.set_clock(died.expires_at);
        assert_eq!(ctx.get("x").await.status, ExecutionStatus::Dead);
        b.set_attempt_limit(&AttemptScope::Default, None)
            .await
            .expect("remove limit");
        b.retry_dead(&[ctx.id("x")], None).await.expect("retry");
        assert_eq!(history(&*ctx, "x").await, only(vec![expired(&died, c1)]));
        let (next, c2) = deliver(&*ctx, "x").await;
        let want = vec![expired(&died, c1), open(&next, c2)];
        assert_eq!(history(&*ctx, "x").await, only(want));
        let done = WorkflowRunOutcome::Completed(json("1"));
        assert!(!b.acknowledge(&next, &done).await.expect("ack").is_lost());
    } else {
        let (lease, _) = deliver(&*ctx, "x").await;
        let done = WorkflowRunOutcome::Completed(json("1"));
        assert!(!b.acknowledge(&lease, &done).await.expect("ack").is_lost());
    }
    if !ctx.caps().retention {
        return;
    }
    ctx.advance(Duration::from_millis(10));
    let purged = b.purge_terminal(ctx.now(), 10).await.expect("purge");
    assert_eq!(purged.ids, vec![ctx.id("x")]);
    let got = b.deliveries(&ctx.id("x")).await;
    assert!(
        matches!(got, Err(LeaseError::UnknownExecution(_))),
        "{got:?}"
    );
}

/// A takeover after an expiry followed by a terminal acknowledgement (here in a batch) keeps
/// both deliveries: the expired one at its expiry, then the acknowledged one.
pub async fn history_takeover_then_completion_keeps_both<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("x").await;
    let (stale, c1) = deliver(&*ctx, "x").await;
    let (peer, current) = ctx.reclaim(&stale).await;
    let c2 = ctx.now();
    ctx.advance(Duration::from_millis(7));
    let ack = Acknowledgement {
        lease: current.clone(),
        outcome: WorkflowRunOutcome::Failed(json("2")),
    };
    let got = peer.acknowledge_batch(&[ack]).await.expect("ack batch");
    assert!(!got[0].is_lost(), "the current lease");
    let done = closed(&current, c2, DeliveryEnd::Acknowledged, ctx.now(), None);
    assert_eq!(
        history(&*ctx, "x").await,
        only(vec![expired(&stale, c1), done])
    );
}

/// The bound counts every delivery, the one still running and the last one acknowledged
/// included: past [`MAX_DELIVERY_HISTORY`], a claim and a takeover drop the oldest entries
/// so that exactly that many are kept, the latest last, whether it is open, expired or
/// acknowledged.
pub async fn history_bound_counts_the_live_and_the_completed_delivery<H: Harness>(
    ctx: Arc<Ctx<H>>,
) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("x").await;
    let released = MAX_DELIVERY_HISTORY + 4;
    for _ in 0..released {
        // Unstarted leases: no attempt, no redelivery delay, no attempt limit reached.
        let (lease, _) = deliver(&*ctx, "x").await;
        release_after(&*ctx, &lease, 1, Some(&Release::NotStarted)).await;
    }
    let (stale, c1) = deliver(&*ctx, "x").await;
    let got = history(&*ctx, "x").await;
    assert_eq!(
        (got.deliveries.len(), got.earlier),
        (MAX_DELIVERY_HISTORY, 5)
    );
    assert_eq!(got.deliveries.last(), Some(&open(&stale, c1)));

    let (_, current) = ctx.reclaim(&stale).await;
    let c2 = ctx.now();
    let got = history(&*ctx, "x").await;
    assert_eq!(
        (got.deliveries.len(), got.earlier),
        (MAX_DELIVERY_HISTORY, 6)
    );
    let tail = &got.deliveries[MAX_DELIVERY_HISTORY - 2..];
    assert_eq!(tail, [expired(&stale, c1), open(&current, c2)]);

    ctx.advance(Duration::from_millis(3));
    let done = WorkflowRunOutcome::Completed(json("1"));
    let b = ctx.backend();
    assert!(!b.acknowledge(&current, &done).await.expect("ack").is_lost());
    let got = history(&*ctx, "x").await;
    assert_eq!(
        (got.deliveries.len(), got.earlier),
        (MAX_DELIVERY_HISTORY, 6)
    );
    let last = closed(&current, c2, DeliveryEnd::Acknowledged, ctx.now(), None);
    assert_eq!(got.deliveries.last(), Some(&last));
    assert_eq!(got.total(), released as u64 + 2);
}
