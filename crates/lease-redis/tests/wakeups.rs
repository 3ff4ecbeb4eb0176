//! Wake-ups over pub/sub against real Redis: which operations publish and with
//! which instant (the record's `claimable_at` after the write), one subscriber connection per
//! handle family, reconnection after the subscriber is killed, the classic pub/sub path, and
//! `admit_batch` publishing once.

mod common;

use lease_core::ExecutionClientExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lease_core::{
    Admission, ClaimRequest, Clock, ExecutionClient, ExecutionId, ExecutionLease, HeapClient, Json,
    ManualClock, RedeliveryPolicy, StepKey, StepWrite, Timestamp, WakeReceiver, WorkflowRunOutcome,
};
use lease_redis::{RedisBackend, RedisConfig};

/// Runs `$body(classic)` as two tests: `$sharded` (sharded pub/sub) and `$classic`.
macro_rules! in_both_modes {
    ($body:ident: $sharded:ident, $classic:ident) => {
        #[tokio::test]
        async fn $sharded() {
            $body(false).await;
        }

        #[tokio::test]
        async fn $classic() {
            $body(true).await;
        }
    };
}

const LEASE: Duration = Duration::from_secs(30);
const DEADLINE: Duration = Duration::from_secs(20);

fn policy() -> RedeliveryPolicy {
    RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_millis(1600))
        .expect("policy")
}

fn id(name: &str) -> ExecutionId {
    ExecutionId::new(name).expect("id")
}

fn at(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms)
}

async fn connect(clock: &ManualClock, classic: bool) -> RedisBackend {
    RedisBackend::connect(
        RedisConfig::new(common::redis_url())
            .namespace(common::random_namespace())
            .clock(Arc::new(clock.clone()))
            .policy(policy())
            .classic_pubsub(classic),
    )
    .await
    .expect("connect to redis (set LEASE_REDIS_URL)")
}

/// The next signal, failing after [`DEADLINE`].
async fn next(rx: &WakeReceiver, what: &str) -> Timestamp {
    tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("no wake-up for {what} within {DEADLINE:?}"))
}

/// A receiver whose subscription is established.
async fn subscribed(b: &RedisBackend) -> WakeReceiver {
    let rx = b.wakeups().expect("the redis backend sends wake-ups");
    tokio::time::timeout(DEADLINE, b.wakeups_subscribed())
        .await
        .expect("subscribed");
    rx
}

