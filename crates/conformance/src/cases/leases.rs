//! RFC 002 "Runtime-adapter tests" table, plus a batch claim by several peers.

use lease_core::ExecutionClientExt;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use lease_core::{
    Acknowledged, ClaimRequest, ExecutionClient, ExecutionLease, ExecutionOutcome, ExecutionStatus,
    Fenced, HeapClient, WorkflowRunOutcome,
};
use tokio::sync::Barrier;

use crate::context::{Ctx, LEASE, join, json, just_before, key, plus};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __leases_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, leases, [
            two_peers_claim_concurrently_exactly_one_lease, claim_sets_status_running,
            expired_lease_claimable_with_higher_token,
            expiry_after_suspended_delivery_returns_to_suspended,
            expiry_before_any_ack_returns_to_admitted, renewal_keeps_lease_past_original_expiry,
            renewal_with_stale_token_is_lost,
            released_lease_claimable_after_delay_with_higher_token,
            ack_suspended_with_wake_due_at_wake, ack_suspended_without_wake_not_due,
            crashed_worker_redelivered_after_expiry, peers_claim_batch_each_leased_once,
            claim_with_records_returns_what_get_reads,
        ] }
    };
}

/// Rounds of the two-peer claim race, each on a fresh execution.
const CLAIM_RACE_ROUNDS: usize = 50;

/// Row "Two dispatchers call claimDue concurrently for one due execution": exactly one
/// receives a lease. Two peers (separate connections) claim at once from real tokio tasks
/// released together by a barrier, for `CLAIM_RACE_ROUNDS` fresh executions.
pub async fn two_peers_claim_concurrently_exactly_one_lease<H: Harness>(ctx: Arc<Ctx<H>>) {
    let peers = [ctx.peer().await, ctx.peer().await];
    let mut last_token = None;
    for round in 0..CLAIM_RACE_ROUNDS {
        let id = format!("race-{round:03}");
        ctx.admit(&id).await;
        let now = ctx.now();
        let barrier = Arc::new(Barrier::new(peers.len()));
        let tasks: Vec<_> = peers
            .iter()
            .map(|p| {
                let (p, barrier) = (p.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    p.claim_due(ClaimRequest {
                        now,
                        limit: 10,
                        duration: LEASE,
                    })
                    .await
                })
            })
            .collect();
        let mut leases: Vec<ExecutionLease> = Vec::new();
        for t in tasks {
            leases.extend(join(t).await.expect("claim_due"));
        }
        assert_eq!(
            leases.len(),
            1,
            "round {round}: exactly one lease, got {leases:?}"
        );
        let lease = &leases[0];
        assert_eq!(lease.execution_id.as_str(), id);
        let record = ctx.get(&id).await;
        assert_eq!(record.status, ExecutionStatus::Running);
        assert_eq!(record.token, lease.token);
        assert!(
            last_token < Some(lease.token),
            "tokens rise from round to round"
        );
        last_token = Some(lease.token);
        // End the delivery so the next round races for its own fresh execution only.
        let done = WorkflowRunOutcome::Completed(json("null"));
        let ack = peers[0].acknowledge(lease, &done).await.expect("ack");
        assert!(matches!(ack, Fenced::Accepted(Acknowledged::Terminal(_))));
    }
}

/// Row "claimDue claims a due execution": the status is running.
pub async fn claim_sets_status_running<H: Harness>(ctx: Arc<Ctx<H>>) {
    let admitted = ctx.admit("order-42").await;
    assert_eq!(admitted.status, ExecutionStatus::Admitted);
    assert_eq!(
        admitted.due_at,
        Some(ctx.now()),
        "admit makes the execution due now"
    );
    let now = ctx.now();
    let lease = ctx.claim_one("order-42").await;
    assert_eq!(
        lease.expires_at,
        plus(now, LEASE),
        "lease ends at now + duration"
    );
    let record = ctx.get("order-42").await;
    assert_eq!(record.status, ExecutionStatus::Running);
    assert_eq!(record.token, lease.token);
    assert!(record.token.get() > 0, "a claim issues a real token");
    assert_eq!(record.lease_expires_at, Some(lease.expires_at));
    assert_eq!(record.unacknowledged_deliveries, 0);
    assert!(lease.expires_at > ctx.backend().now().await.expect("now"));
    ctx.assert_nothing_claimable("a running execution").await;
}

