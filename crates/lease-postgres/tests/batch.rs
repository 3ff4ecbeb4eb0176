//! Batched acknowledgements under concurrency, on separate connections, as several runtime
//! processes share one store.
//!
//! - `batch_acks_race_peer_reclaims`: round after round, holder A claims a set of executions,
//!   the shared manual clock passes the leases' expiry and the redelivery delay, then A's
//!   tasks acknowledge the leases in several concurrent batches while peers (their own pools)
//!   reclaim the expired executions and acknowledge what they claimed in batches too. For
//!   every execution exactly one of "A's item accepted" and "a peer claimed it" holds: an
//!   accepted stale item would mean a batch acknowledged over a newer token, and neither would
//!   mean a batch lost an item nobody took. `LEASE_BATCH_RACE_ROUNDS` overrides the number of
//!   rounds (default 60).
//! - `overlapping_batches_in_opposite_orders_complete`: two connections acknowledge batches
//!   that share executions, listed in opposite orders. The statement timeout is set below the
//!   server's `deadlock_timeout`, so a deadlock (which the backend would otherwise retry
//!   quietly) surfaces as an error instead.

mod common;

use lease_core::ExecutionClientExt;
use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Acknowledged, Acknowledgement, Admission, ClaimRequest, Claimed, ExecutionClient, ExecutionId,
    ExecutionLease, ExecutionOutcome, ExecutionStatus, Fenced, Json, ManualClock, RedeliveryPolicy,
    Timestamp, WorkflowRunOutcome,
};
use lease_postgres::PostgresBackend;
use tokio::sync::Barrier;

const LEASE: Duration = Duration::from_secs(30);
/// A's concurrent batches per round.
const ACKERS: usize = 4;
/// Items per batch of A.
const BATCH: usize = 4;
/// Peers reclaiming concurrently, each on its own pool.
const PEERS: usize = 2;

fn rounds() -> usize {
    std::env::var("LEASE_BATCH_RACE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime")
}

fn completed(by: &str) -> WorkflowRunOutcome {
    WorkflowRunOutcome::Completed(Json::to_json("outcome", &by).expect("json"))
}

fn acks(leases: &[ExecutionLease], by: &str) -> Vec<Acknowledgement> {
    leases
        .iter()
        .map(|lease| Acknowledgement {
            lease: lease.clone(),
            outcome: completed(by),
        })
        .collect()
}

async fn claim(b: &PostgresBackend, limit: usize) -> Vec<Claimed> {
    b.claim_due_with_records(ClaimRequest {
        now: Timestamp::MAX,
        limit,
        duration: LEASE,
    })
    .await
    .expect("claim")
}

#[derive(Debug, Default)]
struct Tally {
    holder_won: usize,
    peer_won: usize,
    violations: Vec<String>,
}

/// What one peer did in a round: its claims and its batch's results.
type PeerRun = (Vec<Claimed>, Vec<Fenced<Acknowledged>>);

