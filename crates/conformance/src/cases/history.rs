//! Delivery history ([`lease_core::history`]): each execution's last deliveries with their
//! tokens, claim instants and how each ended, written in the same atomic steps that start
//! and end deliveries (RFC 002 leases, seen afterwards). A takeover closes the expired
//! lease's entry at its expiry; an expiry nobody acted on reads as expired; a stale holder
//! writes nothing; the history is bounded. A harness without it
//! ([`Harness::DELIVERY_HISTORY`] `false`) checks only the typed `Unsupported` answer.

use std::sync::Arc;

use lease_core::{
    Acknowledgement, CancelReason, ClaimRequest, DeliveryEnd, DeliveryHistory, ErrorNote,
    ExecutionClient, LastError, LeaseError, MAX_DELIVERY_HISTORY, Release, WorkflowRunOutcome,
};

use crate::context::{Ctx, LEASE, json, plus, plus_ms};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __history_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, history, [
            history_records_each_end_with_its_token,
            history_marks_a_takeover_at_the_expiry,
            history_unacted_expiry_reads_as_expired_until_its_holder_acts,
            history_cancel_and_suspend_end_their_delivery,
            history_keeps_the_latest_and_counts_the_rest,
        ] }
    };
}

/// Returns `true` when the harness keeps no history, after checking it answers
/// `Unsupported`: the case then ends.
async fn unsupported<H: Harness>(ctx: &Ctx<H>) -> bool {
    if H::DELIVERY_HISTORY {
        return false;
    }
    ctx.admit("x").await;
    let err = ctx
        .backend()
        .deliveries(&ctx.id("x"))
        .await
        .expect_err("no history");
    assert!(matches!(err, LeaseError::Unsupported { .. }), "{err}");
    ctx.refusal_only()
}

async fn history<H: Harness>(ctx: &Ctx<H>, id: &str) -> DeliveryHistory {
    ctx.probe_peer()
        .await
        .deliveries(&ctx.id(id))
        .await
        .expect("deliveries")
}

/// The ends of `h`'s entries, oldest first (`None` for an open one).
fn ends(h: &DeliveryHistory) -> Vec<Option<DeliveryEnd>> {
    h.deliveries.iter().map(|e| e.end).collect()
}

/// A failed attempt (with its error), an unstarted release, a plain release, then a
/// completion: four entries, in order, each with its lease's token, claim instant, end
/// instant and error; an unknown id is `UnknownExecution`.
pub async fn history_records_each_end_with_its_token<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    ctx.admit("h-1").await;
    assert_eq!(history(&*ctx, "h-1").await, DeliveryHistory::default());
    let mut tokens = Vec::new();
    let mut claimed = Vec::new();
    let releases = [
        Release::Failed(ErrorNote::new("error", "card declined")),
        Release::NotStarted,
        Release::Retry,
    ];
    for release in &releases {
        let due = ctx.get("h-1").await.claimable_at(&ctx.policy).expect("due");
        ctx.set_clock(due.max(ctx.now()));
        let lease = ctx.claim_one("h-1").await;
        tokens.push(lease.token);
        claimed.push(ctx.now());
        ctx.advance(std::time::Duration::from_millis(7));
        assert!(
            !b.release_with(&lease, release)
                .await
                .expect("release")
                .is_lost()
        );
    }
    let due = ctx.get("h-1").await.claimable_at(&ctx.policy).expect("due");
    ctx.set_clock(due.max(ctx.now()));
    let lease = ctx.claim_one("h-1").await;
    tokens.push(lease.token);
    claimed.push(ctx.now());
    ctx.advance(std::time::Duration::from_millis(7));
    let done = WorkflowRunOutcome::Completed(json("1"));
    assert!(!b.acknowledge(&lease, &done).await.expect("ack").is_lost());

    let h = history(&*ctx, "h-1").await;
    assert_eq!(
        ends(&h),
        [
            Some(DeliveryEnd::Released),
            Some(DeliveryEnd::NotStarted),
            Some(DeliveryEnd::Released),
            Some(DeliveryEnd::Acknowledged),
        ]
    );
    assert_eq!(h.earlier, 0);
    for (i, entry) in h.deliveries.iter().enumerate() {
        assert_eq!(entry.token, tokens[i], "entry {i}");
        assert_eq!(entry.claimed_at, claimed[i], "entry {i}");
        assert_eq!(entry.ended_at, Some(plus_ms(claimed[i], 7)), "entry {i}");
    }
    let error = h.deliveries[0].error.as_ref().expect("the attempt's error");
    assert_eq!((error.kind(), error.message()), ("error", "card declined"));
    assert_eq!(
        h.deliveries[1].error, None,
        "an unstarted lease is no attempt"
    );
    let retry = h.deliveries[2].error.as_ref().expect("a retry note");
    assert_eq!(retry.kind(), LastError::RETRY);
    assert_eq!(h.deliveries[3].error, None);
    let err = b.deliveries(&ctx.id("nobody")).await.expect_err("unknown");
    assert!(matches!(err, LeaseError::UnknownExecution(_)), "{err}");
}