/// Row "A lease expires without renewal": the execution is claimable with a higher token,
/// once the redelivery delay for one unacknowledged delivery has passed (not 1 ms before).
pub async fn expired_lease_claimable_with_higher_token<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let first = ctx.claim_one("order-42").await;
    let peer = ctx.peer().await;
    assert!(
        ctx.claim(&peer, 10).await.is_empty(),
        "a live lease is not claimable"
    );
    ctx.set_clock(just_before(first.expires_at));
    assert!(
        ctx.claim(&peer, 10).await.is_empty(),
        "1 ms before expiry the lease is live"
    );
    ctx.set_clock(first.expires_at);
    assert!(
        ctx.claim(&peer, 10).await.is_empty(),
        "expiry is an unacknowledged delivery: the redelivery delay applies"
    );
    let gate = plus(first.expires_at, ctx.policy.delay(1));
    ctx.set_clock(just_before(gate));
    assert!(
        ctx.claim(&peer, 10).await.is_empty(),
        "1 ms before the delay has passed"
    );
    ctx.set_clock(gate);
    let again = ctx.claim_only(&peer, "order-42").await;
    assert!(again.token > first.token);
    assert_eq!(ctx.get("order-42").await.token, again.token);
}

/// Row "A lease expires after an earlier suspended delivery": the status returns to
/// suspended.
pub async fn expiry_after_suspended_delivery_returns_to_suspended<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.suspended_delivery("order-42").await;
    assert_eq!(ctx.get("order-42").await.status, ExecutionStatus::Suspended);
    let second = ctx.claim_one("order-42").await;
    assert_eq!(ctx.get("order-42").await.status, ExecutionStatus::Running);
    ctx.set_clock(second.expires_at);
    let record = ctx.get("order-42").await;
    assert_eq!(record.status, ExecutionStatus::Suspended);
    assert_eq!(record.unacknowledged_deliveries, 1);
    assert_eq!(record.token, second.token);
    assert_eq!(record.lease_expires_at, None);
}

/// Row "A lease expires before any acknowledgement": the status returns to admitted.
pub async fn expiry_before_any_ack_returns_to_admitted<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let first = ctx.claim_one("order-42").await;
    ctx.set_clock(first.expires_at);
    let record = ctx.get("order-42").await;
    assert_eq!(record.status, ExecutionStatus::Admitted);
    assert_eq!(record.unacknowledged_deliveries, 1);
    assert!(!record.ever_suspended);
    assert_eq!(record.outcome, None);
    // A second expiry, still without any acknowledgement: admitted again.
    let (_peer, second) = ctx.reclaim(&first).await;
    ctx.set_clock(second.expires_at);
    let record = ctx.get("order-42").await;
    assert_eq!(record.status, ExecutionStatus::Admitted);
    assert_eq!(record.unacknowledged_deliveries, 2);
}

