//! Attempt limits and dead letters: the delivery that uses an execution's last attempt
//! ends it as `Dead` in the same atomic step as the release or expiry that used it, after
//! which every write of any holder is `Lost`; a lease no worker started is no attempt; the
//! last error is kept, bounded; operators list dead executions and re-admit them. A
//! harness without them ([`lease_core::Capabilities::attempts`] `false`) checks only the typed
//! `Unsupported` answers, and that a release still ends the lease.

use std::sync::Arc;
use std::time::Duration;

use lease_core::attempts::{MAX_ATTEMPT_LIMIT, MAX_ERROR_MESSAGE_BYTES};
use lease_core::{
    Admission, AttemptLimit, AttemptLimits, AttemptScope, CancelOutcome, CancelReason, ErrorNote,
    ExecutionClient, ExecutionLease, ExecutionStatus, LastError, LeaseError, Release, WorkflowName,
    WorkflowRunOutcome,
};

use lease_runtime::{DeliveryError, Dispatcher, DispatcherOptions};

use crate::context::{Ctx, LEASE, json, plus};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __attempts_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, attempts, [
            attempts_exhausted_by_release_end_dead_and_refuse_every_holder,
            attempts_exhausted_by_expiry_end_dead_at_the_expiry,
            attempts_unstarted_release_counts_nothing_and_is_due_at_once,
            attempts_last_error_is_kept_and_bounded,
            attempts_workflow_limit_overrides_the_default,
            attempts_unlimited_by_default_and_by_choice,
            attempts_invalid_input_refused_and_changes_nothing,
            attempts_retry_dead_resets_and_is_claimable,
            attempts_retry_refuses_executions_not_dead,
            attempts_dead_is_cancellable_and_kept_by_retention,
            attempts_dispatcher_keeps_the_worker_error_until_dead,
        ] }
    };
}

fn limit(n: u32) -> Option<AttemptLimit> {
    Some(AttemptLimit::new(n).expect("limit"))
}

fn workflow(name: &str) -> WorkflowName {
    WorkflowName::new(name).expect("workflow")
}

fn failed(message: &str) -> Release {
    Release::Failed(ErrorNote::new("error", message))
}

/// Returns `true` (after checking every new operation says `Unsupported`, changing
/// nothing, and that a release with a reason still ends the lease) when the harness has no
/// attempt limits: the case then ends.
async fn unsupported<H: Harness>(ctx: &Ctx<H>) -> bool {
    if ctx.caps().attempts {
        return false;
    }
    let b = ctx.backend();
    let is_unsupported = |e: LeaseError| ctx.assert_unsupported(&e);
    is_unsupported(
        b.set_attempt_limit(&AttemptScope::Default, limit(3))
            .await
            .expect_err("no attempt limits"),
    );
    is_unsupported(b.attempt_limits().await.expect_err("no attempt limits"));
    is_unsupported(b.list_dead(None, 10).await.expect_err("no dead letters"));
    let bad = b.list_dead(None, 0).await.expect_err("bad limit");
    assert!(matches!(bad, LeaseError::InvalidInput { .. }), "{bad}");
    ctx.admit("plain").await;
    let lease = ctx.claim_one("plain").await;
    let before = ctx.get("plain").await;
    is_unsupported(
        b.retry_dead(&[ctx.id("plain")], None)
            .await
            .expect_err("no dead letters"),
    );
    assert_eq!(ctx.get("plain").await, before, "a refusal changes nothing");
    let released = b
        .release_with(&lease, &Release::NotStarted)
        .await
        .expect("release");
    assert!(
        !released.is_lost(),
        "a release with a reason ends the lease"
    );
    assert_ne!(ctx.get("plain").await.status, ExecutionStatus::Running);
    true
}

/// Releases `lease` on `b` as `how` says, asserting the release was accepted.
async fn released(b: &impl ExecutionClient, lease: &ExecutionLease, how: &Release) {
    let got = b.release_with(lease, how).await.expect("release");
    assert!(!got.is_lost(), "release of a current lease: {how:?}");
}

/// Claims `id` after its redelivery delay (if any) and returns the lease.
async fn next_delivery<H: Harness>(ctx: &Ctx<H>, id: &str) -> ExecutionLease {
    let record = ctx.get(id).await;
    if let Some(gate) = record
        .redelivery_not_before(&ctx.policy)
        .filter(|gate| *gate > ctx.now())
    {
        ctx.set_clock(gate);
    }
    ctx.claim_only(&ctx.backend(), id).await
}

