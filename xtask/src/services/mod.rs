//! Finding (or starting) the servers the backend tests need.
//!
//! Each service is looked for in a fixed order, and the first way that works wins:
//! 1. the URL in its environment variable (`LEASE_POSTGRES_URL` / `LEASE_REDIS_URL` /
//!    `LEASE_REDIS_CLUSTER_URL`);
//! 2. a server already answering on its usual local port (5432 / 6379);
//! 3. a throwaway server started from local binaries in a temp dir on a free port;
//! 4. a throwaway container through testcontainers ([`containers`]) when a Docker engine
//!    answers, from an image built locally out of this machine's binaries.
//!
//! A Redis Cluster ([`redis_cluster`]) is found only in the first and third way (a cluster
//! is never on a usual port, and no container image is tried). The `containers` row's
//! services ([`Service::PostgresContainer`], [`Service::RedisContainer`]) are always
//! containers.
//!
//! Otherwise discovery fails with an error naming the four ways and why each did not work.
//! Throwaway servers are stopped and removed when their [`Found`] is dropped, and by the
//! interrupt handler in [`crate::cleanup`].

pub mod cluster_failover;
pub mod containers;
pub mod postgres;
pub mod probe;
pub mod redis;
pub mod redis_cluster;
pub mod standby;
pub mod url;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::cleanup::Guard;
use lease_testserver::env_url;

/// A server a backend's tests need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Service {
    /// PostgreSQL, for lease-postgres.
    Postgres,
    /// Redis, for lease-redis.
    Redis,
    /// A Redis Cluster (three primaries with a replica each), for lease-redis's cluster row.
    RedisCluster,
    /// PostgreSQL in a container started through testcontainers, for the `containers` row.
    PostgresContainer,
    /// Redis in a container started through testcontainers, for the `containers` row.
    RedisContainer,
    /// A PostgreSQL primary with a streaming standby and its failover script, for the
    /// torture row's failover runs ([`standby`]).
    PostgresStandby,
    /// A throwaway Redis Cluster with its failover script, for the torture row's Redis
    /// failover runs ([`cluster_failover`]).
    RedisClusterFailover,
}