/// Row "Renewal keeps the lease past its original expiry": a delivery longer than one lease
/// period completes with one claim. The holder renews 1 ms before each expiry for more than
/// three lease periods; a peer can never claim; the acknowledgement is accepted.
pub async fn renewal_keeps_lease_past_original_expiry<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let peer = ctx.peer().await;
    let first = ctx.claim_one("order-42").await;
    let start = ctx.now();
    let mut lease = first.clone();
    while ctx.now() <= plus(start, LEASE * 3) {
        ctx.set_clock(just_before(lease.expires_at));
        assert!(
            ctx.claim(&peer, 10).await.is_empty(),
            "a renewed lease is live"
        );
        let renewed = b.renew(&lease, LEASE).await.expect("renew");
        let Fenced::Accepted(renewed) = renewed else {
            panic!("renewal by the holder was lost at {:?}", ctx.now());
        };
        assert_eq!(renewed.token, first.token, "renewal keeps the token");
        assert_eq!(renewed.expires_at, plus(ctx.now(), LEASE));
        assert_eq!(
            ctx.get("order-42").await.lease_expires_at,
            Some(renewed.expires_at)
        );
        lease = renewed;
    }
    assert!(
        ctx.now() > first.expires_at,
        "the delivery outlived its first lease"
    );
    let written = ctx.write(&b, &lease, "charge", r#""receipt-1""#).await;
    assert!(matches!(written, Fenced::Accepted(ref r) if r.token == first.token));
    let done = WorkflowRunOutcome::Completed(json(r#""charged""#));
    let ack = b.acknowledge(&lease, &done).await.expect("ack");
    assert_eq!(
        ack,
        Fenced::Accepted(Acknowledged::Terminal(ExecutionOutcome::Completed(json(
            r#""charged""#
        ))))
    );
    let record = ctx.get("order-42").await;
    assert_eq!(record.token, first.token, "one claim only");
    assert_eq!(record.unacknowledged_deliveries, 0);
    assert_eq!(record.status, ExecutionStatus::Completed);
}

/// Row "Renewal uses a stale token": it returns lost (and changes nothing).
pub async fn renewal_with_stale_token_is_lost<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let stale = ctx.claim_one("order-42").await;
    let (peer, current) = ctx.reclaim(&stale).await;
    let before = ctx.snapshot("order-42").await;
    let lost = ctx.backend().renew(&stale, LEASE).await.expect("renew");
    assert_eq!(lost, Fenced::Lost);
    assert_eq!(
        ctx.snapshot("order-42").await,
        before,
        "a lost renewal changes nothing"
    );
    let ok = peer.renew(&current, LEASE).await.expect("renew");
    assert!(matches!(ok, Fenced::Accepted(ref l) if l.token == current.token));
}

/// Row "A lease is released": the execution is claimable after the redelivery delay (not
/// 1 ms before), with a higher token.
pub async fn released_lease_claimable_after_delay_with_higher_token<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let first = ctx.claim_one("order-42").await;
    ctx.advance(std::time::Duration::from_secs(5));
    let released_at = ctx.now();
    assert_eq!(
        b.release(&first).await.expect("release"),
        Fenced::Accepted(())
    );
    let record = ctx.get("order-42").await;
    assert_eq!(record.status, ExecutionStatus::Admitted);
    assert_eq!(record.unacknowledged_deliveries, 1);
    assert_eq!(record.last_delivery_ended_at, Some(released_at));
    assert_eq!(record.lease_expires_at, None);
    let gate = plus(released_at, ctx.policy.delay(1));
    ctx.assert_nothing_claimable("right after release").await;
    ctx.set_clock(just_before(gate));
    ctx.assert_nothing_claimable("1 ms before the redelivery delay")
        .await;
    ctx.set_clock(gate);
    let peer = ctx.peer().await;
    let again = ctx.claim_only(&peer, "order-42").await;
    assert!(again.token > first.token);
}

/// Row "A delivery acknowledges suspended, with a future wake requested during it": the
/// lease ends; the execution is due at that wake's time (not claimable 1 ms before).
pub async fn ack_suspended_with_wake_due_at_wake<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let peer = ctx.peer().await;
    let first = ctx.claim_one("order-42").await;
    let wake = plus(ctx.now(), std::time::Duration::from_secs(10));
    // The wake comes from elsewhere (another connection): wakes are unfenced.
    peer.request_wake(&ctx.id("order-42"), wake)
        .await
        .expect("wake");
    ctx.advance(std::time::Duration::from_secs(1));
    let ack = b
        .acknowledge(&first, &WorkflowRunOutcome::Suspended)
        .await
        .expect("ack");
    assert_eq!(ack, Fenced::Accepted(Acknowledged::Suspended));
    let record = ctx.get("order-42").await;
    assert_eq!(record.status, ExecutionStatus::Suspended);
    assert_eq!(record.due_at, Some(wake));
    assert_eq!(record.lease_expires_at, None, "the lease ended");
    assert_eq!(record.unacknowledged_deliveries, 0);
    assert_eq!(b.renew(&first, LEASE).await.expect("renew"), Fenced::Lost);
    ctx.set_clock(just_before(wake));
    assert!(
        ctx.claim(&peer, 10).await.is_empty(),
        "not due before the wake"
    );
    ctx.set_clock(wake);
    let again = ctx.claim_only(&peer, "order-42").await;
    assert!(again.token > first.token);
}

