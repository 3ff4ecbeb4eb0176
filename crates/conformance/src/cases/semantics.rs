//! The rules of the execution model (what each operation does to the stored record, which
//! RFC 002 leaves to RFC 001) that the RFC's tables do not spell out.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Acknowledged, Admission, ExecutionClient, ExecutionLease, ExecutionOutcome, ExecutionStatus,
    Fenced, FencingToken, HeapClient, HeapRecord, MAX_STEP_PAGE, StepCursor, StepWrite, Timestamp,
    WorkflowName, WorkflowRunOutcome,
};

use crate::context::{Ctx, LEASE, json, just_before, key, plus, plus_ms, step};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __semantics_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, semantics, [
            admit_is_idempotent, admit_while_running_changes_nothing,
            get_effective_view_after_expiry_admitted, get_effective_view_after_expiry_suspended,
            wake_during_lease_deferred_to_ack, wake_during_lease_kept_by_release,
            wake_during_lease_kept_by_expiry, wake_outside_lease_makes_due,
            wake_on_terminal_is_noop, renew_after_expiry_without_reclaim_succeeds,
            write_step_after_expiry_without_reclaim_accepted, fenced_writes_after_release_lost,
            fenced_writes_after_ack_lost, ack_completed_is_terminal, ack_failed_is_terminal,
            claim_respects_limit_and_order, claim_with_future_now_uses_backend_clock,
            claim_with_past_now_uses_request_now, tokens_unique_and_increasing,
            list_failing_most_failing_first, renew_extends_from_backend_now,
            backend_now_reads_injected_clock, write_step_records_and_reads_back,
            claim_does_not_end_unclaimed_expired_leases,
            end_after_expiry_without_reclaim_counts_once,
            list_steps_page_returns_every_step_once_in_order,
        ] }
    };
}

/// Rule "admit: idempotent by identity": a second admit (even with another workflow and
/// input) returns the existing record unchanged.
pub async fn admit_is_idempotent<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    let admission = Admission::new(ctx.id("order-42"))
        .workflow(WorkflowName::new("checkout").expect("workflow"))
        .input(json(r#"{"order":42}"#));
    let first = b.admit(&admission).await.expect("admit");
    assert_eq!(first.status, ExecutionStatus::Admitted);
    assert_eq!(first.workflow, admission.workflow);
    assert_eq!(first.input, admission.input);
    assert_eq!(first.token, FencingToken::NONE);
    assert_eq!(first.due_at, Some(ctx.now()));
    assert_eq!(first.unacknowledged_deliveries, 0);
    assert_eq!(first.outcome, None);
    ctx.advance(Duration::from_secs(5));
    let other = Admission::new(ctx.id("order-42"))
        .workflow(WorkflowName::new("refund").expect("workflow"))
        .input(json("1"));
    let second = ctx.peer().await.admit(&other).await.expect("admit");
    assert_eq!(second, first, "the existing record, unchanged");
    assert_eq!(ctx.get("order-42").await, first);
}

/// Rule "admit: idempotent by identity", during a delivery: admitting a running execution
/// returns its record unchanged and does not disturb the lease.
pub async fn admit_while_running_changes_nothing<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let lease = ctx.claim_one("order-42").await;
    let before = ctx.get("order-42").await;
    let again = ctx.admit("order-42").await;
    assert_eq!(again, before);
    assert_eq!(again.status, ExecutionStatus::Running);
    assert_eq!(again.token, lease.token);
    ctx.assert_nothing_claimable("still leased").await;
    let renewed = ctx.backend().renew(&lease, LEASE).await.expect("renew");
    assert!(!renewed.is_lost(), "the lease survives a repeated admit");
}

/// Rule "get: the effective record": a running lease whose expiry has passed reads as
/// ended (admitted, `unacknowledged_deliveries + 1`, ended at its expiry) before anyone
/// claims it; 1 ms earlier it reads as running.
pub async fn get_effective_view_after_expiry_admitted<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let lease = ctx.claim_one("order-42").await;
    ctx.set_clock(just_before(lease.expires_at));
    let live = ctx.get("order-42").await;
    assert_eq!(live.status, ExecutionStatus::Running);
    assert_eq!(live.unacknowledged_deliveries, 0);
    assert_eq!(live.lease_expires_at, Some(lease.expires_at));
    ctx.set_clock(plus(lease.expires_at, Duration::from_secs(60)));
    let ended = ctx.get("order-42").await;
    assert_eq!(ended.status, ExecutionStatus::Admitted);
    assert_eq!(ended.unacknowledged_deliveries, 1);
    assert_eq!(ended.last_delivery_ended_at, Some(lease.expires_at));
    assert_eq!(ended.lease_expires_at, None);
    assert_eq!(ended.token, lease.token);
    assert_eq!(ended.due_at, live.due_at);
    // Reading it changes nothing: a second read a minute later is the same.
    ctx.advance(Duration::from_secs(60));
    assert_eq!(ctx.get("order-42").await, ended);
}

