//! Ordered keys ([`lease_core::keyed`]): an ordered key's executions run one at a time in
//! admission order. A claim takes one only when it is the key's earliest admitted execution
//! that is neither terminal nor dead and no execution of the key holds a live lease: a
//! released, expired or suspended head keeps its place; an ended head lets the next go; a
//! dead head re-admitted takes its place back after the key's live lease. Checked in the
//! claim's own atomic step over every process; a held ordered key holds back nothing else.
//! A harness without them ([`lease_core::Capabilities::ordered_keys`] `false`) checks only the typed
//! `Unsupported` answers.

use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, AttemptLimit, AttemptScope, CancelReason, ErrorNote, ExecutionClient,
    ExecutionLease, KeyOrdering, LimitScope, PauseScope, Priority, Release, WorkflowName,
    WorkflowRunOutcome,
};
use tokio::sync::Barrier;

use crate::cases::rates::{
    admit_keyed, assert_horizon, claim_batch, expect_signal_now, ids_of, key, names, policy_refused,
};
use crate::context::{Ctx, json, plus_ms};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __ordering_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, ordering, [
            ordering_round_trips_and_unmarks,
            ordered_key_runs_one_at_a_time_in_admission_order,
            ordered_released_or_expired_head_keeps_its_place,
            ordered_suspended_head_blocks_the_key_until_woken,
            ordered_paused_head_blocks_the_key_until_resumed,
            ordered_ended_heads_let_the_next_go,
            ordered_dead_head_readmitted_waits_for_the_live_lease,
            ordered_backlog_holds_back_no_other_work,
            ordered_racing_peers_never_hold_two_leases,
            ordered_default_marks_every_key_and_unmarking_signals,
        ] }
    };
}

/// Returns `true` when the backend declares no ordered keys, after checking the refusal
/// ([`policy_refused`]): the case then ends.
async fn unsupported<H: Harness>(ctx: &Ctx<H>) -> bool {
    if ctx.caps().ordered_keys {
        return false;
    }
    let b = ctx.backend();
    policy_refused(
        ctx,
        b.set_key_ordering(&LimitScope::Default, true).await,
        b.key_ordering().await,
    );
    ctx.refusal_only()
}

/// Marks (`true`) or unmarks key `k` on the first connection.
async fn order<H: Harness>(ctx: &Ctx<H>, k: &str, ordered: bool) {
    ctx.backend()
        .set_key_ordering(&LimitScope::Key(key(k)), ordered)
        .await
        .expect("set ordering");
}

/// Admits `id` with key `k` on the first connection.
async fn admit_in<H: Harness>(ctx: &Ctx<H>, k: &str, id: &str) {
    let admission = Admission::new(ctx.id(id)).concurrency_key(key(k));
    ctx.backend().admit(&admission).await.expect("admit");
}

/// Acknowledges `lease` as completed, asserting it was accepted.
async fn complete<H: Harness>(ctx: &Ctx<H>, lease: &ExecutionLease) {
    let ack = ctx
        .backend()
        .acknowledge(lease, &WorkflowRunOutcome::Completed(json("1")))
        .await
        .expect("ack");
    assert!(!ack.is_lost(), "acknowledgement of a current lease");
}

/// Claims (limit 10) on a peer and asserts nothing is claimable, and that the horizon, if
/// any, is after now: held-back executions are not pending.
async fn assert_key_waits<H: Harness>(ctx: &Ctx<H>, why: &str) {
    let batch = claim_batch(&ctx.probe_peer().await, 10).await;
    assert!(batch.claimed.is_empty(), "{why}: {:?}", batch.claimed);
    if let Some(next) = batch.next_claimable_at {
        assert!(next > ctx.now(), "{why}: horizon {next:?} says now");
    }
}

/// Nothing is ordered by default; marks and unmarks read back on a peer (keys sorted,
/// marking twice is one mark), and unmarking a key leaves the default as it was.
pub async fn ordering_round_trips_and_unmarks<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    let peer = ctx.peer().await;
    assert_eq!(
        b.key_ordering().await.expect("read"),
        KeyOrdering::default()
    );
    for k in ["zeta", "alpha", "zeta"] {
        order(&*ctx, k, true).await;
    }
    b.set_key_ordering(&LimitScope::Default, true)
        .await
        .expect("default");
    let want = KeyOrdering {
        default: true,
        keys: vec![key("alpha"), key("zeta")],
    };
    assert_eq!(peer.key_ordering().await.expect("read"), want);
    order(&*ctx, "alpha", false).await;
    order(&*ctx, "never-marked", false).await;
    b.set_key_ordering(&LimitScope::Default, false)
        .await
        .expect("unmark default");
    let want = KeyOrdering {
        default: false,
        keys: vec![key("zeta")],
    };
    assert_eq!(peer.key_ordering().await.expect("read"), want);
}

