//! Shared test support: the Redis URL, random namespaces, snapshots of a namespace's keys.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use lease_core::{ManualClock, RedeliveryPolicy};
use lease_redis::{RedisBackend, RedisConfig};
use redis::Value;

/// `LEASE_REDIS_CLUSTER_URL` (a `redis+cluster://` URL: the tests then run on a Redis
/// Cluster), else `LEASE_REDIS_URL`, else the local default. An unreachable
/// server fails the tests.
pub fn redis_url() -> String {
    cluster_url().unwrap_or_else(lease_testserver::redis_url)
}

/// `LEASE_REDIS_CLUSTER_URL`, when set and not blank.
pub fn cluster_url() -> Option<String> {
    lease_testserver::redis_cluster_url()
}

/// The partition count of the tests' namespaces on a cluster unless
/// `LEASE_REDIS_PARTITIONS` says otherwise: one per primary of the throwaway cluster
/// (so the partitions spread over the cluster), each on its own primary
/// ([`random_namespace`]).
pub const CLUSTER_PARTITIONS: u16 = 3;

/// The partition count of the tests' namespaces: `LEASE_REDIS_PARTITIONS`, else
/// [`CLUSTER_PARTITIONS`] on a cluster and 1 (the layout without partitions) on one server.
/// tests/cluster.rs and tests/partitions.rs choose theirs explicitly.
pub fn partitions() -> u16 {
    std::env::var("LEASE_REDIS_PARTITIONS")
        .ok()
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            p.trim()
                .parse()
                .expect("LEASE_REDIS_PARTITIONS must be a number")
        })
        .unwrap_or(if cluster_url().is_some() {
            CLUSTER_PARTITIONS
        } else {
            1
        })
}

/// The tests' configuration for `namespace`: [`redis_url`] and [`partitions`].
///
/// With `LEASE_REDIS_WAIT_REPLICAS=N` (a manual run, not a test-all row), every call also
/// waits for `N` replicas ([`RedisConfig::wait_for_replicas`], 2 s): the suite then runs
/// through the replication barrier (tests that count a namespace's keys see its `barrier`).
pub fn config(namespace: &str) -> RedisConfig {
    let config = RedisConfig::new(redis_url())
        .namespace(namespace)
        .partitions(partitions());
    match std::env::var("LEASE_REDIS_WAIT_REPLICAS").ok() {
        Some(n) if !n.trim().is_empty() => config.wait_for_replicas(
            n.trim()
                .parse()
                .expect("LEASE_REDIS_WAIT_REPLICAS must be a number"),
            std::time::Duration::from_secs(2),
        ),
        _ => config,
    }
}

/// A namespace nobody else uses; on a cluster with [`partitions`] > 1, one whose
/// partitions are spread over the primaries ([`spread_namespace`]).
pub fn random_namespace() -> String {
    match partitions() {
        n if n > 1 && cluster_url().is_some() => spread_namespace(n),
        _ => fresh_name(),
    }
}

fn fresh_name() -> String {
    format!("test-{}", uuid::Uuid::new_v4().simple())
}

/// On the cluster of `LEASE_REDIS_CLUSTER_URL`: a fresh namespace whose `count`
/// partitions lie on as many primaries as can be (no two on one primary while `count` is
/// at most the number of primaries, else every primary holds one), as the server places
/// them (`CLUSTER KEYSLOT` of each partition prefix, owners from `CLUSTER SLOTS`). Names
/// are tried until one fits; panics after 1000.
pub fn spread_namespace(count: u16) -> String {
    let mut conn = redis::Client::open(first_node_url())
        .expect("node url")
        .get_connection()
        .expect("cluster node connection");
    let slots: Vec<(u16, u16, String)> = slot_owners(&mut conn);
    let primaries: std::collections::BTreeSet<&str> =
        slots.iter().map(|(_, _, p)| p.as_str()).collect();
    let want = primaries.len().min(usize::from(count));
    for _ in 0..1000 {
        let ns = fresh_name();
        let mut owners = std::collections::BTreeSet::new();
        for i in 0..count {
            let slot: u16 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(format!("lease:{{{ns}#{i}}}:"))
                .query(&mut conn)
                .expect("keyslot");
            let owner = slots
                .iter()
                .find(|(a, b, _)| (*a..=*b).contains(&slot))
                .map(|(_, _, p)| p.as_str())
                .expect("every slot has an owner");
            owners.insert(owner);
        }
        if owners.len() == want {
            return ns;
        }
    }
    panic!("no namespace of 1000 spreads {count} partitions over the primaries {primaries:?}");
}