/// A holder stops renewing; after its expiry (and the delay) a peer claims: the first
/// entry ends `Expired` at the lease's expiry with the lease-expired note, the second is
/// open with the higher token; the stale holder's acknowledgement is `Lost` and changes
/// neither entry.
pub async fn history_marks_a_takeover_at_the_expiry<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("t-1").await;
    let stale = ctx.claim_one("t-1").await;
    let (_peer, current) = ctx.reclaim(&stale).await;
    let done = WorkflowRunOutcome::Completed(json("1"));
    let got = ctx.backend().acknowledge(&stale, &done).await.expect("ack");
    assert!(got.is_lost(), "the stale holder is refused");
    let h = history(&*ctx, "t-1").await;
    assert_eq!(ends(&h), [Some(DeliveryEnd::Expired), None]);
    let first = &h.deliveries[0];
    assert_eq!(first.token, stale.token);
    assert_eq!(first.ended_at, Some(stale.expires_at));
    let note = first.error.as_ref().expect("the expiry note");
    assert_eq!(note.kind(), LastError::LEASE_EXPIRED);
    assert_eq!(h.deliveries[1].token, current.token);
    assert_eq!(h.deliveries[1].ended_at, None);
}

/// An expired lease no claim took over yet reads as `Expired` at its expiry (as `get`
/// reads the record). Its holder still holds until a claim takes the execution over
/// (fencing needs no clock), so its late release is accepted and ends the entry
/// `Released`; a second release is `Lost` and writes nothing.
pub async fn history_unacted_expiry_reads_as_expired_until_its_holder_acts<H: Harness>(
    ctx: Arc<Ctx<H>>,
) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("u-1").await;
    let lease = ctx.claim_one("u-1").await;
    assert_eq!(
        ends(&history(&*ctx, "u-1").await),
        [None],
        "open while live"
    );
    ctx.set_clock(plus_ms(lease.expires_at, 1));
    let h = history(&*ctx, "u-1").await;
    assert_eq!(ends(&h), [Some(DeliveryEnd::Expired)]);
    assert_eq!(h.deliveries[0].ended_at, Some(lease.expires_at));
    let got = ctx.backend().release(&lease).await.expect("release");
    assert!(!got.is_lost(), "an expired lease holds until a takeover");
    let h = history(&*ctx, "u-1").await;
    assert_eq!(ends(&h), [Some(DeliveryEnd::Released)]);
    assert_eq!(h.deliveries[0].ended_at, Some(ctx.now()));
    let got = ctx.backend().release(&lease).await.expect("release");
    assert!(got.is_lost(), "the delivery has ended");
    assert_eq!(
        history(&*ctx, "u-1").await,
        h,
        "a lost write writes nothing"
    );
}

/// A suspended acknowledgement ends its entry `Suspended`; a cancel of a live lease ends
/// the next one `Cancelled` at the cancel's instant.
pub async fn history_cancel_and_suspend_end_their_delivery<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    ctx.suspended_delivery("c-1").await;
    let lease = ctx.claim_one("c-1").await;
    ctx.advance(std::time::Duration::from_millis(3));
    let reason = CancelReason::new("operator").expect("reason");
    match b.cancel(&ctx.id("c-1"), &reason).await {
        Ok(_) => {}
        Err(LeaseError::Unsupported { .. }) => return,
        Err(e) => panic!("cancel: {e}"),
    }
    let h = history(&*ctx, "c-1").await;
    assert_eq!(
        ends(&h),
        [Some(DeliveryEnd::Suspended), Some(DeliveryEnd::Cancelled)]
    );
    assert_eq!(h.deliveries[1].token, lease.token);
    assert_eq!(h.deliveries[1].ended_at, Some(ctx.now()));
}

/// More deliveries than the bound: the last [`MAX_DELIVERY_HISTORY`] are kept, oldest
/// first, and `earlier` counts the rest. Claims here ride on `acknowledge_and_claim` for
/// half of them, whose two ends are written in its one step.
pub async fn history_keeps_the_latest_and_counts_the_rest<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    let total = MAX_DELIVERY_HISTORY + 3;
    ctx.admit("k-1").await;
    let mut lease = ctx.claim_one("k-1").await;
    let mut tokens = vec![lease.token];
    for _ in 1..total {
        b.request_wake(&ctx.id("k-1"), ctx.now())
            .await
            .expect("wake");
        let ack = Acknowledgement {
            lease: lease.clone(),
            outcome: WorkflowRunOutcome::Suspended,
        };
        let next = ClaimRequest {
            now: ctx.now(),
            limit: 1,
            duration: LEASE,
        };
        let got = b
            .acknowledge_and_claim(&ack, next)
            .await
            .expect("ack and claim");
        assert!(!got.acknowledged.is_lost());
        lease = got
            .next
            .claimed
            .into_iter()
            .next()
            .expect("claimed again")
            .lease;
        tokens.push(lease.token);
        ctx.set_clock(plus(ctx.now(), std::time::Duration::from_millis(1)));
    }
    let h = history(&*ctx, "k-1").await;
    assert_eq!(h.deliveries.len(), MAX_DELIVERY_HISTORY);
    assert_eq!(h.earlier, 3);
    assert_eq!(h.total(), total as u64);
    let kept: Vec<_> = h.deliveries.iter().map(|e| e.token).collect();
    assert_eq!(kept, tokens[3..]);
    assert!(
        h.deliveries[..MAX_DELIVERY_HISTORY - 1]
            .iter()
            .all(|e| e.end == Some(DeliveryEnd::Suspended))
    );
    assert_eq!(
        h.deliveries[MAX_DELIVERY_HISTORY - 1].end,
        None,
        "the live one"
    );
}
