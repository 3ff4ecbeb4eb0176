//! [`Conn`]: the backend's command connection, to one server (a [`ConnectionManager`]) or to a
//! Redis Cluster (redis-rs's async [`ClusterConnection`]), behind one
//! [`ConnectionLike`] so every operation runs unchanged on either.
//!
//! The cluster client routes each command by its first key's slot, follows `MOVED` (and
//! refreshes its slot map) and `ASK` redirections, and waits and retries on `TRYAGAIN`,
//! `CLUSTERDOWN` and `LOADING`. A script's `EVALSHA` answered `NOSCRIPT` by a node that has
//! not seen it (after a slot moved there) is loaded on every primary and sent again by
//! `redis::Script`.

use std::time::Duration;

use lease_core::{LeaseError, Result};
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, Pipeline, RedisFuture, Value};

use crate::config::RedisConfig;
use crate::error::BACKEND;
use crate::url::Endpoint;

/// How to open connections: one server's client, or a cluster's.
#[derive(Clone)]
pub(crate) enum Opener {
    /// One server.
    Single(Box<redis::Client>),
    /// A cluster, reached through the listed nodes.
    Cluster(Box<ClusterClient>),
}

/// A command connection (cheap to clone; clones share it).
#[derive(Clone)]
pub enum Conn {
    /// One server, reconnecting by itself.
    Single(ConnectionManager),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
}

fn unavailable(e: redis::RedisError) -> LeaseError {
    LeaseError::Unavailable {
        backend: BACKEND,
        operation: "connect",
        source: Box::new(e),
    }
}

impl Opener {
    /// The opener for `endpoint` with `config`'s timeouts.
    ///
    /// TLS to a Redis Cluster is not supported: a cluster with
    /// [`RedisConfig::tls_root_certificates`] is `InvalidInput` rather than a plain-text
    /// connection that would drop the TLS the caller asked for.
    pub(crate) fn new(endpoint: &Endpoint, config: &RedisConfig) -> Result<Self> {
        let bad = |e: redis::RedisError| LeaseError::invalid("redis url", e.to_string());
        if !endpoint.cluster {
            let url = endpoint.nodes.first().map(String::as_str).unwrap_or("");
            return crate::tls::client(config, url).map(|c| Opener::Single(Box::new(c)));
        }
        if config.tls_root_certificates.is_some() {
            return Err(LeaseError::invalid(
                "redis url",
                "TLS to a Redis Cluster is not supported (redis+cluster:// connects in plain \
                 text): drop the CA (sslrootcert / tls_root_certificates) or use one rediss:// \
                 server",
            ));
        }
        let mut builder = ClusterClient::builder(endpoint.nodes.iter().map(String::as_str))
            .connection_timeout(config.connect_timeout)
            // Redirects and TRYAGAIN during a slot migration are retried quickly: 10 ms,
            // doubling, at most 500 ms apart, 12 times (about 3 s in all).
            .retries(12)
            .min_retry_wait(10)
            .max_retry_wait(500)
            .retry_wait_formula(10, 2);
        if let Some(timeout) = config.response_timeout {
            builder = builder.response_timeout(timeout);
        }
        builder
            .build()
            .map(|c| Opener::Cluster(Box::new(c)))
            .map_err(bad)
    }

    /// Opens a command connection.
    pub(crate) async fn open(&self, config: &RedisConfig) -> Result<Conn> {
        match self {
            Opener::Single(client) => {
                let manager = ConnectionManagerConfig::new()
                    .set_number_of_retries(2)
                    .set_connection_timeout(Some(config.connect_timeout))
                    .set_response_timeout(config.response_timeout);
                ConnectionManager::new_with_config((**client).clone(), manager)
                    .await
                    .map(Conn::Single)
                    .map_err(unavailable)
            }
            Opener::Cluster(client) => client
                .get_async_connection()
                .await
                .map(Conn::Cluster)
                .map_err(unavailable),
        }
    }

    /// The connection settings (credentials, database) of the first node, for the wake-up
    /// subscribers.
    pub(crate) fn node_info(&self, endpoint: &Endpoint) -> Result<redis::ConnectionInfo> {
        use redis::IntoConnectionInfo;
        let url = endpoint.nodes.first().map(String::as_str).unwrap_or("");
        match self {
            Opener::Single(client) => Ok(client.get_connection_info().clone()),
            Opener::Cluster(_) => url
                .into_connection_info()
                .map_err(|e| LeaseError::invalid("redis url", e.to_string())),
        }
    }
}

