//! [`OpenOptions`]: what [`crate::open_with`] sets on the backend a URL names, beyond the URL.

use std::time::Duration;

use lease_core::{RedeliveryPolicy, SharedClock};

/// Settings for [`crate::open_with`] and [`crate::destroy_with`]. Each is optional; an unset
/// one keeps the backend's default. A setting a backend has no use for (a pool size on
/// SQLite, a busy timeout on Redis) is ignored by that backend, so one set of options serves
/// every URL a program may be given.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct OpenOptions {
    pub(crate) namespace: Option<String>,
    pub(crate) policy: Option<RedeliveryPolicy>,
    pub(crate) clock: Option<SharedClock>,
    pub(crate) pool_size: Option<u32>,
    pub(crate) busy_timeout: Option<Duration>,
    pub(crate) wait_for_replicas: Option<(u32, Duration)>,
    pub(crate) shared_only: bool,
    pub(crate) verify_only: bool,
    pub(crate) lock_timeout: Option<Duration>,
}

impl OpenOptions {
    /// No settings: every backend's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The namespace (SQLite, Redis) or schema (PostgreSQL). The URL's `?namespace=` names
    /// it too; if both are given they must agree ([`crate::OpenError::InvalidUrl`]).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// The redelivery policy (RFC 002 "redelivery"); the default is
    /// [`RedeliveryPolicy::default`].
    pub fn policy(mut self, policy: RedeliveryPolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// The clock that decides expiry (tests use a [`lease_core::ManualClock`]); the default
    /// is the backend's own (system clock for SQLite and memory, the server's clock for
    /// PostgreSQL and Redis).
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The connection pool's size (PostgreSQL). 0 is refused when the pool is built
    /// ([`lease_core::LeaseError::InvalidInput`], nothing opened).
    pub fn pool_size(mut self, size: u32) -> Self {
        self.pool_size = Some(size);
        self
    }

    /// How long a write waits for another process's lock on the file (SQLite).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = Some(timeout);
        self
    }

    /// Redis: answer only what `replicas` replicas have, `WAIT replicas timeout` after every
    /// call under a barrier write (`lease_redis::RedisConfig::wait_for_replicas`; see the
    /// README's failover section).
    pub fn wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.wait_for_replicas = Some((replicas, timeout));
        self
    }

    /// Refuse stores other processes cannot reach (`sqlite::memory:`, `memory:`): for
    /// programs whose workers run in several processes.
    pub fn shared_only(mut self, shared_only: bool) -> Self {
        self.shared_only = shared_only;
        self
    }
}

impl OpenOptions {
    /// Whether opening creates or upgrades the store's schema (the default, `true`). With
    /// `false` it only verifies the schema is there at this library's version and changes
    /// nothing, failing otherwise with [`lease_core::LeaseError::SchemaMismatch`] (inside
    /// [`crate::OpenError::Backend`]): for read-only tools, so an old schema is not altered
    /// under live traffic and a mistyped namespace is not created. PostgreSQL, SQLite and
    /// Redis verify (a missing SQLite file is not created; an empty non-default SQLite
    /// namespace is `InvalidInput`); memory has no schema and opens as with `true`.
    pub fn migrate(mut self, migrate: bool) -> Self {
        self.verify_only = !migrate;
        self
    }
}

impl OpenOptions {
    /// PostgreSQL: how long each step of a migration waits for a lock before it fails with
    /// [`lease_core::LeaseError::Unavailable`] (`lease_postgres::PostgresConfig::lock_timeout`,
    /// default 5 s). Other backends take no table locks and ignore it.
    pub fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = Some(timeout);
        self
    }
}

impl std::fmt::Debug for OpenOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenOptions")
            .field("namespace", &self.namespace)
            .field("policy", &self.policy)
            .field("clock", &self.clock.as_ref().map(|_| "custom"))
            .field("pool_size", &self.pool_size)
            .field("busy_timeout", &self.busy_timeout)
            .field("wait_for_replicas", &self.wait_for_replicas)
            .field("shared_only", &self.shared_only)
            .field("migrate", &!self.verify_only)
            .field("lock_timeout", &self.lock_timeout)
            .finish()
    }
}