/// Asserts every write of `lease`'s holder is `Lost` and changes nothing.
async fn assert_holder_refused<H: Harness>(ctx: &Ctx<H>, lease: &ExecutionLease, why: &str) {
    let id = lease.execution_id.as_str();
    let before = ctx.snapshot(id).await;
    let b = ctx.peer().await;
    assert!(
        b.renew(lease, LEASE).await.expect("renew").is_lost(),
        "{why}: renew"
    );
    assert!(
        ctx.write(&b, lease, "late", "1").await.is_lost(),
        "{why}: step"
    );
    let ack = b
        .acknowledge(lease, &WorkflowRunOutcome::Completed(json("1")))
        .await
        .expect("acknowledge");
    assert!(ack.is_lost(), "{why}: acknowledge");
    assert!(
        b.release_with(lease, &failed("late"))
            .await
            .expect("release")
            .is_lost(),
        "{why}: release"
    );
    assert_eq!(ctx.snapshot(id).await, before, "{why}: nothing changed");
}

/// With a limit of 2, the second failed release ends the execution as dead in that step:
/// not due, never claimed, a wake does not revive it, and both holders are `Lost`.
pub async fn attempts_exhausted_by_release_end_dead_and_refuse_every_holder<H: Harness>(
    ctx: Arc<Ctx<H>>,
) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    b.set_attempt_limit(&AttemptScope::Default, limit(2))
        .await
        .expect("set limit");
    ctx.admit("job").await;
    let first = ctx.claim_one("job").await;
    released(&b, &first, &failed("one")).await;
    let after_one = ctx.get("job").await;
    assert_eq!(
        after_one.status,
        ExecutionStatus::Admitted,
        "one attempt left"
    );
    assert_eq!(after_one.unacknowledged_deliveries, 1);

    let second = next_delivery(&*ctx, "job").await;
    let ended_at = ctx.now();
    released(&b, &second, &failed("two")).await;
    let dead = ctx.get("job").await;
    assert_eq!(dead.status, ExecutionStatus::Dead);
    assert_eq!(dead.unacknowledged_deliveries, 2);
    assert_eq!(dead.due_at, None);
    assert_eq!(dead.lease_expires_at, None);
    assert_eq!(dead.outcome, None, "dead is no outcome a worker chose");
    let last = dead.last_error.clone().expect("last error");
    assert_eq!(
        (last.kind.as_str(), last.message.as_str()),
        ("error", "two")
    );
    assert_eq!((last.attempt, last.at), (2, ended_at));

    b.request_wake(&ctx.id("job"), ctx.now())
        .await
        .expect("wake");
    assert_eq!(ctx.get("job").await, dead, "a wake cannot revive it");
    ctx.advance(Duration::from_secs(3600));
    ctx.assert_nothing_claimable("a dead execution").await;
    assert_holder_refused(&*ctx, &second, "the holder that used the last attempt").await;
    assert_holder_refused(&*ctx, &first, "an older holder").await;
    let listed = b.list_dead(None, 10).await.expect("list_dead");
    assert_eq!(listed, vec![ctx.get("job").await]);
}

/// With a limit of 1, the lease's expiry uses the attempt: from the expiry on `get` reads
/// dead (the last error says the lease expired, at the expiry), and the holder's renew,
/// step, acknowledge and release are `Lost`; one millisecond before, it still runs.
pub async fn attempts_exhausted_by_expiry_end_dead_at_the_expiry<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    b.set_attempt_limit(&AttemptScope::Default, limit(1))
        .await
        .expect("set limit");
    ctx.admit("job").await;
    let lease = ctx.claim_one("job").await;
    ctx.set_clock(crate::context::just_before(lease.expires_at));
    assert_eq!(ctx.get("job").await.status, ExecutionStatus::Running);

    ctx.set_clock(lease.expires_at);
    let dead = ctx.get("job").await;
    assert_eq!(dead.status, ExecutionStatus::Dead);
    assert_eq!(dead.unacknowledged_deliveries, 1);
    let last = dead.last_error.clone().expect("last error");
    assert_eq!(last.kind, LastError::LEASE_EXPIRED);
    assert_eq!((last.attempt, last.at), (1, lease.expires_at));
    assert_holder_refused(
        &*ctx,
        &lease,
        "the holder whose expiry used the last attempt",
    )
    .await;
    ctx.advance(Duration::from_secs(3600));
    ctx.assert_nothing_claimable("dead by expiry").await;
    assert_eq!(
        b.list_dead(None, 10).await.expect("list_dead"),
        vec![ctx.get("job").await]
    );
    if ctx.caps().status_counts {
        let counts = b.status_counts().await.expect("counts");
        assert_eq!((counts.dead, counts.running, counts.admitted), (1, 0, 0));
    }
}

