//! Concurrency limits per key: never more live leases for one key than its limit, across
//! every connection, counted in the claim's own atomic step; an ended or expired lease
//! frees its place. A harness without them checks `Unsupported` (see
//! [`crate::cases::priority`]); a run without keys ([`lease_core::Capabilities::concurrency_limits`]
//! `false`) checks that they are refused.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, CancelReason, ConcurrencyKey, ConcurrencyLimit, ConcurrencyLimits, ExecutionClient,
    ExecutionLease, LeaseError, LimitScope, WorkflowRunOutcome,
};
use tokio::sync::Barrier;

use crate::cases::priority::limits_unsupported;
use crate::context::{Ctx, json, plus};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __limits_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, limits, [
            key_limit_caps_live_leases_and_acknowledge_frees_a_place,
            expired_or_cancelled_lease_frees_its_place,
            default_limit_applies_to_keys_without_their_own,
            limits_round_trip_and_bad_input_rejected, racing_claimers_never_exceed_limit_1,
            racing_claimers_never_exceed_limit_3,
        ] }
    };
}

fn key(name: &str) -> ConcurrencyKey {
    ConcurrencyKey::new(name).expect("key")
}

fn limit(n: u32) -> Option<ConcurrencyLimit> {
    Some(ConcurrencyLimit::new(n).expect("limit"))
}