/// The slot ranges of the cluster and each one's primary (`host:port`), from `CLUSTER SLOTS`.
fn slot_owners(conn: &mut redis::Connection) -> Vec<(u16, u16, String)> {
    let ranges: Vec<Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(conn)
        .expect("cluster slots");
    ranges
        .into_iter()
        .map(|range| {
            let Value::Array(items) = range else {
                panic!("CLUSTER SLOTS entry {range:?}");
            };
            let number = |v: &Value| match v {
                Value::Int(n) => u16::try_from(*n).expect("slot"),
                other => panic!("slot {other:?}"),
            };
            let Some(Value::Array(primary)) = items.get(2) else {
                panic!("CLUSTER SLOTS entry without a primary: {items:?}");
            };
            let addr = primary
                .iter()
                .take(2)
                .map(|v| match v {
                    Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                    Value::Int(n) => n.to_string(),
                    other => format!("{other:?}"),
                })
                .collect::<Vec<_>>()
                .join(":");
            (number(&items[0]), number(&items[1]), addr)
        })
        .collect()
}

/// Removes a namespace's keys when dropped, so a test that panics still cleans up
/// (SCAN + UNLINK on a blocking connection of its own).
pub struct Cleanup(pub String);

impl Cleanup {
    /// A guard for `backend`'s namespace.
    pub fn of(backend: &RedisBackend) -> Self {
        Cleanup(backend.key_prefix().to_owned())
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if cluster_url().is_some() {
            // The namespace's keys lie on several nodes: a fresh handle removes them.
            let namespace = self.0["lease:{".len()..self.0.len() - "}:".len()].to_owned();
            let _ = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(async {
                    if let Ok(b) = RedisBackend::connect(config(&namespace)).await {
                        let _ = b.delete_namespace().await;
                    }
                });
            })
            .join();
            return;
        }
        let Ok(client) = redis::Client::open(redis_url()) else {
            return;
        };
        let Ok(mut conn) = client.get_connection() else {
            return;
        };
        // The home prefix's keys, then the partitions' (`lease:{<ns>#<i>}:`).
        let partitions = format!("{}#*", &self.0[..self.0.len() - "}:".len()]);
        for pattern in [format!("{}*", self.0), partitions] {
            unlink_matching(&mut conn, &pattern);
        }
    }
}

/// SCAN + UNLINK of every key matching `pattern`, errors ignored (a cleanup).
fn unlink_matching(conn: &mut redis::Connection, pattern: &str) {
    let mut cursor: u64 = 0;
    loop {
        let Ok((next, keys)): redis::RedisResult<(u64, Vec<String>)> = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query(conn)
        else {
            return;
        };
        if !keys.is_empty() {
            let _: redis::RedisResult<i64> = redis::cmd("UNLINK").arg(&keys).query(conn);
        }
        if next == 0 {
            return;
        }
        cursor = next;
    }
}

/// A backend on a fresh namespace over `clock`.
pub async fn fresh(clock: &ManualClock, policy: RedeliveryPolicy) -> RedisBackend {
    fresh_with(clock, policy, partitions()).await
}

/// A backend on a fresh namespace of `partitions` partitions over `clock`. The tests of the
/// one-partition key layout and scripts (they write keys under `key_prefix()` by hand, or
/// test what one script does) pass 1 whatever `LEASE_REDIS_PARTITIONS` says.
pub async fn fresh_with(
    clock: &ManualClock,
    policy: RedeliveryPolicy,
    partitions: u16,
) -> RedisBackend {
    RedisBackend::connect(
        config(&random_namespace())
            .partitions(partitions)
            .clock(Arc::new(clock.clone()))
            .policy(policy),
    )
    .await
    .expect("connect to redis (set LEASE_REDIS_URL)")
}

/// A multi-threaded runtime with `workers` threads, for tests that race connections.
pub fn runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime")
}

/// `N` handles on one fresh namespace over `clock`, each on its own connection (the first
/// connects, the others are its peers), as `N` separate processes would be.
pub async fn connections<const N: usize>(
    clock: &ManualClock,
    policy: RedeliveryPolicy,
) -> [RedisBackend; N] {
    connections_with(clock, policy, partitions()).await
}

