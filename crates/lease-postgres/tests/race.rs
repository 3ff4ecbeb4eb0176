//! A stale holder races a peer's claim, round after round, on separate connections.
//!
//! Each round: A claims an execution (token t1); the shared manual clock passes the lease's
//! expiry and the redelivery delay; then, released together by a barrier, A writes a step and
//! acknowledges (each on its own connection of A's pool) while peer B claims the expired
//! lease (on B's pool). After the round the observations must fit SOME serial order of the
//! three operations; in particular no accepted write or acknowledgement carries a token lower
//! than one issued before it committed:
//!
//! - B's claim (t2) and A's acknowledgement (t1) cannot both be accepted: whichever
//!   committed second acted on a stale view.
//! - If A's step write with t1 was accepted and B claimed, the write must have committed
//!   before the claim, so B's read of the step right after its claim returned must see it.
//!   A read that misses it proves the t1 write committed after t2 was issued.
//!
//! `LEASE_RACE_ROUNDS` overrides the number of rounds (default 500). The test is meant to
//! FAIL with `RUSTFLAGS="--cfg lease_postgres_nonatomic_fencing_experiment"` (a cfg, see
//! build.rs; no environment variable of the crate's own turns it on), which swaps in a bare `INSERT ... WHERE EXISTS (token = n)` step write and an
//! unlocked-check acknowledge.

mod common;

use std::sync::Arc;
use std::time::Duration;

use lease_conformance::race::{LEASE, Tally, claim, rounds};
use lease_core::{
    Admission, ExecutionClient, ExecutionId, ExecutionOutcome, ExecutionStatus, Fenced, HeapClient,
    Json, ManualClock, RedeliveryPolicy, StepKey, StepWrite, WorkflowRunOutcome,
};
use lease_postgres::PostgresBackend;
use tokio::sync::Barrier;

async fn round(
    i: usize,
    a: &PostgresBackend,
    b: &PostgresBackend,
    clock: &ManualClock,
    policy: &RedeliveryPolicy,
    payload: &Json,
    tally: &mut Tally,
) {
    let id = ExecutionId::new(format!("race-{i}")).expect("id");
    a.admit(&Admission::new(id.clone())).await.expect("admit");
    let first = claim(a, clock).await;
    assert_eq!(first.len(), 1, "round {i}: A claims the new execution");
    let stale = first[0].clone();
    assert_eq!(stale.execution_id, id);
    clock.advance(LEASE + policy.delay(1));

    let key = StepKey::new("charge").expect("key");
    let barrier = Arc::new(Barrier::new(3));
    let write = {
        let (a, lease, barrier) = (a.clone(), stale.clone(), barrier.clone());
        let w = StepWrite {
            step_key: key.clone(),
            step_attempt: 0,
            done: true,
            response: payload.clone(),
        };
        tokio::spawn(async move {
            barrier.wait().await;
            a.write_step(&lease, &w).await.expect("stale write_step")
        })
    };
    let ack = {
        let (a, lease, barrier) = (a.clone(), stale.clone(), barrier.clone());
        let outcome = WorkflowRunOutcome::Completed(Json::parse("t", "\"A\"").expect("json"));
        tokio::spawn(async move {
            barrier.wait().await;
            a.acknowledge(&lease, &outcome)
                .await
                .expect("stale acknowledge")
        })
    };
    let peer = {
        let (b, barrier, clock, id, key) = (
            b.clone(),
            barrier.clone(),
            clock.clone(),
            id.clone(),
            key.clone(),
        );
        tokio::spawn(async move {
            barrier.wait().await;
            let leases = claim(&b, &clock).await;
            let lease = leases.into_iter().next()?;
            let seen = b.read_step(&id, &key, 0).await.expect("read_step");
            let outcome = WorkflowRunOutcome::Completed(Json::parse("t", "\"B\"").expect("json"));
            let acked = b
                .acknowledge(&lease, &outcome)
                .await
                .expect("peer acknowledge");
            Some((lease, seen, acked))
        })
    };
    let write = write.await.expect("write task");
    let ack = ack.await.expect("ack task");
    let peer = peer.await.expect("peer task");

    let record = a.get(&id).await.expect("get").expect("record");
    let stored_step = a.read_step(&id, &key, 0).await.expect("read_step");
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
    }
    match &peer {
        Some((lease, seen, acked)) => {
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
            if let Fenced::Accepted(r) = &write {
                if seen.is_none() {
                    violation(format!(
                        "step write with {:?} committed after {:?} was issued \
                         (absent from the peer's read right after its claim)",
                        r.token, lease.token
                    ));
                } else {
                    tally.write_before_claim += 1;
                }
            }
            if acked.is_lost() {
                violation("the peer's acknowledgement with the newest token was lost".into());
            }
            let expected = ExecutionOutcome::Completed(Json::parse("t", "\"B\"").expect("json"));
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
            if record.status != ExecutionStatus::Completed || record.token != stale.token {
                violation(format!(
                    "final record {:?} {:?}, expected completed by A",
                    record.status, record.token
                ));
            }
        }
    }
    if record.status != ExecutionStatus::Completed {
        violation(format!("round ended {:?}, not terminal", record.status));
    }
}

#[test]
fn stale_holder_write_and_ack_race_peer_claim() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime");
    let clock = ManualClock::starting_now();
    let policy = RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_secs(2))
        .expect("policy");
    let config = common::config(clock.clone(), policy);
    let schema = config.schema_name().to_owned();
    rt.block_on(common::cleaning_up(schema, async move {
        let a = PostgresBackend::connect(config).await.expect("connect A");
        let b = a.peer().await.expect("connect peer B");
        let payload = Json::to_json("response", &"x".repeat(2048)).expect("payload");
        let mut tally = Tally::default();
        let mut n = 0;
        for i in 0..rounds() {
            round(i, &a, &b, &clock, &policy, &payload, &mut tally).await;
            n += 1;
            if tally.full() {
                break;
            }
        }
        tally.assert_fenced(n);
    }));
}