/// A release of a lease no worker started counts nothing: the counter, the last error and
/// the redelivery delay stay, and the execution is claimable again at once, however often;
/// the next real failure then uses the one attempt.
pub async fn attempts_unstarted_release_counts_nothing_and_is_due_at_once<H: Harness>(
    ctx: Arc<Ctx<H>>,
) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    b.set_attempt_limit(&AttemptScope::Default, limit(1))
        .await
        .expect("set limit");
    let before = ctx.admit("job").await;
    let mut lease = ctx.claim_one("job").await;
    for round in 0..3 {
        let released = b
            .release_with(&lease, &Release::NotStarted)
            .await
            .expect("release");
        assert!(!released.is_lost(), "round {round}");
        let record = ctx.get("job").await;
        assert_eq!(record.status, ExecutionStatus::Admitted, "round {round}");
        assert_eq!(record.unacknowledged_deliveries, 0, "round {round}");
        assert_eq!(
            record.last_delivery_ended_at, None,
            "round {round}: no delay"
        );
        assert_eq!(record.last_error, None, "round {round}");
        assert_eq!(record.due_at, before.due_at, "round {round}: due as before");
        let next = ctx.claim_only(&ctx.peer().await, "job").await;
        assert!(
            next.token > lease.token,
            "round {round}: the token still rises"
        );
        lease = next;
    }
    released(&b, &lease, &failed("real")).await;
    assert_eq!(ctx.get("job").await.status, ExecutionStatus::Dead);
}

/// The last error names the attempt and time; a message over the bound is kept cut to it
/// on a character boundary; a later attempt replaces it; an acknowledgement keeps it.
pub async fn attempts_last_error_is_kept_and_bounded<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    ctx.admit("job").await;
    let lease = ctx.claim_one("job").await;
    let long = "é".repeat(MAX_ERROR_MESSAGE_BYTES);
    let at = ctx.now();
    released(&b, &lease, &failed(&long)).await;
    let last = ctx.get("job").await.last_error.expect("last error");
    assert!(
        last.message.len() <= MAX_ERROR_MESSAGE_BYTES,
        "{}",
        last.message.len()
    );
    assert!(last.message.len() >= MAX_ERROR_MESSAGE_BYTES - 1);
    assert!(long.starts_with(&last.message), "a prefix of the message");
    assert_eq!(
        (last.kind.as_str(), last.attempt, last.at),
        ("error", 1, at)
    );

    let lease = next_delivery(&*ctx, "job").await;
    released(&b, &lease, &Release::Retry).await;
    let last = ctx.get("job").await.last_error.expect("last error");
    assert_eq!((last.kind.as_str(), last.attempt), (LastError::RETRY, 2));

    let lease = next_delivery(&*ctx, "job").await;
    let acked = b
        .acknowledge(&lease, &WorkflowRunOutcome::Completed(json("1")))
        .await
        .expect("acknowledge");
    assert!(!acked.is_lost());
    let done = ctx.get("job").await;
    assert_eq!(
        done.last_error,
        Some(last),
        "kept after the acknowledgement"
    );
    assert_eq!(done.unacknowledged_deliveries, 0);
}

/// A workflow's own limit overrides the namespace default, which applies to every other
/// workflow and to executions without a name; the limits read back as set.
pub async fn attempts_workflow_limit_overrides_the_default<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    b.set_attempt_limit(&AttemptScope::Default, limit(1))
        .await
        .expect("default");
    b.set_attempt_limit(&AttemptScope::Workflow(workflow("patient")), limit(3))
        .await
        .expect("workflow");
    let peer = ctx.peer().await;
    assert_eq!(
        peer.attempt_limits().await.expect("limits"),
        AttemptLimits {
            default: limit(1),
            workflows: vec![(workflow("patient"), AttemptLimit::new(3).expect("3"))],
        }
    );
    for (id, name) in [("p", Some("patient")), ("o", Some("other")), ("n", None)] {
        let mut admission = Admission::new(ctx.id(id));
        if let Some(name) = name {
            admission = admission.workflow(workflow(name));
        }
        b.admit(&admission).await.expect("admit");
    }
    let leases = ctx.claim(&b, 10).await;
    assert_eq!(leases.len(), 3);
    for lease in &leases {
        released(&b, lease, &failed("x")).await;
    }
    assert_eq!(ctx.get("p").await.status, ExecutionStatus::Admitted);
    assert_eq!(ctx.get("o").await.status, ExecutionStatus::Dead);
    assert_eq!(ctx.get("n").await.status, ExecutionStatus::Dead);
    let dead: Vec<String> = b
        .list_dead(None, 10)
        .await
        .expect("list")
        .into_iter()
        .map(|r| r.id.to_string())
        .collect();
    assert_eq!(dead, ["n", "o"], "by id");
    let after_n = b.list_dead(Some(&ctx.id("n")), 10).await.expect("page");
    assert_eq!(after_n.len(), 1);
    assert_eq!(after_n[0].id, ctx.id("o"), "the page after n");
}