/// [`connections`] on a namespace of `partitions` partitions (see [`fresh_with`]).
pub async fn connections_with<const N: usize>(
    clock: &ManualClock,
    policy: RedeliveryPolicy,
    partitions: u16,
) -> [RedisBackend; N] {
    let first = fresh_with(clock, policy, partitions).await;
    let mut all = Vec::with_capacity(N);
    for _ in 1..N {
        all.push(first.peer().await.expect("peer connection"));
    }
    all.insert(0, first);
    all.try_into().unwrap_or_else(|_| unreachable!("N handles"))
}

/// Reports a race test's `n` rounds with `summary` (its tally) and fails listing every
/// violation found.
pub fn assert_no_violations(n: usize, summary: &str, violations: &[String]) {
    eprintln!("{n} rounds: {summary}, violations {}", violations.len());
    assert!(
        violations.is_empty(),
        "fencing violated:\n{}",
        violations.join("\n")
    );
}

/// A separate admin connection (not one of the backend's).
pub async fn admin() -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis_url())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("admin connection")
}

/// A separate admin connection to the server holding `key`: [`admin`] on one server, on a
/// cluster the primary owning its slot (`CLUSTER KEYSLOT`, `CLUSTER SLOTS`).
pub async fn admin_for(key: &str) -> redis::aio::MultiplexedConnection {
    if cluster_url().is_none() {
        return admin().await;
    }
    let mut conn = redis::Client::open(first_node_url())
        .expect("node url")
        .get_connection()
        .expect("cluster node connection");
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut conn)
        .expect("keyslot");
    let owner = slot_owners(&mut conn)
        .into_iter()
        .find(|(a, b, _)| (*a..=*b).contains(&slot))
        .map(|(_, _, p)| p)
        .expect("every slot has an owner");
    redis::Client::open(format!("redis://{owner}"))
        .expect("owner url")
        .get_multiplexed_async_connection()
        .await
        .expect("owner connection")
}

/// Every key of the backend's namespace with a dump of its contents, to prove that an
/// operation changed nothing.
pub async fn snapshot(backend: &RedisBackend) -> BTreeMap<String, String> {
    let mut conn = admin().await;
    let pattern = format!("{}*", backend.key_prefix());
    let mut keys: Vec<String> = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
            .expect("scan");
        keys.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    let mut out = BTreeMap::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .expect("type");
        let dump: Value = match kind.as_str() {
            "hash" => redis::cmd("HGETALL").arg(&key).query_async(&mut conn).await,
            "zset" => {
                redis::cmd("ZRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query_async(&mut conn)
                    .await
            }
            "set" => {
                redis::cmd("SMEMBERS")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
            }
            "list" => {
                redis::cmd("LRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .query_async(&mut conn)
                    .await
            }
            _ => redis::cmd("GET").arg(&key).query_async(&mut conn).await,
        }
        .expect("read key");
        let dump = match dump {
            // HGETALL order is not stable across rehashing: sort the pairs.
            Value::Array(items) if kind == "hash" => {
                let mut pairs: Vec<String> = items.chunks(2).map(|c| format!("{:?}", c)).collect();
                pairs.sort();
                pairs.join(",")
            }
            // Nor is SMEMBERS order.
            Value::Array(items) if kind == "set" => {
                let mut members: Vec<String> = items.iter().map(|m| format!("{m:?}")).collect();
                members.sort();
                members.join(",")
            }
            other => format!("{other:?}"),
        };
        out.insert(key, format!("{kind}:{dump}"));
    }
    out
}

/// Number of keys in the backend's namespace.
pub async fn key_count(backend: &RedisBackend) -> usize {
    snapshot(backend).await.len()
}

/// `redis://` URL of the first node of `LEASE_REDIS_CLUSTER_URL`.
pub fn first_node_url() -> String {
    let url = cluster_url().expect("LEASE_REDIS_CLUSTER_URL");
    url.trim_start_matches("redis+cluster://")
        .split([',', '/', '?'])
        .next()
        .map(|node| format!("redis://{node}"))
        .expect("a cluster node")
}

/// `CLUSTER NODES` as the first node of `LEASE_REDIS_CLUSTER_URL` reports it.
pub async fn cluster_nodes() -> String {
    let mut conn = redis::Client::open(first_node_url())
        .expect("node url")
        .get_multiplexed_async_connection()
        .await
        .expect("cluster node connection");
    redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut conn)
        .await
        .expect("cluster nodes")
}