/// Admitted in the order `z-first` (due later), `m-second` (higher priority), `a-third`
/// (smallest id), and a batch `y`, `x`, `w` of another ordered key: each key runs one at a
/// time in admission order, whatever the due times, priorities and ids say.
pub async fn ordered_key_runs_one_at_a_time_in_admission_order<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    order(&*ctx, "acct", true).await;
    order(&*ctx, "batch", true).await;
    let b = ctx.backend();
    let t = ctx.now();
    let first = Admission::new(ctx.id("z-first"))
        .concurrency_key(key("acct"))
        .not_before(plus_ms(t, 500));
    b.admit(&first).await.expect("admit");
    let second = Admission::new(ctx.id("m-second"))
        .concurrency_key(key("acct"))
        .priority(Priority::new(5).expect("priority"));
    b.admit(&second).await.expect("admit");
    admit_in(&*ctx, "acct", "a-third").await;
    let batch: Vec<Admission> = ["y", "x", "w"]
        .iter()
        .map(|id| Admission::new(ctx.id(id)).concurrency_key(key("batch")))
        .collect();
    b.admit_batch(&batch).await.expect("admit");

    let y = ctx.claim_only(&b, "y").await;
    let held = claim_batch(&ctx.peer().await, 10).await;
    assert_horizon(&*ctx, &held, t, plus_ms(t, 500));
    complete(&*ctx, &y).await;
    let x = ctx.claim_only(&b, "x").await;
    ctx.set_clock(plus_ms(t, 500));
    let z = ctx.claim_only(&b, "z-first").await;
    complete(&*ctx, &x).await;
    ctx.claim_only(&b, "w").await;
    assert_key_waits(&*ctx, "z-first holds acct").await;
    complete(&*ctx, &z).await;
    let m = ctx.claim_only(&b, "m-second").await;
    complete(&*ctx, &m).await;
    ctx.claim_only(&b, "a-third").await;
}

/// A released head keeps its place through its redelivery delay, and so does a head whose
/// lease expired; the next one goes only when the head is acknowledged.
pub async fn ordered_released_or_expired_head_keeps_its_place<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    order(&*ctx, "k", true).await;
    admit_in(&*ctx, "k", "2-head").await;
    admit_in(&*ctx, "k", "1-next").await;
    let b = ctx.backend();
    let t = ctx.now();
    let first = ctx.claim_only(&b, "2-head").await;
    assert!(!b.release(&first).await.expect("release").is_lost());
    let held = claim_batch(&ctx.peer().await, 10).await;
    let gate = plus_ms(t, ctx.policy.delay(1).as_millis() as i64);
    assert_horizon(&*ctx, &held, t, gate);
    ctx.set_clock(gate);
    let second = ctx.claim_only(&b, "2-head").await;
    ctx.set_clock(second.expires_at);
    let gate = plus_ms(second.expires_at, ctx.policy.delay(2).as_millis() as i64);
    let held = claim_batch(&ctx.peer().await, 10).await;
    assert_horizon(&*ctx, &held, ctx.now(), gate);
    ctx.set_clock(gate);
    let third = ctx.claim_only(&b, "2-head").await;
    complete(&*ctx, &third).await;
    ctx.claim_only(&b, "1-next").await;
}

/// A head acknowledged as suspended without a wake blocks its key (nothing pending);
/// once woken it runs again before the next one.
pub async fn ordered_suspended_head_blocks_the_key_until_woken<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    order(&*ctx, "k", true).await;
    admit_in(&*ctx, "k", "2-head").await;
    admit_in(&*ctx, "k", "1-next").await;
    let b = ctx.backend();
    let lease = ctx.claim_only(&b, "2-head").await;
    let ack = b
        .acknowledge(&lease, &WorkflowRunOutcome::Suspended)
        .await
        .expect("ack");
    assert!(!ack.is_lost());
    assert_key_waits(&*ctx, "a suspended head blocks its key").await;
    b.request_wake(&ctx.id("2-head"), ctx.now())
        .await
        .expect("wake");
    let again = ctx.claim_only(&b, "2-head").await;
    complete(&*ctx, &again).await;
    ctx.claim_only(&b, "1-next").await;
}