/// Without a limit (the default) an execution is redelivered for ever; a limit removed is
/// unlimited again (from the next claim).
pub async fn attempts_unlimited_by_default_and_by_choice<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    assert_eq!(
        b.attempt_limits().await.expect("limits"),
        AttemptLimits::default()
    );
    ctx.admit("job").await;
    for _ in 0..5 {
        let lease = next_delivery(&*ctx, "job").await;
        released(&b, &lease, &failed("again")).await;
    }
    b.set_attempt_limit(&AttemptScope::Default, limit(2))
        .await
        .expect("set");
    b.set_attempt_limit(&AttemptScope::Default, None)
        .await
        .expect("remove");
    assert_eq!(
        b.attempt_limits().await.expect("limits"),
        AttemptLimits::default()
    );
    let lease = next_delivery(&*ctx, "job").await;
    released(&b, &lease, &failed("again")).await;
    let record = ctx.get("job").await;
    assert_eq!(record.status, ExecutionStatus::Admitted);
    assert_eq!(record.unacknowledged_deliveries, 6);
}

/// A limit of 0 or over the maximum cannot be built (`InvalidInput`); a bad page limit, no
/// ids, or an id twice in a retry are `InvalidInput` and change nothing.
pub async fn attempts_invalid_input_refused_and_changes_nothing<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    for bad in [0, MAX_ATTEMPT_LIMIT + 1] {
        let err = AttemptLimit::new(bad).expect_err("out of range");
        assert!(matches!(err, LeaseError::InvalidInput { .. }), "{err}");
    }
    let b = ctx.backend();
    b.set_attempt_limit(&AttemptScope::Default, limit(1))
        .await
        .expect("set");
    ctx.admit("job").await;
    let lease = ctx.claim_one("job").await;
    released(&b, &lease, &failed("x")).await;
    let dead = ctx.get("job").await;
    let invalid = |e: LeaseError| assert!(matches!(e, LeaseError::InvalidInput { .. }), "{e}");
    invalid(b.list_dead(None, 0).await.expect_err("limit 0"));
    invalid(b.list_dead(None, 1001).await.expect_err("limit over 1000"));
    invalid(b.retry_dead(&[], None).await.expect_err("no ids"));
    invalid(
        b.retry_dead(&[ctx.id("job"), ctx.id("job")], None)
            .await
            .expect_err("twice"),
    );
    assert_eq!(ctx.get("job").await, dead, "nothing changed");
    assert_eq!(b.attempt_limits().await.expect("limits").default, limit(1));
}

/// `retry_dead` re-admits: due now, the counter reset (no redelivery delay), the new input
/// in place, the last error kept; a claim takes it at once with a higher token, and it is
/// no longer listed as dead.
pub async fn attempts_retry_dead_resets_and_is_claimable<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    b.set_attempt_limit(&AttemptScope::Default, limit(1))
        .await
        .expect("set");
    ctx.admit("job").await;
    let lease = ctx.claim_one("job").await;
    released(&b, &lease, &failed("bad input")).await;
    let dead = ctx.get("job").await;
    assert_eq!(dead.status, ExecutionStatus::Dead);

    let fixed = json(r#"{"fixed":true}"#);
    let retried = ctx
        .peer()
        .await
        .retry_dead(&[ctx.id("job")], Some(&fixed))
        .await
        .expect("retry");
    let record = ctx.get("job").await;
    assert_eq!(retried, vec![record.clone()]);
    assert_eq!(record.status, ExecutionStatus::Admitted);
    assert_eq!(record.unacknowledged_deliveries, 0);
    assert_eq!(record.due_at, Some(ctx.now()));
    assert_eq!(record.input, Some(fixed.clone()));
    assert_eq!(
        record.last_error, dead.last_error,
        "why it died stays visible"
    );
    assert!(b.list_dead(None, 10).await.expect("list").is_empty());
    let again = ctx.claim_only(&b, "job").await;
    assert!(again.token > lease.token);
    assert_eq!(ctx.get("job").await.input, Some(fixed));
    assert_holder_refused(&*ctx, &lease, "the holder before the retry").await;
}