/// Admits `ids` with concurrency key `k` in one batch.
async fn admit_keyed<H: Harness>(ctx: &Ctx<H>, k: &str, ids: &[String]) {
    let admissions: Vec<Admission> = ids
        .iter()
        .map(|id| Admission::new(ctx.id(id)).concurrency_key(key(k)))
        .collect();
    ctx.backend().admit_batch(&admissions).await.expect("admit");
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

fn ids_of(leases: &[ExecutionLease]) -> Vec<String> {
    leases
        .iter()
        .map(|l| l.execution_id.as_str().to_owned())
        .collect()
}

/// With limit 1, one claim of ten takes one keyed execution and every unkeyed one; the
/// next claim takes nothing of the key until its lease is acknowledged.
pub async fn key_limit_caps_live_leases_and_acknowledge_frees_a_place<H: Harness>(
    ctx: Arc<Ctx<H>>,
) {
    if limits_unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    b.set_concurrency_limit(&LimitScope::Key(key("acme")), limit(1))
        .await
        .expect("limit");
    admit_keyed(&*ctx, "acme", &names("acme", 3)).await;
    ctx.admit("free").await;
    let first = ctx.claim(&b, 10).await;
    assert_eq!(
        ids_of(&first),
        ["acme-0", "free"],
        "one of the key, and the unkeyed one"
    );
    assert!(
        ctx.claim(&ctx.peer().await, 10).await.is_empty(),
        "the key is full"
    );
    let ack = b
        .acknowledge(&first[0], &WorkflowRunOutcome::Completed(json("1")))
        .await
        .expect("ack");
    assert!(!ack.is_lost());
    assert_eq!(ids_of(&ctx.claim(&b, 10).await), ["acme-1"]);
}

/// A lease that expires frees its place at its expiry, and a cancel frees it at once.
pub async fn expired_or_cancelled_lease_frees_its_place<H: Harness>(ctx: Arc<Ctx<H>>) {
    if limits_unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    b.set_concurrency_limit(&LimitScope::Key(key("acme")), limit(1))
        .await
        .expect("limit");
    admit_keyed(&*ctx, "acme", &names("acme", 3)).await;
    let held = ctx.claim_only(&b, "acme-0").await;
    ctx.set_clock(plus(held.expires_at, Duration::from_millis(0)));
    // Expired: the place is free; the redelivery delay keeps acme-0 itself back.
    let next = ctx.claim_only(&b, "acme-1").await;
    if ctx.caps().cancel {
        let reason = CancelReason::new("stop").expect("reason");
        b.cancel(&next.execution_id, &reason).await.expect("cancel");
        ctx.claim_only(&b, "acme-2").await;
    }
}

/// The namespace default limits every key without its own limit, each key on its own; a
/// key's own limit wins; removing limits makes keys unlimited.
pub async fn default_limit_applies_to_keys_without_their_own<H: Harness>(ctx: Arc<Ctx<H>>) {
    if limits_unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    b.set_concurrency_limit(&LimitScope::Default, limit(2))
        .await
        .expect("default");
    b.set_concurrency_limit(&LimitScope::Key(key("big")), limit(3))
        .await
        .expect("limit");
    for k in ["small", "other", "big"] {
        admit_keyed(&*ctx, k, &names(k, 4)).await;
    }
    let got = ctx.claim(&b, 100).await;
    let count = |k: &str| {
        got.iter()
            .filter(|l| l.execution_id.as_str().starts_with(k))
            .count()
    };
    assert_eq!((count("small"), count("other"), count("big")), (2, 2, 3));
    b.set_concurrency_limit(&LimitScope::Default, None)
        .await
        .expect("remove");
    b.set_concurrency_limit(&LimitScope::Key(key("big")), None)
        .await
        .expect("remove");
    assert_eq!(ctx.claim(&b, 100).await.len(), 5, "unlimited: the rest");
}

/// What is set reads back (keys by name); bad values are `InvalidInput`.
pub async fn limits_round_trip_and_bad_input_rejected<H: Harness>(ctx: Arc<Ctx<H>>) {
    if limits_unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    assert_eq!(
        b.concurrency_limits().await.expect("read"),
        ConcurrencyLimits::default()
    );
    b.set_concurrency_limit(&LimitScope::Key(key("zeta")), limit(4))
        .await
        .expect("set");
    b.set_concurrency_limit(&LimitScope::Key(key("alpha")), limit(1))
        .await
        .expect("set");
    b.set_concurrency_limit(&LimitScope::Key(key("zeta")), limit(5))
        .await
        .expect("replace");
    b.set_concurrency_limit(&LimitScope::Default, limit(9))
        .await
        .expect("set");
    let want = ConcurrencyLimits {
        default: limit(9),
        keys: vec![
            (key("alpha"), ConcurrencyLimit::new(1).expect("limit")),
            (key("zeta"), ConcurrencyLimit::new(5).expect("limit")),
        ],
    };
    assert_eq!(
        ctx.peer().await.concurrency_limits().await.expect("read"),
        want
    );
    for bad in [0, lease_core::control::MAX_CONCURRENCY_LIMIT + 1] {
        let err = ConcurrencyLimit::new(bad).expect_err("bad limit");
        assert!(matches!(err, LeaseError::InvalidInput { .. }), "{err}");
    }
}

/// Several connections claim at once (a barrier releases them together), over several
/// rounds; the key's live leases never exceed its limit and every execution is claimed at
/// most once at a time.
async fn racing_claimers<H: Harness>(ctx: Arc<Ctx<H>>, cap: u32) {
    if limits_unsupported(&*ctx).await {
        return;
    }
    const CLAIMERS: usize = 4;
    let b = ctx.backend();
    b.set_concurrency_limit(&LimitScope::Key(key("hot")), limit(cap))
        .await
        .expect("limit");
    admit_keyed(&*ctx, "hot", &names("hot", 12)).await;
    let mut peers = Vec::new();
    for _ in 0..CLAIMERS {
        peers.push(ctx.peer().await);
    }
    let mut live: Vec<ExecutionLease> = Vec::new();
    for round in 0..4 {
        let barrier = Arc::new(Barrier::new(CLAIMERS));
        let tasks: Vec<_> = peers
            .iter()
            .cloned()
            .map(|peer| {
                let (barrier, ctx) = (barrier.clone(), ctx.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    ctx.claim(&peer, 5).await
                })
            })
            .collect();
        for task in tasks {
            live.extend(crate::context::join(task).await);
        }
        let distinct: HashSet<_> = live.iter().map(|l| l.execution_id.clone()).collect();
        assert_eq!(
            distinct.len(),
            live.len(),
            "round {round}: one lease per execution"
        );
        assert!(
            live.len() <= cap as usize,
            "round {round}: {} live, limit {cap}",
            live.len()
        );
        assert_eq!(
            live.len(),
            cap as usize,
            "round {round}: the key is filled to its limit"
        );
        // Free one place for the next round.
        let done = live.remove(0);
        let ack = b
            .acknowledge(&done, &WorkflowRunOutcome::Completed(json("1")))
            .await
            .expect("ack");
        assert!(!ack.is_lost());
    }
}

/// `racing_claimers` with limit 1.
pub async fn racing_claimers_never_exceed_limit_1<H: Harness>(ctx: Arc<Ctx<H>>) {
    racing_claimers(ctx, 1).await;
}

/// `racing_claimers` with limit 3.
pub async fn racing_claimers_never_exceed_limit_3<H: Harness>(ctx: Arc<Ctx<H>>) {
    racing_claimers(ctx, 3).await;
}
