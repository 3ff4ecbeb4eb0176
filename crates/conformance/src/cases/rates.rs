//! Start rates per key ([`lease_core::keyed`]): at most `starts` claims of a key's
//! executions in any sliding window of `period`, counted in the claim's own atomic step over
//! every process; a claim is a start whether or not a worker runs it (redeliveries count);
//! a key held back by its rate holds back nothing else, and the claim's horizon says when
//! it may start again. A harness without them ([`lease_core::Capabilities::rate_limits`] `false`) checks
//! only the typed `Unsupported` answers.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use lease_core::keyed::{MAX_RATE_PERIOD, MAX_RATE_STARTS};
use lease_core::{
    Admission, ClaimBatch, ClaimRequest, ConcurrencyKey, ExecutionClient, ExecutionLease,
    LeaseBackend, LeaseError, LimitScope, RateLimit, RateLimits, Timestamp, WakeReceiver,
    WorkflowRunOutcome,
};
use tokio::sync::Barrier;

use crate::cases::priority::key_refusal;
use crate::context::{Ctx, LEASE, json, plus_ms};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __rates_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, rates, [
            rates_round_trip_and_bad_values_refused,
            rates_allow_exactly_n_per_sliding_window,
            rates_default_applies_to_each_key_on_its_own,
            rates_held_key_backlog_holds_back_no_other_work,
            rates_racing_peers_never_exceed_the_rate,
            rates_redeliveries_count_as_starts,
            rates_limit_set_later_counts_from_then,
            rates_raised_or_removed_let_claims_proceed,
        ] }
    };
}

/// A concurrency key (panics on invalid test input).
pub(crate) fn key(name: &str) -> ConcurrencyKey {
    ConcurrencyKey::new(name).expect("key")
}

/// `starts` per `period_ms` milliseconds (panics on invalid test input).
fn rate(starts: u32, period_ms: u64) -> RateLimit {
    RateLimit::new(starts, Duration::from_millis(period_ms)).expect("rate")
}

/// `prefix-0` .. `prefix-(n-1)`, zero-padded to three digits.
pub(crate) fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:03}")).collect()
}

/// The execution ids of `leases`, in the claim's order.
pub(crate) fn ids_of(leases: &[ExecutionLease]) -> Vec<String> {
    leases
        .iter()
        .map(|l| l.execution_id.as_str().to_owned())
        .collect()
}

/// Admits `ids` with concurrency key `k`, in batches the backends accept, in this order.
pub(crate) async fn admit_keyed<H: Harness>(ctx: &Ctx<H>, k: &str, ids: &[String]) {
    let admissions: Vec<Admission> = ids
        .iter()
        .map(|id| Admission::new(ctx.id(id)).concurrency_key(key(k)))
        .collect();
    for chunk in admissions.chunks(lease_core::limits::MAX_ADMIT_BATCH / 2) {
        ctx.backend().admit_batch(chunk).await.expect("admit");
    }
}

/// Claims up to `limit` on `b` at the clock's now, with the horizon.
pub(crate) async fn claim_batch(b: &impl LeaseBackend, limit: usize) -> ClaimBatch {
    let now = b.now().await.expect("now");
    b.claim_due_with_horizon(ClaimRequest {
        now,
        limit,
        duration: LEASE,
    })
    .await
    .expect("claim")
}

/// Asserts what a batch that claimed nothing says of when to look again: with wake-ups the
/// horizon is after `now` (no spinning on held-back work) and never after `truth`, the
/// instant something becomes claimable; any reported horizon is never after `truth`.
pub(crate) fn assert_horizon<H: Harness>(
    ctx: &Ctx<H>,
    batch: &ClaimBatch,
    now: Timestamp,
    truth: Timestamp,
) {
    assert!(batch.claimed.is_empty(), "nothing claimable: {batch:?}");
    if ctx.caps().wakeups {
        let next = batch.next_claimable_at.expect("a horizon");
        assert!(next > now, "held-back work is not claimable now: {next:?}");
    }
    if let Some(next) = batch.next_claimable_at {
        assert!(
            next <= truth,
            "horizon {next:?} is after the truth {truth:?}"
        );
    }
}

/// Returns `true` when the backend declares no rate limits, after checking the refusal
/// ([`policy_refused`]): the case then ends.
async fn unsupported<H: Harness>(ctx: &Ctx<H>) -> bool {
    if ctx.caps().rate_limits {
        return false;
    }
    let b = ctx.backend();
    policy_refused(
        ctx,
        b.set_rate_limit(&LimitScope::Default, Some(rate(1, 1000)))
            .await,
        b.rate_limits().await,
    );
    ctx.refusal_only()
}