/// A head a pause covers holds its key: the next one, of a workflow nobody paused, does not
/// overtake it; after resume the head runs first.
pub async fn ordered_paused_head_blocks_the_key_until_resumed<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await || !ctx.caps().pause {
        return;
    }
    order(&*ctx, "k", true).await;
    let b = ctx.backend();
    let slow = PauseScope::Workflow(WorkflowName::new("slow").expect("workflow"));
    let line = [("2-head", "slow"), ("1-next", "fast")].map(|(id, workflow)| {
        Admission::new(ctx.id(id))
            .concurrency_key(key("k"))
            .workflow(WorkflowName::new(workflow).expect("workflow"))
    });
    b.admit_batch(&line).await.expect("admit");
    assert!(b.pause(&slow).await.expect("pause"));
    assert_key_waits(&*ctx, "a paused head holds its key").await;
    assert!(b.resume(&slow).await.expect("resume"));
    let head = ctx.claim_only(&b, "2-head").await;
    complete(&*ctx, &head).await;
    ctx.claim_only(&b, "1-next").await;
}

/// Each way a head ends lets the next one go: completed, failed, cancelled while it ran
/// (when the backend cancels) and dead (when it has attempt limits).
pub async fn ordered_ended_heads_let_the_next_go<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    order(&*ctx, "k", true).await;
    let mut line = vec!["5-completed", "4-failed"];
    if ctx.caps().cancel {
        line.push("3-cancelled");
    }
    if ctx.caps().attempts {
        line.push("2-dead");
        ctx.backend()
            .set_attempt_limit(&AttemptScope::Default, AttemptLimit::new(1).ok())
            .await
            .expect("attempt limit");
    }
    line.push("1-last");
    for id in &line {
        admit_in(&*ctx, "k", id).await;
    }
    let b = ctx.backend();
    let lease = ctx.claim_only(&b, "5-completed").await;
    complete(&*ctx, &lease).await;
    let lease = ctx.claim_only(&b, "4-failed").await;
    let ack = b
        .acknowledge(&lease, &WorkflowRunOutcome::Failed(json("\"no\"")))
        .await
        .expect("ack");
    assert!(!ack.is_lost());
    if ctx.caps().cancel {
        ctx.claim_only(&b, "3-cancelled").await;
        let reason = CancelReason::new("stop").expect("reason");
        b.cancel(&ctx.id("3-cancelled"), &reason)
            .await
            .expect("cancel");
    }
    if ctx.caps().attempts {
        let lease = ctx.claim_only(&b, "2-dead").await;
        let failed = Release::Failed(ErrorNote::new("error", "boom"));
        let released = b.release_with(&lease, &failed).await.expect("release");
        assert!(!released.is_lost());
    }
    ctx.claim_only(&b, "1-last").await;
}

/// A dead head leaves the line, so the next one runs; re-admitted by `retry_dead` it takes
/// its place back, but is claimed only once the key's live lease ends (never two live
/// leases), and before the rest of the line.
pub async fn ordered_dead_head_readmitted_waits_for_the_live_lease<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await || !ctx.caps().attempts {
        return;
    }
    order(&*ctx, "k", true).await;
    let b = ctx.backend();
    b.set_attempt_limit(&AttemptScope::Default, AttemptLimit::new(1).ok())
        .await
        .expect("attempt limit");
    for id in ["3-dead", "2-next", "1-last"] {
        admit_in(&*ctx, "k", id).await;
    }
    let lease = ctx.claim_only(&b, "3-dead").await;
    let failed = Release::Failed(ErrorNote::new("error", "boom"));
    assert!(!b.release_with(&lease, &failed).await.expect("r").is_lost());
    let next = ctx.claim_only(&b, "2-next").await;
    b.retry_dead(&[ctx.id("3-dead")], None)
        .await
        .expect("retry");
    let held = claim_batch(&ctx.peer().await, 10).await;
    assert_horizon(&*ctx, &held, ctx.now(), next.expires_at);
    complete(&*ctx, &next).await;
    let again = ctx.claim_only(&b, "3-dead").await;
    complete(&*ctx, &again).await;
    ctx.claim_only(&b, "1-last").await;
}

