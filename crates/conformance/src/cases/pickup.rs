//! Work is picked up at once (wake-ups across connections, timers from the claim's next
//! claimable instant), scheduled admission and batch admission.
//!
//! No case asserts a latency. The pickup cases run a dispatcher whose backstop poll is one
//! hour, so it can only claim in time through a wake-up or its timer, and poll with a
//! deadline for the outcome. On a harness that declares no wake-ups
//! ([`lease_core::Capabilities::wakeups`] `false`) they run with a 5 ms poll instead and check only what
//! polling guarantees.

use lease_core::ExecutionClientExt;
use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, ExecutionClient, ExecutionStatus, Json, LeaseError, Timestamp,
    WorkflowRunOutcome, limits::MAX_ADMIT_BATCH,
};
use lease_runtime::{Delivery, Dispatcher, DispatcherOptions, Reply};
use tokio::sync::mpsc;

use crate::context::{Ctx, LEASE, plus_ms};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __pickup_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, pickup, [
            pickup_admission_by_peer_is_claimed, pickup_wake_by_peer_is_claimed,
            pickup_expired_lease_is_reclaimed, pickup_survives_a_killed_listener,
            pickup_idle_dispatchers_claim_once_per_admission,
            scheduled_admission_claimable_from_its_time,
            scheduled_admission_past_due_and_idempotent,
            scheduled_admission_out_of_range_rejected,
            claim_horizon_is_the_earliest_claimable_instant, admit_batch_admits_each_like_admit,
            admit_batch_bad_input_admits_nothing, admit_batch_retry_after_a_partial_one_is_idempotent,
        ] }
    };
}

/// How long a case waits for something a dispatcher should do promptly.
const DEADLINE: Duration = Duration::from_secs(20);

/// A dispatcher on `backend` whose worker reports each execution it runs and completes it;
/// its backstop poll is an hour when the harness has wake-ups.
fn reporting_dispatcher<H: Harness>(
    backend: H::Backend,
) -> (Dispatcher, mpsc::UnboundedReceiver<String>) {
    let wakeups = backend.capabilities().wakeups;
    assert_eq!(
        backend.wakeups().is_some(),
        wakeups,
        "the declared wake-ups must say whether the backend sends them"
    );
    let poll = if wakeups {
        Duration::from_secs(3600)
    } else {
        Duration::from_millis(5)
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let dispatcher = Dispatcher::start(
        Arc::new(backend),
        move |d: Delivery| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(d.execution_id().as_str().to_owned());
                Ok(Reply::Acknowledge(WorkflowRunOutcome::Completed(
                    Json::parse("outcome", "true").expect("valid JSON"),
                )))
            }
        },
        DispatcherOptions::new()
            .concurrency(4)
            .lease_duration(LEASE)
            .renew_every(LEASE / 2)
            .poll_interval(poll),
    )
    .expect("start dispatcher");
    (dispatcher, rx)
}

