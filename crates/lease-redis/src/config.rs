//! [`RedisConfig`]: how to reach Redis and which namespace, clock and policy to use.

use std::time::Duration;

use lease_core::{RedeliveryPolicy, SharedClock};

/// The default namespace (key prefix `lease:{lease}:`).
pub const DEFAULT_NAMESPACE: &str = "lease";

/// Configuration of a [`crate::RedisBackend`], built with plain owned-self setters.
///
/// ```
/// use lease_redis::RedisConfig;
/// let config = RedisConfig::new("redis://127.0.0.1:6379").namespace("billing");
/// # let _ = config;
/// ```
#[derive(Clone)]
pub struct RedisConfig {
    pub(crate) url: String,
    pub(crate) namespace: String,
    pub(crate) clock: Option<SharedClock>,
    pub(crate) policy: RedeliveryPolicy,
    pub(crate) allow_evicting_policy: bool,
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Option<Duration>,
    pub(crate) classic_pubsub: bool,
    pub(crate) partitions: Option<u16>,
    pub(crate) tls_root_certificates: Option<Vec<u8>>,
    pub(crate) wait_replicas: Option<(u32, Duration)>,
    pub(crate) migrate: bool,
}

impl RedisConfig {
    /// A configuration for the server at `url` (`redis://host:port/db`, `rediss://` for TLS
    /// when redis-rs is built with TLS) or the Redis Cluster at
    /// `redis+cluster://host:port,host:port` (either may end in `?partitions=N`,
    /// see [`RedisConfig::partitions`]), namespace [`DEFAULT_NAMESPACE`], Redis `TIME` as the
    /// clock, the default redelivery policy and the eviction guard on.
    pub fn new(url: impl Into<String>) -> Self {
        RedisConfig {
            url: url.into(),
            namespace: DEFAULT_NAMESPACE.to_owned(),
            clock: None,
            policy: RedeliveryPolicy::default(),
            allow_evicting_policy: false,
            connect_timeout: Duration::from_secs(5),
            response_timeout: Some(Duration::from_secs(10)),
            classic_pubsub: false,
            partitions: None,
            tls_root_certificates: None,
            wait_replicas: None,
            migrate: true,
        }
    }

    /// The namespace: every key lives under `lease:{<namespace>}:`, so one Redis database
    /// can hold several independent stores and a namespace maps to one cluster hash slot.
    /// 1 to 128 bytes of ASCII letters, digits, `_`, `-`, `.` and `:` (checked at connect).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// Replaces the backend clock. By default every script reads Redis `TIME`, one clock
    /// for every process, so a process whose own clock runs fast cannot take live leases
    /// early; tests inject a [`lease_core::ManualClock`].
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The redelivery policy (RFC 002 "Redelivery delay"). Every handle on one namespace
    /// must use the same policy: the claim indexes are scored with it.
    pub fn policy(mut self, policy: RedeliveryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Whether `connect` claims a fresh namespace and migrates an older key layout (the
    /// default, `true`: an application handle keeps its namespace current). With `false` it
    /// only reads the namespace's stored layout, writing nothing, and fails with
    /// [`lease_core::LeaseError::SchemaMismatch`] unless it is this library's (found `None`:
    /// the namespace holds no layout, as a mistyped one). For read-only tools.
    pub fn migrate(mut self, migrate: bool) -> Self {
        self.migrate = migrate;
        self
    }

    /// With `true`, a `maxmemory-policy` that may evict lease keys (`allkeys-*`) is logged
    /// as a warning instead of failing `connect` with
    /// [`lease_core::LeaseError::UnsafeConfiguration`]. Evicting a token counter or an
    /// execution breaks fencing: only allow this where memory can never fill up.
    pub fn allow_evicting_policy(mut self, allow: bool) -> Self {
        self.allow_evicting_policy = allow;
        self
    }

    /// How long one connection attempt may take (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long to wait for a reply (default 10 s; `None` waits forever). A writing
    /// operation that times out fails with [`lease_core::LeaseError::OutcomeUnknown`]: the
    /// script may still run. Keep it well below the lease duration so a renewal that hangs
    /// is noticed before the lease runs out.
    pub fn response_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Splits the namespace into `partitions` partitions (1 to 1024; default: the URL's
    /// `?partitions=N`, else 1), each its own cluster hash tag `{<namespace>#<i>}`, so one
    /// namespace spreads over every shard of a cluster while each script still touches one
    /// slot; an execution lives in the partition its id hashes to, and a claim takes the
    /// earliest due work over every partition, with tokens from the namespace's one counter
    /// (a few more round trips per claim: see docs/decisions/0033). One partition is the layout
    /// without partitions (`{<namespace>}`). Every handle on a namespace must use the same count: it
    /// is stored at connect, and a different count is [`lease_core::LeaseError::Schema`].
    pub fn partitions(mut self, partitions: u16) -> Self {
        self.partitions = Some(partitions);
        self
    }

    /// For a `rediss://` URL: trust only the CA certificates in `pem` (PEM text, one or
    /// more certificates) instead of the system roots, e.g. a private CA. Needs feature
    /// `tls-rustls`; a CA that does not verify the server's certificate fails `connect` with
    /// [`lease_core::LeaseError::Unavailable`].
    pub fn tls_root_certificates(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_root_certificates = Some(pem.into());
        self
    }

    /// Answer only what `replicas` replicas have, so a failover cannot take back an answer:
    /// every call, read or write, is sent as one pipeline `<command>; INCR <prefix>barrier;
    /// WAIT replicas timeout` on its slot's primary, so a success means a replica of the node
    /// that ran the command has everything the answer rests on, the caller's writes and
    /// anyone else's it read. Fewer acknowledging replicas within `timeout` fail a write
    /// with [`lease_core::LeaseError::OutcomeUnknown`] (it is on the primary and may or may
    /// not survive a failover) and a read with [`lease_core::LeaseError::Unavailable`]. Off
    /// by default; it costs a write and a replication round trip per call. With one replica
    /// per primary and `replicas = 1`, a failover that promotes that replica takes back no
    /// success (the torture's `wait` runs: docs/decisions/0034); with
    /// more replicas per primary wait for all of them, or the promoted one may lack it.
    pub fn wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.wait_replicas = Some((replicas, timeout));
        self
    }

    /// With `true`, wake-ups use classic pub/sub (`PUBLISH`/`SUBSCRIBE`) even on a server
    /// with sharded pub/sub, as on Redis 6: for tests of that path. Not a stable API.
    #[doc(hidden)]
    pub fn classic_pubsub(mut self, classic: bool) -> Self {
        self.classic_pubsub = classic;
        self
    }
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password: show only its scheme and host part.
        let shown = match self.url.rsplit_once('@') {
            Some((_, host)) => format!("redis://***@{host}"),
            None => self.url.clone(),
        };
        f.debug_struct("RedisConfig")
            .field("url", &shown)
            .field("namespace", &self.namespace)
            .field("clock", &self.clock)
            .field("policy", &self.policy)
            .field("allow_evicting_policy", &self.allow_evicting_policy)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("classic_pubsub", &self.classic_pubsub)
            .field("partitions", &self.partitions)
            .field("wait_replicas", &self.wait_replicas)
            .field("migrate", &self.migrate)
            .field(
                "tls_root_certificates",
                &self.tls_root_certificates.is_some(),
            )
            .finish()
    }
}