/// Rule "get: the effective record", after an earlier suspended delivery: the expired lease
/// reads as suspended, `unacknowledged_deliveries + 1`, ended at its expiry.
pub async fn get_effective_view_after_expiry_suspended<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.suspended_delivery("order-42").await;
    let b = ctx.backend();
    let second = ctx.claim_one("order-42").await;
    ctx.set_clock(second.expires_at);
    let ended = ctx.get("order-42").await;
    assert_eq!(ended.status, ExecutionStatus::Suspended);
    assert!(ended.ever_suspended);
    assert_eq!(ended.unacknowledged_deliveries, 1);
    assert_eq!(ended.last_delivery_ended_at, Some(second.expires_at));
    assert_eq!(ended.lease_expires_at, None);
    let listed = b.list_failing(1, 10).await.expect("list_failing");
    assert_eq!(
        listed,
        vec![ended],
        "list_failing reads the same effective record"
    );
}

/// Rule "request_wake during a delivery is deferred to the acknowledgement": it does not
/// make a running execution claimable, is remembered as `wake_after_claim`, and an
/// acknowledgement as suspended makes it the due time.
pub async fn wake_during_lease_deferred_to_ack<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let lease = ctx.claim_one("order-42").await;
    let id = ctx.id("order-42");
    let soon = plus(ctx.now(), Duration::from_secs(5));
    let later = plus(ctx.now(), Duration::from_secs(9));
    b.request_wake(&id, later).await.expect("wake");
    b.request_wake(&id, soon).await.expect("wake");
    b.request_wake(&id, later).await.expect("wake");
    let running = ctx.get("order-42").await;
    assert_eq!(running.status, ExecutionStatus::Running);
    assert_eq!(
        running.wake_after_claim,
        Some(soon),
        "the earliest wake since the claim"
    );
    ctx.set_clock(plus(soon, Duration::from_secs(1)));
    ctx.assert_nothing_claimable("a wake does not break a live lease")
        .await;
    let ack = b
        .acknowledge(&lease, &WorkflowRunOutcome::Suspended)
        .await
        .expect("ack");
    assert_eq!(ack, Fenced::Accepted(Acknowledged::Suspended));
    let record = ctx.get("order-42").await;
    assert_eq!(record.due_at, Some(soon));
    assert_eq!(record.wake_after_claim, None);
    let next = ctx.claim_one("order-42").await;
    assert!(next.token > lease.token);
    assert_eq!(
        ctx.get("order-42").await.wake_after_claim,
        None,
        "a claim clears it"
    );
}

/// Rule "release keeps a wake requested during the delivery": `due_at = min(due_at, wake)`.
pub async fn wake_during_lease_kept_by_release<H: Harness>(ctx: Arc<Ctx<H>>) {
    let admitted = ctx.admit("order-42").await;
    let due = admitted.due_at.expect("due at admission");
    let b = ctx.backend();
    let lease = ctx.claim_one("order-42").await;
    // A wake earlier than the current due time (min picks it) ...
    let earlier = plus_ms(due, -5000);
    b.request_wake(&ctx.id("order-42"), earlier)
        .await
        .expect("wake");
    assert_eq!(
        b.release(&lease).await.expect("release"),
        Fenced::Accepted(())
    );
    assert_eq!(ctx.get("order-42").await.due_at, Some(earlier));
    // ... and a later one leaves the due time alone.
    ctx.advance(ctx.policy.delay(1));
    let lease = ctx.claim_one("order-42").await;
    b.request_wake(
        &ctx.id("order-42"),
        plus(ctx.now(), Duration::from_secs(60)),
    )
    .await
    .expect("wake");
    assert_eq!(
        b.release(&lease).await.expect("release"),
        Fenced::Accepted(())
    );
    let record = ctx.get("order-42").await;
    assert_eq!(record.due_at, Some(earlier));
    assert_eq!(record.wake_after_claim, None);
}

/// Rule "expiry keeps a wake requested during the delivery": the effective record (and the
/// next claim) use `due_at = min(due_at, wake)`.
pub async fn wake_during_lease_kept_by_expiry<H: Harness>(ctx: Arc<Ctx<H>>) {
    let admitted = ctx.admit("order-42").await;
    let due = admitted.due_at.expect("due at admission");
    let b = ctx.backend();
    let lease = ctx.claim_one("order-42").await;
    let earlier = plus_ms(due, -7000);
    b.request_wake(&ctx.id("order-42"), earlier)
        .await
        .expect("wake");
    ctx.set_clock(lease.expires_at);
    let record = ctx.get("order-42").await;
    assert_eq!(record.due_at, Some(earlier));
    assert_eq!(record.wake_after_claim, None);
    ctx.advance(ctx.policy.delay(1));
    let next = ctx.claim_one("order-42").await;
    assert!(next.token > lease.token);
}

