//! Effects and store waiters, the rest of RFC 002's write table. `EffectClient.begin` and
//! `settle` (idempotent by receipt), `EffectClient.wait` and store waiter registration
//! (unfenced: a stale one causes at most one extra delivery). A harness without effects
//! ([`lease_core::Capabilities::effects`] `false`) checks only that the backend says so.

use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    EffectClient, EffectId, EffectState, EffectWait, ExecutionClient, ExecutionLease,
    ExecutionStatus, Fenced, Json, LeaseBackend, LeaseError, Settlement, StoreClient, StoreId,
    StoreKey, StoreOp, StoreReceipt, WorkflowRunOutcome,
};

use crate::context::{Ctx, json, key};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __effects_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, effects, [
            effect_begin_repeat_returns_current_state,
            effect_settle_keeps_first_result_reports_conflicts,
            effect_bad_input_is_typed_and_changes_nothing,
            stale_and_current_holders_race_begin_and_settle, effect_wait_is_woken_by_the_settle,
            stale_effect_wait_causes_at_most_one_extra_delivery,
            store_waiter_is_woken_once_by_a_change,
            stale_store_waiter_causes_at_most_one_extra_delivery,
            purge_removes_effects_and_waiters,
        ] }
    };
}

fn effect(s: &str) -> EffectId {
    EffectId::new(s).expect("effect id")
}

/// The backend's effect client (asserted present: the harness says it has effects).
fn effects(b: &impl LeaseBackend) -> &dyn EffectClient {
    b.effects()
        .expect("declared effects: the backend has an effect client")
}

/// Returns `true` (after checking the backend reports it) when the harness has no effects:
/// the case then ends.
async fn unsupported<H: Harness>(ctx: &Ctx<H>) -> bool {
    if ctx.caps().effects {
        return false;
    }
    let b = ctx.backend();
    assert!(
        b.effects().is_none(),
        "no effect client without the effects capability"
    );
    let store = StoreId::new("s").expect("store");
    b.get_or_create(&store, &[]).await.expect("store");
    ctx.admit("w").await;
    let err = b
        .watch_entry(&store, &StoreKey::new("k").expect("key"), &ctx.id("w"))
        .await
        .expect_err("no store waiters");
    // The store trait's default cannot see the declaration, so its refusal may name
    // "adapter" rather than the backend; the kind is what a caller matches on.
    assert!(matches!(err, LeaseError::Unsupported { .. }), "{err}");
    ctx.refusal_only()
}

/// Claims `id` and acknowledges it suspended with no wake: it is then not due.
async fn suspend<H: Harness>(ctx: &Ctx<H>, id: &str) {
    let lease = ctx.claim_one(id).await;
    ack_suspended(ctx, &lease).await;
}

async fn ack_suspended<H: Harness>(ctx: &Ctx<H>, lease: &ExecutionLease) {
    let ack = ctx
        .backend()
        .acknowledge(lease, &WorkflowRunOutcome::Suspended)
        .await
        .expect("acknowledge");
    assert!(!ack.is_lost());
}

/// Counts the deliveries the clock can still produce for `id` over five hours, each
/// acknowledged suspended with no wake.
async fn deliveries_left<H: Harness>(ctx: &Ctx<H>, id: &str) -> usize {
    let mut count = 0;
    for _ in 0..5 {
        ctx.advance(Duration::from_secs(3600));
        for lease in ctx.claim(&ctx.backend(), 10).await {
            assert_eq!(lease.execution_id, ctx.id(id));
            count += 1;
            ack_suspended(ctx, &lease).await;
        }
    }
    count
}