/// Waits until the dispatcher made its first claim call, so what follows happens while it
/// sleeps (and must be learned of by a wake-up or the claim's horizon).
async fn wait_idle(dispatcher: &Dispatcher) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while dispatcher.snapshot().claim_calls == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the dispatcher made no claim within {DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The next execution the dispatcher ran; panics after [`DEADLINE`].
async fn next_run(rx: &mut mpsc::UnboundedReceiver<String>, what: &str) -> String {
    match tokio::time::timeout(DEADLINE, rx.recv()).await {
        Ok(Some(id)) => id,
        Ok(None) => panic!("the worker is gone before {what}"),
        Err(_) => panic!("{what}: not claimed within {DEADLINE:?} (backstop poll: 1 h)"),
    }
}

/// An execution admitted by another connection while the dispatcher sleeps is claimed.
pub async fn pickup_admission_by_peer_is_claimed<H: Harness>(ctx: Arc<Ctx<H>>) {
    let (dispatcher, mut runs) = reporting_dispatcher::<H>(ctx.backend());
    wait_idle(&dispatcher).await;
    let peer = ctx.peer().await;
    peer.admit(&Admission::new(ctx.id("order-42")))
        .await
        .expect("admit");
    assert_eq!(next_run(&mut runs, "order-42").await, "order-42");
    dispatcher.shutdown(DEADLINE).await;
}

/// A wake requested by another connection makes a suspended execution run: at once when
/// due now, and when its time comes for a future wake.
pub async fn pickup_wake_by_peer_is_claimed<H: Harness>(ctx: Arc<Ctx<H>>) {
    let peer = ctx.peer().await;
    for id in ["now", "later"] {
        ctx.admit(id).await;
        let lease = ctx.claim_only(&peer, id).await;
        let ack = peer
            .acknowledge(&lease, &WorkflowRunOutcome::Suspended)
            .await
            .expect("acknowledge");
        assert!(!ack.is_lost());
    }
    let (dispatcher, mut runs) = reporting_dispatcher::<H>(ctx.backend());
    wait_idle(&dispatcher).await;
    peer.request_wake(&ctx.id("now"), ctx.now())
        .await
        .expect("request_wake");
    assert_eq!(next_run(&mut runs, "a wake due now").await, "now");
    let at = plus_ms(ctx.now(), 300);
    peer.request_wake(&ctx.id("later"), at)
        .await
        .expect("request_wake");
    ctx.set_clock(at);
    assert_eq!(next_run(&mut runs, "a wake due later").await, "later");
    dispatcher.shutdown(DEADLINE).await;
}

/// A lease another connection holds and lets expire is reclaimed once it expired and the
/// redelivery delay passed, though nothing else happens.
pub async fn pickup_expired_lease_is_reclaimed<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    // The dispatcher would claim it at once: the peer holds it before the dispatcher
    // starts, so every run exercises the reclaim (had the dispatcher started first, it
    // would win the claim on most PostgreSQL and Redis runs and the case would end early).
    let peer = ctx.peer().await;
    let now = ctx.now();
    let short = peer
        .claim_due(ClaimRequest {
            now,
            limit: 1,
            duration: Duration::from_millis(200),
        })
        .await
        .expect("claim");
    assert_eq!(short.len(), 1, "the peer claims the admitted execution");
    let (dispatcher, mut runs) = reporting_dispatcher::<H>(ctx.backend());
    wait_idle(&dispatcher).await;
    let delay = ctx.policy.delay(1);
    ctx.set_clock(plus_ms(
        short[0].expires_at,
        i64::try_from(delay.as_millis()).expect("small delay"),
    ));
    assert_eq!(next_run(&mut runs, "the expired lease").await, "order-42");
    let record = ctx.get("order-42").await;
    assert!(record.token > short[0].token);
    dispatcher.shutdown(DEADLINE).await;
}

/// The listener connection killed on the server: a later admission is still claimed (the
/// backend reconnects and, since notifications may have been missed, signals a claim).
pub async fn pickup_survives_a_killed_listener<H: Harness>(ctx: Arc<Ctx<H>>) {
    let (dispatcher, mut runs) = reporting_dispatcher::<H>(ctx.backend());
    wait_idle(&dispatcher).await;
    let killed = ctx.harness.kill_listeners().await.expect("kill listeners");
    assert_eq!(
        killed,
        H::KILLABLE_LISTENER,
        "kill_listeners reports whether it found a listener connection to kill"
    );
    ctx.peer()
        .await
        .admit(&Admission::new(ctx.id("after-kill")))
        .await
        .expect("admit");
    assert_eq!(next_run(&mut runs, "after-kill").await, "after-kill");
    dispatcher.shutdown(DEADLINE).await;
}

/// A scheduled admission is not claimable before its time and is claimable at it; it reads
/// as admitted and due at its time; a claim reports it as the next claimable instant.
pub async fn scheduled_admission_claimable_from_its_time<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    let at = plus_ms(ctx.now(), 5_000);
    let record = b
        .admit(&Admission::new(ctx.id("later")).not_before(at))
        .await
        .expect("admit");
    assert_eq!(record.status, ExecutionStatus::Admitted);
    assert_eq!(record.due_at, Some(at));
    let batch = b
        .claim_due_with_horizon(ClaimRequest {
            now: ctx.now(),
            limit: 10,
            duration: LEASE,
        })
        .await
        .expect("claim");
    assert!(batch.claimed.is_empty(), "claimed before its time");
    if ctx.caps().wakeups {
        assert_eq!(batch.next_claimable_at, Some(at), "the claim's horizon");
        assert_eq!(batch.now, Some(ctx.now()), "the claim's clock");
    }
    ctx.set_clock(plus_ms(at, -1));
    ctx.assert_nothing_claimable("1 ms before its time").await;
    ctx.set_clock(at);
    let lease = ctx.claim_only(&b, "later").await;
    assert_eq!(ctx.get("later").await.token, lease.token);
}

/// A scheduled time in the past is due at once; plain admit stays "due now"; a second admit
/// with another time changes nothing (idempotent by identity).
pub async fn scheduled_admission_past_due_and_idempotent<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    let past = plus_ms(ctx.now(), -60_000);
    let r = b
        .admit(&Admission::new(ctx.id("past")).not_before(past))
        .await
        .expect("admit");
    assert_eq!(r.due_at, Some(past));
    let plain = ctx.admit("plain").await;
    assert_eq!(plain.due_at, Some(ctx.now()));
    let again = b
        .admit(&Admission::new(ctx.id("plain")).not_before(plus_ms(ctx.now(), 9_000)))
        .await
        .expect("admit");
    assert_eq!(again, plain, "a second admit returns the record unchanged");
    let leases = ctx.claim(&b, 10).await;
    let ids: Vec<&str> = leases.iter().map(|l| l.execution_id.as_str()).collect();
    assert_eq!(ids, ["past", "plain"], "ordered by due time");
}