/// Rule "request_wake outside a delivery makes the execution due at that time"
/// (`due_at = min(due_at, at)`).
pub async fn wake_outside_lease_makes_due<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let lease = ctx.claim_one("order-42").await;
    let ack = b
        .acknowledge(&lease, &WorkflowRunOutcome::Suspended)
        .await
        .expect("ack");
    assert_eq!(ack, Fenced::Accepted(Acknowledged::Suspended));
    assert_eq!(ctx.get("order-42").await.due_at, None);
    let id = ctx.id("order-42");
    let wake = plus(ctx.now(), Duration::from_secs(2));
    b.request_wake(&id, plus(ctx.now(), Duration::from_secs(10)))
        .await
        .expect("wake");
    b.request_wake(&id, wake).await.expect("wake");
    b.request_wake(&id, plus(ctx.now(), Duration::from_secs(20)))
        .await
        .expect("wake");
    let record = ctx.get("order-42").await;
    assert_eq!(record.due_at, Some(wake), "the earliest wake");
    assert_eq!(record.status, ExecutionStatus::Suspended);
    ctx.set_clock(just_before(wake));
    ctx.assert_nothing_claimable("before the wake").await;
    ctx.set_clock(wake);
    let next = ctx.claim_one("order-42").await;
    assert!(next.token > lease.token);
}

/// Rule "request_wake on a terminal execution is a no-op".
pub async fn wake_on_terminal_is_noop<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let lease = ctx.claim_one("order-42").await;
    let outcome = WorkflowRunOutcome::Failed(json(r#"{"error":"card declined"}"#));
    assert!(
        !b.acknowledge(&lease, &outcome)
            .await
            .expect("ack")
            .is_lost()
    );
    let before = ctx.snapshot("order-42").await;
    b.request_wake(&ctx.id("order-42"), ctx.now())
        .await
        .expect("wake");
    b.request_wake(&ctx.id("order-42"), plus_ms(ctx.now(), -60_000))
        .await
        .expect("wake");
    assert_eq!(ctx.snapshot("order-42").await, before);
    ctx.advance(Duration::from_secs(60));
    ctx.assert_nothing_claimable("terminal").await;
}

/// Rule "renew after expiry with no reclaim succeeds": nobody holds a higher token; the
/// expiry is extended from the backend's now and `get` reads running again.
pub async fn renew_after_expiry_without_reclaim_succeeds<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let lease = ctx.claim_one("order-42").await;
    ctx.set_clock(plus(lease.expires_at, Duration::from_secs(10)));
    assert_eq!(ctx.get("order-42").await.status, ExecutionStatus::Admitted);
    let renewed = ctx.backend().renew(&lease, LEASE).await.expect("renew");
    let Fenced::Accepted(renewed) = renewed else {
        panic!("renewal after expiry without a reclaim was lost");
    };
    assert_eq!(renewed.token, lease.token);
    assert_eq!(renewed.expires_at, plus(ctx.now(), LEASE));
    let record = ctx.get("order-42").await;
    assert_eq!(record.status, ExecutionStatus::Running);
    assert_eq!(record.unacknowledged_deliveries, 0);
    assert_eq!(record.lease_expires_at, Some(renewed.expires_at));
    assert_eq!(record.token, lease.token);
    ctx.assert_nothing_claimable("renewed").await;
}

/// Rule "write_step after expiry with no reclaim is accepted": fenced writes never consult a
/// clock.
pub async fn write_step_after_expiry_without_reclaim_accepted<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let lease = ctx.claim_one("order-42").await;
    ctx.set_clock(plus(lease.expires_at, Duration::from_secs(3600)));
    let written = ctx.write(&b, &lease, "charge", r#""late""#).await;
    let Fenced::Accepted(record) = written else {
        panic!("a write after expiry without a reclaim was lost");
    };
    assert_eq!(record.token, lease.token);
    assert_eq!(ctx.steps("order-42").await, vec![record]);
    // The acknowledgement is accepted too.
    let ack = b
        .acknowledge(&lease, &WorkflowRunOutcome::Completed(json("1")))
        .await
        .expect("ack");
    assert!(matches!(ack, Fenced::Accepted(_)));
}

/// Asserts every fenced write with `lease` is lost and changes nothing.
async fn assert_all_fenced_lost<H: Harness>(ctx: &Ctx<H>, lease: &ExecutionLease, why: &str) {
    let b = ctx.backend();
    let id = lease.execution_id.as_str();
    let before = ctx.snapshot(id).await;
    assert_eq!(
        ctx.write(&b, lease, "after", "1").await,
        Fenced::Lost,
        "{why}: write_step"
    );
    assert_eq!(
        ctx.snapshot(id).await,
        before,
        "{why}: write_step changed something"
    );
    assert_eq!(
        b.renew(lease, LEASE).await.expect("renew"),
        Fenced::Lost,
        "{why}: renew"
    );
    assert_eq!(
        ctx.snapshot(id).await,
        before,
        "{why}: renew changed something"
    );
    assert_eq!(
        b.release(lease).await.expect("release"),
        Fenced::Lost,
        "{why}: release"
    );
    assert_eq!(
        ctx.snapshot(id).await,
        before,
        "{why}: release changed something"
    );
    for outcome in [
        WorkflowRunOutcome::Suspended,
        WorkflowRunOutcome::Completed(json("2")),
        WorkflowRunOutcome::Failed(json("3")),
    ] {
        let ack = b.acknowledge(lease, &outcome).await.expect("ack");
        assert_eq!(ack, Fenced::Lost, "{why}: acknowledge {outcome:?}");
        assert_eq!(
            ctx.snapshot(id).await,
            before,
            "{why}: acknowledge changed something"
        );
    }
}