/// Row `EffectClient.begin`: the effect id identifies one effect; a repeat, by the same or
/// another connection, returns its current state (pending, then settled) and creates nothing.
pub async fn effect_begin_repeat_returns_current_state<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("order-42").await;
    let (b, peer) = (ctx.backend(), ctx.peer().await);
    let id = effect("charge-42");
    let x = ctx.id("order-42");
    let first = effects(&b).begin_effect(&id, &x).await.expect("begin");
    assert!(first.created);
    assert_eq!(first.record.state, EffectState::Pending);
    assert_eq!(first.record.execution_id, x);
    assert_eq!(first.record.begun_at, ctx.now());
    ctx.advance(Duration::from_secs(1));
    let again = effects(&peer).begin_effect(&id, &x).await.expect("begin");
    assert!(!again.created, "a repeat creates nothing");
    assert_eq!(again.record, first.record);
    let settled = effects(&b)
        .settle_effect(&id, &x, &json(r#"{"charge":"ch_1"}"#))
        .await
        .expect("settle");
    let after = effects(&peer).begin_effect(&id, &x).await.expect("begin");
    assert!(!after.created);
    assert_eq!(&after.record, settled.record());
    assert_eq!(
        effects(&peer).read_effect(&id).await.expect("read"),
        Some(after.record)
    );
}

/// Row `EffectClient.settle`: the first result is kept; an equal later result returns it; a
/// different one is reported as a conflict with both values and is not applied.
pub async fn effect_settle_keeps_first_result_reports_conflicts<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let (id, x) = (effect("charge-42"), ctx.id("order-42"));
    effects(&b).begin_effect(&id, &x).await.expect("begin");
    let first = effects(&b)
        .settle_effect(&id, &x, &json(r#""ch_1""#))
        .await
        .expect("settle");
    let kept = match first {
        Settlement::Recorded(r) => r,
        other => panic!("first settle records: {other:?}"),
    };
    assert_eq!(kept.state, EffectState::Settled(json(r#""ch_1""#)));
    assert_eq!(kept.settled_at, Some(ctx.now()));
    ctx.advance(Duration::from_secs(1));
    let peer = ctx.peer().await;
    let equal = effects(&peer)
        .settle_effect(&id, &x, &json(r#""ch_1""#))
        .await
        .expect("settle");
    assert_eq!(equal, Settlement::AlreadySettled(kept.clone()));
    let other = effects(&peer)
        .settle_effect(&id, &x, &json(r#""ch_2""#))
        .await
        .expect("settle");
    assert_eq!(
        other,
        Settlement::Conflict {
            kept: kept.clone(),
            offered: json(r#""ch_2""#)
        }
    );
    assert_eq!(
        effects(&b).read_effect(&id).await.expect("read"),
        Some(kept),
        "a conflict is not applied"
    );
}

/// Bad input: an unknown effect or execution, an effect of another execution, a result over
/// the size limit: typed errors, nothing changed.
pub async fn effect_bad_input_is_typed_and_changes_nothing<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("a").await;
    ctx.admit("b").await;
    let b = ctx.backend();
    let e = effects(&b);
    let (id, a, other) = (effect("eff"), ctx.id("a"), ctx.id("b"));
    let r = json("1");
    let unknown = e.settle_effect(&id, &a, &r).await.expect_err("unknown");
    assert!(
        matches!(unknown, LeaseError::UnknownEffect(ref i) if *i == id),
        "{unknown}"
    );
    let unknown = e.wait_effect(&id, &a).await.expect_err("unknown");
    assert!(matches!(unknown, LeaseError::UnknownEffect(_)), "{unknown}");
    let nobody = e
        .begin_effect(&id, &ctx.id("nobody"))
        .await
        .expect_err("unknown execution");
    assert!(
        matches!(nobody, LeaseError::UnknownExecution(_)),
        "{nobody}"
    );
    assert_eq!(
        e.read_effect(&id).await.expect("read"),
        None,
        "nothing created"
    );
    let begun = e.begin_effect(&id, &a).await.expect("begin").record;
    for err in [
        e.begin_effect(&id, &other).await.expect_err("begin"),
        e.settle_effect(&id, &other, &r).await.expect_err("settle"),
        e.wait_effect(&id, &other)
            .await
            .map(|_| ())
            .expect_err("wait"),
    ] {
        assert!(
            matches!(err, LeaseError::EffectOfAnotherExecution { ref owner, ref caller, .. }
                if *owner == a && *caller == other),
            "{err}"
        );
    }
    let big = format!("\"{}\"", "x".repeat(lease_core::limits::MAX_PAYLOAD_BYTES));
    let too_large = Json::parse("effect result", &big).expect_err("over the limit");
    assert!(matches!(too_large, LeaseError::PayloadTooLarge { .. }));
    assert_eq!(e.read_effect(&id).await.expect("read"), Some(begun));
    // The other execution's refused wait registered nothing: a settle wakes only `a`'s
    // waiters, and `b` (suspended, no wake) stays not due.
    suspend(&*ctx, "b").await;
    let _ = e.settle_effect(&id, &a, &r).await.expect("settle");
    assert_eq!(ctx.get("b").await.due_at, None);
}

/// A stale holder and the current one race `begin` and `settle` with different results
/// (rounds of concurrent calls on separate connections): both see one effect, created
/// once, and both end with the first result.
pub async fn stale_and_current_holders_race_begin_and_settle<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let mut stale_peer = ctx.backend();
    for round in 0..10 {
        let name = format!("order-{round}");
        ctx.admit(&name).await;
        let stale = ctx.claim_only(&stale_peer, &name).await;
        let (current_peer, current) = ctx.reclaim(&stale).await;
        let id = effect(&format!("charge-{round}"));
        let holder = |b: H::Backend, result: &'static str| {
            let (id, x) = (id.clone(), current.execution_id.clone());
            tokio::spawn(async move {
                let begun = effects(&b).begin_effect(&id, &x).await.expect("begin");
                let settled = effects(&b)
                    .settle_effect(&id, &x, &json(result))
                    .await
                    .expect("settle");
                (begun.created, settled)
            })
        };
        let a = holder(stale_peer.clone(), r#""stale""#);
        let b = holder(current_peer.clone(), r#""current""#);
        let (a, b) = (crate::context::join(a).await, crate::context::join(b).await);
        assert!(a.0 ^ b.0, "round {round}: exactly one begin creates");
        assert_eq!(a.1.result(), b.1.result(), "round {round}: one result");
        let recorded = [&a.1, &b.1]
            .iter()
            .filter(|s| matches!(s, Settlement::Recorded(_)))
            .count();
        assert_eq!(recorded, 1, "round {round}: one settle applied");
        let stored = effects(&stale_peer).read_effect(&id).await.expect("read");
        assert_eq!(stored.as_ref(), Some(a.1.record()));
        let done = WorkflowRunOutcome::Completed(json("1"));
        let ack = current_peer
            .acknowledge(&current, &done)
            .await
            .expect("ack");
        assert!(!ack.is_lost());
        stale_peer = current_peer;
    }
}

/// Row `EffectClient.wait`: waiting on a pending effect registers the owner, and the settle
/// makes it due (a suspended execution is claimable at the settle's instant); waiting on a
/// settled effect returns it and registers nothing; an equal or conflicting later settle
/// wakes nobody.
pub async fn effect_wait_is_woken_by_the_settle<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let (id, x) = (effect("charge-42"), ctx.id("order-42"));
    let lease = ctx.claim_one("order-42").await;
    effects(&b).begin_effect(&id, &x).await.expect("begin");
    assert_eq!(
        effects(&b).wait_effect(&id, &x).await.expect("wait"),
        EffectWait::Registered
    );
    ack_suspended(&*ctx, &lease).await;
    assert_eq!(ctx.get("order-42").await.due_at, None);
    ctx.assert_nothing_claimable("suspended, effect pending")
        .await;
    ctx.advance(Duration::from_secs(5));
    let settled = effects(&ctx.peer().await)
        .settle_effect(&id, &x, &json(r#""ch_1""#))
        .await
        .expect("settle");
    assert_eq!(ctx.get("order-42").await.due_at, Some(ctx.now()));
    let lease = ctx.claim_one("order-42").await;
    match effects(&b).wait_effect(&id, &x).await.expect("wait") {
        EffectWait::Settled(record) => assert_eq!(&record, settled.record()),
        other => panic!("a settled effect is returned: {other:?}"),
    }
    ack_suspended(&*ctx, &lease).await;
    let _ = effects(&b)
        .settle_effect(&id, &x, &json(r#""ch_1""#))
        .await
        .expect("settle");
    let _ = effects(&b)
        .settle_effect(&id, &x, &json(r#""ch_2""#))
        .await
        .expect("settle");
    assert_eq!(deliveries_left(&*ctx, "order-42").await, 0);
}

/// Row "`EffectClient.wait` by a stale holder": its registration causes at most one extra
/// delivery, and the current holder's outcome is unchanged.
pub async fn stale_effect_wait_causes_at_most_one_extra_delivery<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let (id, x) = (effect("charge-42"), ctx.id("order-42"));
    let stale = ctx.claim_one("order-42").await;
    effects(&b).begin_effect(&id, &x).await.expect("begin");
    let (peer, current) = ctx.reclaim(&stale).await;
    assert_eq!(
        effects(&b).wait_effect(&id, &x).await.expect("stale wait"),
        EffectWait::Registered
    );
    let ack = peer
        .acknowledge(&current, &WorkflowRunOutcome::Suspended)
        .await
        .expect("ack");
    assert!(!ack.is_lost());
    let _ = effects(&peer)
        .settle_effect(&id, &x, &json("1"))
        .await
        .expect("settle");
    assert!(deliveries_left(&*ctx, "order-42").await <= 1);
    let record = ctx.get("order-42").await;
    assert_eq!(record.status, ExecutionStatus::Suspended);
    assert_eq!(record.due_at, None);
}

/// Row "store waiter registration": the next applied update of the watched entry wakes the
/// waiter, once; an update that does not apply (a failed compare-and-set), a replay of a
/// receipt and an update of another entry wake nobody. Registration returns the entry's
/// value; bad names are typed errors.
pub async fn store_waiter_is_woken_once_by_a_change<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    let store = StoreId::new("inventory").expect("store");
    let (sku, other) = (
        StoreKey::new("sku-7").expect("key"),
        StoreKey::new("sku-8").expect("key"),
    );
    b.get_or_create(&store, &[(sku.clone(), json("5"))])
        .await
        .expect("store");
    ctx.admit("order-42").await;
    suspend(&*ctx, "order-42").await;
    let x = ctx.id("order-42");
    let seen = b.watch_entry(&store, &sku, &x).await.expect("watch");
    assert_eq!(seen, Some(json("5")));
    let update = |step: &str, op: StoreOp| {
        let receipt = StoreReceipt {
            store: store.clone(),
            execution_id: x.clone(),
            step_key: key(step),
        };
        let b = b.clone();
        async move { b.update(&receipt, &op).await.expect("update") }
    };
    let mismatch = StoreOp::CompareAndSet {
        key: sku.clone(),
        expected: Some(json("9")),
        new: json("0"),
    };
    assert!(!update("cas", mismatch).await.outcome.applied);
    let put_other = StoreOp::Put {
        key: other.clone(),
        value: json("1"),
    };
    assert!(update("other", put_other).await.outcome.applied);
    assert_eq!(ctx.get("order-42").await.due_at, None, "no change of sku-7");
    ctx.advance(Duration::from_secs(2));
    let take = StoreOp::Put {
        key: sku.clone(),
        value: json("4"),
    };
    assert!(update("take", take.clone()).await.outcome.applied);
    assert_eq!(ctx.get("order-42").await.due_at, Some(ctx.now()), "woken");
    let lease = ctx.claim_one("order-42").await;
    ack_suspended(&*ctx, &lease).await;
    assert!(update("take", take).await.replayed);
    let put = StoreOp::Put {
        key: sku.clone(),
        value: json("3"),
    };
    assert!(update("again", put).await.outcome.applied);
    assert_eq!(deliveries_left(&*ctx, "order-42").await, 0, "one-shot");
    let missing = StoreId::new("missing").expect("store");
    let err = b.watch_entry(&missing, &sku, &x).await.expect_err("store");
    assert!(matches!(err, LeaseError::UnknownStore(_)), "{err}");
    let err = b
        .watch_entry(&store, &sku, &ctx.id("nobody"))
        .await
        .expect_err("execution");
    assert!(matches!(err, LeaseError::UnknownExecution(_)), "{err}");
}

/// Row "store waiter registration by a stale holder": at most one extra delivery; the
/// current holder's outcome is unchanged.
pub async fn stale_store_waiter_causes_at_most_one_extra_delivery<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    let store = StoreId::new("inventory").expect("store");
    let sku = StoreKey::new("sku-7").expect("key");
    b.get_or_create(&store, &[]).await.expect("store");
    ctx.admit("order-42").await;
    let x = ctx.id("order-42");
    let stale = ctx.claim_one("order-42").await;
    let (peer, current) = ctx.reclaim(&stale).await;
    assert_eq!(b.watch_entry(&store, &sku, &x).await.expect("watch"), None);
    let ack = peer
        .acknowledge(&current, &WorkflowRunOutcome::Suspended)
        .await
        .expect("ack");
    assert!(!ack.is_lost());
    for (step, value) in [("one", "1"), ("two", "2")] {
        let receipt = StoreReceipt {
            store: store.clone(),
            execution_id: x.clone(),
            step_key: key(step),
        };
        let put = StoreOp::Put {
            key: sku.clone(),
            value: json(value),
        };
        peer.update(&receipt, &put).await.expect("update");
    }
    assert!(deliveries_left(&*ctx, "order-42").await <= 1);
    assert_eq!(ctx.get("order-42").await.status, ExecutionStatus::Suspended);
}

/// Retention and effects (both capabilities): a purged execution's effects and its waiter
/// registrations go with it; a live execution's stay.
pub async fn purge_removes_effects_and_waiters<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await || (!ctx.caps().retention && ctx.refusal_only()) {
        return;
    }
    let b = ctx.backend();
    let store = StoreId::new("inventory").expect("store");
    let sku = StoreKey::new("sku-7").expect("key");
    b.get_or_create(&store, &[]).await.expect("store");
    for name in ["old", "live"] {
        ctx.admit(name).await;
        let x = ctx.id(name);
        let lease = ctx.claim_one(name).await;
        let e = effect(&format!("{name}-charge"));
        effects(&b).begin_effect(&e, &x).await.expect("begin");
        assert_eq!(
            effects(&b).wait_effect(&e, &x).await.expect("wait"),
            EffectWait::Registered
        );
        b.watch_entry(&store, &sku, &x).await.expect("watch");
        let outcome = if name == "old" {
            WorkflowRunOutcome::Completed(json("1"))
        } else {
            WorkflowRunOutcome::Suspended
        };
        assert!(matches!(
            b.acknowledge(&lease, &outcome).await.expect("ack"),
            Fenced::Accepted(_)
        ));
    }
    ctx.advance(Duration::from_secs(10));
    let purged = b.purge_terminal(ctx.now(), 100).await.expect("purge");
    assert_eq!(purged.ids, vec![ctx.id("old")]);
    assert_eq!(
        effects(&b)
            .read_effect(&effect("old-charge"))
            .await
            .expect("read"),
        None
    );
    let live = effect("live-charge");
    assert!(
        effects(&b)
            .read_effect(&live)
            .await
            .expect("read")
            .is_some()
    );
    let receipt = StoreReceipt {
        store: store.clone(),
        execution_id: ctx.id("live"),
        step_key: key("put"),
    };
    let put = StoreOp::Put {
        key: sku,
        value: json("1"),
    };
    b.update(&receipt, &put).await.expect("update");
    assert_eq!(
        ctx.get("live").await.due_at,
        Some(ctx.now()),
        "live waiter kept"
    );
}