impl Service {
    /// Lowercase name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Service::Postgres => "postgres",
            Service::Redis => "redis",
            Service::RedisCluster => "redis-cluster",
            Service::PostgresContainer => "postgres-container",
            Service::RedisContainer => "redis-container",
            Service::PostgresStandby => "postgres-standby",
            Service::RedisClusterFailover => "redis-cluster-failover",
        }
    }

    /// The variable that names the server, read by the backend's tests.
    pub fn env_var(self) -> &'static str {
        match self {
            Service::Postgres | Service::PostgresContainer => postgres::ENV,
            Service::Redis | Service::RedisContainer => redis::ENV,
            Service::RedisCluster => redis_cluster::ENV,
            Service::PostgresStandby => standby::ENV,
            Service::RedisClusterFailover => cluster_failover::ENV,
        }
    }

    /// Variables a row gets besides [`Service::env_var`]: the pair's failover script.
    pub fn extra_env(self, found: &Found) -> Vec<(&'static str, String)> {
        match self {
            Service::PostgresStandby => standby::failover_script(found)
                .map(|s| (standby::FAILOVER_ENV, s))
                .into_iter()
                .collect(),
            Service::RedisClusterFailover => cluster_failover::failover_script(found)
                .map(|s| (cluster_failover::FAILOVER_ENV, s))
                .into_iter()
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Every service, for `cargo xtask services`.
    pub const ALL: [Service; 3] = [Service::Postgres, Service::Redis, Service::RedisCluster];

    /// Services started only when named (by `cargo xtask services NAME` or a matrix row),
    /// never by "all": the standby pair, and the containers of the `containers` row.
    pub const ON_REQUEST: [Service; 4] = [
        Service::PostgresStandby,
        Service::RedisClusterFailover,
        Service::PostgresContainer,
        Service::RedisContainer,
    ];

    /// The service named `name` (`postgres`, `redis`, `redis-cluster`, `postgres-standby`,
    /// `redis-cluster-failover`, `postgres-container`, `redis-container`).
    pub fn from_name(name: &str) -> Option<Service> {
        Service::ALL
            .into_iter()
            .chain(Service::ON_REQUEST)
            .find(|s| s.name() == name)
    }

    /// Finds or starts the server, in the order of the module documentation.
    pub fn discover(self) -> Result<Found, String> {
        match self {
            Service::Postgres => postgres::discover(),
            Service::Redis => redis::discover(),
            Service::RedisCluster => redis_cluster::discover(),
            Service::PostgresContainer => containers::postgres(),
            Service::RedisContainer => containers::redis(),
            Service::PostgresStandby => standby::discover(),
            Service::RedisClusterFailover => cluster_failover::discover(),
        }
    }
}

/// A server that answers, and how it was found.
#[derive(Debug)]
pub struct Found {
    /// The URL handed to the tests.
    pub url: String,
    /// Which way it was found, for the log.
    pub how: String,
    /// The temp dir of a throwaway server started from local binaries.
    pub workdir: Option<PathBuf>,
    /// Stops a throwaway server when dropped; `None` for a server xtask did not start.
    pub _guard: Option<Guard>,
}

/// A server with a failover script named by both variables (`url_env`, `script_env`), or
/// `None` when either is unset.
fn failover_pair_from_env(url_env: &str, script_env: &str) -> Option<Found> {
    let (url, _) = (env_url(url_env)?, env_url(script_env)?);
    Some(Found {
        url,
        how: format!("{url_env} and {script_env}"),
        workdir: None,
        _guard: None,
    })
}

/// The failover script of a server found with [`failover_pair_from_env`] (`script_env`), else
/// `failover` in the throwaway server's dir.
fn failover_script_of(found: &Found, script_env: &str) -> Option<String> {
    env_url(script_env).or_else(|| {
        found
            .workdir
            .as_ref()
            .map(|d| d.join("failover").to_string_lossy().into_owned())
    })
}

/// Creates a fresh, uniquely named directory under the system temp dir.
fn temp_dir(kind: &str) -> Result<PathBuf, String> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let seq = SEQ.fetch_add(1, Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!(
        "lease-xtask-{kind}-{}-{seq}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// The last `n` lines of a log file, for error messages.
fn log_tail(path: &std::path::Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(n)..].join("\n    ");
    if tail.is_empty() {
        String::new()
    } else {
        format!("\n  last lines of {}:\n    {tail}", path.display())
    }
}

/// Names ways (`local`, `binaries`, `containers`) to leave out, comma-separated; for trying
/// the later ways on a machine where an earlier one works.
pub const SKIP_VAR: &str = "XTASK_SKIP_WAYS";

/// One way of finding a server after its environment variable.
struct Way {
    /// Short name for [`SKIP_VAR`]: `local`, `binaries` or `containers`.
    key: &'static str,
    /// What it is, for messages.
    what: &'static str,
    /// Tries it.
    start: fn() -> Result<Found, String>,
}

/// Tries `ways` in order after the environment variable `env` (not set); the first that
/// works wins, else the error names every way and why it failed.
fn first_that_works(service: &str, env: &str, ways: &[Way]) -> Result<Found, String> {
    let skip = std::env::var(SKIP_VAR).unwrap_or_default();
    let mut tried = vec![(env.to_owned(), "not set".to_owned())];
    for way in ways {
        if skip.split(',').any(|k| k.trim() == way.key) {
            tried.push((way.what.to_owned(), format!("left out by {SKIP_VAR}")));
            continue;
        }
        match (way.start)() {
            Ok(found) => return Ok(found),
            Err(why) => tried.push((way.what.to_owned(), why)),
        }
    }
    Err(not_found(service, &tried))
}

/// Formats the "nothing found" error: one line per way tried, with its reason.
fn not_found(service: &str, tried: &[(String, String)]) -> String {
    let mut msg = format!("no {service} server found. Tried, in order:");
    for (i, (way, why)) in tried.iter().enumerate() {
        msg.push_str(&format!("\n  {}. {way}: {why}", i + 1));
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_names_every_way() {
        let msg = not_found(
            "PostgreSQL",
            &[
                ("LEASE_POSTGRES_URL".into(), "not set".into()),
                ("127.0.0.1:5432".into(), "refused".into()),
            ],
        );
        assert_eq!(
            msg,
            "no PostgreSQL server found. Tried, in order:\n  1. LEASE_POSTGRES_URL: not set\n  2. 127.0.0.1:5432: refused"
        );
    }

    #[test]
    fn temp_dirs_are_fresh() {
        let a = temp_dir("test").expect("a");
        let b = temp_dir("test").expect("b");
        assert_ne!(a, b);
        std::fs::remove_dir(&a).expect("rm a");
        std::fs::remove_dir(&b).expect("rm b");
    }
}