/// Rule "fenced writes after release are lost": the delivery ended, although the token is
/// still the execution's latest.
pub async fn fenced_writes_after_release_lost<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let lease = ctx.claim_one("order-42").await;
    assert!(
        ctx.write(&ctx.backend(), &lease, "load", "0")
            .await
            .accepted()
            .is_some()
    );
    let released = ctx.backend().release(&lease).await.expect("release");
    assert_eq!(released, Fenced::Accepted(()));
    assert_eq!(ctx.get("order-42").await.token, lease.token);
    assert_all_fenced_lost(&ctx, &lease, "after release").await;
}

/// Rule "fenced writes after an acknowledgement are lost" (suspended and completed).
pub async fn fenced_writes_after_ack_lost<H: Harness>(ctx: Arc<Ctx<H>>) {
    let lease = ctx.suspended_delivery("order-42").await;
    let b = ctx.backend();
    assert_all_fenced_lost(&ctx, &lease, "after ack suspended").await;
    let lease = ctx.claim_one("order-42").await;
    let ack = b
        .acknowledge(&lease, &WorkflowRunOutcome::Completed(json("1")))
        .await
        .expect("ack");
    assert!(matches!(ack, Fenced::Accepted(_)));
    assert_all_fenced_lost(&ctx, &lease, "after ack completed").await;
}

async fn ack_terminal_case<H: Harness>(ctx: Arc<Ctx<H>>, failed: bool) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let lease = ctx.claim_one("order-42").await;
    ctx.advance(Duration::from_secs(1));
    let value = json(r#"{"receipt":"r-42","amount":1999}"#);
    let (outcome, expected) = if failed {
        (
            WorkflowRunOutcome::Failed(value.clone()),
            ExecutionOutcome::Failed(value),
        )
    } else {
        (
            WorkflowRunOutcome::Completed(value.clone()),
            ExecutionOutcome::Completed(value),
        )
    };
    let ack = b.acknowledge(&lease, &outcome).await.expect("ack");
    assert_eq!(
        ack,
        Fenced::Accepted(Acknowledged::Terminal(expected.clone()))
    );
    let record = ctx.get("order-42").await;
    let status = if failed {
        ExecutionStatus::Failed
    } else {
        ExecutionStatus::Completed
    };
    assert_eq!(record.status, status);
    assert_eq!(record.outcome, Some(expected));
    assert_eq!(record.due_at, None);
    assert_eq!(record.lease_expires_at, None);
    assert_eq!(record.unacknowledged_deliveries, 0);
    assert_eq!(record.token, lease.token);
    b.request_wake(&ctx.id("order-42"), ctx.now())
        .await
        .expect("wake");
    for _ in 0..3 {
        ctx.advance(Duration::from_secs(24 * 3600));
        ctx.assert_nothing_claimable("terminal").await;
    }
    assert_eq!(ctx.get("order-42").await, record);
}

/// Rule "acknowledge completed: terminal, outcome stored, never claimable again".
pub async fn ack_completed_is_terminal<H: Harness>(ctx: Arc<Ctx<H>>) {
    ack_terminal_case(ctx, false).await;
}

/// Rule "acknowledge failed: terminal, error stored, never claimable again".
pub async fn ack_failed_is_terminal<H: Harness>(ctx: Arc<Ctx<H>>) {
    ack_terminal_case(ctx, true).await;
}

/// Rule "claim_due: at most `limit`, ordered by due_at, then id".
pub async fn claim_respects_limit_and_order<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    for id in ["gamma", "beta", "zeta", "alpha", "mid"] {
        ctx.admit(id).await;
    }
    let now = ctx.now();
    b.request_wake(&ctx.id("zeta"), plus_ms(now, -10_000))
        .await
        .expect("wake");
    b.request_wake(&ctx.id("mid"), plus_ms(now, -5_000))
        .await
        .expect("wake");
    let ids = |ls: &[ExecutionLease]| -> Vec<String> {
        ls.iter()
            .map(|l| l.execution_id.as_str().to_owned())
            .collect()
    };
    let first = ctx.claim(&b, 2).await;
    assert_eq!(ids(&first), ["zeta", "mid"], "earliest due first");
    let second = ctx.claim(&b, 2).await;
    assert_eq!(ids(&second), ["alpha", "beta"], "same due time: by id");
    let third = ctx.claim(&b, 2).await;
    assert_eq!(ids(&third), ["gamma"]);
    assert!(ctx.claim(&b, 2).await.is_empty());
    let max_first = first.iter().map(|l| l.token).max();
    assert!(
        second.iter().all(|l| Some(l.token) > max_first),
        "later claims, higher tokens"
    );
}