/// 600 executions of ordered key `hot` admitted first, then two of ordered key `warm`, one
/// of unordered key `cold` and one with no key: a claim of 4 takes the head of each
/// ordered key and the other two; the held lines leave the horizon alone; each
/// acknowledgement lets exactly the next of its line go.
pub async fn ordered_backlog_holds_back_no_other_work<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    order(&*ctx, "hot", true).await;
    order(&*ctx, "warm", true).await;
    admit_keyed(&*ctx, "hot", &names("hot", 600)).await;
    ctx.advance(Duration::from_millis(1));
    let t = ctx.now();
    admit_keyed(&*ctx, "warm", &names("warm", 2)).await;
    admit_in(&*ctx, "cold", "cold").await;
    ctx.admit("free").await;
    let b = ctx.backend();
    let first = ctx.claim(&b, 4).await;
    let mut got = ids_of(&first);
    got.sort();
    assert_eq!(got, ["cold", "free", "hot-000", "warm-000"]);
    let held = claim_batch(&ctx.probe_peer().await, 4).await;
    let redelivery = ctx.policy.delay(1).as_millis() as i64;
    assert_horizon(&*ctx, &held, t, plus_ms(first[0].expires_at, redelivery));
    let lease_of = |id: &str| {
        first
            .iter()
            .find(|l| l.execution_id.as_str() == id)
            .cloned()
            .expect("claimed")
    };
    complete(&*ctx, &lease_of("hot-000")).await;
    let next = ctx.claim(&ctx.peer().await, 4).await;
    assert_eq!(ids_of(&next), ["hot-001"], "one more of the line");
    complete(&*ctx, &lease_of("warm-000")).await;
    assert_eq!(ids_of(&ctx.claim(&b, 4).await), ["warm-001"]);
}

/// Four connections claim at once (a barrier releases them together), round after round:
/// exactly one lease of the ordered key is live, and it is the next in admission order.
pub async fn ordered_racing_peers_never_hold_two_leases<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    const CLAIMERS: usize = 4;
    order(&*ctx, "k", true).await;
    let line = names("k", 4);
    admit_keyed(&*ctx, "k", &line).await;
    let mut peers = Vec::new();
    for _ in 0..CLAIMERS {
        peers.push(ctx.peer().await);
    }
    for want in &line {
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
        let mut live = Vec::new();
        for task in tasks {
            live.extend(crate::context::join(task).await);
        }
        assert_eq!(
            ids_of(&live),
            std::slice::from_ref(want),
            "one live lease, in order"
        );
        complete(&*ctx, &live[0]).await;
    }
}

/// Keys are unordered until marked: three of key `k` run at once. Marking every key (the
/// default) orders `k` too (its next waits for all its live leases) and `j`; unmarking `j`
/// alone leaves it ordered by the default; unmarking the default lets every due one go and
/// signals the wake-up path (when the backend sends wake-ups).
pub async fn ordered_default_marks_every_key_and_unmarking_signals<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    admit_keyed(&*ctx, "k", &names("k", 3)).await;
    assert_eq!(ctx.claim(&b, 10).await.len(), 3, "unordered: all at once");
    b.set_key_ordering(&LimitScope::Default, true)
        .await
        .expect("mark every key");
    admit_keyed(&*ctx, "j", &names("j", 3)).await;
    admit_in(&*ctx, "k", "k-003").await;
    assert_eq!(ids_of(&ctx.claim(&b, 10).await), ["j-000"]);
    order(&*ctx, "j", false).await;
    assert_key_waits(&*ctx, "the default still orders j").await;
    let listener = ctx.peer().await;
    let wakeups = listener.wakeups();
    assert_eq!(
        wakeups.is_some(),
        ctx.caps().wakeups,
        "WAKEUPS says whether they come"
    );
    // A claim on the listening connection (nothing claimable) returns once its listener
    // listens, so the signal below cannot be sent before anyone listens.
    assert!(ctx.claim(&listener, 10).await.is_empty(), "still ordered");
    b.set_key_ordering(&LimitScope::Default, false)
        .await
        .expect("unmark every key");
    if let Some(wakeups) = &wakeups {
        expect_signal_now(wakeups, ctx.now(), "unmarking the default").await;
    }
    let got = ids_of(&ctx.claim(&b, 10).await);
    assert_eq!(got, ["j-001", "j-002", "k-003"]);
}
