//! A stale holder races a peer's reclaim, round after round, on three separate connections.
//!
//! Each round: A claims an execution (token t1); the shared manual clock passes the lease's
//! expiry and the redelivery delay; then, released together by a barrier, A writes a step (on
//! connection A1) and acknowledges (on connection A2) while peer B claims the expired lease
//! (on connection B), reads the step and acknowledges. Redis runs scripts one at a time, so
//! the observations must fit one serial order of the operations; in particular no accepted
//! write or acknowledgement carries a token lower than one issued before it committed:
//!
//! - B's claim (t2) and A's acknowledgement (t1) are never both accepted.
//! - If A's write with t1 was accepted and B claimed, the write committed before the claim,
//!   so B's read of the step right after its claim returned must see it, with token t1.
//! - Real time: an operation of A invoked after B's claim had returned must be `Lost`.
//! - The final record is B's outcome under t2 when B claimed, else A's under t1.
//!
//! `LEASE_RACE_ROUNDS` overrides the number of rounds (default 500).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lease_conformance::race::{LEASE, Tally, claim, rounds};
use lease_core::{
    Admission, ExecutionClient, ExecutionId, ExecutionOutcome, ExecutionStatus, Fenced, HeapClient,
    Json, ManualClock, RedeliveryPolicy, StepKey, StepWrite, WorkflowRunOutcome,
};
use lease_redis::RedisBackend;
use tokio::sync::Barrier;

/// A global order of invocations and completions, for the real-time check.
static SEQ: AtomicU64 = AtomicU64::new(0);

fn tick() -> u64 {
    SEQ.fetch_add(1, Ordering::SeqCst)
}

fn json(text: &str) -> Json {
    Json::parse("test", text).expect("json")
}

struct Conns {
    a_write: RedisBackend,
    a_ack: RedisBackend,
    b: RedisBackend,
}

/// The peer's head start in a round. On a namespace split into partitions (the
/// cluster row) a claim is three round trips (peek every partition, reserve tokens, claim)
/// to the holder's one, so started together the holder would always win; there the
/// holder's operations wait a random number (0-1999) of scheduler yields after the barrier,
/// so that both orders occur. None with one partition.
struct HeadStart(usize);

fn head_start(b: &RedisBackend) -> HeadStart {
    match b.partitions() {
        1 => HeadStart(0),
        _ => HeadStart(rand::random_range(0..2000)),
    }
}

impl HeadStart {
    async fn wait(self) {
        for _ in 0..self.0 {
            tokio::task::yield_now().await;
        }
    }
}