/// Rule "claim_due uses min(request.now, backend clock)": a caller whose clock runs far
/// ahead (up to [`Timestamp::MAX`], which the dispatcher sends) can take neither a live
/// lease nor an execution not yet due on the backend clock, and its leases expire relative
/// to the backend clock.
pub async fn claim_with_future_now_uses_backend_clock<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    let peer = ctx.peer().await;
    ctx.admit("later").await;
    let later = ctx.claim_only(&b, "later").await;
    b.request_wake(&ctx.id("later"), plus(ctx.now(), Duration::from_secs(3600)))
        .await
        .expect("wake");
    let ack = b
        .acknowledge(&later, &WorkflowRunOutcome::Suspended)
        .await
        .expect("ack");
    assert_eq!(ack, Fenced::Accepted(Acknowledged::Suspended));
    ctx.admit("live").await;
    let live = ctx.claim_only(&b, "live").await;
    let far = plus(ctx.now(), Duration::from_secs(10 * 24 * 3600));
    let got = ctx
        .try_claim(&peer, far, 100, LEASE)
        .await
        .expect("claim_due");
    assert!(got.is_empty(), "a fast clock took {got:?}");
    let got = ctx
        .try_claim(&peer, Timestamp::MAX, 100, LEASE)
        .await
        .expect("claim_due at Timestamp::MAX");
    assert!(got.is_empty(), "Timestamp::MAX took {got:?}");
    ctx.set_clock(plus(live.expires_at, ctx.policy.delay(1)));
    let got = ctx
        .try_claim(&peer, Timestamp::MAX, 100, LEASE)
        .await
        .expect("claim_due");
    assert_eq!(got.len(), 1, "only the expired lease: {got:?}");
    assert_eq!(got[0].execution_id.as_str(), "live");
    assert_eq!(
        got[0].expires_at,
        plus(ctx.now(), LEASE),
        "expiry from the backend clock"
    );
    assert_eq!(
        ctx.get("live").await.lease_expires_at,
        Some(got[0].expires_at)
    );
    assert_eq!(ctx.get("later").await.status, ExecutionStatus::Suspended);
}

/// Rule "claim_due uses min(request.now, backend clock)": a caller whose clock runs behind
/// claims only what is due at its own now, and its lease expires from that now.
pub async fn claim_with_past_now_uses_request_now<H: Harness>(ctx: Arc<Ctx<H>>) {
    let admitted = ctx.admit("order-42").await;
    let due = admitted.due_at.expect("due");
    let got = ctx
        .try_claim(&ctx.backend(), just_before(due), 10, LEASE)
        .await
        .expect("claim_due");
    assert!(got.is_empty(), "not due yet at the caller's now: {got:?}");
    assert_eq!(ctx.get("order-42").await, admitted);
    ctx.advance(Duration::from_secs(10));
    let got = ctx
        .try_claim(&ctx.backend(), due, 10, LEASE)
        .await
        .expect("claim_due");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].expires_at, plus(due, LEASE));
}

/// Rule "tokens come from one counter": unique across executions, strictly increasing per
/// execution, and every claim's token is above every token issued before it.
pub async fn tokens_unique_and_increasing<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    let ids = ["a", "b", "c"];
    for id in ids {
        ctx.admit(id).await;
    }
    let mut all = BTreeSet::new();
    let mut per: BTreeMap<String, Vec<FencingToken>> = BTreeMap::new();
    let mut highest = FencingToken::NONE;
    for round in 0..5 {
        let leases = ctx.claim(&b, 10).await;
        assert_eq!(leases.len(), ids.len(), "round {round}: {leases:?}");
        let round_min = leases.iter().map(|l| l.token).min().expect("leases");
        assert!(
            round_min > highest,
            "round {round}: a token at or below an earlier one"
        );
        for lease in &leases {
            assert!(
                all.insert(lease.token),
                "token {} issued twice",
                lease.token
            );
            per.entry(lease.execution_id.as_str().to_owned())
                .or_default()
                .push(lease.token);
            highest = highest.max(lease.token);
            match lease.execution_id.as_str() {
                "a" => assert_eq!(
                    b.release(lease).await.expect("release"),
                    Fenced::Accepted(())
                ),
                "b" => {} // left to expire
                _ => {
                    b.request_wake(&lease.execution_id, ctx.now())
                        .await
                        .expect("wake");
                    let ack = b
                        .acknowledge(lease, &WorkflowRunOutcome::Suspended)
                        .await
                        .expect("ack");
                    assert_eq!(ack, Fenced::Accepted(Acknowledged::Suspended));
                }
            }
        }
        ctx.advance(LEASE + Duration::from_secs(2));
    }
    for (id, tokens) in &per {
        assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{id}: {tokens:?}");
        assert_eq!(ctx.get(id).await.token, *tokens.last().expect("tokens"));
    }
}