/// Row "A delivery acknowledges suspended, with no wake requested during it": the lease
/// ends; the execution is not due, even a year later.
pub async fn ack_suspended_without_wake_not_due<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let first = ctx.claim_one("order-42").await;
    let ack = b
        .acknowledge(&first, &WorkflowRunOutcome::Suspended)
        .await
        .expect("ack");
    assert_eq!(ack, Fenced::Accepted(Acknowledged::Suspended));
    let record = ctx.get("order-42").await;
    assert_eq!(record.status, ExecutionStatus::Suspended);
    assert_eq!(record.due_at, None);
    assert_eq!(record.lease_expires_at, None);
    let written = ctx.write(&b, &first, "late", "1").await;
    assert_eq!(written, Fenced::Lost, "the lease ended");
    ctx.assert_nothing_claimable("suspended with no wake").await;
    ctx.advance(std::time::Duration::from_secs(365 * 24 * 3600));
    ctx.assert_nothing_claimable("a year later").await;
    assert_eq!(ctx.get("order-42").await.due_at, None);
}

/// Row "A worker crashes": the execution is delivered again after the lease expires, and
/// the next delivery finds the crashed worker's recorded steps.
pub async fn crashed_worker_redelivered_after_expiry<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let crashed = ctx.claim_one("order-42").await;
    let recorded = ctx
        .write(&ctx.backend(), &crashed, "load", r#"{"order":42}"#)
        .await;
    let Fenced::Accepted(recorded) = recorded else {
        panic!("the holder's write was lost");
    };
    // The worker is gone: nothing renews. Not delivered while the lease is live.
    ctx.set_clock(just_before(crashed.expires_at));
    ctx.assert_nothing_claimable("before expiry").await;
    let (peer, next) = ctx.reclaim(&crashed).await;
    assert!(next.token > crashed.token);
    let read = peer
        .read_step(&ctx.id("order-42"), &key("load"), 0)
        .await
        .expect("read_step");
    assert_eq!(read, Some(recorded.clone()));
    let replay = ctx.write(&peer, &next, "load", r#"{"order":43}"#).await;
    assert_eq!(
        replay,
        Fenced::Accepted(recorded),
        "the recorded value is kept"
    );
}

/// Peers sharing one backend claim a batch of due executions concurrently: every execution
/// is leased exactly once and all tokens are distinct (RFC 002 "at most one live lease").
pub async fn peers_claim_batch_each_leased_once<H: Harness>(ctx: Arc<Ctx<H>>) {
    const EXECUTIONS: usize = 100;
    const PEERS: usize = 4;
    for i in 0..EXECUTIONS {
        ctx.admit(&format!("batch-{i:03}")).await;
    }
    let now = ctx.now();
    let barrier = Arc::new(Barrier::new(PEERS));
    let mut tasks = Vec::new();
    for _ in 0..PEERS {
        let (p, barrier) = (ctx.peer().await, barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut mine = Vec::new();
            loop {
                let got = p
                    .claim_due(ClaimRequest {
                        now,
                        limit: 7,
                        duration: LEASE,
                    })
                    .await
                    .expect("claim_due");
                assert!(got.len() <= 7, "claim_due returned more than its limit");
                if got.is_empty() {
                    return mine;
                }
                mine.extend(got);
                assert!(
                    mine.len() <= EXECUTIONS,
                    "one peer claimed more leases than exist"
                );
            }
        }));
    }
    let mut by_id: BTreeMap<String, Vec<ExecutionLease>> = BTreeMap::new();
    let mut tokens = BTreeSet::new();
    let mut total = 0;
    for t in tasks {
        for lease in join(t).await {
            total += 1;
            assert!(
                tokens.insert(lease.token),
                "token {} issued twice",
                lease.token
            );
            by_id
                .entry(lease.execution_id.as_str().to_owned())
                .or_default()
                .push(lease);
        }
    }
    assert_eq!(total, EXECUTIONS, "every execution leased exactly once");
    assert_eq!(by_id.len(), EXECUTIONS);
    for (id, leases) in &by_id {
        assert_eq!(leases.len(), 1, "{id} leased {} times", leases.len());
        let record = ctx.get(id).await;
        assert_eq!(record.status, ExecutionStatus::Running);
        assert_eq!(record.token, leases[0].token);
    }
}

