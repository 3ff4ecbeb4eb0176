//! LISTEN/NOTIFY wake-ups, beyond what the conformance pickup cases check.
//!
//! - Every write that makes an execution claimable notifies the row's `claimable_at` after
//!   the write (`ExecutionRecord::claimable_at`); renew, write_step and a terminal
//!   acknowledgement notify nothing. Absence is checked without waiting: a probe that
//!   notifies a later instant follows, and the receiver keeps the earliest instant signalled
//!   since it last looked, so an unwanted earlier notification would show instead.
//! - A listener connection terminated on the server reconnects, signals "now" (missed
//!   notifications), and later notifications arrive.
//! - Outside a tokio runtime no listener can run: `wakeups()` is `None`.
//!
//! That a notification never arrives before its write commits needs no test of ours: the
//! NOTIFY is issued inside the writing statement, and PostgreSQL delivers notifications of
//! a transaction only when it commits (never when it aborts).

mod common;

use lease_core::ExecutionClientExt;
use std::time::Duration;

use lease_core::{
    Acknowledgement, Admission, ClaimRequest, ExecutionClient, ExecutionId, ExecutionLease,
    ExecutionRecord, HeapClient, Json, ManualClock, RedeliveryPolicy, RequestId, StartClient,
    StartRequest, StepKey, StepWrite, Timestamp, WakeReceiver, WorkflowName, WorkflowRunOutcome,
};
use lease_postgres::PostgresBackend;

const LEASE: Duration = Duration::from_secs(30);
const DEADLINE: Duration = Duration::from_secs(20);

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

/// The next signal; panics after [`DEADLINE`].
async fn next_signal(rx: &WakeReceiver, what: &str) -> Timestamp {
    tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("{what}: no wake-up within {DEADLINE:?}"))
}

/// A fresh schema over a manual clock, a backend, and its policy.
async fn setup() -> (PostgresBackend, ManualClock, RedeliveryPolicy, String) {
    let clock = ManualClock::starting_now();
    let policy = RedeliveryPolicy::default();
    let config = common::config(clock.clone(), policy);
    let schema = config.schema_name().to_owned();
    let backend = PostgresBackend::connect(config).await.expect("connect");
    (backend, clock, policy, schema)
}

async fn claim_one(b: &PostgresBackend) -> ExecutionLease {
    let mut leases = b
        .claim_due(ClaimRequest {
            now: Timestamp::MAX,
            limit: 1,
            duration: LEASE,
        })
        .await
        .expect("claim");
    assert_eq!(leases.len(), 1, "one claimable execution");
    leases.remove(0)
}

async fn record(b: &PostgresBackend, name: &str) -> ExecutionRecord {
    b.get(&id(name)).await.expect("get").expect("exists")
}