async fn race_round(
    round: usize,
    a: &PostgresBackend,
    peers: &[PostgresBackend],
    clock: &ManualClock,
    policy: &RedeliveryPolicy,
    tally: &mut Tally,
) {
    let n = ACKERS * BATCH;
    for k in 0..n {
        let id = ExecutionId::new(format!("r{round:04}-{k:02}")).expect("id");
        a.admit(&Admission::new(id)).await.expect("admit");
    }
    let leases: Vec<ExecutionLease> = claim(a, n).await.into_iter().map(|c| c.lease).collect();
    assert_eq!(
        leases.len(),
        n,
        "round {round}: A claims every new execution"
    );
    clock.advance(LEASE + policy.delay(1));

    let barrier = Arc::new(Barrier::new(ACKERS + PEERS));
    let holders: Vec<_> = leases
        .chunks(BATCH)
        .map(|chunk| {
            let (a, batch, barrier) = (a.clone(), acks(chunk, "A"), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let results = a.acknowledge_batch(&batch).await.expect("A's batch");
                (batch, results)
            })
        })
        .collect();
    let reclaimers: Vec<_> = peers
        .iter()
        .enumerate()
        .map(|(j, p)| {
            let (p, barrier) = (p.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let claimed = claim(&p, BATCH).await;
                let mine: Vec<_> = claimed.iter().map(|c| c.lease.clone()).collect();
                let results = p
                    .acknowledge_batch(&acks(&mine, &format!("P{j}")))
                    .await
                    .expect("peer's batch");
                (claimed, results) as PeerRun
            })
        })
        .collect();

    let mut holder_accepted = std::collections::BTreeMap::new();
    for task in holders {
        let (batch, results) = task.await.expect("holder task");
        assert_eq!(results.len(), batch.len());
        for (ack, result) in batch.iter().zip(results) {
            holder_accepted.insert(ack.lease.execution_id.clone(), !result.is_lost());
        }
    }
    let mut peer_claims = std::collections::BTreeMap::new();
    for (j, task) in reclaimers.into_iter().enumerate() {
        let (claimed, results) = task.await.expect("peer task");
        for (c, result) in claimed.iter().zip(&results) {
            let stale = &leases[leases
                .iter()
                .position(|l| l.execution_id == c.lease.execution_id)
                .expect("peers claim only this round's executions")];
            if c.lease.token <= stale.token {
                tally.violations.push(format!(
                    "round {round}: {} reclaimed with {:?} <= {:?}",
                    c.lease.execution_id, c.lease.token, stale.token
                ));
            }
            if c.record.status != ExecutionStatus::Running
                || c.record.token != c.lease.token
                || c.record.unacknowledged_deliveries != 1
            {
                tally.violations.push(format!(
                    "round {round}: claimed record {:?} does not fit {:?}",
                    c.record, c.lease
                ));
            }
            if result.is_lost() {
                tally.violations.push(format!(
                    "round {round}: peer {j}'s item for {} was lost",
                    c.lease.execution_id
                ));
            }
            peer_claims.insert(c.lease.execution_id.clone(), (j, c.lease.token));
        }
    }

    for lease in &leases {
        let id = &lease.execution_id;
        let accepted = holder_accepted.get(id).copied().unwrap_or(false);
        let claimed = peer_claims.get(id);
        let record = a.get(id).await.expect("get").expect("record");
        let (winner, token) = match (accepted, claimed) {
            (true, None) => {
                tally.holder_won += 1;
                ("A".to_owned(), lease.token)
            }
            (false, Some((j, token))) => {
                tally.peer_won += 1;
                (format!("P{j}"), *token)
            }
            (true, Some((j, token))) => {
                tally.violations.push(format!(
                    "round {round}: {id}: A's stale item with {:?} accepted although peer {j} \
                     claimed {token:?}",
                    lease.token
                ));
                continue;
            }
            (false, None) => {
                tally.violations.push(format!(
                    "round {round}: {id}: A's item lost although nobody reclaimed it"
                ));
                continue;
            }
        };
        let expected = ExecutionOutcome::Completed(Json::to_json("outcome", &winner).expect("j"));
        if record.status != ExecutionStatus::Completed
            || record.outcome.as_ref() != Some(&expected)
            || record.token != token
            || record.unacknowledged_deliveries != 0
        {
            tally.violations.push(format!(
                "round {round}: {id}: final record {record:?}, expected completed by {winner} \
                 under {token:?}"
            ));
        }
    }
}

#[test]
fn batch_acks_race_peer_reclaims() {
    let clock = ManualClock::starting_now();
    let policy = RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_secs(2))
        .expect("policy");
    let config = common::config(clock.clone(), policy);
    let schema = config.schema_name().to_owned();
    runtime().block_on(common::cleaning_up(schema, async move {
        let a = PostgresBackend::connect(config).await.expect("connect A");
        let mut peers = Vec::with_capacity(PEERS);
        for _ in 0..PEERS {
            peers.push(a.peer().await.expect("connect peer"));
        }
        let mut tally = Tally::default();
        let mut n = 0;
        for round in 0..rounds() {
            race_round(round, &a, &peers, &clock, &policy, &mut tally).await;
            n += 1;
            if tally.violations.len() >= 20 {
                break;
            }
        }
        eprintln!(
            "{n} rounds: A's item accepted {}, reclaimed by a peer {}, violations {}",
            tally.holder_won,
            tally.peer_won,
            tally.violations.len()
        );
        assert!(
            tally.violations.is_empty(),
            "batch fencing violated:\n{}",
            tally.violations.join("\n")
        );
        assert!(
            tally.holder_won > 0 && tally.peer_won > 0,
            "the batches never raced the reclaims: {tally:?}"
        );
        for p in &peers {
            p.close().await;
        }
        a.close().await;
    }));
}