/// A retry naming an execution that is not dead (admitted, running, completed) is
/// `InvalidInput`, an unknown one `UnknownExecution`: nothing changes, the dead ones named
/// beside it stay dead.
pub async fn attempts_retry_refuses_executions_not_dead<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    b.set_attempt_limit(&AttemptScope::Default, limit(1))
        .await
        .expect("set");
    ctx.admit("dead").await;
    let lease = ctx.claim_one("dead").await;
    released(&b, &lease, &failed("x")).await;
    ctx.admit("waiting").await;
    let dead = ctx.snapshot("dead").await;
    let waiting = ctx.snapshot("waiting").await;
    let err = b
        .retry_dead(&[ctx.id("dead"), ctx.id("waiting")], None)
        .await
        .expect_err("waiting is not dead");
    assert!(matches!(err, LeaseError::InvalidInput { .. }), "{err}");
    let err = b
        .retry_dead(&[ctx.id("dead"), ctx.id("nobody")], Some(&json("1")))
        .await
        .expect_err("unknown");
    assert!(matches!(err, LeaseError::UnknownExecution(_)), "{err}");
    assert_eq!(ctx.snapshot("dead").await, dead);
    assert_eq!(ctx.snapshot("waiting").await, waiting);
}

/// A dead execution may be cancelled (the operator's other answer), and retention leaves
/// it alone while it is dead.
pub async fn attempts_dead_is_cancellable_and_kept_by_retention<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    b.set_attempt_limit(&AttemptScope::Default, limit(1))
        .await
        .expect("set");
    for id in ["kept", "cancelled"] {
        ctx.admit(id).await;
        let lease = ctx.claim_one(id).await;
        released(&b, &lease, &failed("x")).await;
    }
    ctx.advance(Duration::from_secs(60));
    if ctx.caps().retention {
        let purged = b
            .purge_terminal(plus(ctx.now(), Duration::from_secs(1)), 100)
            .await
            .expect("purge");
        assert!(
            purged.ids.is_empty(),
            "dead executions wait for an operator"
        );
    }
    if ctx.caps().cancel {
        let reason = CancelReason::new("given up").expect("reason");
        let got = b
            .cancel(&ctx.id("cancelled"), &reason)
            .await
            .expect("cancel");
        assert_eq!(got, CancelOutcome::Cancelled { ended_lease: false });
        assert_eq!(
            ctx.get("cancelled").await.status,
            ExecutionStatus::Cancelled
        );
    }
    assert_eq!(ctx.get("kept").await.status, ExecutionStatus::Dead);
}

/// A dispatcher releases a failed delivery with the worker's error and a panicked one with
/// its message: with a limit of 1 each ends dead at once, its last error saying why.
pub async fn attempts_dispatcher_keeps_the_worker_error_until_dead<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    b.set_attempt_limit(&AttemptScope::Default, limit(1))
        .await
        .expect("set");
    ctx.admit("fails").await;
    ctx.admit("panics").await;
    let worker = |d: lease_runtime::Delivery| async move {
        if d.execution_id().as_str() == "panics" {
            panic!("boom");
        }
        Err::<lease_runtime::Reply, _>(DeliveryError::worker("card declined"))
    };
    let options = DispatcherOptions::new()
        .concurrency(2)
        .lease_duration(LEASE)
        .poll_interval(Duration::from_millis(5));
    let dispatcher = Dispatcher::start(Arc::new(ctx.backend()), worker, options).expect("start");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while ctx.get("fails").await.status != ExecutionStatus::Dead
        || ctx.get("panics").await.status != ExecutionStatus::Dead
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "both dead within 20 s: {:?} {:?}",
            ctx.get("fails").await,
            ctx.get("panics").await
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    dispatcher.shutdown(Duration::from_secs(20)).await;
    let fails = ctx.get("fails").await.last_error.expect("last error");
    assert_eq!(fails.kind, "error");
    assert!(fails.message.contains("card declined"), "{fails:?}");
    assert_eq!(fails.attempt, 1);
    let panics = ctx.get("panics").await.last_error.expect("last error");
    assert_eq!(panics.kind, "panic");
    assert!(panics.message.contains("boom"), "{panics:?}");
}