/// Rule "claim_due_with_records returns what get reads right after the claim": the same
/// leases in the same order as `claim_due` would issue, each with the effective record at
/// that instant; a redelivered and a once-suspended execution are not first deliveries.
pub async fn claim_with_records_returns_what_get_reads<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    for id in ["rec-b", "rec-a", "rec-released", "rec-suspended"] {
        ctx.admit(id).await;
    }
    // Two complete, one is released, one acknowledged as suspended with a wake: the last
    // two are due again.
    let leases = ctx.claim(&b, 1000).await;
    assert_eq!(leases.len(), 4, "all four: {leases:?}");
    end_each_delivery(&ctx, &b, &leases).await;
    ctx.admit("rec-c").await;
    ctx.advance(ctx.policy.delay(1));
    let expected_ids = {
        // Due order: rec-released and rec-suspended (earlier due), then rec-c.
        let mut due: Vec<_> = Vec::new();
        for id in ["rec-released", "rec-suspended", "rec-c"] {
            let r = ctx.get(id).await;
            due.push((r.due_at.expect("due"), id.to_owned()));
        }
        due.sort();
        due.into_iter().map(|(_, id)| id).collect::<Vec<_>>()
    };
    let peer = ctx.peer().await;
    let claimed = peer
        .claim_due_with_records(ClaimRequest {
            now: lease_core::Timestamp::MAX,
            limit: 10,
            duration: LEASE,
        })
        .await
        .expect("claim_due_with_records");
    let got_ids: Vec<_> = claimed
        .iter()
        .map(|c| c.lease.execution_id.as_str().to_owned())
        .collect();
    assert_eq!(got_ids, expected_ids, "due time then id order");
    for c in &claimed {
        let id = c.lease.execution_id.as_str();
        assert_eq!(c.record, ctx.get(id).await, "{id}: the record get reads");
        assert_eq!(c.record.status, ExecutionStatus::Running);
        assert_eq!(c.record.token, c.lease.token);
        assert_eq!(c.record.lease_expires_at, Some(c.lease.expires_at));
        assert_eq!(
            c.lease.expires_at,
            plus(ctx.now(), LEASE),
            "{id}: expiry from the backend clock"
        );
        let first = c.record.is_first_delivery(&c.lease);
        assert_eq!(first, id == "rec-c", "{id}: first delivery");
    }
    assert!(
        claimed
            .windows(2)
            .all(|w| w[0].lease.token < w[1].lease.token),
        "tokens rise in claim order"
    );
    let by_id: BTreeMap<_, _> = claimed
        .iter()
        .map(|c| (c.lease.execution_id.as_str(), &c.record))
        .collect();
    assert_eq!(by_id["rec-released"].unacknowledged_deliveries, 1);
    assert!(by_id["rec-suspended"].ever_suspended);
    ctx.assert_nothing_claimable("all claimed").await;
}

/// For [`claim_with_records_returns_what_get_reads`]: `rec-released` is released,
/// `rec-suspended` acknowledged as suspended with a wake due now, the others complete.
async fn end_each_delivery<H: Harness>(ctx: &Ctx<H>, b: &H::Backend, leases: &[ExecutionLease]) {
    for l in leases {
        match l.execution_id.as_str() {
            "rec-released" => {
                let r = b.release(l).await.expect("release");
                assert_eq!(r, Fenced::Accepted(()));
            }
            "rec-suspended" => {
                b.request_wake(&l.execution_id, ctx.now())
                    .await
                    .expect("wake");
                let ack = b
                    .acknowledge(l, &WorkflowRunOutcome::Suspended)
                    .await
                    .expect("ack");
                assert_eq!(ack, Fenced::Accepted(Acknowledged::Suspended));
            }
            _ => {
                let done = WorkflowRunOutcome::Completed(json("null"));
                let ack = b.acknowledge(l, &done).await.expect("ack");
                assert!(matches!(ack, Fenced::Accepted(Acknowledged::Terminal(_))));
            }
        }
    }
}