/// The server's `deadlock_timeout` in milliseconds.
async fn deadlock_timeout_ms(b: &PostgresBackend) -> u64 {
    let ms: String =
        sqlx::query_scalar("SELECT setting FROM pg_settings WHERE name = 'deadlock_timeout'")
            .fetch_one(b.pool())
            .await
            .expect("deadlock_timeout");
    ms.parse().expect("deadlock_timeout in ms")
}

#[test]
fn overlapping_batches_in_opposite_orders_complete() {
    const ITEMS: usize = 8;
    const ROUNDS: usize = 60;
    let clock = ManualClock::starting_now();
    let config = common::config(clock, RedeliveryPolicy::default());
    let schema = config.schema_name().to_owned();
    runtime().block_on(common::cleaning_up(schema, async move {
        let probe = PostgresBackend::connect(config.clone())
            .await
            .expect("connect");
        let timeout = deadlock_timeout_ms(&probe).await * 4 / 5;
        probe.close().await;
        // A statement waiting in a deadlock times out before the detector could resolve it.
        let config = config.statement_timeout(Duration::from_millis(timeout));
        let a = PostgresBackend::connect(config).await.expect("connect A");
        let b = a.peer().await.expect("connect B");
        let (mut a_won, mut b_won) = (0, 0);
        for round in 0..ROUNDS {
            for k in 0..ITEMS {
                let id = ExecutionId::new(format!("o{round:03}-{k}")).expect("id");
                a.admit(&Admission::new(id)).await.expect("admit");
            }
            let leases: Vec<_> = claim(&a, ITEMS)
                .await
                .into_iter()
                .map(|c| c.lease)
                .collect();
            assert_eq!(leases.len(), ITEMS);
            // A: items 0..6 in order; B: items 2..8 in reverse. Items 2..6 are shared.
            let first = acks(&leases[..ITEMS - 2], "A");
            let mut second = acks(&leases[2..], "B");
            second.reverse();
            let barrier = Arc::new(Barrier::new(2));
            let run = |backend: &PostgresBackend, batch: Vec<Acknowledgement>| {
                let (backend, barrier) = (backend.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    let results = backend.acknowledge_batch(&batch).await;
                    (batch, results)
                })
            };
            let (ta, tb) = (run(&a, first), run(&b, second));
            let (first, ra) = ta.await.expect("task A");
            let (second, rb) = tb.await.expect("task B");
            let ra = ra.unwrap_or_else(|e| panic!("round {round}: A's batch failed: {e:?}"));
            let rb = rb.unwrap_or_else(|e| panic!("round {round}: B's batch failed: {e:?}"));
            let accepted = |batch: &[Acknowledgement], results: &[Fenced<Acknowledged>], id| {
                batch
                    .iter()
                    .zip(results)
                    .any(|(ack, r)| &ack.lease.execution_id == id && !r.is_lost())
            };
            for (k, lease) in leases.iter().enumerate() {
                let id = &lease.execution_id;
                let (by_a, by_b) = (accepted(&first, &ra, id), accepted(&second, &rb, id));
                let shared = (2..ITEMS - 2).contains(&k);
                assert!(
                    by_a != by_b,
                    "round {round}: {id}: accepted by A {by_a}, by B {by_b}"
                );
                if shared {
                    if by_a {
                        a_won += 1;
                    } else {
                        b_won += 1;
                    }
                }
                let record = a.get(id).await.expect("get").expect("record");
                let winner = if by_a { "A" } else { "B" };
                let expected =
                    ExecutionOutcome::Completed(Json::to_json("outcome", &winner).expect("json"));
                assert_eq!(record.outcome, Some(expected), "round {round}: {id}");
            }
        }
        eprintln!("shared items: A's batch won {a_won}, B's batch won {b_won}");
        b.close().await;
        a.close().await;
    }));
}