/// The URL of every server: [`redis_url`], or on a cluster every node's.
pub async fn node_urls() -> Vec<String> {
    if cluster_url().is_none() {
        return vec![redis_url()];
    }
    cluster_nodes()
        .await
        .lines()
        .filter_map(|line| line.split(' ').nth(1))
        .filter_map(|addr| addr.split('@').next())
        .map(|addr| format!("redis://{addr}"))
        .collect()
}

/// Kills, with `CLIENT KILL ID`, every connection named `name` (`CLIENT LIST`) on every
/// server, as an operator or a network fault would; `true` when it killed at least one.
pub async fn kill_connections_named(name: &str) -> redis::RedisResult<bool> {
    let mut killed = false;
    for url in node_urls().await {
        let mut conn = redis::Client::open(url)?
            .get_multiplexed_async_connection()
            .await?;
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut conn)
            .await?;
        for id in connection_ids_named(&list, name) {
            let n: i64 = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(id)
                .query_async(&mut conn)
                .await?;
            killed |= n > 0;
        }
    }
    Ok(killed)
}

/// The ids of the `CLIENT LIST` entries whose name is exactly `name`.
pub fn connection_ids_named(list: &str, name: &str) -> Vec<String> {
    list.lines()
        .filter(|line| {
            line.split(' ')
                .any(|f| f.strip_prefix("name=") == Some(name))
        })
        .filter_map(|line| {
            line.split(' ')
                .find_map(|f| f.strip_prefix("id="))
                .map(str::to_owned)
        })
        .collect()
}

/// The number of connections named `name`.
pub async fn connections_named(name: &str) -> usize {
    let mut conn = admin().await;
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut conn)
        .await
        .expect("client list");
    connection_ids_named(&list, name).len()
}

/// What a fresh namespace of `backend` issues its first token after: 0 on one
/// server; on a cluster the config epoch of the primary holding the namespace's counter
/// times 2^36 (`cluster_my_epoch`, read there by a script on the counter's slot, as the
/// claim reads it).
pub async fn token_base(backend: &RedisBackend) -> u64 {
    if !backend.is_cluster() {
        return 0;
    }
    let script = "return string.match(redis.call('CLUSTER', 'INFO'), 'cluster_my_epoch:(%d+)')";
    let epoch: String = redis::cmd("EVAL")
        .arg(script)
        .arg(1)
        .arg(format!("{}token", backend.key_prefix()))
        .query_async(&mut backend.connection())
        .await
        .expect("cluster_my_epoch");
    epoch.parse::<u64>().expect("an epoch") << 36
}

/// Claims up to `limit` due executions at `clock`'s instant with leases of `duration`;
/// panics on an error.
pub async fn claim(
    b: &RedisBackend,
    clock: &ManualClock,
    limit: usize,
    duration: std::time::Duration,
) -> Vec<lease_core::ExecutionLease> {
    use lease_core::{Clock as _, ExecutionClientExt as _};
    let request = lease_core::ClaimRequest {
        now: clock.now(),
        limit,
        duration,
    };
    b.claim_due(request).await.expect("claim")
}

/// The primary owning `slot` and one of its replicas in `CLUSTER NODES` output `nodes`.
pub fn find_primary_and_replica(nodes: &str, slot: u16) -> Option<(String, String)> {
    let lines: Vec<Vec<&str>> = nodes.lines().map(|l| l.split(' ').collect()).collect();
    let addr = |f: &[&str]| f[1].split('@').next().map(str::to_owned);
    let primary = lines
        .iter()
        .filter(|f| f.len() > 8 && f[2].contains("master"))
        .find(|f| f[8..].iter().any(|r| owns(r, slot)))?;
    let replica = lines
        .iter()
        .find(|f| f.len() > 3 && f[2].contains("slave") && f[3] == primary[0])?;
    Some((addr(primary)?, addr(replica)?))
}

/// True when `CLUSTER NODES` slot field `range` (`a-b` or `a`) holds `slot`.
pub fn owns(range: &str, slot: u16) -> bool {
    let (a, b) = range.split_once('-').unwrap_or((range, range));
    match (a.parse::<u16>(), b.parse::<u16>()) {
        (Ok(a), Ok(b)) => (a..=b).contains(&slot),
        _ => false,
    }
}