/// Rule "list_failing: effective records with `unacknowledged_deliveries >= max(min, 1)`,
/// most failing first, then by id; at most `limit`" (RFC 002: operators find executions
/// that keep failing). An expired lease counts before anyone reclaims it.
pub async fn list_failing_most_failing_first<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    let base = ctx.now();
    // Due times steer which executions a limited claim takes (due_at, then id).
    let plan = [
        ("three", -3),
        ("two-a", -2),
        ("two-b", -2),
        ("exp", -2),
        ("one", -1),
    ];
    for (id, hours) in plan {
        ctx.admit(id).await;
        b.request_wake(&ctx.id(id), plus_ms(base, hours * 3_600_000))
            .await
            .expect("wake");
    }
    ctx.admit("zero").await;
    // Round 1: everyone but "zero" is released once.
    let round = ctx.claim(&b, 5).await;
    assert_eq!(round.len(), 5);
    assert!(round.iter().all(|l| l.execution_id.as_str() != "zero"));
    for l in &round {
        assert_eq!(b.release(l).await.expect("release"), Fenced::Accepted(()));
    }
    ctx.advance(ctx.policy.delay(1));
    // Round 2: three, two-a, two-b released again; exp claimed and left to expire.
    let round = ctx.claim(&b, 4).await;
    let mut exp = None;
    for l in &round {
        if l.execution_id.as_str() == "exp" {
            exp = Some(l.clone());
        } else {
            assert_eq!(b.release(l).await.expect("release"), Fenced::Accepted(()));
        }
    }
    let exp = exp.expect("exp claimed in round 2");
    ctx.advance(ctx.policy.delay(2));
    // Round 3: three released a third time.
    let round = ctx.claim(&b, 1).await;
    assert_eq!(round.len(), 1);
    assert_eq!(round[0].execution_id.as_str(), "three");
    assert_eq!(
        b.release(&round[0]).await.expect("release"),
        Fenced::Accepted(())
    );
    ctx.set_clock(exp.expires_at);

    let listed = |min: u32, limit: usize| {
        let b = b.clone();
        async move {
            b.list_failing(min, limit)
                .await
                .expect("list_failing")
                .into_iter()
                .map(|r| (r.id.as_str().to_owned(), r.unacknowledged_deliveries))
                .collect::<Vec<_>>()
        }
    };
    let all = vec![
        ("three".to_owned(), 3),
        ("exp".to_owned(), 2),
        ("two-a".to_owned(), 2),
        ("two-b".to_owned(), 2),
        ("one".to_owned(), 1),
    ];
    assert_eq!(listed(1, 100).await, all);
    assert_eq!(
        listed(0, 100).await,
        all,
        "min 0 lists no healthy execution"
    );
    assert_eq!(listed(2, 100).await, all[..4].to_vec());
    assert_eq!(listed(3, 100).await, all[..1].to_vec());
    assert_eq!(listed(1, 2).await, all[..2].to_vec());
    assert!(listed(4, 100).await.is_empty());
    let exp_record = b.list_failing(2, 2).await.expect("list_failing")[1].clone();
    assert_eq!(exp_record, ctx.get("exp").await);
    assert_eq!(exp_record.last_delivery_ended_at, Some(exp.expires_at));
}

/// Rule "renew extends the expiry to the backend clock's now + duration" (also shortening
/// it when the new duration is shorter than what remained).
pub async fn renew_extends_from_backend_now<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let lease = ctx.claim_one("order-42").await;
    ctx.advance(Duration::from_secs(10));
    let longer = b
        .renew(&lease, LEASE)
        .await
        .expect("renew")
        .accepted()
        .expect("renewed");
    assert_eq!(longer.expires_at, plus(ctx.now(), LEASE));
    ctx.advance(Duration::from_secs(1));
    let short = Duration::from_secs(5);
    let shorter = b
        .renew(&longer, short)
        .await
        .expect("renew")
        .accepted()
        .expect("renewed");
    assert_eq!(shorter.expires_at, plus(ctx.now(), short));
    assert_eq!(
        ctx.get("order-42").await.lease_expires_at,
        Some(shorter.expires_at)
    );
    ctx.set_clock(just_before(shorter.expires_at));
    assert_eq!(ctx.get("order-42").await.status, ExecutionStatus::Running);
    ctx.set_clock(shorter.expires_at);
    let ended = ctx.get("order-42").await;
    assert_eq!(ended.status, ExecutionStatus::Admitted);
    assert_eq!(ended.last_delivery_ended_at, Some(shorter.expires_at));
    // An old copy of the lease (same token, stale expiry) is still the holder's lease.
    ctx.set_clock(just_before(plus(shorter.expires_at, ctx.policy.delay(1))));
    ctx.assert_nothing_claimable("inside the redelivery delay")
        .await;
    let again = b.renew(&lease, LEASE).await.expect("renew");
    assert!(matches!(again, Fenced::Accepted(ref l) if l.token == lease.token));
}

/// Rule "the backend reads its one authoritative clock": with an injected manual clock,
/// `now()` on every connection is that clock.
pub async fn backend_now_reads_injected_clock<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    let peer = ctx.peer().await;
    assert_eq!(b.now().await.expect("now"), ctx.now());
    ctx.advance(Duration::from_millis(12_345));
    assert_eq!(b.now().await.expect("now"), ctx.now());
    assert_eq!(peer.now().await.expect("now"), ctx.now());
}

