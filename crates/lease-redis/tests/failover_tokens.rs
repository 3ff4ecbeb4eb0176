//! Tokens a Redis Cluster failover cannot issue twice: the shard holding a
//! namespace's token counter fails over (`CLUSTER FAILOVER` on its replica), and the new
//! primary has lost the counter's latest write (the counter is set back, on the new primary,
//! to its value before the last claim: what a replica that had not received that claim's
//! write holds after promotion). The next claim's token is still above every token issued
//! before, because tokens carry the node's config epoch, which the promotion raised. Without
//! the epoch the next claim issues the lost token again.
//!
//! Needs `LEASE_REDIS_CLUSTER_URL` (`cargo xtask test-all --backend redis-cluster` starts a
//! throwaway cluster); without it, the test fails saying so. It fails over one shard per
//! layout, so it lives in a test binary of its own (test binaries run one after another).

mod common;

use std::time::{Duration, Instant};

use lease_core::{
    Admission, ClaimRequest, Clock, ExecutionClient, ExecutionClientExt, ExecutionId, SystemClock,
};
use lease_redis::RedisBackend;
use redis::aio::MultiplexedConnection;

/// How long a failover may take to show on the replica.
const FAILOVER_DEADLINE: Duration = Duration::from_secs(30);

async fn node(addr: &str) -> MultiplexedConnection {
    redis::Client::open(format!("redis://{addr}"))
        .expect("node url")
        .get_multiplexed_async_connection()
        .await
        .expect("node connection")
}

/// The slot of `key`, asked of any node.
async fn key_slot(key: &str) -> u16 {
    let url = common::node_urls().await.remove(0);
    let mut conn = redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connection");
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query_async(&mut conn)
        .await
        .expect("keyslot")
}

/// The `host:port` of the primary owning `slot` and of one of its replicas, from
/// `CLUSTER NODES` of the URL's first node, once that node's view has both (right after a
/// failover it may not have learnt the old primary's new role yet).
async fn primary_and_replica(slot: u16) -> (String, String) {
    let start = Instant::now();
    loop {
        if let Some(pair) = common::find_primary_and_replica(&common::cluster_nodes().await, slot) {
            return pair;
        }
        assert!(
            start.elapsed() < FAILOVER_DEADLINE,
            "no primary with a replica for slot {slot} within {FAILOVER_DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `cluster_my_epoch` of the node at `addr`.
async fn my_epoch(addr: &str) -> u64 {
    let info: String = redis::cmd("CLUSTER")
        .arg("INFO")
        .query_async(&mut node(addr).await)
        .await
        .expect("cluster info");
    info.lines()
        .find_map(|l| l.strip_prefix("cluster_my_epoch:"))
        .and_then(|e| e.trim().parse().ok())
        .expect("cluster_my_epoch")
}

/// True when the node at `addr` reports `role:<role>` (`INFO replication`).
async fn has_role(addr: &str, role: &str) -> bool {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut node(addr).await)
        .await
        .expect("info replication");
    info.lines().any(|l| l.trim() == format!("role:{role}"))
}

/// True when the replica at `addr` has its link to its primary up (`INFO replication`):
/// a manual failover needs it (a node demoted by an earlier failover resyncs first).
async fn link_up(addr: &str) -> bool {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut node(addr).await)
        .await
        .expect("info replication");
    info.lines().any(|l| l.trim() == "master_link_status:up")
}

/// How long Redis gives a manual failover before it abandons it (`CLUSTER_MF_TIMEOUT`, 5 s)
/// plus a margin: after that, the command is sent again.
const MANUAL_FAILOVER_RETRY: Duration = Duration::from_secs(6);

/// Fails over the primary owning `slot` to its replica (`CLUSTER FAILOVER`, the replica
/// catches up first) and waits until the replica is primary and the old primary a replica.
/// The command is sent once the replica's link is up, and again when Redis abandoned it;
/// all within [`FAILOVER_DEADLINE`]. Returns the new primary's address.
async fn fail_over(slot: u16) -> String {
    let (primary, replica) = primary_and_replica(slot).await;
    let before = my_epoch(&primary).await;
    let start = Instant::now();
    let mut sent: Option<Instant> = None;
    while !(has_role(&replica, "master").await && has_role(&primary, "slave").await) {
        assert!(
            start.elapsed() < FAILOVER_DEADLINE,
            "{replica} not promoted within {FAILOVER_DEADLINE:?}"
        );
        let due = sent.is_none_or(|at| at.elapsed() >= MANUAL_FAILOVER_RETRY);
        if due && has_role(&replica, "slave").await && link_up(&replica).await {
            let _: String = redis::cmd("CLUSTER")
                .arg("FAILOVER")
                .query_async(&mut node(&replica).await)
                .await
                .expect("cluster failover");
            sent = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after = my_epoch(&replica).await;
    eprintln!("slot {slot}: {primary} (config epoch {before}) -> {replica} (epoch {after})");
    assert!(after > before, "the promotion raised the config epoch");
    replica
}

/// Claims one execution now; its token.
async fn claim_one(b: &RedisBackend) -> u64 {
    let leases = b
        .claim_due(ClaimRequest {
            now: SystemClock.now(),
            limit: 1,
            duration: Duration::from_secs(30),
        })
        .await
        .expect("claim");
    assert_eq!(leases.len(), 1, "{leases:?}");
    leases[0].token.get()
}

/// The failover scenario on a namespace of `partitions` partitions (1: the counter lies with
/// the executions; 4: it lies under the home prefix and claims reserve tokens there).
async fn lost_counter_write_after_failover(partitions: u16) {
    common::cluster_url().expect(
        "LEASE_REDIS_CLUSTER_URL is not set: this test needs a Redis Cluster \
         (cargo xtask test-all --backend redis-cluster starts one)",
    );
    let ns = common::random_namespace();
    let b = RedisBackend::connect(common::config(&ns).partitions(partitions))
        .await
        .expect("connect");
    let _cleanup = common::Cleanup::of(&b);
    for name in ["a", "b", "c"] {
        let id = ExecutionId::new(name).expect("id");
        b.admit(&Admission::new(id)).await.expect("admit");
    }
    let counter = format!("{}token", b.key_prefix());
    let slot = key_slot(&counter).await;
    let first = claim_one(&b).await;
    let (primary, _) = primary_and_replica(slot).await;
    let lost: Option<String> = redis::cmd("GET")
        .arg(&counter)
        .query_async(&mut node(&primary).await)
        .await
        .expect("get counter");
    let second = claim_one(&b).await;
    assert!(second > first);
    let promoted = fail_over(slot).await;
    // The promoted replica had not received the second claim's counter write.
    let _: () = redis::cmd("SET")
        .arg(&counter)
        .arg(lost.as_deref().expect("the counter after the first claim"))
        .query_async(&mut node(&promoted).await)
        .await
        .expect("set counter back");
    let third = claim_one(&b).await;
    eprintln!("{partitions} partition(s): tokens {first}, {second}; after the failover {third}");
    assert!(
        third > second && third > first,
        "{partitions} partition(s): token {third} after the failover, tokens {first} and \
         {second} before"
    );
    b.delete_namespace().await.expect("delete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Redis Cluster (LEASE_REDIS_CLUSTER_URL): run by test-all's redis-cluster row"]
async fn a_promoted_replica_that_lost_counter_writes_issues_higher_tokens() {
    lost_counter_write_after_failover(1).await;
    lost_counter_write_after_failover(4).await;
}