/// The instant a stored record becomes claimable, as the notification must carry it.
fn claimable(r: &ExecutionRecord, policy: &RedeliveryPolicy) -> Timestamp {
    r.claimable_at(policy).expect("claimable at some instant")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_that_makes_work_claimable_notifies_its_claimable_at() {
    let (b, clock, policy, schema) = setup().await;
    common::cleaning_up(schema, async move {
        let peer = b.peer().await.expect("peer");
        let rx = b.wakeups().expect("wake-ups inside a runtime");
        common::wait_until_listening(&b).await;
        let now = lease_core::Clock::now(&clock);
        let at = |ms: i64| Timestamp::from_millis(now.as_millis() + ms);

        // admit (another connection), scheduled: its due time.
        peer.admit(&Admission::new(id("a")).not_before(at(5_000)))
            .await
            .expect("admit");
        assert_eq!(next_signal(&rx, "admit").await, at(5_000));
        // An existing id: nothing; the probe's later instant shows instead.
        peer.admit(&Admission::new(id("a"))).await.expect("admit");
        peer.admit(&Admission::new(id("probe-1")).not_before(at(9_000)))
            .await
            .expect("admit");
        assert_eq!(next_signal(&rx, "admit existing").await, at(9_000));

        // admit_batch: the earliest due time among the created items.
        peer.admit_batch(&[
            Admission::new(id("a")).not_before(at(1)),
            Admission::new(id("b")).not_before(at(7_000)),
            Admission::new(id("c")).not_before(at(6_000)),
        ])
        .await
        .expect("admit_batch");
        assert_eq!(next_signal(&rx, "admit_batch").await, at(6_000));

        // start: the target is due now.
        let started = peer
            .start(&StartRequest::new(
                RequestId::new("r-1").expect("request id"),
                WorkflowName::new("w").expect("workflow"),
                Json::parse("input", "{}").expect("json"),
            ))
            .await
            .expect("start");
        assert!(started.created);
        assert_eq!(next_signal(&rx, "start").await, now);

        // claim: the new lease's claimable_at (expiry + redelivery delay).
        let lease = claim_one(&peer).await;
        let claimed = record(&b, lease.execution_id.as_str()).await;
        assert_eq!(
            next_signal(&rx, "claim").await,
            claimable(&claimed, &policy)
        );

        // renew and write_step: nothing (the probe's instant shows).
        let renewed = peer.renew(&lease, LEASE).await.expect("renew");
        assert!(!renewed.is_lost());
        let write = StepWrite {
            step_key: StepKey::new("s").expect("key"),
            step_attempt: 1,
            done: true,
            response: Json::parse("response", "1").expect("json"),
        };
        assert!(
            !peer
                .write_step(&lease, &write)
                .await
                .expect("write")
                .is_lost()
        );
        // request_wake while running: folded into the delivery, nothing.
        peer.request_wake(&lease.execution_id, at(100))
            .await
            .expect("wake");
        peer.admit(&Admission::new(id("probe-2")).not_before(at(9_000_000)))
            .await
            .expect("admit");
        assert_eq!(next_signal(&rx, "renew, write").await, at(9_000_000));

        // acknowledge suspended with the wake requested during the delivery: that wake.
        let ack = peer
            .acknowledge(&lease, &WorkflowRunOutcome::Suspended)
            .await
            .expect("acknowledge");
        assert!(!ack.is_lost());
        assert_eq!(next_signal(&rx, "acknowledge suspended").await, at(100));

        // request_wake on a suspended execution: its new claimable_at.
        peer.request_wake(&lease.execution_id, at(50))
            .await
            .expect("wake");
        assert_eq!(next_signal(&rx, "request_wake").await, at(50));

        // release: the end of the redelivery delay.
        clock.set(at(100));
        let lease = claim_one(&peer).await;
        assert_eq!(lease.execution_id, started.target);
        let _claim_signal = next_signal(&rx, "claim").await;
        assert!(!peer.release(&lease).await.expect("release").is_lost());
        let released = record(&b, lease.execution_id.as_str()).await;
        let expected = claimable(&released, &policy);
        assert_eq!(expected, at(100).saturating_add(policy.delay(1)));
        assert_eq!(next_signal(&rx, "release").await, expected);

        // acknowledge_batch: suspended without a wake and completed notify nothing, a
        // suspended one with a wake its wake.
        clock.set(at(10_000));
        let mut leases = peer
            .claim_due(ClaimRequest {
                now: Timestamp::MAX,
                limit: 3,
                duration: LEASE,
            })
            .await
            .expect("claim");
        assert_eq!(leases.len(), 3);
        let _claim_signal = next_signal(&rx, "claim of three").await;
        peer.request_wake(&leases[2].execution_id, at(20_000))
            .await
            .expect("wake");
        let outcomes = [
            WorkflowRunOutcome::Suspended,
            WorkflowRunOutcome::Completed(Json::parse("outcome", "1").expect("json")),
            WorkflowRunOutcome::Suspended,
        ];
        let batch: Vec<Acknowledgement> = leases
            .drain(..)
            .zip(outcomes)
            .map(|(lease, outcome)| Acknowledgement { lease, outcome })
            .collect();
        let results = peer.acknowledge_batch(&batch).await.expect("batch");
        assert!(results.iter().all(|r| !r.is_lost()));
        assert_eq!(next_signal(&rx, "acknowledge_batch").await, at(20_000));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_killed_on_the_server_reconnects_and_later_notifications_arrive() {
    let (b, clock, _policy, schema) = setup().await;
    common::cleaning_up(schema, async move {
        let peer = b.peer().await.expect("peer");
        let rx = b.wakeups().expect("wake-ups inside a runtime");
        let now = lease_core::Clock::now(&clock);
        let at = |ms: i64| Timestamp::from_millis(now.as_millis() + ms);
        common::wait_until_listening(&b).await;
        peer.admit(&Admission::new(id("before")).not_before(at(1)))
            .await
            .expect("admit");
        assert_eq!(next_signal(&rx, "before the kill").await, at(1));
        for round in 1..=2 {
            while rx.try_recv().is_some() {}
            let killed = common::kill_listeners_when_connected(&b).await;
            assert_eq!(
                killed, 1,
                "round {round}: one listener connection per handle"
            );
            assert_eq!(
                next_signal(&rx, "reconnect").await,
                Timestamp::MIN,
                "round {round}: a reconnect signals now"
            );
            let due = at(1_000 * round);
            peer.admit(&Admission::new(id(&format!("after-{round}"))).not_before(due))
                .await
                .expect("admit");
            assert_eq!(
                next_signal(&rx, "after the kill").await,
                due,
                "round {round}"
            );
        }
    })
    .await;
}

#[test]
fn outside_a_runtime_there_are_no_wakeups() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let (b, _clock, _policy, schema) = runtime.block_on(setup());
    let from_plain_thread = std::thread::spawn({
        let b = b.clone();
        move || b.wakeups().is_some()
    })
    .join()
    .expect("thread");
    assert!(!from_plain_thread, "no runtime, no listener: None");
    let inside = runtime.block_on(async { b.wakeups().is_some() });
    assert!(inside);
    runtime.block_on(common::drop_schema_named(&schema));
}