/// A per-key policy the backend does not declare (rates, ordering): setting one is refused
/// ([`key_refusal`]), and reading says `Unsupported` or that nothing is set.
pub(crate) fn policy_refused<H: Harness, T: PartialEq + Default + std::fmt::Debug>(
    ctx: &Ctx<H>,
    set: lease_core::Result<()>,
    read: lease_core::Result<T>,
) {
    let err = set.expect_err("declared absent, so refused");
    assert!(key_refusal(ctx, &err), "{err}");
    match read {
        Ok(read) => assert_eq!(read, T::default(), "nothing was set"),
        Err(e) => ctx.assert_unsupported(&e),
    }
}

/// Waits (at most 10 s) for a wake-up saying "claimable at `now` or before", passing over
/// later instants (the expiries of leases claimed before, whose signals may arrive late).
pub(crate) async fn expect_signal_now(wakeups: &WakeReceiver, now: Timestamp, after: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let at = tokio::time::timeout_at(deadline, wakeups.recv())
            .await
            .unwrap_or_else(|_| panic!("no wake-up saying \"now\" after {after}"));
        if at <= now {
            return;
        }
    }
}

/// Sets `k`'s own rate on the first connection.
async fn set_rate<H: Harness>(ctx: &Ctx<H>, k: &str, limit: Option<RateLimit>) {
    ctx.backend()
        .set_rate_limit(&LimitScope::Key(key(k)), limit)
        .await
        .expect("set rate");
}

/// Out-of-range limits cannot be built; what is set reads back on a peer, keys sorted;
/// a key's limit is replaced and removed, and the default removed.
pub async fn rates_round_trip_and_bad_values_refused<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let ms = Duration::from_millis;
    for (starts, period) in [
        (0, ms(1000)),
        (MAX_RATE_STARTS + 1, ms(1000)),
        (1, Duration::ZERO),
        (1, Duration::from_micros(1500)),
        (1, MAX_RATE_PERIOD + ms(1)),
    ] {
        let err = RateLimit::new(starts, period).expect_err("bad rate");
        assert!(matches!(err, LeaseError::InvalidInput { .. }), "{err}");
    }
    let b = ctx.backend();
    assert_eq!(b.rate_limits().await.expect("read"), RateLimits::default());
    set_rate(&*ctx, "zeta", Some(rate(4, 1000))).await;
    set_rate(&*ctx, "alpha", Some(rate(1, 100))).await;
    set_rate(&*ctx, "mid", Some(rate(2, 5))).await;
    set_rate(&*ctx, "zeta", Some(rate(5, 60_000))).await;
    let top = RateLimit::new(MAX_RATE_STARTS, MAX_RATE_PERIOD).expect("rate");
    b.set_rate_limit(&LimitScope::Default, Some(top))
        .await
        .expect("default");
    let want = RateLimits {
        default: Some(top),
        keys: vec![
            (key("alpha"), rate(1, 100)),
            (key("mid"), rate(2, 5)),
            (key("zeta"), rate(5, 60_000)),
        ],
    };
    let peer = ctx.peer().await;
    assert_eq!(peer.rate_limits().await.expect("read"), want);
    set_rate(&*ctx, "mid", None).await;
    b.set_rate_limit(&LimitScope::Default, None)
        .await
        .expect("remove");
    let want = RateLimits {
        default: None,
        keys: vec![(key("alpha"), rate(1, 100)), (key("zeta"), rate(5, 60_000))],
    };
    assert_eq!(peer.rate_limits().await.expect("read"), want);
}

/// 3 starts per second: 1 claim at `t`, 2 at `t + 400`; the window is full until
/// `t + 1000` exactly (half-open: a claim at `t` stops counting at `t + 1000`), when one
/// place frees, and the next two at `t + 1400`. The horizon of a held claim is the instant
/// the key may start again.
pub async fn rates_allow_exactly_n_per_sliding_window<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    set_rate(&*ctx, "tick", Some(rate(3, 1000))).await;
    admit_keyed(&*ctx, "tick", &names("tick", 10)).await;
    let b = ctx.backend();
    let t = ctx.now();
    assert_eq!(ids_of(&ctx.claim(&b, 1).await), ["tick-000"]);
    ctx.set_clock(plus_ms(t, 400));
    assert_eq!(ids_of(&ctx.claim(&b, 10).await), ["tick-001", "tick-002"]);
    ctx.set_clock(plus_ms(t, 999));
    let held = claim_batch(&ctx.peer().await, 10).await;
    assert_horizon(&*ctx, &held, ctx.now(), plus_ms(t, 1000));
    ctx.set_clock(plus_ms(t, 1000));
    assert_eq!(ids_of(&ctx.claim(&b, 10).await), ["tick-003"]);
    ctx.set_clock(plus_ms(t, 1399));
    let held = claim_batch(&b, 10).await;
    assert_horizon(&*ctx, &held, ctx.now(), plus_ms(t, 1400));
    ctx.set_clock(plus_ms(t, 1400));
    assert_eq!(ids_of(&ctx.claim(&b, 10).await), ["tick-004", "tick-005"]);
    assert!(
        ctx.claim(&b, 10).await.is_empty(),
        "the window is full again"
    );
}