/// Rule "write_step inserts a record with the token that wrote it": records read back
/// exactly (canonical JSON text, byte for byte), `list_steps` orders by step key then
/// attempt, and `read_step` of a missing record is `None`.
pub async fn write_step_records_and_reads_back<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    ctx.admit("other").await;
    let b = ctx.backend();
    let leases = ctx.claim(&b, 10).await;
    let lease = leases
        .iter()
        .find(|l| l.execution_id.as_str() == "order-42")
        .expect("lease");
    let other = leases
        .iter()
        .find(|l| l.execution_id.as_str() == "other")
        .expect("lease");
    let tricky = r#"{ "bb": 1, "a": [2, {"z": null, "y": "ünïcødé 🚀 \"q\" \\ \n"}], "big": 12345678901234567890, "f": 0.1 }"#;
    let writes = [
        ("b", 1u32, false, tricky),
        ("b", 0, true, "true"),
        ("a", 7, true, r#""x""#),
    ];
    for (k, attempt, done, text) in writes {
        let w = StepWrite {
            step_key: key(k),
            step_attempt: attempt,
            done,
            response: json(text),
        };
        let got = b.write_step(lease, &w).await.expect("write_step");
        let Fenced::Accepted(r) = got else {
            panic!("lost")
        };
        assert_eq!(
            (
                r.execution_id.as_str(),
                r.step_key.as_str(),
                r.step_attempt,
                r.done
            ),
            ("order-42", k, attempt, done)
        );
        assert_eq!(r.response, json(text));
        assert_eq!(r.token, lease.token);
    }
    assert!(ctx.write(&b, other, "b", "0").await.accepted().is_some());
    let steps = ctx.steps("order-42").await;
    let order: Vec<(&str, u32)> = steps
        .iter()
        .map(|r| (r.step_key.as_str(), r.step_attempt))
        .collect();
    assert_eq!(order, [("a", 7), ("b", 0), ("b", 1)]);
    assert_eq!(
        steps[2].response.as_str(),
        r#"{"a":[2,{"y":"ünïcødé 🚀 \"q\" \\ \n","z":null}],"bb":1,"big":12345678901234567890,"f":0.1}"#,
        "canonical text stored byte for byte"
    );
    let id = ctx.id("order-42");
    let read = b.read_step(&id, &key("b"), 1).await.expect("read_step");
    assert_eq!(read.as_ref(), Some(&steps[2]));
    assert_eq!(
        b.read_step(&id, &key("b"), 2).await.expect("read_step"),
        None
    );
    assert_eq!(
        b.read_step(&id, &key("c"), 0).await.expect("read_step"),
        None
    );
    assert_eq!(ctx.steps("other").await.len(), 1);
    assert!(ctx.steps("nobody").await.is_empty());
}

/// Rule "expiry alone does not make a write lost; only a reclaim or an ended delivery
/// does": a claim_due that takes one expired execution (limit 1), or none (redelivery gate
/// shut), leaves every other expired lease with its holder, who can still write and renew.
pub async fn claim_does_not_end_unclaimed_expired_leases<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("a").await;
    ctx.admit("b").await;
    let b = ctx.backend();
    let peer = ctx.peer().await;
    let leases = ctx.claim(&b, 10).await;
    assert_eq!(leases.len(), 2);
    let la = leases
        .iter()
        .find(|l| l.execution_id.as_str() == "a")
        .expect("a")
        .clone();
    let lb = leases
        .iter()
        .find(|l| l.execution_id.as_str() == "b")
        .expect("b")
        .clone();
    // Both expired, the redelivery gate still shut: a claim takes nothing and ends nothing.
    ctx.set_clock(la.expires_at.max(lb.expires_at));
    assert!(ctx.claim(&peer, 10).await.is_empty());
    assert!(
        ctx.write(&b, &la, "s", "1").await.accepted().is_some(),
        "a's holder still holds"
    );
    // Gate open: a limited claim takes "a" (same due time, lower id) and only "a".
    ctx.set_clock(plus(ctx.now(), ctx.policy.delay(1)));
    let taken = ctx.claim(&peer, 1).await;
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].execution_id.as_str(), "a");
    assert_eq!(
        ctx.write(&b, &la, "t", "1").await,
        Fenced::Lost,
        "a was reclaimed"
    );
    assert!(
        ctx.write(&b, &lb, "s", "1").await.accepted().is_some(),
        "b was not"
    );
    let renewed = b.renew(&lb, LEASE).await.expect("renew");
    assert!(
        !renewed.is_lost(),
        "b's holder renews: nobody holds a higher token"
    );
    let record = ctx.get("b").await;
    assert_eq!(record.status, ExecutionStatus::Running);
    assert_eq!(record.unacknowledged_deliveries, 0);
    assert_eq!(record.token, lb.token);
}

