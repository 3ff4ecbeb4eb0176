//! The redelivery rows of RFC 002 "Dispatcher tests" that need no dispatcher: a "retry
//! reply" is a release.

use std::sync::Arc;
use std::time::Duration;

use lease_core::{Acknowledged, ExecutionClient, ExecutionStatus, Fenced, WorkflowRunOutcome};

use crate::context::{Ctx, just_before, plus, plus_ms};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __redelivery_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, redelivery, [
            release_increments_unacked_and_delays, repeated_release_delays_never_shrink,
            expiry_after_release_counts_both, ack_after_releases_resets_unacked,
        ] }
    };
}

/// Row "A delivery replies retry": its lease is released, `unacknowledged_deliveries`
/// increases by one, and the execution is claimable at `delay(1)` after the release, not
/// 1 ms before.
pub async fn release_increments_unacked_and_delays<H: Harness>(ctx: Arc<Ctx<H>>) {
    let admitted = ctx.admit("order-42").await;
    let b = ctx.backend();
    let lease = ctx.claim_one("order-42").await;
    ctx.advance(Duration::from_millis(1234));
    let ended = ctx.now();
    assert_eq!(
        b.release(&lease).await.expect("release"),
        Fenced::Accepted(())
    );
    let record = ctx.get("order-42").await;
    assert_eq!(record.unacknowledged_deliveries, 1);
    assert_eq!(record.last_delivery_ended_at, Some(ended));
    assert_eq!(record.status, ExecutionStatus::Admitted);
    assert_eq!(
        record.due_at, admitted.due_at,
        "nothing was acknowledged: still due"
    );
    let gate = plus(ended, ctx.policy.delay(1));
    ctx.set_clock(just_before(gate));
    ctx.assert_nothing_claimable("1 ms before delay(1)").await;
    ctx.set_clock(gate);
    let next = ctx.claim_one("order-42").await;
    assert!(next.token > lease.token);
    assert_eq!(
        ctx.get("order-42").await.unacknowledged_deliveries,
        1,
        "a claim keeps it"
    );
}

/// Row "A delivery replies retry several times in a row": each redelivery waits a non-zero
/// delay, no shorter than the one before. The earliest claimable instant is measured each
/// round by probing 1 ms before and at the expected time.
pub async fn repeated_release_delays_never_shrink<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let mut lease = ctx.claim_one("order-42").await;
    let mut previous = Duration::ZERO;
    for n in 1..=7u32 {
        ctx.advance(Duration::from_millis(50));
        let ended = ctx.now();
        assert_eq!(
            b.release(&lease).await.expect("release"),
            Fenced::Accepted(())
        );
        let record = ctx.get("order-42").await;
        assert_eq!(record.unacknowledged_deliveries, n);
        assert_eq!(record.last_delivery_ended_at, Some(ended));
        let expected = ctx.policy.delay(n);
        let gate = plus(ended, expected);
        ctx.set_clock(just_before(gate));
        ctx.assert_nothing_claimable(&format!("retry {n}: 1 ms before the delay"))
            .await;
        ctx.set_clock(gate);
        let next = ctx.claim_one("order-42").await;
        assert!(next.token > lease.token);
        let measured = gate.saturating_since(ended);
        assert!(measured > Duration::ZERO, "retry {n}: zero delay");
        assert!(
            measured >= previous,
            "retry {n}: {measured:?} < {previous:?}"
        );
        previous = measured;
        lease = next;
    }
    assert_eq!(
        previous,
        Duration::from_millis(1600),
        "the delay reached its cap"
    );
}

/// Row "A lease expires after a retry reply": both count; `unacknowledged_deliveries` is
/// two, and the gate after the expiry is `delay(2)`.
pub async fn expiry_after_release_counts_both<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let first = ctx.claim_one("order-42").await;
    assert_eq!(
        b.release(&first).await.expect("release"),
        Fenced::Accepted(())
    );
    ctx.advance(ctx.policy.delay(1));
    let second = ctx.claim_one("order-42").await;
    ctx.set_clock(second.expires_at);
    let record = ctx.get("order-42").await;
    assert_eq!(record.unacknowledged_deliveries, 2);
    assert_eq!(record.last_delivery_ended_at, Some(second.expires_at));
    assert_eq!(record.status, ExecutionStatus::Admitted);
    let gate = plus(second.expires_at, ctx.policy.delay(2));
    ctx.set_clock(just_before(gate));
    ctx.assert_nothing_claimable("1 ms before delay(2)").await;
    ctx.set_clock(gate);
    let third = ctx.claim_one("order-42").await;
    assert!(third.token > second.token);
}

/// Row "A delivery is acknowledged after several retry replies": `unacknowledged_deliveries`
/// returns to zero, and the next wake is not delayed.
pub async fn ack_after_releases_resets_unacked<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let mut lease = ctx.claim_one("order-42").await;
    for n in 1..=3u32 {
        assert_eq!(
            b.release(&lease).await.expect("release"),
            Fenced::Accepted(())
        );
        ctx.advance(ctx.policy.delay(n));
        lease = ctx.claim_one("order-42").await;
    }
    assert_eq!(ctx.get("order-42").await.unacknowledged_deliveries, 3);
    let acked_at = ctx.now();
    // Far shorter than delay(3) (or delay(1)): a gate left behind would block the wake.
    let wake = plus_ms(acked_at, 10);
    b.request_wake(&ctx.id("order-42"), wake)
        .await
        .expect("wake");
    let ack = b
        .acknowledge(&lease, &WorkflowRunOutcome::Suspended)
        .await
        .expect("ack");
    assert_eq!(ack, Fenced::Accepted(Acknowledged::Suspended));
    let record = ctx.get("order-42").await;
    assert_eq!(record.unacknowledged_deliveries, 0);
    assert_eq!(record.due_at, Some(wake));
    assert_eq!(record.status, ExecutionStatus::Suspended);
    ctx.set_clock(just_before(wake));
    ctx.assert_nothing_claimable("before the wake").await;
    ctx.set_clock(wake);
    let next = ctx.claim_one("order-42").await;
    assert!(next.token > lease.token);
}