/// A scheduled time out of range is `InvalidInput` and admits nothing.
pub async fn scheduled_admission_out_of_range_rejected<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    for ms in [
        -1,
        lease_core::limits::MAX_SCHEDULED_MS + 1,
        i64::MAX,
        i64::MIN,
    ] {
        let a = Admission::new(ctx.id("bad")).not_before(Timestamp::from_millis(ms));
        let err = b.admit(&a).await.expect_err("out of range");
        assert!(
            matches!(err, LeaseError::InvalidInput { .. }),
            "{ms}: {err}"
        );
        assert!(ctx.try_get("bad").await.is_none(), "{ms}: admitted anyway");
    }
}

/// The claim's horizon is never later than the truth: it reports the earliest of a
/// scheduled admission, the end of a redelivery delay and a live lease's expiry.
pub async fn claim_horizon_is_the_earliest_claimable_instant<H: Harness>(ctx: Arc<Ctx<H>>) {
    if !ctx.caps().wakeups {
        ctx.refusal_only();
        return;
    }
    let b = ctx.backend();
    let now = ctx.now();
    b.admit(&Admission::new(ctx.id("scheduled")).not_before(plus_ms(now, 9_000)))
        .await
        .expect("admit");
    ctx.admit("held").await;
    ctx.admit("released").await;
    let horizon = |limit| {
        let b = b.clone();
        async move {
            b.claim_due_with_horizon(ClaimRequest {
                now: Timestamp::MAX,
                limit,
                duration: Duration::from_millis(5_000),
            })
            .await
            .expect("claim")
        }
    };
    let first = horizon(2).await;
    let ids: Vec<&str> = first
        .claimed
        .iter()
        .map(|c| c.lease.execution_id.as_str())
        .collect();
    assert_eq!(ids, ["held", "released"]);
    let delay = i64::try_from(ctx.policy.delay(1).as_millis()).expect("small");
    // Both leases expire at now + 5 s and are claimable a delay later.
    assert_eq!(first.next_claimable_at, Some(plus_ms(now, 5_000 + delay)));
    let released = first.claimed[1].lease.clone();
    assert!(!b.release(&released).await.expect("release").is_lost());
    let second = horizon(1).await;
    assert!(second.claimed.is_empty());
    assert_eq!(second.next_claimable_at, Some(plus_ms(now, delay)));
    ctx.set_clock(plus_ms(now, delay));
    let third = horizon(1).await;
    assert_eq!(third.claimed.len(), 1);
    assert_eq!(third.next_claimable_at, Some(plus_ms(now, 5_000 + delay)));
}

/// `admit_batch` admits each item as `admit` would, in order: new ones admitted (scheduled
/// ones at their time), an existing id returned unchanged.
pub async fn admit_batch_admits_each_like_admit<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    let existing = ctx.admit("existing").await;
    let at = plus_ms(ctx.now(), 1_000);
    let items = [
        Admission::new(ctx.id("b-new")),
        Admission::new(ctx.id("existing")).not_before(at),
        Admission::new(ctx.id("a-scheduled")).not_before(at),
    ];
    let records = b.admit_batch(&items).await.expect("admit_batch");
    assert_eq!(records.len(), 3);
    assert_eq!(records[0].id.as_str(), "b-new");
    assert_eq!(records[0].due_at, Some(ctx.now()));
    assert_eq!(records[1], existing, "an existing id is returned unchanged");
    assert_eq!(records[2].due_at, Some(at));
    for r in &records {
        assert_eq!(ctx.get(r.id.as_str()).await, *r, "returned = stored");
    }
    assert!(b.admit_batch(&[]).await.expect("empty").is_empty());
    let many: Vec<Admission> = (0..MAX_ADMIT_BATCH)
        .map(|i| Admission::new(ctx.id(&format!("m-{i:04}"))))
        .collect();
    assert_eq!(
        b.admit_batch(&many).await.expect("full batch").len(),
        MAX_ADMIT_BATCH
    );
    assert!(ctx.try_get("m-0999").await.is_some());
}