impl Conn {
    /// Runs `cmd` (a keyless command such as `SCAN`) on the primary that owns `key`'s slot;
    /// on one server, there.
    pub(crate) async fn on_slot_of(&mut self, key: &str, cmd: &Cmd) -> redis::RedisResult<Value> {
        match self {
            Conn::Single(conn) => cmd.query_async(conn).await,
            Conn::Cluster(conn) => {
                let route = Route::with_key(key.as_bytes(), SlotAddr::Master);
                conn.route_command(
                    cmd.clone(),
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                )
                .await
            }
        }
    }

    /// Whether this is a cluster connection.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Conn::Cluster(_))
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// The `host:port` of the primary owning `slot`, from a `CLUSTER SLOTS` reply.
pub(crate) fn slot_owner(slots: &Value, slot: u16) -> Option<(String, u16)> {
    let Value::Array(ranges) = slots else {
        return None;
    };
    ranges.iter().find_map(|range| {
        let Value::Array(items) = range else {
            return None;
        };
        let int = |v: Option<&Value>| match v {
            Some(Value::Int(n)) => Some(*n),
            _ => None,
        };
        let (start, end) = (int(items.first())?, int(items.get(1))?);
        if !(start..=end).contains(&i64::from(slot)) {
            return None;
        }
        let Some(Value::Array(node)) = items.get(2) else {
            return None;
        };
        let host = match node.first()? {
            Value::BulkString(b) => String::from_utf8(b.clone()).ok()?,
            Value::SimpleString(s) => s.clone(),
            _ => return None,
        };
        let port = u16::try_from(int(node.get(1))?).ok()?;
        Some((host, port))
    })
}

/// The cluster hash slot of `key` (CRC16/XMODEM of its hash tag, mod 16384), as Redis
/// computes it (`CLUSTER KEYSLOT`): e.g. which primary will hold a partition's keys.
pub fn key_slot(key: &str) -> u16 {
    let hashed = crate::keys::hash_tag(key).unwrap_or(key);
    let mut crc: u16 = 0;
    for byte in hashed.bytes() {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

/// How long the wake-up subscriber waits for `CLUSTER SLOTS`.
pub(crate) const SLOTS_TIMEOUT: Duration = Duration::from_secs(5);

/// A read that failed because its connection dropped is retried once: reads change nothing,
/// and the connection manager has started reconnecting. Refusals and timeouts are not
/// retried (the server is down or slow; a retry would only double the wait).
pub(crate) fn retry_read(e: &redis::RedisError) -> bool {
    e.is_io_error() && e.is_connection_dropped() && !e.is_connection_refusal()
}

/// How many more times a script answered `NOSCRIPT` after its reload is sent (see
/// [`is_noscript`]).
pub(crate) const NOSCRIPT_RETRIES: usize = 3;

/// The server does not hold the script: it did not run, so sending it again (after a load)
/// cannot apply anything twice.
pub(crate) fn is_noscript(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA with a cluster URL is refused, not ignored (the cluster client
    /// would connect in plain text).
    #[test]
    fn tls_to_a_cluster_is_refused() {
        let endpoint = crate::url::parse("redis+cluster://127.0.0.1:1,127.0.0.1:2").expect("url");
        let config = RedisConfig::new("redis+cluster://127.0.0.1:1,127.0.0.1:2")
            .tls_root_certificates(b"-----BEGIN CERTIFICATE-----".to_vec());
        match Opener::new(&endpoint, &config) {
            Err(LeaseError::InvalidInput { reason, .. }) => {
                assert!(reason.contains("TLS to a Redis Cluster"), "{reason}");
            }
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("a CA with a cluster URL was accepted"),
        }
        let plain = RedisConfig::new("redis+cluster://127.0.0.1:1,127.0.0.1:2");
        assert!(Opener::new(&endpoint, &plain).is_ok());
    }

    #[test]
    fn slots_match_redis() {
        // Values from `CLUSTER KEYSLOT` on Redis 7.
        assert_eq!(key_slot("foo"), 12182);
        assert_eq!(key_slot("lease:{lease}:exec:a"), key_slot("lease"));
        assert_eq!(key_slot("123456789"), 12739);
    }

    #[test]
    fn slot_owners_come_from_cluster_slots() {
        let node = |host: &str, port: i64| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
            ])
        };
        let slots = Value::Array(vec![
            Value::Array(vec![Value::Int(0), Value::Int(100), node("a", 1)]),
            Value::Array(vec![Value::Int(101), Value::Int(16383), node("b", 2)]),
        ]);
        assert_eq!(slot_owner(&slots, 100), Some(("a".to_owned(), 1)));
        assert_eq!(slot_owner(&slots, 101), Some(("b".to_owned(), 2)));
        assert_eq!(slot_owner(&Value::Nil, 1), None);
    }
}
