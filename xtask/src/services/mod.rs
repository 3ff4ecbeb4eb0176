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
//!
//! This file only declares the modules and dispatches on [`Service`]; what the services share
//! lives in leaf modules that import no sibling but [`found`]: [`Found`] in `found`, the
//! ways tried in order in `ways`, the throwaway servers' temp dirs and logs in `workdir`.

pub mod cluster_failover;
pub mod containers;
mod found;
pub mod postgres;
pub mod probe;
pub mod redis;
pub mod redis_cluster;
pub mod standby;
pub mod url;
mod ways;
mod workdir;

pub use found::Found;

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
