//! The replication barrier of `RedisConfig::wait_for_replicas`: an answer is a
//! success only once a replica has every write it could rest on, the caller's own and
//! anyone else's. The replica of the namespace's shard is held back (`CLIENT PAUSE ALL` on
//! it: it stays connected and counted by its primary, but applies and acknowledges nothing),
//! one handle's admission then reaches only the primary (`OutcomeUnknown`), and another
//! handle - a second process - reads it or admits the same id again (a script that writes
//! nothing). Before the barrier the read answered success (it sent no `WAIT`): the test
//! fails there. The second admission was refused before the barrier too in this setup (its
//! `WAIT`, for its connection's last write, waited for a write the paused replica had not
//! acknowledged); with the barrier it is refused whatever its connection wrote before.
//!
//! Needs `LEASE_REDIS_CLUSTER_URL` (`cargo xtask test-all --backend redis-cluster` starts a
//! throwaway cluster, one replica per primary). It pauses a replica, so it lives in a test
//! binary of its own (test binaries run one after another).

mod common;

use std::time::{Duration, Instant};

use lease_core::{Admission, ExecutionClient, ExecutionId, LeaseError};
use lease_redis::RedisBackend;

/// How long a replica may take to catch up once resumed.
const CATCH_UP: Duration = Duration::from_secs(20);

/// How long the replica is held back: enough for the three calls under it (each waits
/// [`WAIT_TIMEOUT`] for the replica). A paused Redis 7 node queues even `CLIENT UNPAUSE`
/// until the pause ends, so the pause cannot be cut short and the test lasts about this long.
const HOLD: Duration = Duration::from_secs(8);

/// How long each call waits for the replica.
const WAIT_TIMEOUT: Duration = Duration::from_millis(300);

/// Holds the replica at `addr` back for [`HOLD`] (`CLIENT PAUSE <ms> ALL`: it stays
/// connected and counted by its primary, but applies and acknowledges nothing); returns
/// when the pause ends.
fn pause(addr: &str) -> Instant {
    let mut conn = node(addr);
    let until = Instant::now() + HOLD;
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(u64::try_from(HOLD.as_millis()).expect("ms"))
        .arg("ALL")
        .query(&mut conn)
        .expect("client pause");
    until
}

fn node(addr: &str) -> redis::Connection {
    redis::Client::open(format!("redis://{addr}"))
        .expect("node url")
        .get_connection()
        .expect("node connection")
}

/// The primary owning `prefix`'s slot and its replica, once the first node's view has both.
async fn shard_of(prefix: &str) -> (String, String) {
    let slot = lease_redis::key_slot(prefix);
    let start = Instant::now();
    loop {
        if let Some(pair) = common::find_primary_and_replica(&common::cluster_nodes().await, slot) {
            return pair;
        }
        assert!(start.elapsed() < CATCH_UP, "no replica for slot {slot}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Redis Cluster (LEASE_REDIS_CLUSTER_URL): run by test-all's redis-cluster row"]
async fn an_answer_resting_on_an_unreplicated_write_is_not_a_success() {
    assert!(
        common::cluster_url().is_some(),
        "set LEASE_REDIS_CLUSTER_URL (cargo xtask services redis-cluster)"
    );
    let config = common::config(&common::random_namespace())
        .partitions(1)
        .wait_for_replicas(1, WAIT_TIMEOUT);
    let writer = RedisBackend::connect(config).await.expect("connect");
    let reader = writer.peer().await.expect("a second process's handle");
    writer
        .admit(&Admission::new(id("a")))
        .await
        .expect("confirmed while the replica keeps up");
    reader.get(&id("a")).await.expect("a confirmed read");
    let (_, replica) = shard_of(writer.key_prefix()).await;

    let paused_until = pause(&replica);
    let unconfirmed = writer.admit(&Admission::new(id("b"))).await;
    assert!(
        matches!(unconfirmed, Err(LeaseError::OutcomeUnknown { .. })),
        "an admission no replica has: {unconfirmed:?}"
    );
    let read = reader.get(&id("b")).await;
    assert!(
        matches!(read, Err(LeaseError::Unavailable { .. })),
        "a read of a record no replica has must not succeed: {read:?}"
    );
    let again = reader.admit(&Admission::new(id("b"))).await;
    assert!(
        matches!(again, Err(LeaseError::OutcomeUnknown { .. })),
        "an admission answered from a record no replica has must not succeed: {again:?}"
    );
    assert!(
        Instant::now() < paused_until,
        "the calls outlasted the replica's pause ({HOLD:?}): the test proved nothing"
    );

    // Once the pause ends the replica catches up and the same calls succeed.
    let start = Instant::now();
    loop {
        match reader.admit(&Admission::new(id("b"))).await {
            Ok(record) => {
                assert_eq!(record.id, id("b"));
                break;
            }
            Err(e) => assert!(
                start.elapsed() < HOLD + CATCH_UP,
                "not confirmed after the pause: {e}"
            ),
        }
    }
    assert!(reader.get(&id("b")).await.expect("read").is_some());
    writer.delete_namespace().await.expect("cleanup");
}