/// The default rate limits every key without its own limit, each key counted on its own;
/// a key's own limit wins; executions without a key are never limited.
pub async fn rates_default_applies_to_each_key_on_its_own<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    b.set_rate_limit(&LimitScope::Default, Some(rate(1, 60_000)))
        .await
        .expect("default");
    set_rate(&*ctx, "big", Some(rate(3, 60_000))).await;
    for k in ["small", "other", "big"] {
        admit_keyed(&*ctx, k, &names(k, 4)).await;
    }
    for id in ["free-0", "free-1"] {
        ctx.admit(id).await;
    }
    let got = ctx.claim(&b, 100).await;
    let count = |prefix: &str| {
        got.iter()
            .filter(|l| l.execution_id.as_str().starts_with(prefix))
            .count()
    };
    let counts = (count("small"), count("other"), count("big"), count("free"));
    assert_eq!(counts, (1, 1, 3, 2));
    assert!(
        ctx.claim(&b, 100).await.is_empty(),
        "every key used its rate"
    );
}

/// 600 executions of `hot` at 1 start a minute, admitted first, then one of key `cold` and
/// one with no key: a claim of 4 takes the first `hot`, `cold` and the unkeyed one; a
/// claim then takes nothing and reports the minute's end (or earlier), and at the minute's
/// end exactly the next `hot`, in order.
pub async fn rates_held_key_backlog_holds_back_no_other_work<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    set_rate(&*ctx, "hot", Some(rate(1, 60_000))).await;
    let backlog = names("hot", 600);
    admit_keyed(&*ctx, "hot", &backlog).await;
    ctx.advance(Duration::from_millis(1));
    let t = ctx.now();
    let late = [
        Admission::new(ctx.id("cold")).concurrency_key(key("cold")),
        Admission::new(ctx.id("free")),
    ];
    let b = ctx.backend();
    b.admit_batch(&late).await.expect("admit");
    let first = ctx.claim(&b, 4).await;
    let mut got = ids_of(&first);
    got.sort();
    assert_eq!(got, ["cold", "free", "hot-000"], "the late ones at once");
    let held = claim_batch(&ctx.probe_peer().await, 4).await;
    assert_horizon(&*ctx, &held, t, plus_ms(t, 60_000));
    for lease in &first {
        let ack = b
            .acknowledge(lease, &WorkflowRunOutcome::Completed(json("1")))
            .await
            .expect("ack");
        assert!(!ack.is_lost());
    }
    let held = claim_batch(&b, 4).await;
    assert_horizon(&*ctx, &held, t, plus_ms(t, 60_000));
    ctx.set_clock(plus_ms(t, 59_999));
    assert!(ctx.claim(&b, 4).await.is_empty(), "a minute has not passed");
    ctx.set_clock(plus_ms(t, 60_000));
    assert_eq!(ids_of(&ctx.claim(&b, 4).await), ["hot-001"]);
}

/// Four connections claim at once (a barrier releases them together) in each of three
/// windows: the key starts exactly its rate per window, never more, each execution once.
pub async fn rates_racing_peers_never_exceed_the_rate<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    const CLAIMERS: usize = 4;
    set_rate(&*ctx, "hot", Some(rate(3, 1000))).await;
    admit_keyed(&*ctx, "hot", &names("hot", 20)).await;
    let mut peers = Vec::new();
    for _ in 0..CLAIMERS {
        peers.push(ctx.peer().await);
    }
    let mut seen = HashSet::new();
    for window in 0..3 {
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
        let mut started = 0;
        for task in tasks {
            for lease in crate::context::join(task).await {
                assert!(seen.insert(lease.execution_id), "claimed twice");
                started += 1;
            }
        }
        assert_eq!(started, 3, "window {window}: exactly the rate");
        ctx.advance(Duration::from_millis(1000));
    }
}