/// A batch retried after a call that admitted only some of its items (as a batch spread
/// over partitions can fail half-way) admits the rest, returns the earlier ones as stored,
/// and a second retry changes nothing: every item is admitted once and claimed once.
pub async fn admit_batch_retry_after_a_partial_one_is_idempotent<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    let batch: Vec<Admission> = (0..30)
        .map(|i| Admission::new(ctx.id(&format!("r-{i:02}"))))
        .collect();
    let first: Vec<Admission> = batch.iter().step_by(3).cloned().collect();
    let earlier = b.admit_batch(&first).await.expect("partial");
    ctx.advance(Duration::from_millis(5));
    let retried = b.admit_batch(&batch).await.expect("retry");
    assert_eq!(retried.len(), batch.len());
    for (i, r) in retried.iter().enumerate() {
        assert_eq!(r.id, batch[i].id, "in the items' order");
        // Due at its admission: the earlier call's instant, or this one's.
        let want_due = if i % 3 == 0 {
            earlier[i / 3].due_at
        } else {
            Some(ctx.now())
        };
        assert_eq!(r.due_at, want_due, "{}", r.id);
        assert_eq!(ctx.get(r.id.as_str()).await, *r, "returned = stored");
    }
    ctx.advance(Duration::from_millis(5));
    let again = b.admit_batch(&batch).await.expect("second retry");
    assert_eq!(again, retried, "a second retry changes nothing");
    let mut claimed: Vec<String> = ctx
        .claim(&b, 100)
        .await
        .into_iter()
        .map(|l| l.execution_id.as_str().to_owned())
        .collect();
    claimed.sort();
    let mut want: Vec<String> = batch.iter().map(|a| a.id.as_str().to_owned()).collect();
    want.sort();
    assert_eq!(claimed, want, "each admitted once, claimed once");
}

/// Bad input in any item of `admit_batch` (one id twice, a scheduled time out of range, too
/// many items) is `InvalidInput` and admits nothing.
pub async fn admit_batch_bad_input_admits_nothing<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    let good = || Admission::new(ctx.id("good"));
    let twice = vec![
        good(),
        Admission::new(ctx.id("x")),
        Admission::new(ctx.id("x")),
    ];
    let out_of_range = vec![
        good(),
        Admission::new(ctx.id("y")).not_before(Timestamp::from_millis(-5)),
    ];
    let too_many: Vec<Admission> = (0..=MAX_ADMIT_BATCH)
        .map(|i| Admission::new(ctx.id(&format!("n-{i:04}"))))
        .collect();
    for (what, batch) in [
        ("duplicate id", twice),
        ("out of range", out_of_range),
        ("too many", too_many),
    ] {
        let err = b.admit_batch(&batch).await.expect_err(what);
        assert!(
            matches!(err, LeaseError::InvalidInput { .. }),
            "{what}: {err}"
        );
        for a in &batch {
            assert!(
                ctx.try_get(a.id.as_str()).await.is_none(),
                "{what}: {} admitted",
                a.id
            );
        }
    }
}

/// Several idle dispatchers and one admission: each claims at most once for it (no herd of
/// repeated claims), and exactly one runs it.
pub async fn pickup_idle_dispatchers_claim_once_per_admission<H: Harness>(ctx: Arc<Ctx<H>>) {
    if !ctx.caps().wakeups {
        ctx.refusal_only();
        return;
    }
    let mut dispatchers = Vec::new();
    let (tx, mut runs) = mpsc::unbounded_channel();
    for _ in 0..3 {
        let (d, mut rx) = reporting_dispatcher::<H>(ctx.peer().await);
        wait_idle(&d).await;
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(id) = rx.recv().await {
                let _ = tx.send(id);
            }
        });
        dispatchers.push(d);
    }
    let before: Vec<u64> = dispatchers
        .iter()
        .map(|d| d.snapshot().claim_calls)
        .collect();
    ctx.admit("order-42").await;
    assert_eq!(next_run(&mut runs, "order-42").await, "order-42");
    // Count once every dispatcher reacted to the wake-up and the run was acknowledged
    // (events, not a fixed 300 ms wait that a slow machine outlasts).
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let snapshots: Vec<_> = dispatchers.iter().map(Dispatcher::snapshot).collect();
        let reacted = snapshots
            .iter()
            .zip(&before)
            .all(|(s, b)| s.claim_calls > *b);
        if reacted && snapshots.iter().any(|s| s.acknowledgements > 0) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not every idle dispatcher reacted to the admission within {DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let after: u64 = dispatchers.iter().map(|d| d.snapshot().claim_calls).sum();
    let calls = after - before.iter().sum::<u64>();
    // One claim each for the admission's wake-up, at most one more each for the
    // acknowledgement's and the claim's own signal (a future instant arms a timer only).
    assert!(
        calls <= 2 * dispatchers.len() as u64,
        "{calls} claim calls by {} idle dispatchers for one admission",
        dispatchers.len()
    );
    assert!(runs.try_recv().is_err(), "run twice");
    for d in dispatchers {
        d.shutdown(DEADLINE).await;
    }
}
