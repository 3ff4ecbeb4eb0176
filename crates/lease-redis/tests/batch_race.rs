//! A holder acknowledging in batches races a peer reclaiming its expired leases, round after
//! round, on three separate connections.
//!
//! Each round: A claims eight executions (token t1 each); the shared manual clock moves half
//! a lease on, A renews a random subset, and the clock moves past the other leases' expiry
//! and the redelivery delay. Then, released together by a barrier, A acknowledges all eight
//! in two batches (one per connection, the executions split at random) while peer B claims
//! through `claim_due_with_records` (at `Timestamp::MAX`, as the dispatcher does) and
//! acknowledges what it got in one batch. Redis runs each script whole, so:
//!
//! - No stale item is ever `Accepted`: an execution B claimed is `Lost` in A's batch.
//! - A renewed lease stays live: B never claims it and A's item is `Accepted`.
//! - An expired item B did not claim was acknowledged by A before B's claim: `Accepted`.
//! - A batch is atomic against the claim: its expired items are all `Lost` or all
//!   `Accepted`. On a namespace split into partitions (the cluster row) a batch is
//!   one script per partition, so this holds for each partition's items of the batch.
//! - B's records are what the claim made (running, B's token, one unacknowledged delivery)
//!   and B's acknowledgements are all `Accepted`; the final record is B's outcome under B's
//!   token where B claimed, A's under t1 elsewhere.
//!
//! `LEASE_BATCH_RACE_ROUNDS` overrides the number of rounds (default 200).

mod common;

use lease_core::ExecutionClientExt;
use std::collections::BTreeMap;
use std::time::Duration;

use lease_core::{
    Acknowledgement, Admission, ClaimRequest, Clock, ExecutionClient, ExecutionId, ExecutionLease,
    ExecutionOutcome, ExecutionStatus, Json, ManualClock, RedeliveryPolicy, Timestamp,
    WorkflowRunOutcome,
};
use lease_redis::RedisBackend;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::Barrier;

const LEASE: Duration = Duration::from_secs(30);
const PER_ROUND: usize = 8;