/// A claim is a start whether or not the delivery is acknowledged: released executions
/// due again wait for the window like new ones, and their redelivery uses a place; an
/// acknowledgement's claim obeys the rate too.
pub async fn rates_redeliveries_count_as_starts<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    set_rate(&*ctx, "k", Some(rate(2, 1000))).await;
    admit_keyed(&*ctx, "k", &names("k", 4)).await;
    let b = ctx.backend();
    let t = ctx.now();
    let first = ctx.claim(&b, 10).await;
    assert_eq!(ids_of(&first), ["k-000", "k-001"]);
    assert!(!b.release(&first[0]).await.expect("release").is_lost());
    // Past the redelivery delay, k-000 is due again, but the window holds two starts.
    ctx.set_clock(plus_ms(t, 500));
    let held = claim_batch(&b, 10).await;
    assert_horizon(&*ctx, &held, ctx.now(), plus_ms(t, 1000));
    let next = ClaimRequest {
        now: ctx.now(),
        limit: 10,
        duration: LEASE,
    };
    let ack = lease_core::Acknowledgement {
        lease: first[1].clone(),
        outcome: WorkflowRunOutcome::Completed(json("1")),
    };
    let both = b.acknowledge_and_claim(&ack, next).await.expect("ack");
    assert!(!both.acknowledged.is_lost());
    assert!(
        both.next.claimed.is_empty(),
        "the acknowledgement's claim too"
    );
    ctx.set_clock(plus_ms(t, 1000));
    let again = ctx.claim(&b, 10).await;
    assert_eq!(
        ids_of(&again),
        ["k-000", "k-002"],
        "the redelivery uses a place"
    );
    ctx.set_clock(plus_ms(t, 1999));
    assert!(
        ctx.claim(&b, 10).await.is_empty(),
        "two starts in the window"
    );
    ctx.set_clock(plus_ms(t, 2000));
    assert_eq!(ids_of(&ctx.claim(&b, 10).await), ["k-003"]);
}

/// Claims before a key had a rate are not counted: a limit set later counts from then.
pub async fn rates_limit_set_later_counts_from_then<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    admit_keyed(&*ctx, "k", &names("k", 8)).await;
    let b = ctx.backend();
    assert_eq!(ctx.claim(&b, 3).await.len(), 3, "no rate yet");
    set_rate(&*ctx, "k", Some(rate(2, 60_000))).await;
    assert_eq!(ids_of(&ctx.claim(&b, 10).await), ["k-003", "k-004"]);
    assert!(ctx.claim(&b, 10).await.is_empty(), "two since the limit");
}

/// Raising a key's rate lets the claims it allows proceed at once, and removing it lets
/// every due execution go; each change signals the wake-up path (when the backend sends
/// wake-ups), so an idle dispatcher claims without waiting out the old window.
pub async fn rates_raised_or_removed_let_claims_proceed<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    set_rate(&*ctx, "k", Some(rate(1, 60_000))).await;
    admit_keyed(&*ctx, "k", &names("k", 5)).await;
    let b = ctx.backend();
    assert_eq!(ids_of(&ctx.claim(&b, 10).await), ["k-000"]);
    assert!(ctx.claim(&b, 10).await.is_empty(), "one a minute");
    let listener = ctx.peer().await;
    let wakeups = listener.wakeups();
    assert_eq!(
        wakeups.is_some(),
        ctx.caps().wakeups,
        "WAKEUPS says whether they come"
    );
    // A claim on the listening connection (nothing claimable) returns once its listener
    // listens, so the signal below cannot be sent before anyone listens.
    assert!(ctx.claim(&listener, 10).await.is_empty(), "one a minute");
    set_rate(&*ctx, "k", Some(rate(3, 60_000))).await;
    if let Some(wakeups) = &wakeups {
        expect_signal_now(wakeups, ctx.now(), "raising the rate").await;
    }
    assert_eq!(ids_of(&ctx.claim(&b, 10).await), ["k-001", "k-002"]);
    assert!(ctx.claim(&b, 10).await.is_empty(), "three a minute");
    if let Some(wakeups) = &wakeups {
        while wakeups.try_recv().is_some() {}
    }
    set_rate(&*ctx, "k", None).await;
    if let Some(wakeups) = &wakeups {
        expect_signal_now(wakeups, ctx.now(), "removing the rate").await;
    }
    assert_eq!(ids_of(&ctx.claim(&b, 10).await), ["k-003", "k-004"]);
}
