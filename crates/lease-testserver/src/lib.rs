//! Where this workspace's tests find their servers: the one place naming the environment
//! variables and the default URLs (every test crate, example and the xtask read them from
//! here), and, with the feature `containers`, throwaway PostgreSQL and Redis servers started
//! through testcontainers from images built locally ([`containers`]; decision record 0047 in
//! docs/decisions/).
//!
//! A URL is taken from its variable when set and not blank, else the local default; an
//! unreachable server fails the tests, it never skips them.

#[cfg(feature = "containers")]
pub mod containers;

/// The variable naming the PostgreSQL server of the tests.
pub const POSTGRES_ENV: &str = "LEASE_POSTGRES_URL";
/// The variable naming the Redis server of the tests.
pub const REDIS_ENV: &str = "LEASE_REDIS_URL";
/// The variable naming a Redis Cluster (a `redis+cluster://` URL); no default.
pub const REDIS_CLUSTER_ENV: &str = "LEASE_REDIS_CLUSTER_URL";

/// The shared local PostgreSQL: user `postgres`, trust auth, database `test`.
pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
/// The shared local Redis.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

/// Settings of throwaway PostgreSQL servers (clusters from local binaries, containers):
/// durability is not needed, speed is.
pub const POSTGRES_FAST_SETTINGS: [&str; 4] = [
    "fsync=off",
    "full_page_writes=off",
    "synchronous_commit=off",
    "max_connections=200",
];

/// The URL of a PostgreSQL on `127.0.0.1:port` (user `postgres`, trust auth, database `test`),
/// the form of every test server: the shared one, throwaway clusters and containers.
pub fn postgres_url_on(port: u16) -> String {
    format!("postgres://postgres@127.0.0.1:{port}/test")
}

/// The URL of a Redis on `127.0.0.1:port`.
pub fn redis_url_on(port: u16) -> String {
    format!("redis://127.0.0.1:{port}")
}

/// The value of `var` when set and not blank.
pub fn env_url(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.trim().is_empty())
}

/// The PostgreSQL URL of the tests: [`POSTGRES_ENV`], else [`DEFAULT_POSTGRES_URL`].
pub fn postgres_url() -> String {
    env_url(POSTGRES_ENV).unwrap_or_else(|| DEFAULT_POSTGRES_URL.to_owned())
}

/// The Redis URL of the tests: [`REDIS_ENV`], else [`DEFAULT_REDIS_URL`].
pub fn redis_url() -> String {
    env_url(REDIS_ENV).unwrap_or_else(|| DEFAULT_REDIS_URL.to_owned())
}

/// The Redis Cluster URL of the tests: [`REDIS_CLUSTER_ENV`] when set and not blank.
pub fn redis_cluster_url() -> Option<String> {
    env_url(REDIS_CLUSTER_ENV)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults name loopback servers only, on their usual ports.
    #[test]
    fn defaults_are_loopback() {
        assert_eq!(DEFAULT_POSTGRES_URL, postgres_url_on(5432));
        assert_eq!(DEFAULT_REDIS_URL, redis_url_on(6379));
    }

    /// A variable that is unset or blank names nothing.
    #[test]
    fn blank_variables_name_nothing() {
        assert_eq!(env_url("LEASE_TESTSERVER_SURELY_UNSET_VAR"), None);
    }
}
