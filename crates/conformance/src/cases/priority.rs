//! Priorities: a claim takes higher priorities first, then the earliest due time, then the
//! smallest id. A harness without priorities and limits ([`lease_core::Capabilities::priorities`]
//! `false`) checks that an admission using one is `Unsupported` and admits nothing.

use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, ConcurrencyKey, ExecutionClient, LeaseError, Priority,
    control::{MAX_PRIORITY, MIN_PRIORITY},
};

use crate::context::{Ctx, plus};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __priority_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, priority, [
            claims_take_higher_priority_first, equal_priorities_go_by_due_time_then_id,
            priority_and_key_are_stored, priority_out_of_range_rejected,
        ] }
    };
}

/// `id` with priority `p`, due at its admission unless `not_before` says otherwise.
pub(crate) fn prioritized<H: Harness>(ctx: &Ctx<H>, id: &str, p: i32) -> Admission {
    Admission::new(ctx.id(id)).priority(Priority::new(p).expect("priority"))
}

/// Returns `true` (after checking the refusal admitted nothing) when the harness has no
/// priorities and limits: the case then ends, having checked only the refusal.
pub(crate) async fn unsupported<H: Harness>(ctx: &Ctx<H>) -> bool {
    check_refused(ctx).await && ctx.refusal_only()
}

/// The check of [`unsupported`], for a case that goes on to check what needs no capability.
async fn check_refused<H: Harness>(ctx: &Ctx<H>) -> bool {
    if ctx.caps().priorities {
        return false;
    }
    let b = ctx.backend();
    let keyed = Admission::new(ctx.id("keyed"))
        .concurrency_key(ConcurrencyKey::new("tenant").expect("key"));
    let mut refused = vec![prioritized(ctx, "urgent", 5)];
    if !ctx.caps().concurrency_limits {
        refused.push(keyed);
    }
    for admission in refused {
        let err = b.admit(&admission).await.expect_err("unsupported");
        ctx.assert_unsupported(&err);
        let err = b
            .admit_batch(std::slice::from_ref(&admission))
            .await
            .expect_err("unsupported");
        ctx.assert_unsupported(&err);
        assert!(b.get(&admission.id).await.expect("get").is_none());
    }
    true
}

/// Whether `e` refuses a per-key setting or a keyed admission on a backend that declares no
/// concurrency keys: `Unsupported` naming the backend its declaration names.
pub(crate) fn key_refusal<H: Harness>(ctx: &Ctx<H>, e: &LeaseError) -> bool {
    matches!(e, LeaseError::Unsupported { backend, .. } if *backend == ctx.caps().backend)
}

/// Returns `true` (after checking the refusals admitted and set nothing) when this run's
/// store has no concurrency keys and limits ([`lease_core::Capabilities::concurrency_limits`]); also when it
/// has no priorities either ([`unsupported`]).
pub(crate) async fn limits_unsupported<H: Harness>(ctx: &Ctx<H>) -> bool {
    if unsupported(ctx).await {
        return true;
    }
    if ctx.caps().concurrency_limits {
        return false;
    }
    let b = ctx.backend();
    let refused = |e: &LeaseError| key_refusal(ctx, e);
    let keyed = Admission::new(ctx.id("keyed"))
        .concurrency_key(ConcurrencyKey::new("tenant").expect("key"));
    let err = b.admit(&keyed).await.expect_err("keys refused");
    assert!(refused(&err), "{err}");
    let batch = [Admission::new(ctx.id("plain")), keyed.clone()];
    let err = b.admit_batch(&batch).await.expect_err("keys refused");
    assert!(refused(&err), "{err}");
    for id in ["keyed", "plain"] {
        assert!(b.get(&ctx.id(id)).await.expect("get").is_none(), "{id}");
    }
    let limit = lease_core::ConcurrencyLimit::new(1).expect("limit");
    let scope = lease_core::LimitScope::Key(ConcurrencyKey::new("tenant").expect("key"));
    let err = b
        .set_concurrency_limit(&scope, Some(limit))
        .await
        .expect_err("limits refused");
    assert!(refused(&err), "{err}");
    let none = lease_core::ConcurrencyLimits::default();
    assert_eq!(b.concurrency_limits().await.expect("read"), none);
    ctx.refusal_only()
}

/// One claim at a time takes the highest priority first, whatever the admission order and
/// even when a lower priority is due earlier.
pub async fn claims_take_higher_priority_first<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    let early = ctx.now();
    b.admit(&prioritized(&*ctx, "low", MIN_PRIORITY))
        .await
        .expect("admit");
    ctx.advance(Duration::from_millis(5));
    b.admit(&prioritized(&*ctx, "normal", 0))
        .await
        .expect("admit");
    ctx.advance(Duration::from_millis(5));
    b.admit(&prioritized(&*ctx, "high", MAX_PRIORITY))
        .await
        .expect("admit");
    b.admit(&prioritized(&*ctx, "some", 3).not_before(early))
        .await
        .expect("admit");
    let mut order = Vec::new();
    for _ in 0..4 {
        let leases = ctx.claim(&b, 1).await;
        assert_eq!(leases.len(), 1);
        order.push(leases[0].execution_id.as_str().to_owned());
    }
    assert_eq!(order, ["high", "some", "normal", "low"]);
}

/// Within one priority the earliest due goes first; equal due times go by id.
pub async fn equal_priorities_go_by_due_time_then_id<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    let t = ctx.now();
    let admissions = [
        prioritized(&*ctx, "b-later", 2).not_before(plus(t, Duration::from_millis(2))),
        prioritized(&*ctx, "c-first", 2).not_before(t),
        prioritized(&*ctx, "a-first", 2).not_before(t),
    ];
    b.admit_batch(&admissions).await.expect("admit");
    ctx.advance(Duration::from_millis(10));
    let order: Vec<String> = ctx
        .claim(&b, 10)
        .await
        .into_iter()
        .map(|l| l.execution_id.as_str().to_owned())
        .collect();
    assert_eq!(order, ["a-first", "c-first", "b-later"]);
}

/// `get` and the claim's record report the admission's priority and key.
pub async fn priority_and_key_are_stored<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    // Without keys in this run (no `Capabilities::concurrency_limits`), the priority alone.
    let key = ctx
        .caps()
        .concurrency_limits
        .then(|| ConcurrencyKey::new("tenant-7").expect("key"));
    let mut admission = prioritized(&*ctx, "job", -3);
    admission.concurrency_key = key.clone();
    let admitted = b.admit(&admission).await.expect("admit");
    assert_eq!(admitted.priority.get(), -3);
    assert_eq!(admitted.concurrency_key, key);
    let got = ctx.get("job").await;
    assert_eq!((got.priority.get(), got.concurrency_key), (-3, key));
    assert_eq!(ctx.get("job").await, admitted);
}

/// A priority outside the range, an empty or over-long key are `InvalidInput`.
pub async fn priority_out_of_range_rejected<H: Harness>(ctx: Arc<Ctx<H>>) {
    let _ = check_refused(&*ctx).await;
    for bad in [MIN_PRIORITY - 1, MAX_PRIORITY + 1, i32::MAX, i32::MIN] {
        let err = Priority::new(bad).expect_err("out of range");
        assert!(matches!(err, LeaseError::InvalidInput { .. }), "{err}");
    }
    for bad in [String::new(), "k".repeat(256)] {
        let err = ConcurrencyKey::new(bad).expect_err("bad key");
        assert!(matches!(err, LeaseError::InvalidInput { .. }), "{err}");
    }
}
