//! Shared test support: the Redis URL, random namespaces, snapshots of a namespace's keys.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use lease_core::{ManualClock, RedeliveryPolicy};
use lease_redis::{RedisBackend, RedisConfig};
use redis::Value;

/// `LEASE_REDIS_CLUSTER_URL` (a `redis+cluster://` URL: the tests then run on a Redis
/// Cluster, issue 14), else `LEASE_REDIS_URL`, else the local default. An unreachable
/// server fails the tests.
pub fn redis_url() -> String {
    cluster_url().unwrap_or_else(lease_testserver::redis_url)
}

/// `LEASE_REDIS_CLUSTER_URL`, when set and not blank.
pub fn cluster_url() -> Option<String> {
    lease_testserver::redis_cluster_url()
}

/// The partition count of the tests' namespaces: `LEASE_REDIS_PARTITIONS`, else 1 (the
/// layout without partitions). Effects and store waiters (issue 16) do not support more
/// yet, and the conformance suite now runs them, so the default is 1 also on a cluster;
/// tests/cluster.rs uses 4 explicitly.
pub fn partitions() -> u16 {
    std::env::var("LEASE_REDIS_PARTITIONS")
        .ok()
        .map(|p| p.parse().expect("LEASE_REDIS_PARTITIONS must be a number"))
        .unwrap_or(1)
}

/// The tests' configuration for `namespace`: [`redis_url`] and [`partitions`].
pub fn config(namespace: &str) -> RedisConfig {
    RedisConfig::new(redis_url())
        .namespace(namespace)
        .partitions(partitions())
}

/// A namespace nobody else uses.
pub fn random_namespace() -> String {
    format!("test-{}", uuid::Uuid::new_v4().simple())
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
        let pattern = format!("{}*", self.0);
        let Ok(client) = redis::Client::open(redis_url()) else {
            return;
        };
        let Ok(mut conn) = client.get_connection() else {
            return;
        };
        let mut cursor: u64 = 0;
        loop {
            let Ok((next, keys)): redis::RedisResult<(u64, Vec<String>)> = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query(&mut conn)
            else {
                return;
            };
            if !keys.is_empty() {
                let _: redis::RedisResult<i64> = redis::cmd("UNLINK").arg(&keys).query(&mut conn);
            }
            if next == 0 {
                return;
            }
            cursor = next;
        }
    }
}

/// A backend on a fresh namespace over `clock`.
pub async fn fresh(clock: &ManualClock, policy: RedeliveryPolicy) -> RedisBackend {
    RedisBackend::connect(
        config(&random_namespace())
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
    let first = fresh(clock, policy).await;
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

/// `CLUSTER NODES` as the first node of `LEASE_REDIS_CLUSTER_URL` reports it.
pub async fn cluster_nodes() -> String {
    let url = cluster_url().expect("LEASE_REDIS_CLUSTER_URL");
    let first = url
        .trim_start_matches("redis+cluster://")
        .split([',', '/', '?'])
        .next()
        .map(|node| format!("redis://{node}"))
        .expect("a cluster node");
    let mut conn = redis::Client::open(first)
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

/// What a fresh namespace of `backend` issues its first token after (issue 22): 0 on one
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