/// Rule "release / acknowledge after expiry with no reclaim are accepted": the delivery
/// ends once, at the call (not at the expiry): a release counts one unacknowledged
/// delivery ended now; an acknowledgement resets the count.
pub async fn end_after_expiry_without_reclaim_counts_once<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("released").await;
    ctx.admit("acked").await;
    let b = ctx.backend();
    let leases = ctx.claim(&b, 10).await;
    assert_eq!(leases.len(), 2);
    let expiry = leases[0].expires_at;
    ctx.set_clock(plus(expiry, Duration::from_secs(5)));
    for l in &leases {
        let r = ctx.get(l.execution_id.as_str()).await;
        assert_eq!(
            (r.unacknowledged_deliveries, r.last_delivery_ended_at),
            (1, Some(expiry))
        );
    }
    let ended = ctx.now();
    for l in &leases {
        if l.execution_id.as_str() == "released" {
            assert_eq!(b.release(l).await.expect("release"), Fenced::Accepted(()));
        } else {
            b.request_wake(&l.execution_id, plus(ended, Duration::from_secs(1)))
                .await
                .expect("wake");
            let ack = b
                .acknowledge(l, &WorkflowRunOutcome::Suspended)
                .await
                .expect("ack");
            assert_eq!(ack, Fenced::Accepted(Acknowledged::Suspended));
        }
    }
    let released = ctx.get("released").await;
    assert_eq!(released.status, ExecutionStatus::Admitted);
    assert_eq!(
        released.unacknowledged_deliveries, 1,
        "one delivery, ended once"
    );
    assert_eq!(released.last_delivery_ended_at, Some(ended));
    let acked = ctx.get("acked").await;
    assert_eq!(acked.status, ExecutionStatus::Suspended);
    assert_eq!(acked.unacknowledged_deliveries, 0);
    assert_eq!(acked.due_at, Some(plus(ended, Duration::from_secs(1))));
    ctx.set_clock(just_before(plus(ended, ctx.policy.delay(1))));
    ctx.assert_nothing_claimable("released: delay(1) from the release")
        .await;
    ctx.set_clock(plus(ended, ctx.policy.delay(1)));
    let next = ctx.claim(&b, 10).await;
    let ids: Vec<&str> = next.iter().map(|l| l.execution_id.as_str()).collect();
    assert_eq!(
        ids,
        ["released"],
        "acked is due a second after the ack, not yet"
    );
}

/// Reads every step of `id` in pages of `limit`, checking each page's size and `more`.
async fn read_in_pages<H: Harness>(ctx: &Ctx<H>, id: &str, limit: u32) -> Vec<HeapRecord> {
    let b = ctx.backend();
    let (mut all, mut after) = (Vec::new(), None::<StepCursor>);
    for _ in 0..100 {
        let page = b
            .list_steps_page(&ctx.id(id), after.as_ref(), limit)
            .await
            .expect("list_steps_page");
        assert!(page.records.len() <= limit as usize, "page over its limit");
        all.extend(page.records.iter().cloned());
        match page.next() {
            Some(next) => after = Some(next),
            None => {
                assert!(!page.more, "more remain but no cursor");
                return all;
            }
        }
        assert!(
            !page.records.is_empty(),
            "an empty page that says more remain"
        );
    }
    panic!("paging did not end");
}

/// `list_steps_page`: pages of any size return every step record of the execution exactly
/// once, in `list_steps`'s order (step key byte order, then attempt), and nothing of
/// another execution.
pub async fn list_steps_page_returns_every_step_once_in_order<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    ctx.admit("order-43").await;
    let b = ctx.backend();
    let leases = ctx.claim(&b, 2).await;
    let find = |id: &str| {
        leases
            .iter()
            .find(|l| l.execution_id.as_str() == id)
            .cloned()
            .expect("claimed")
    };
    let (lease, other) = (find("order-42"), find("order-43"));
    for (k, attempt) in [("b", 0), ("a", 1), ("B", 0), ("a", 0), ("é", 0), ("a/b", 0)] {
        let write = StepWrite {
            step_attempt: attempt,
            ..step(k, "1")
        };
        let written = b.write_step(&lease, &write).await.expect("write_step");
        assert!(matches!(written, Fenced::Accepted(_)), "{k}: {written:?}");
    }
    let written = ctx.write(&b, &other, "a", "2").await;
    assert!(matches!(written, Fenced::Accepted(_)), "{written:?}");
    let all = ctx.steps("order-42").await;
    let order: Vec<(&str, u32)> = all
        .iter()
        .map(|r| (r.step_key.as_str(), r.step_attempt))
        .collect();
    assert_eq!(
        order,
        [("B", 0), ("a", 0), ("a", 1), ("a/b", 0), ("b", 0), ("é", 0)]
    );
    for limit in [1, 2, 4, 6, 7, MAX_STEP_PAGE] {
        assert_eq!(
            read_in_pages(&ctx, "order-42", limit).await,
            all,
            "limit {limit}"
        );
    }
    let full = b
        .list_steps_page(&ctx.id("order-42"), None, 6)
        .await
        .expect("page");
    assert!(
        !full.more && full.next().is_none(),
        "an exact page says more remain"
    );
    let none = b
        .list_steps_page(&ctx.id("order-44"), None, 3)
        .await
        .expect("page of an unknown execution");
    assert!(none.records.is_empty() && !none.more);
}