fn rounds() -> usize {
    std::env::var("LEASE_BATCH_RACE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200)
}

/// The result `by` (A or B) completes with.
fn result(by: &str) -> Json {
    Json::parse("test", &format!("\"{by}\"")).expect("json")
}

fn completed(by: &str) -> WorkflowRunOutcome {
    WorkflowRunOutcome::Completed(result(by))
}

#[derive(Debug, Default)]
struct Tally {
    /// Expired items B claimed before A's batch ran (A's item `Lost`).
    lost_to_peer: usize,
    /// Expired items A acknowledged before B's claim ran.
    acked_before_claim: usize,
    /// Renewed items (A's acknowledgement must always be accepted).
    renewed: usize,
    violations: Vec<String>,
}

struct Conns {
    a1: RedisBackend,
    a2: RedisBackend,
    b: RedisBackend,
}

/// One batch of A on `conn`, started by the barrier; its results by execution.
fn spawn_batch(
    conn: &RedisBackend,
    acks: Vec<Acknowledgement>,
    barrier: &std::sync::Arc<Barrier>,
) -> tokio::task::JoinHandle<Vec<(ExecutionId, bool)>> {
    let (conn, barrier) = (conn.clone(), barrier.clone());
    tokio::spawn(async move {
        barrier.wait().await;
        let results = if acks.is_empty() {
            Vec::new()
        } else {
            conn.acknowledge_batch(&acks)
                .await
                .expect("holder acknowledge_batch")
        };
        assert_eq!(results.len(), acks.len());
        acks.iter()
            .zip(results)
            .map(|(a, r)| (a.lease.execution_id.clone(), !r.is_lost()))
            .collect()
    })
}

async fn round(i: usize, c: &Conns, clock: &ManualClock, policy: &RedeliveryPolicy, t: &mut Tally) {
    let mut rng = StdRng::seed_from_u64(i as u64);
    for j in 0..PER_ROUND {
        let id = ExecutionId::new(format!("r{i}-{j}")).expect("id");
        c.a1.admit(&Admission::new(id)).await.expect("admit");
    }
    let leases =
        c.a1.claim_due(ClaimRequest {
            now: clock.now(),
            limit: PER_ROUND,
            duration: LEASE,
        })
        .await
        .expect("claim");
    assert_eq!(leases.len(), PER_ROUND, "round {i}: A claims all");
    clock.advance(LEASE / 2);
    let mut renewed = BTreeMap::new();
    for lease in &leases {
        let renew = rng.random_bool(0.4);
        if renew {
            let r = c.a1.renew(lease, LEASE).await.expect("renew");
            assert!(!r.is_lost(), "round {i}: renew {lease:?}");
            t.renewed += 1;
        }
        renewed.insert(lease.execution_id.clone(), renew);
    }
    clock.advance(LEASE / 2 + policy.delay(1));

    let (mut first, mut second) = (Vec::new(), Vec::new());
    for lease in &leases {
        let ack = Acknowledgement {
            lease: lease.clone(),
            outcome: completed("A"),
        };
        if rng.random_bool(0.5) {
            first.push(ack);
        } else {
            second.push(ack);
        }
    }
    let barrier = std::sync::Arc::new(Barrier::new(3));
    let batch1 = spawn_batch(&c.a1, first, &barrier);
    let batch2 = spawn_batch(&c.a2, second, &barrier);
    let peer = {
        let (b, barrier) = (c.b.clone(), barrier.clone());
        tokio::spawn(async move {
            barrier.wait().await;
            let claimed = b
                .claim_due_with_records(ClaimRequest {
                    now: Timestamp::MAX,
                    limit: PER_ROUND,
                    duration: LEASE,
                })
                .await
                .expect("peer claim");
            let acks: Vec<Acknowledgement> = claimed
                .iter()
                .map(|c| Acknowledgement {
                    lease: c.lease.clone(),
                    outcome: completed("B"),
                })
                .collect();
            let acked = if acks.is_empty() {
                Vec::new()
            } else {
                b.acknowledge_batch(&acks).await.expect("peer acknowledge")
            };
            (claimed, acked)
        })
    };
    let batches = [
        batch1.await.expect("batch task"),
        batch2.await.expect("batch task"),
    ];
    let (claimed, acked) = peer.await.expect("peer task");

    let mut violation = |what: String| t.violations.push(format!("round {i}: {what}"));
    let stale: BTreeMap<&ExecutionId, &ExecutionLease> =
        leases.iter().map(|l| (&l.execution_id, l)).collect();
    let mut by_peer: BTreeMap<ExecutionId, ExecutionLease> = BTreeMap::new();
    for (claim, ack) in claimed.iter().zip(&acked) {
        let id = &claim.lease.execution_id;
        let Some(old) = stale.get(id) else {
            violation(format!("peer claimed {id}, not of this round"));
            continue;
        };
        if renewed[id] {
            violation(format!(
                "peer claimed {id}, whose lease was renewed and live"
            ));
        }
        if claim.lease.token <= old.token {
            violation(format!(
                "{id}: claim issued {:?} <= {:?}",
                claim.lease.token, old.token
            ));
        }
        let r = &claim.record;
        if r.status != ExecutionStatus::Running
            || r.token != claim.lease.token
            || r.lease_expires_at != Some(claim.lease.expires_at)
            || r.unacknowledged_deliveries != 1
            || r.is_first_delivery(&claim.lease)
        {
            violation(format!("{id}: claimed record {r:?}"));
        }
        if ack.is_lost() {
            violation(format!("{id}: the peer's acknowledgement was lost"));
        }
        by_peer.insert(id.clone(), claim.lease.clone());
    }
    if acked.len() != claimed.len() {
        violation(format!(
            "{} results for {} acks",
            acked.len(),
            claimed.len()
        ));
    }
    for batch in &batches {
        // Per partition (one with a single partition): each is one script.
        let mut expired_accepted: BTreeMap<String, Vec<bool>> = BTreeMap::new();
        for (id, accepted) in batch {
            if renewed[id] {
                if !accepted {
                    violation(format!(
                        "{id}: renewed lease, yet the holder's ack was lost"
                    ));
                }
                continue;
            }
            expired_accepted
                .entry(c.a1.hash_tag_for(id))
                .or_default()
                .push(*accepted);
            match (by_peer.contains_key(id), accepted) {
                (true, true) => violation(format!(
                    "{id}: stale item accepted although the peer claimed it"
                )),
                (true, false) => t.lost_to_peer += 1,
                (false, true) => t.acked_before_claim += 1,
                (false, false) => violation(format!("{id}: nobody claimed, yet the ack was lost")),
            }
        }
        if expired_accepted
            .values()
            .any(|part| part.windows(2).any(|w| w[0] != w[1]))
        {
            violation(format!("a batch was split by the claim: {batch:?}"));
        }
    }
    for lease in &leases {
        let id = &lease.execution_id;
        let record = c.b.get(id).await.expect("get").expect("record");
        let (who, token) = match by_peer.get(id) {
            Some(l) => ("B", l.token),
            None => ("A", lease.token),
        };
        let expected = ExecutionOutcome::Completed(result(who));
        if record.status != ExecutionStatus::Completed
            || record.outcome.as_ref() != Some(&expected)
            || record.token != token
        {
            violation(format!(
                "{id}: final record {record:?}, expected {who}'s under {token:?}"
            ));
        }
    }
}

#[test]
fn batched_acks_race_peer_reclaim() {
    common::runtime(4).block_on(async {
        let clock = ManualClock::starting_now();
        let policy = RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_secs(2))
            .expect("policy");
        let [a1, a2, b] = common::connections(&clock, policy).await;
        let _cleanup = common::Cleanup::of(&a1);
        let conns = Conns { a1, a2, b };
        let mut tally = Tally::default();
        let mut n = 0;
        for i in 0..rounds() {
            round(i, &conns, &clock, &policy, &mut tally).await;
            n += 1;
            if tally.violations.len() >= 20 {
                break;
            }
        }
        conns.a1.delete_namespace().await.expect("delete namespace");
        let summary = format!(
            "expired items lost to the peer {}, acknowledged before its claim {}, renewed {}",
            tally.lost_to_peer, tally.acked_before_claim, tally.renewed
        );
        common::assert_no_violations(n, &summary, &tally.violations);
        assert!(
            tally.lost_to_peer > 0 && tally.acked_before_claim > 0,
            "the batches never raced the claim: {tally:?}"
        );
    });
}
