//! RFC 002 "Fencing tests" table, plus a race of a stale holder against a reclaim.

use lease_core::ExecutionClientExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lease_core::{
    Acknowledged, Acknowledgement, ClaimRequest, ExecutionClient, ExecutionLease, ExecutionOutcome,
    ExecutionStatus, Fenced, HeapClient, HeapRecord, LeaseBackend, RequestId, StartClient,
    StartRequest, StoreClient, StoreId, StoreKey, StoreOp, StoreOutcome, StoreReceipt, Timestamp,
    WorkflowName, WorkflowRunOutcome,
};
use tokio::sync::Barrier;

use crate::context::{Ctx, LEASE, join, json, key, plus, step};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __fencing_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, fencing, [
            stale_step_write_after_reclaim_is_lost, stale_ack_after_reclaim_is_lost,
            paused_holder_every_fenced_write_lost, current_holder_rewrite_keeps_recorded_value,
            stale_store_update_applies_once, stale_start_returns_same_target,
            stale_wake_causes_at_most_one_extra_delivery, stale_wake_does_not_change_outcome,
            stale_writes_race_reclaim_atomically,
            stale_renew_and_release_race_reclaim_atomically, ack_batch_fences_each_item,
        ] }
    };
}

fn completed(text: &str) -> WorkflowRunOutcome {
    WorkflowRunOutcome::Completed(json(text))
}