async fn round(
    i: usize,
    c: &Conns,
    clock: &ManualClock,
    policy: &RedeliveryPolicy,
    payload: &Json,
    tally: &mut Tally,
) {
    let id = ExecutionId::new(format!("race-{i}")).expect("id");
    c.a_write
        .admit(&Admission::new(id.clone()))
        .await
        .expect("admit");
    let first = claim(&c.a_write, clock).await;
    assert_eq!(first.len(), 1, "round {i}: A claims the new execution");
    let stale = first[0].clone();
    assert_eq!(stale.execution_id, id);
    clock.advance(LEASE + policy.delay(1));

    let key = StepKey::new("charge").expect("key");
    let barrier = Arc::new(Barrier::new(3));
    let write = {
        let (a, lease, barrier) = (c.a_write.clone(), stale.clone(), barrier.clone());
        let w = StepWrite {
            step_key: key.clone(),
            step_attempt: 0,
            done: true,
            response: payload.clone(),
        };
        let lead = head_start(&a);
        tokio::spawn(async move {
            barrier.wait().await;
            lead.wait().await;
            let invoked = tick();
            let r = a.write_step(&lease, &w).await.expect("stale write_step");
            (invoked, r)
        })
    };
    let ack = {
        let (a, lease, barrier) = (c.a_ack.clone(), stale.clone(), barrier.clone());
        let lead = head_start(&a);
        tokio::spawn(async move {
            barrier.wait().await;
            lead.wait().await;
            let invoked = tick();
            let r = a
                .acknowledge(&lease, &WorkflowRunOutcome::Completed(json("\"A\"")))
                .await
                .expect("stale acknowledge");
            (invoked, r)
        })
    };
    let peer = {
        let (b, barrier, clock, id, key) = (
            c.b.clone(),
            barrier.clone(),
            clock.clone(),
            id.clone(),
            key.clone(),
        );
        tokio::spawn(async move {
            barrier.wait().await;
            let leases = claim(&b, &clock).await;
            let returned = tick();
            let lease = leases.into_iter().next()?;
            let seen = b.read_step(&id, &key, 0).await.expect("read_step");
            let acked = b
                .acknowledge(&lease, &WorkflowRunOutcome::Completed(json("\"B\"")))
                .await
                .expect("peer acknowledge");
            Some((lease, returned, seen, acked))
        })
    };
    let (write_invoked, write) = write.await.expect("write task");
    let (ack_invoked, ack) = ack.await.expect("ack task");
    let peer = peer.await.expect("peer task");

    let record = c.b.get(&id).await.expect("get").expect("record");
    let stored_step = c.b.read_step(&id, &key, 0).await.expect("read_step");
    let mut violation = |what: String| tally.violations.push(format!("round {i}: {what}"));

    if let Fenced::Accepted(r) = &write {
        if r.token != stale.token {
            violation(format!(
                "stale write returned a record of token {:?}",
                r.token
            ));
        }
        if stored_step.as_ref() != Some(r) {
            violation("accepted step record is not the stored one".into());
        }
    } else if stored_step.as_ref().is_some_and(|s| s.token == stale.token) {
        violation("a lost write left its record behind".into());
    }
    match &peer {
        Some((lease, returned, seen, acked)) => {
            tally.claim_won += 1;
            if lease.token <= stale.token {
                violation(format!(
                    "claim issued {:?} <= {:?}",
                    lease.token, stale.token
                ));
            }
            if !ack.is_lost() {
                violation(format!(
                    "ack with {:?} accepted although the claim issued {:?}",
                    stale.token, lease.token
                ));
            }
            if !write.is_lost() && write_invoked > *returned {
                violation(format!(
                    "write with {:?} invoked after the claim of {:?} returned, yet accepted",
                    stale.token, lease.token
                ));
            }
            if !ack.is_lost() && ack_invoked > *returned {
                violation("ack invoked after the claim returned, yet accepted".into());
            }
            if let Fenced::Accepted(r) = &write {
                match seen {
                    Some(s) if s == r => tally.write_before_claim += 1,
                    other => violation(format!(
                        "step write with {:?} committed after {:?} was issued (the peer's read \
                         right after its claim saw {other:?})",
                        r.token, lease.token
                    )),
                }
            }
            if acked.is_lost() {
                violation("the peer's acknowledgement with the newest token was lost".into());
            }
            let expected = ExecutionOutcome::Completed(json("\"B\""));
            if record.outcome.as_ref() != Some(&expected) || record.token != lease.token {
                violation(format!(
                    "final record {:?}/{:?}, expected B's outcome under {:?}",
                    record.outcome, record.token, lease.token
                ));
            }
        }
        None => {
            tally.holder_won += 1;
            if ack.is_lost() {
                violation("nobody claimed, yet the holder's acknowledgement was lost".into());
            }
            let expected = ExecutionOutcome::Completed(json("\"A\""));
            if record.outcome.as_ref() != Some(&expected) || record.token != stale.token {
                violation(format!(
                    "final record {:?}/{:?}, expected A's outcome under {:?}",
                    record.outcome, record.token, stale.token
                ));
            }
        }
    }
    if record.status != ExecutionStatus::Completed {
        violation(format!("round ended {:?}, not terminal", record.status));
    }
}

#[test]
fn stale_holder_write_and_ack_race_peer_reclaim() {
    common::runtime(4).block_on(async {
        let clock = ManualClock::starting_now();
        let policy = RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_secs(2))
            .expect("policy");
        let [a_write, a_ack, b] = common::connections(&clock, policy).await;
        let _cleanup_a_write = common::Cleanup::of(&a_write);
        let conns = Conns { a_write, a_ack, b };
        let payload = Json::to_json("response", &"x".repeat(2048)).expect("payload");
        let mut tally = Tally::default();
        let mut n = 0;
        for i in 0..rounds() {
            round(i, &conns, &clock, &policy, &payload, &mut tally).await;
            n += 1;
            if tally.full() {
                break;
            }
        }
        conns
            .a_write
            .delete_namespace()
            .await
            .expect("delete namespace");
        tally.assert_fenced(n);
    });
}