/// Polls until `name` has `want` connections, failing after [`DEADLINE`].
async fn until_connections(name: &str, want: usize) {
    let start = Instant::now();
    loop {
        let n = common::connections_named(name).await;
        if n == want {
            return;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "{name}: {n} connections, expected {want}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The claimable instant `get` implies for `name`.
async fn claimable_at(b: &RedisBackend, name: &str) -> Option<Timestamp> {
    b.get(&id(name))
        .await
        .expect("get")
        .expect("record")
        .claimable_at(&policy())
}

/// The latest instant an admission may be scheduled at: later than anything the operations
/// under test publish.
const PROBE_MS: i64 = lease_core::limits::MAX_SCHEDULED_MS;

/// Admits `name` scheduled at [`PROBE_MS`] and checks that exactly that instant arrives: no
/// earlier signal was pending (a receiver keeps the earliest since it last looked).
async fn probe(b: &RedisBackend, rx: &WakeReceiver, name: &str) {
    b.admit(&Admission::new(id(name)).not_before(at(PROBE_MS)))
        .await
        .expect("admit probe");
    assert_eq!(
        next(rx, name).await,
        at(PROBE_MS),
        "{name}: something before it published"
    );
}

async fn claim_one(b: &RedisBackend, clock: &ManualClock) -> ExecutionLease {
    let mut leases = b
        .claim_due(ClaimRequest {
            now: clock.now(),
            limit: 1,
            duration: LEASE,
        })
        .await
        .expect("claim");
    assert_eq!(leases.len(), 1, "one lease");
    leases.remove(0)
}

/// Every publishing operation signals the record's claimable instant after its write; the
/// operations that make nothing claimable (renew, write_step, a completed acknowledgement,
/// an admit of an existing id) publish nothing: a receiver keeps the earliest instant
/// signalled, so a probe admission scheduled far later than anything they could publish
/// arrives alone.
async fn payloads_are_the_claimable_instant(classic: bool) {
    let clock = ManualClock::starting_now();
    let b = connect(&clock, classic).await;
    let _cleanup = common::Cleanup::of(&b);
    let peer = b.peer().await.expect("peer");
    let rx = subscribed(&b).await;
    let now = clock.now().as_millis();

    // admit, scheduled: its due time; from another connection.
    peer.admit(&Admission::new(id("a")).not_before(at(now + 5_000)))
        .await
        .expect("admit");
    assert_eq!(next(&rx, "admit").await, at(now + 5_000));
    // A second admit of the same id creates nothing and publishes nothing.
    peer.admit(&Admission::new(id("a"))).await.expect("admit");
    probe(&peer, &rx, "probe-1").await;
    peer.admit(&Admission::new(id("b"))).await.expect("admit");
    assert_eq!(next(&rx, "admit b").await, at(now));

    // claim: lease expiry plus delay(1).
    let lease = claim_one(&peer, &clock).await;
    assert_eq!(lease.execution_id.as_str(), "b");
    let expected = now + LEASE.as_millis() as i64 + 100;
    assert_eq!(next(&rx, "claim").await, at(expected));
    assert_eq!(claimable_at(&b, "b").await, Some(at(expected)));

    // renew and write_step publish nothing: the next message is release's.
    clock.advance(Duration::from_millis(10));
    let lease = peer
        .renew(&lease, LEASE)
        .await
        .expect("renew")
        .accepted()
        .expect("held");
    let write = StepWrite {
        step_key: StepKey::new("s").expect("key"),
        step_attempt: 1,
        done: true,
        response: Json::null(),
    };
    assert!(
        !peer
            .write_step(&lease, &write)
            .await
            .expect("write")
            .is_lost()
    );
    probe(&peer, &rx, "probe-2").await;
    assert!(!peer.release(&lease).await.expect("release").is_lost());
    assert_eq!(next(&rx, "release").await, at(now + 10 + 100));
    assert_eq!(claimable_at(&b, "b").await, Some(at(now + 110)));

    // acknowledge suspended with a wake requested during the delivery: that wake.
    clock.advance(Duration::from_millis(200));
    let lease = claim_one(&peer, &clock).await;
    assert!(next(&rx, "claim").await > clock.now());
    peer.request_wake(&id("b"), at(now + 9_000))
        .await
        .expect("request_wake");
    let acked = peer
        .acknowledge(&lease, &WorkflowRunOutcome::Suspended)
        .await
        .expect("ack");
    assert!(!acked.is_lost());
    assert_eq!(
        next(&rx, "acknowledge").await,
        at(now + 9_000),
        "a wake requested under a live lease published"
    );

    // request_wake on a suspended execution: its new claimable instant.
    peer.request_wake(&id("b"), at(now + 7_000))
        .await
        .expect("request_wake");
    assert_eq!(next(&rx, "request_wake").await, at(now + 7_000));

    // A completed acknowledgement publishes nothing: the next message is admit c's.
    clock.set(at(now + 7_000));
    let lease = claim_one(&peer, &clock).await;
    assert_eq!(lease.execution_id.as_str(), "a");
    next(&rx, "claim").await;
    let acked = peer
        .acknowledge(&lease, &WorkflowRunOutcome::Completed(Json::null()))
        .await
        .expect("ack");
    assert!(!acked.is_lost());
    probe(&peer, &rx, "probe-3").await;
    assert_eq!(rx.try_recv(), None);
    b.delete_namespace().await.expect("cleanup");
}

in_both_modes!(payloads_are_the_claimable_instant: sharded_payloads_are_the_claimable_instant, classic_payloads_are_the_claimable_instant);

#[tokio::test]
async fn the_server_version_decides_sharded_pubsub() {
    let clock = ManualClock::starting_now();
    let b = connect(&clock, false).await;
    let _cleanup = common::Cleanup::of(&b);
    let mut admin = common::admin().await;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut admin)
        .await
        .expect("info");
    let major: u32 = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .and_then(|v| v.split('.').next()?.parse().ok())
        .expect("redis_version");
    assert_eq!(b.sharded_pubsub(), major >= 7);
    let classic = connect(&clock, true).await;
    let _classic_cleanup = common::Cleanup::of(&classic);
    assert!(!classic.sharded_pubsub());
}

/// The subscriber connection named `name` holds one subscription of the expected kind
/// (`CLIENT LIST`: `ssub=1` for sharded, `sub=1` for classic).
async fn assert_subscribed_as(name: &str, classic: bool) {
    let mut admin = common::admin().await;
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut admin)
        .await
        .expect("client list");
    let line = list
        .lines()
        .find(|l| l.split(' ').any(|f| f.strip_prefix("name=") == Some(name)))
        .expect("the subscriber connection");
    let field = |f: &str| {
        line.split(' ')
            .find_map(|x| x.strip_prefix(f))
            .map(str::to_owned)
    };
    let (sub, ssub) = (field("sub="), field("ssub="));
    if classic {
        assert_eq!(sub.as_deref(), Some("1"), "{line}");
    } else {
        assert_eq!(ssub.as_deref(), Some("1"), "{line}");
        assert_eq!(sub.as_deref(), Some("0"), "{line}");
    }
}

/// A killed subscriber reconnects (signalling "now"), and later messages arrive.
async fn killed_subscriber_reconnects(classic: bool) {
    let clock = ManualClock::starting_now();
    let b = connect(&clock, classic).await;
    let _cleanup = common::Cleanup::of(&b);
    let rx = subscribed(&b).await;
    let name = b.listener_name();
    for round in 0..3 {
        assert!(
            common::kill_connections_named(&name)
                .await
                .expect("client kill"),
            "round {round}: no subscriber connection to kill"
        );
        assert_eq!(
            next(&rx, "the resubscribe").await,
            Timestamp::MIN,
            "round {round}: a reconnect signals now"
        );
        until_connections(&name, 1).await;
        assert_subscribed_as(&name, classic).await;
        let due = at(clock.now().as_millis() + 1_000 + round);
        b.peer()
            .await
            .expect("peer")
            .admit(&Admission::new(id(&format!("after-kill-{round}"))).not_before(due))
            .await
            .expect("admit");
        assert_eq!(next(&rx, "an admission after the kill").await, due);
    }
    b.delete_namespace().await.expect("cleanup");
}

in_both_modes!(killed_subscriber_reconnects: sharded_killed_subscriber_reconnects, classic_killed_subscriber_reconnects);

/// Clones share one subscriber connection, a peer has its own, and dropping every handle
/// of a family closes its connection.
#[tokio::test]
async fn one_subscriber_per_handle_family() {
    let clock = ManualClock::starting_now();
    let b = connect(&clock, false).await;
    let _cleanup = common::Cleanup::of(&b);
    let name = b.listener_name();
    assert_eq!(common::connections_named(&name).await, 0, "started lazily");
    let clone = b.clone();
    let rx1 = subscribed(&b).await;
    // The family is subscribed already: this receiver hears only later messages.
    let rx2 = clone.wakeups().expect("wake-ups");
    until_connections(&name, 1).await;
    let peer = b.peer().await.expect("peer");
    let rx3 = subscribed(&peer).await;
    until_connections(&name, 2).await;
    // Every receiver of both families hears an admission.
    b.admit(&Admission::new(id("x"))).await.expect("admit");
    for rx in [&rx1, &rx2, &rx3] {
        assert_eq!(next(rx, "admit").await, clock.now());
    }
    drop(peer);
    until_connections(&name, 1).await;
    // A peer whose listener never started, to clean up with.
    let keep = b.peer().await.expect("peer");
    drop(b);
    drop(clone);
    until_connections(&name, 0).await;
    keep.delete_namespace().await.expect("cleanup");
}

/// `admit_batch` publishes once, the earliest due time of the records it created.
#[tokio::test]
async fn admit_batch_publishes_the_earliest_created_due_time() {
    let clock = ManualClock::starting_now();
    let b = connect(&clock, false).await;
    let _cleanup = common::Cleanup::of(&b);
    let rx = subscribed(&b).await;
    let now = clock.now().as_millis();
    b.admit(&Admission::new(id("old")).not_before(at(now + 10)))
        .await
        .expect("admit");
    assert_eq!(next(&rx, "admit").await, at(now + 10));
    let batch = [
        Admission::new(id("old")).not_before(at(now + 1)),
        Admission::new(id("n1")).not_before(at(now + 300)),
        Admission::new(id("n2")).not_before(at(now + 200)),
    ];
    b.admit_batch(&batch).await.expect("admit_batch");
    assert_eq!(next(&rx, "admit_batch").await, at(now + 200));
    // A batch of existing ids publishes nothing: a probe scheduled last arrives alone.
    b.admit_batch(&batch).await.expect("admit_batch");
    let probe = at(lease_core::limits::MAX_SCHEDULED_MS);
    b.admit(&Admission::new(id("probe")).not_before(probe))
        .await
        .expect("admit");
    assert_eq!(next(&rx, "the probe").await, probe);
    b.delete_namespace().await.expect("cleanup");
}