/// Row "A stale holder writes a heap step after a reclaim": the write returns lost; the
/// current holder's records are unchanged.
pub async fn stale_step_write_after_reclaim_is_lost<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let stale = ctx.claim_one("order-42").await;
    assert!(
        ctx.write(&b, &stale, "load", r#"{"order":42}"#)
            .await
            .accepted()
            .is_some()
    );
    let (peer, current) = ctx.reclaim(&stale).await;
    let charged = ctx.write(&peer, &current, "charge", r#""receipt-B""#).await;
    assert!(matches!(charged, Fenced::Accepted(ref r) if r.token == current.token));
    let before = ctx.snapshot("order-42").await;
    assert_eq!(before.steps.len(), 2);
    // The stale holder tries both a step the current holder wrote and a new one.
    assert_eq!(
        ctx.write(&b, &stale, "charge", r#""receipt-A""#).await,
        Fenced::Lost
    );
    assert_eq!(
        ctx.write(&b, &stale, "ship", r#""parcel-A""#).await,
        Fenced::Lost
    );
    assert_eq!(ctx.snapshot("order-42").await, before, "records unchanged");
    let charge = b
        .read_step(&ctx.id("order-42"), &key("charge"), 0)
        .await
        .expect("read_step")
        .expect("recorded");
    assert_eq!(charge.response, json(r#""receipt-B""#));
    assert_eq!(charge.token, current.token);
}

/// Row "A stale holder acknowledges after a reclaim": it returns lost; the status and
/// outcome are unchanged (before and after the current holder's own acknowledgement).
pub async fn stale_ack_after_reclaim_is_lost<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let stale = ctx.claim_one("order-42").await;
    let (peer, current) = ctx.reclaim(&stale).await;
    let before = ctx.snapshot("order-42").await;
    for outcome in [
        completed(r#""stale""#),
        WorkflowRunOutcome::Failed(json(r#""stale""#)),
        WorkflowRunOutcome::Suspended,
    ] {
        assert_eq!(
            b.acknowledge(&stale, &outcome).await.expect("ack"),
            Fenced::Lost
        );
        assert_eq!(
            ctx.snapshot("order-42").await,
            before,
            "{outcome:?} changed the record"
        );
    }
    let record = ctx.get("order-42").await;
    assert_eq!(record.status, ExecutionStatus::Running);
    assert_eq!(record.token, current.token);
    assert_eq!(record.outcome, None);
    let ack = peer
        .acknowledge(&current, &completed(r#""current""#))
        .await
        .expect("ack");
    assert!(matches!(ack, Fenced::Accepted(Acknowledged::Terminal(_))));
    let after = ctx.snapshot("order-42").await;
    let late = b
        .acknowledge(&stale, &WorkflowRunOutcome::Failed(json(r#""stale""#)))
        .await
        .expect("ack");
    assert_eq!(late, Fenced::Lost);
    assert_eq!(ctx.snapshot("order-42").await, after);
    let record = ctx.get("order-42").await;
    assert_eq!(record.status, ExecutionStatus::Completed);
    assert_eq!(
        record.outcome,
        Some(ExecutionOutcome::Completed(json(r#""current""#)))
    );
}

/// Row "A holder pauses past expiry, another claims, and the first resumes": every fenced
/// write from the first (write_step, renew, release, acknowledge) returns lost and changes
/// nothing; the current holder is unaffected.
pub async fn paused_holder_every_fenced_write_lost<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let first = ctx.claim_one("order-42").await;
    assert!(
        ctx.write(&b, &first, "load", "1")
            .await
            .accepted()
            .is_some()
    );
    // The first holder freezes; its lease runs out and a peer takes over.
    let (peer, current) = ctx.reclaim(&first).await;
    assert!(
        ctx.write(&peer, &current, "charge", r#""B""#)
            .await
            .accepted()
            .is_some()
    );
    let before = ctx.snapshot("order-42").await;
    assert_eq!(
        ctx.write(&b, &first, "charge", r#""A""#).await,
        Fenced::Lost
    );
    assert_eq!(ctx.snapshot("order-42").await, before, "write_step");
    assert_eq!(ctx.write(&b, &first, "ship", r#""A""#).await, Fenced::Lost);
    assert_eq!(
        ctx.snapshot("order-42").await,
        before,
        "write_step (new key)"
    );
    assert_eq!(b.renew(&first, LEASE).await.expect("renew"), Fenced::Lost);
    assert_eq!(ctx.snapshot("order-42").await, before, "renew");
    assert_eq!(b.release(&first).await.expect("release"), Fenced::Lost);
    assert_eq!(ctx.snapshot("order-42").await, before, "release");
    let ack = b
        .acknowledge(&first, &completed(r#""A""#))
        .await
        .expect("ack");
    assert_eq!(ack, Fenced::Lost);
    assert_eq!(ctx.snapshot("order-42").await, before, "acknowledge");
    ctx.assert_nothing_claimable("the current lease is live")
        .await;
    // The current holder carries on undisturbed.
    let renewed = peer.renew(&current, LEASE).await.expect("renew");
    assert!(matches!(renewed, Fenced::Accepted(ref l) if l.token == current.token));
    let ack = peer
        .acknowledge(&current, &completed(r#""B""#))
        .await
        .expect("ack");
    assert!(matches!(ack, Fenced::Accepted(_)));
    assert_eq!(
        ctx.get("order-42").await.outcome,
        Some(ExecutionOutcome::Completed(json(r#""B""#)))
    );
}

/// Row "The current holder rewrites an existing step record": it succeeds, and the
/// recorded value is unchanged (the original record is returned, not the new response),
/// also when the record was written by an earlier holder.
pub async fn current_holder_rewrite_keeps_recorded_value<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let lease = ctx.claim_one("order-42").await;
    let original = ctx.write(&b, &lease, "charge", r#""receipt-1""#).await;
    let Fenced::Accepted(original) = original else {
        panic!("first write lost");
    };
    assert_eq!(original.response, json(r#""receipt-1""#));
    assert_eq!(original.token, lease.token);
    assert!(original.done);
    let mut rewrite = step("charge", r#""receipt-2""#);
    rewrite.done = false;
    let again = b.write_step(&lease, &rewrite).await.expect("write_step");
    assert_eq!(again, Fenced::Accepted(original.clone()));
    assert_eq!(ctx.steps("order-42").await, vec![original.clone()]);
    // A later holder rewriting the same step gets the record the earlier one made.
    let (peer, current) = ctx.reclaim(&lease).await;
    let replay = ctx.write(&peer, &current, "charge", r#""receipt-3""#).await;
    assert_eq!(replay, Fenced::Accepted(original.clone()));
    assert_eq!(ctx.steps("order-42").await, vec![original]);
}

/// Row "A stale holder commits an idempotent store update": the store reflects the step
/// exactly once, and the current holder (same receipt) receives the recorded result with
/// `replayed: true`.
pub async fn stale_store_update_applies_once<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let store = StoreId::new("inventory").expect("store id");
    let sku = StoreKey::new("sku-7").expect("store key");
    b.get_or_create(&store, &[(sku.clone(), json("5"))])
        .await
        .expect("get_or_create");
    let stale = ctx.claim_one("order-42").await;
    let (peer, _current) = ctx.reclaim(&stale).await;
    let receipt = StoreReceipt {
        store: store.clone(),
        execution_id: ctx.id("order-42"),
        step_key: key("reserve"),
    };
    let reserve = StoreOp::CompareAndSet {
        key: sku.clone(),
        expected: Some(json("5")),
        new: json("4"),
    };
    // Unfenced: the stale holder's commit goes through, once.
    let first = b.update(&receipt, &reserve).await.expect("update");
    let recorded = StoreOutcome {
        applied: true,
        previous: Some(json("5")),
    };
    assert_eq!(first.outcome, recorded);
    assert!(!first.replayed);
    let second = peer.update(&receipt, &reserve).await.expect("update");
    assert_eq!(
        second.outcome, recorded,
        "the current holder gets the recorded result"
    );
    assert!(second.replayed);
    assert_eq!(
        peer.read_entry(&store, &sku).await.expect("read_entry"),
        Some(json("4")),
        "applied exactly once"
    );
}

/// Row "A stale holder calls WorkflowStartClient.start": the current holder receives the
/// same target; exactly one execution exists for the request.
pub async fn stale_start_returns_same_target<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let stale = ctx.claim_one("order-42").await;
    let (peer, _current) = ctx.reclaim(&stale).await;
    let request_id = RequestId::new("order-42/ship").expect("request id");
    let workflow = WorkflowName::new("shipping").expect("workflow");
    let mut from_stale = StartRequest::new(request_id.clone(), workflow.clone(), json("42"));
    from_stale.target = ctx.id("ship-A");
    let mut from_current = StartRequest::new(request_id, workflow, json("42"));
    from_current.target = ctx.id("ship-B");
    let first = b.start(&from_stale).await.expect("start");
    assert_eq!(first.target, ctx.id("ship-A"));
    assert!(first.created);
    let second = peer.start(&from_current).await.expect("start");
    assert_eq!(second.target, ctx.id("ship-A"), "the first target");
    assert!(!second.created, "a repeat starts nothing");
    assert_eq!(ctx.try_get("ship-B").await, None, "no second execution");
    let target = ctx.get("ship-A").await;
    assert_eq!(target.status, ExecutionStatus::Admitted);
    assert_eq!(target.token.get(), 0);
}

/// Row "A stale holder requests a wake": at most one extra delivery occurs; the outcome is
/// unchanged. Here the current holder suspends, so the stale wake (made during its
/// delivery) yields one delivery, and no more.
pub async fn stale_wake_causes_at_most_one_extra_delivery<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let stale = ctx.claim_one("order-42").await;
    let (peer, current) = ctx.reclaim(&stale).await;
    let wake = plus(ctx.now(), Duration::from_secs(1));
    b.request_wake(&ctx.id("order-42"), wake)
        .await
        .expect("stale wake");
    let ack = peer
        .acknowledge(&current, &WorkflowRunOutcome::Suspended)
        .await
        .expect("ack");
    assert_eq!(ack, Fenced::Accepted(Acknowledged::Suspended));
    let mut extra = 0;
    for _ in 0..5 {
        ctx.advance(Duration::from_secs(3600));
        for lease in ctx.claim(&peer, 10).await {
            extra += 1;
            let ack = peer
                .acknowledge(&lease, &WorkflowRunOutcome::Suspended)
                .await
                .expect("ack");
            assert_eq!(ack, Fenced::Accepted(Acknowledged::Suspended));
        }
    }
    assert!(extra <= 1, "{extra} extra deliveries from one stale wake");
    let record = ctx.get("order-42").await;
    assert_eq!(record.status, ExecutionStatus::Suspended);
    assert_eq!(record.outcome, None);
    assert_eq!(record.due_at, None);
}

/// Row "A stale holder requests a wake", terminal variant: the current holder completes;
/// the stale wakes (during and after its delivery) deliver nothing and leave the outcome
/// unchanged.
pub async fn stale_wake_does_not_change_outcome<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let stale = ctx.claim_one("order-42").await;
    let (peer, current) = ctx.reclaim(&stale).await;
    let id = ctx.id("order-42");
    b.request_wake(&id, ctx.now()).await.expect("stale wake");
    let ack = peer
        .acknowledge(&current, &completed(r#""done""#))
        .await
        .expect("ack");
    assert!(matches!(ack, Fenced::Accepted(Acknowledged::Terminal(_))));
    let after = ctx.snapshot("order-42").await;
    b.request_wake(&id, ctx.now()).await.expect("stale wake");
    assert_eq!(ctx.snapshot("order-42").await, after);
    ctx.advance(Duration::from_secs(3600));
    ctx.assert_nothing_claimable("a completed execution").await;
    let record = ctx.get("order-42").await;
    assert_eq!(record.status, ExecutionStatus::Completed);
    assert_eq!(
        record.outcome,
        Some(ExecutionOutcome::Completed(json(r#""done""#)))
    );
}

/// Rounds of the stale-holder race.
const STALE_RACE_ROUNDS: usize = 400;
/// Step writes the stale holder attempts per round.
const STALE_WRITES: usize = 4;

/// What the stale holder observed in one race round: for each write and for its final
/// acknowledgement, whether the peer's claim had already returned a lease when the call
/// was issued, and the result.
struct StaleSide {
    writes: Vec<(bool, Fenced<HeapRecord>)>,
    ack: (bool, Fenced<Acknowledged>),
}

/// What the peer observed: whether the stale acknowledgement had been accepted before its
/// claim was issued, the leases it got, and its own step writes.
struct PeerSide {
    acked_before_claim: bool,
    leases: Vec<ExecutionLease>,
    writes: Vec<Fenced<HeapRecord>>,
}

/// Fencing "The check and the write will be atomic": a stale holder's step writes and
/// acknowledgement race a peer's claim of its expired lease (separate connections, real
/// tasks started by a barrier), `STALE_RACE_ROUNDS` times.
///
/// In every round: exactly one of "the peer got a lease" and "the stale acknowledgement
/// was accepted" happens; no stale call issued after the peer's claim returned is
/// accepted; once a stale call is lost every later one is; every accepted write of a step
/// key (stale or current) returned the same record, which is the one `list_steps` holds;
/// records carry the token of the write that made them. A backend whose check and write
/// are separate steps (read committed, check-then-insert) breaks one of these.
pub async fn stale_writes_race_reclaim_atomically<H: Harness>(ctx: Arc<Ctx<H>>) {
    let stale_b = ctx.backend();
    let peer_b = ctx.peer().await;
    for round in 0..STALE_RACE_ROUNDS {
        let id = format!("race-{round:03}");
        ctx.admit(&id).await;
        let stale = ctx.claim_only(&stale_b, &id).await;
        ctx.set_clock(plus(stale.expires_at, ctx.policy.delay(1)));
        let now = ctx.now();
        let flags = RaceFlags {
            claimed: Arc::new(AtomicBool::new(false)),
            acked: Arc::new(AtomicBool::new(false)),
            barrier: Arc::new(Barrier::new(2)),
        };
        let stale_task = spawn_stale_side(stale_b.clone(), stale.clone(), flags.clone());
        let peer_task = spawn_peer_side(peer_b.clone(), round, now, flags);
        let s = join(stale_task).await;
        let p = join(peer_task).await;
        check_race_round(&ctx, &peer_b, round, &id, &stale, &s, &p).await;
    }
}

/// What the two sides of a race round share: whether the peer's claim returned a lease,
/// whether the stale acknowledgement was accepted, and the barrier that starts both.
#[derive(Clone)]
struct RaceFlags {
    claimed: Arc<AtomicBool>,
    acked: Arc<AtomicBool>,
    barrier: Arc<Barrier>,
}

/// The stale holder's side of a round: every step write at once, then the acknowledgement.
fn spawn_stale_side<B: LeaseBackend + Clone + 'static>(
    b: B,
    lease: ExecutionLease,
    flags: RaceFlags,
) -> tokio::task::JoinHandle<StaleSide> {
    let RaceFlags {
        claimed,
        acked,
        barrier,
    } = flags;
    tokio::spawn(async move {
        barrier.wait().await;
        // All writes in flight at once, so the claim lands inside some write.
        let tasks: Vec<_> = (0..STALE_WRITES)
            .map(|i| {
                let (b, lease, claimed) = (b.clone(), lease.clone(), claimed.clone());
                tokio::spawn(async move {
                    let w = step(&format!("step-{i}"), &format!(r#""stale-{i}""#));
                    let after_claim = claimed.load(Ordering::SeqCst);
                    (after_claim, b.write_step(&lease, &w).await.expect("write"))
                })
            })
            .collect();
        let mut writes = Vec::new();
        for t in tasks {
            writes.push(join(t).await);
        }
        let after_claim = claimed.load(Ordering::SeqCst);
        let ack = b
            .acknowledge(&lease, &completed(r#""stale""#))
            .await
            .expect("ack");
        if !ack.is_lost() {
            acked.store(true, Ordering::SeqCst);
        }
        StaleSide {
            writes,
            ack: (after_claim, ack),
        }
    })
}

/// The peer's side of a round: a claim of the expired lease, then (when it got one) every
/// step write at once.
fn spawn_peer_side<B: LeaseBackend + Clone + 'static>(
    p: B,
    round: usize,
    now: Timestamp,
    flags: RaceFlags,
) -> tokio::task::JoinHandle<PeerSide> {
    tokio::spawn(async move {
        flags.barrier.wait().await;
        // Vary the phase between the two sides from round to round.
        for _ in 0..round % 4 {
            tokio::task::yield_now().await;
        }
        let acked_before_claim = flags.acked.load(Ordering::SeqCst);
        let leases = p
            .claim_due(ClaimRequest {
                now,
                limit: 10,
                duration: LEASE,
            })
            .await
            .expect("claim_due");
        let mut writes = Vec::new();
        if let Some(lease) = leases.first() {
            flags.claimed.store(true, Ordering::SeqCst);
            // All at once, so whichever step the stale holder is writing right now
            // meets a current write as early as possible.
            let tasks: Vec<_> = (0..STALE_WRITES)
                .map(|i| {
                    let (p, lease) = (p.clone(), lease.clone());
                    tokio::spawn(async move {
                        let w = step(&format!("step-{i}"), &format!(r#""peer-{i}""#));
                        p.write_step(&lease, &w).await.expect("write")
                    })
                })
                .collect();
            for t in tasks {
                writes.push(join(t).await);
            }
        }
        PeerSide {
            acked_before_claim,
            leases,
            writes,
        }
    })
}

async fn check_race_round<H: Harness>(
    ctx: &Ctx<H>,
    peer_b: &H::Backend,
    round: usize,
    id: &str,
    stale: &ExecutionLease,
    s: &StaleSide,
    p: &PeerSide,
) {
    let ack_accepted = !s.ack.1.is_lost();
    let lease = p.leases.first();
    assert!(
        p.leases.len() <= 1,
        "round {round}: one execution, {:?}",
        p.leases
    );
    assert!(
        lease.is_some() != ack_accepted,
        "round {round}: exactly one of (peer claimed, stale ack accepted): claimed={:?} ack={:?}",
        p.leases,
        s.ack.1
    );
    assert!(
        !(p.acked_before_claim && lease.is_some()),
        "round {round}: claimed after the execution was acknowledged"
    );
    let calls: Vec<(bool, bool)> = s
        .writes
        .iter()
        .map(|(after, r)| (*after, r.is_lost()))
        .chain([(s.ack.0, s.ack.1.is_lost())])
        .collect();
    for (i, (after_claim, lost)) in calls.iter().enumerate() {
        assert!(
            !after_claim || *lost,
            "round {round}: stale call {i} issued after the peer's claim returned was accepted"
        );
    }
    // The acknowledgement was issued after every write returned: once one is lost, so is it.
    assert!(
        ack_accepted <= s.writes.iter().all(|(_, r)| !r.is_lost()),
        "round {round}: stale ack accepted after a stale write was lost"
    );
    if let Some(lease) = lease {
        assert_eq!(lease.execution_id.as_str(), id);
        assert!(lease.token > stale.token);
    } else {
        assert!(
            calls.iter().all(|(_, lost)| !lost),
            "round {round}: a stale call was lost but no higher token was issued"
        );
    }
    check_race_steps(ctx, round, id, stale, s, p).await;
    finish_race_round(ctx, peer_b, round, id, lease).await;
}

/// Every accepted write of a step key (stale or current) returned the same record, which
/// is the one `list_steps` holds and the one its writer wrote; no stray records.
async fn check_race_steps<H: Harness>(
    ctx: &Ctx<H>,
    round: usize,
    id: &str,
    stale: &ExecutionLease,
    s: &StaleSide,
    p: &PeerSide,
) {
    let lease = p.leases.first();
    let steps = ctx.steps(id).await;
    for i in 0..STALE_WRITES {
        let k = format!("step-{i}");
        let mut accepted: Vec<&HeapRecord> = Vec::new();
        if let (_, Fenced::Accepted(r)) = &s.writes[i] {
            assert_eq!(r.token, stale.token);
            assert_eq!(r.response, json(&format!(r#""stale-{i}""#)));
            accepted.push(r);
        }
        if let Some(Fenced::Accepted(r)) = p.writes.get(i) {
            accepted.push(r);
        } else if let Some(w) = p.writes.get(i) {
            panic!("round {round}: the current holder's write of {k} was {w:?}");
        }
        let stored: Vec<&HeapRecord> = steps.iter().filter(|r| r.step_key.as_str() == k).collect();
        match accepted.first() {
            None => assert!(
                stored.is_empty(),
                "round {round}: {k} stored with no accepted write"
            ),
            Some(first) => {
                assert!(
                    accepted.iter().all(|r| r == first),
                    "round {round}: {k} accepted as different records {accepted:?}"
                );
                assert_eq!(stored, vec![*first], "round {round}: {k} record changed");
                let writer = if first.token == stale.token {
                    assert!(
                        !s.writes[i].1.is_lost(),
                        "round {round}: {k} by a lost write"
                    );
                    "stale"
                } else {
                    assert_eq!(Some(first.token), lease.map(|l| l.token));
                    "peer"
                };
                assert_eq!(first.response, json(&format!(r#""{writer}-{i}""#)));
            }
        }
    }
    let keys: Vec<String> = (0..STALE_WRITES).map(|i| format!("step-{i}")).collect();
    assert!(
        steps
            .iter()
            .all(|r| keys.iter().any(|k| k == r.step_key.as_str())),
        "round {round}: stray records {steps:?}"
    );
}

/// Finishes the round: the winner's outcome is the stored one, and the execution is
/// terminal so later rounds race on their own execution only.
async fn finish_race_round<H: Harness>(
    ctx: &Ctx<H>,
    peer_b: &H::Backend,
    round: usize,
    id: &str,
    lease: Option<&ExecutionLease>,
) {
    let expected = match lease {
        Some(lease) => {
            let ack = peer_b
                .acknowledge(lease, &completed(r#""peer""#))
                .await
                .expect("ack");
            assert!(matches!(ack, Fenced::Accepted(_)), "round {round}: {ack:?}");
            "\"peer\""
        }
        None => "\"stale\"",
    };
    let record = ctx.get(id).await;
    assert_eq!(record.status, ExecutionStatus::Completed, "round {round}");
    assert_eq!(
        record.outcome,
        Some(ExecutionOutcome::Completed(json(expected))),
        "round {round}"
    );
}

/// Rounds of the renew/release race.
const END_RACE_ROUNDS: usize = 200;

/// Fencing "The check and the write will be atomic", for renew and release: the holder of
/// an expired lease renews (even rounds) or releases (odd rounds) while a peer claims the
/// execution, on separate connections, `END_RACE_ROUNDS` times. Exactly one side wins,
/// and the record is the winner's: a lost renewal never moves the new holder's expiry, a
/// lost release never ends the new delivery.
pub async fn stale_renew_and_release_race_reclaim_atomically<H: Harness>(ctx: Arc<Ctx<H>>) {
    let holder_b = ctx.backend();
    let peer_b = ctx.peer().await;
    for round in 0..END_RACE_ROUNDS {
        let id = format!("end-race-{round:03}");
        ctx.admit(&id).await;
        let held = ctx.claim_only(&holder_b, &id).await;
        ctx.set_clock(plus(held.expires_at, ctx.policy.delay(1)));
        let now = ctx.now();
        let renewing = round % 2 == 0;
        let barrier = Arc::new(Barrier::new(2));
        let holder_task = {
            let (b, lease, barrier) = (holder_b.clone(), held.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                if renewing {
                    // Twice the usual duration, so a renewal that overwrote the new
                    // holder's expiry would show.
                    b.renew(&lease, LEASE * 2).await.expect("renew").accepted()
                } else {
                    b.release(&lease)
                        .await
                        .expect("release")
                        .accepted()
                        .map(|()| lease)
                }
            })
        };
        let peer_task = {
            let (p, barrier) = (peer_b.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                for _ in 0..round % 3 {
                    tokio::task::yield_now().await;
                }
                p.claim_due(ClaimRequest {
                    now,
                    limit: 10,
                    duration: LEASE,
                })
                .await
                .expect("claim_due")
            })
        };
        let holder_won = join(holder_task).await;
        let leases = join(peer_task).await;
        assert!(leases.len() <= 1, "round {round}: {leases:?}");
        let r = EndRound {
            round,
            id: &id,
            held: &held,
            now,
            renewing,
        };
        check_end_race_round(&ctx, &holder_b, &peer_b, &r, holder_won, leases.first()).await;
        assert!(ctx.get(&id).await.status.is_terminal(), "round {round}");
    }
}

/// One round of the renew/release race: which execution, the lease its holder held, the
/// instant of the race and which call the holder made.
#[derive(Clone, Copy)]
struct EndRound<'a> {
    round: usize,
    id: &'a str,
    held: &'a ExecutionLease,
    now: Timestamp,
    renewing: bool,
}

/// Exactly one side of the round won, and the record is the winner's; then the execution is
/// finished so later rounds see only their own.
async fn check_end_race_round<H: Harness>(
    ctx: &Ctx<H>,
    holder_b: &H::Backend,
    peer_b: &H::Backend,
    r: &EndRound<'_>,
    holder_won: Option<ExecutionLease>,
    claimed: Option<&ExecutionLease>,
) {
    let EndRound {
        round,
        id,
        held,
        now,
        renewing,
    } = *r;
    let record = ctx.get(id).await;
    match (holder_won, claimed) {
        (Some(_), Some(l)) => panic!(
            "round {round}: both the stale {} and the claim ({l:?}) succeeded",
            if renewing { "renewal" } else { "release" }
        ),
        (None, None) => panic!("round {round}: neither the holder nor the claim succeeded"),
        (None, Some(l)) => {
            assert!(l.token > held.token, "round {round}");
            assert_eq!(record.status, ExecutionStatus::Running, "round {round}");
            assert_eq!(record.token, l.token, "round {round}");
            assert_eq!(record.lease_expires_at, Some(l.expires_at), "round {round}");
            assert_eq!(record.unacknowledged_deliveries, 1, "round {round}");
            let ack = peer_b
                .acknowledge(l, &completed("null"))
                .await
                .expect("ack");
            assert!(!ack.is_lost(), "round {round}");
        }
        (Some(renewed), None) if renewing => {
            assert_eq!(renewed.expires_at, plus(now, LEASE * 2), "round {round}");
            assert_eq!(record.status, ExecutionStatus::Running, "round {round}");
            assert_eq!(record.token, held.token, "round {round}");
            assert_eq!(
                record.lease_expires_at,
                Some(renewed.expires_at),
                "round {round}"
            );
            let ack = holder_b
                .acknowledge(&renewed, &completed("null"))
                .await
                .expect("ack");
            assert!(!ack.is_lost(), "round {round}");
        }
        (Some(_), None) => {
            assert_eq!(record.status, ExecutionStatus::Admitted, "round {round}");
            assert_eq!(record.token, held.token, "round {round}");
            assert_eq!(record.unacknowledged_deliveries, 1, "round {round}");
            assert_eq!(record.last_delivery_ended_at, Some(now), "round {round}");
            // Take it once more and finish it, so later rounds see only their own.
            ctx.set_clock(plus(now, ctx.policy.delay(1)));
            let next = ctx.claim_only(peer_b, id).await;
            let ack = peer_b
                .acknowledge(&next, &completed("null"))
                .await
                .expect("ack");
            assert!(!ack.is_lost(), "round {round}");
        }
    }
}

/// Rule "acknowledge_batch applies each item as acknowledge would": a stale item is `Lost`
/// and changes nothing, the current items are applied (outcome, suspension with the wake
/// requested during the delivery), results in order, and a second batch of the same leases
/// is all `Lost` (their deliveries ended).
pub async fn ack_batch_fences_each_item<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    for id in ["batch-done", "batch-stale", "batch-wait"] {
        ctx.admit(id).await;
    }
    let leases = ctx.claim(&b, 10).await;
    assert_eq!(leases.len(), 3);
    let lease = |id: &str| {
        leases
            .iter()
            .find(|l| l.execution_id.as_str() == id)
            .cloned()
            .expect("claimed")
    };
    let (done, stale, wait) = (
        lease("batch-done"),
        lease("batch-stale"),
        lease("batch-wait"),
    );
    // Renew the other two so only batch-stale expires and is reclaimed.
    ctx.advance(LEASE / 2);
    for l in [&done, &wait] {
        assert!(!b.renew(l, LEASE).await.expect("renew").is_lost());
    }
    let wake_at = plus(ctx.now(), LEASE * 10);
    b.request_wake(&wait.execution_id, wake_at)
        .await
        .expect("wake");
    let (_peer, current) = ctx.reclaim(&stale).await;
    let stale_before = ctx.snapshot("batch-stale").await;
    let batch = ack_batch_of(&done, &stale, &wait);
    let results = b
        .acknowledge_batch(&batch)
        .await
        .expect("acknowledge_batch");
    assert_eq!(
        results,
        vec![
            Fenced::Accepted(Acknowledged::Terminal(ExecutionOutcome::Completed(json(
                r#""done""#
            )))),
            Fenced::Lost,
            Fenced::Accepted(Acknowledged::Suspended),
        ]
    );
    assert_eq!(
        ctx.snapshot("batch-stale").await,
        stale_before,
        "stale item"
    );
    assert_batch_items_applied(&ctx, &current, wake_at).await;
    // The same batch again: every delivery has ended.
    let after = (
        ctx.snapshot("batch-done").await,
        ctx.snapshot("batch-wait").await,
    );
    let again = b
        .acknowledge_batch(&batch)
        .await
        .expect("acknowledge_batch");
    assert_eq!(again, vec![Fenced::Lost; 3]);
    assert_eq!(ctx.snapshot("batch-done").await, after.0);
    assert_eq!(ctx.snapshot("batch-wait").await, after.1);
    assert_eq!(ctx.snapshot("batch-stale").await, stale_before);
    assert_eq!(
        b.acknowledge_batch(&[]).await.expect("empty batch"),
        Vec::new()
    );
}

/// After the batch of [`ack_batch_fences_each_item`]: the stale item's execution still runs
/// under its reclaimed lease `current`, the completed one holds its outcome, the suspended
/// one is due at the wake requested during its delivery.
async fn assert_batch_items_applied<H: Harness>(
    ctx: &Ctx<H>,
    current: &ExecutionLease,
    wake_at: Timestamp,
) {
    let record = ctx.get("batch-stale").await;
    assert_eq!(record.status, ExecutionStatus::Running);
    assert_eq!(record.token, current.token);
    let record = ctx.get("batch-done").await;
    assert_eq!(record.status, ExecutionStatus::Completed);
    assert_eq!(
        record.outcome,
        Some(ExecutionOutcome::Completed(json(r#""done""#)))
    );
    assert_eq!(record.unacknowledged_deliveries, 0);
    let record = ctx.get("batch-wait").await;
    assert_eq!(record.status, ExecutionStatus::Suspended);
    assert_eq!(record.due_at, Some(wake_at), "the wake from the delivery");
    assert!(record.ever_suspended);
}

/// The batch of [`ack_batch_fences_each_item`]: `done` completes, `stale` (reclaimed) would
/// complete, `wait` suspends.
fn ack_batch_of(
    done: &ExecutionLease,
    stale: &ExecutionLease,
    wait: &ExecutionLease,
) -> [Acknowledgement; 3] {
    [
        Acknowledgement {
            lease: done.clone(),
            outcome: completed(r#""done""#),
        },
        Acknowledgement {
            lease: stale.clone(),
            outcome: completed(r#""stale""#),
        },
        Acknowledgement {
            lease: wait.clone(),
            outcome: WorkflowRunOutcome::Suspended,
        },
    ]
}
