//! [`RedisBackend`]: connecting, peers, namespace removal and the script call path.

use std::sync::Arc;

use lease_core::{LeaseError, RedeliveryPolicy, Result, SharedClock, Timestamp};
use redis::{Script, Value};

use crate::config::RedisConfig;
use crate::conn::{Conn, NOSCRIPT_RETRIES, Opener, is_noscript, retry_read};
use crate::error::{Access, map_error, protocol, token_counter_error};
use crate::guard;
use crate::keys::{Keys, LAYOUT_V1, LAYOUT_VERSION};
use crate::replication::Barrier;
use crate::reply::Reply;
use crate::scripts::operation_script;
use crate::url::Endpoint;
use crate::wakeup::{Listener, Subscriber, Target, WakeMode, channel, listener_name};
use crate::wire::{exact_time, policy_arg};

// The operation scripts this module runs, each compiled once per process.
operation_script!(META = script(include_str!("backend/meta.lua")));

/// The Redis backend: a cheap-to-clone handle on one namespace, implementing every
/// `lease_core` client trait (so it is a [`lease_core::LeaseBackend`]).
///
/// Clones share one multiplexed connection (a `ConnectionManager`, which reconnects after a
/// failure, or a cluster connection) and one wake-up listener; [`RedisBackend::peer`] opens
/// another of each, as a second runtime process would.
#[derive(Clone)]
pub struct RedisBackend {
    conn: Conn,
    listener: Arc<Listener>,
    shared: Arc<Shared>,
}

/// What every handle on the namespace shares.
struct Shared {
    config: RedisConfig,
    endpoint: Endpoint,
    opener: Opener,
    keys: Keys,
    policy_arg: String,
    /// How this server delivers wake-ups (decided at connect from its version).
    wake: WakeMode,
}

impl std::fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBackend")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl RedisBackend {
    /// Connects, checks the server (Redis >= 5; a `maxmemory-policy` that cannot evict our
    /// keys, see [`RedisConfig::allow_evicting_policy`]) and claims the namespace's key
    /// layout (a namespace holding another layout is [`LeaseError::Schema`]; one of layout 1,
    /// before the retention indexes, is migrated first: see `crate::migrate`).
    ///
    /// Errors: `InvalidInput` for a bad URL or namespace, `Unavailable` when Redis cannot be
    /// reached, `UnsafeConfiguration` for an evicting policy or an old server;
    /// `SchemaMismatch` when [`RedisConfig::migrate`] is `false` and the namespace holds
    /// another layout or none (nothing written then).
    pub async fn connect(config: RedisConfig) -> Result<Self> {
        let endpoint = crate::url::parse(&config.url)?;
        let partitions = config.partitions.or(endpoint.partitions).unwrap_or(1);
        let keys = Keys::new(&config.namespace, partitions)?;
        let opener = Opener::new(&endpoint, &config)?;
        let conn = opener.open(&config).await?;
        let major = check_server(&conn, &keys, &config).await?;
        let wake = match WakeMode::for_version(major) {
            WakeMode::Sharded if config.classic_pubsub => WakeMode::Classic,
            mode => mode,
        };
        let shared = Arc::new(Shared {
            policy_arg: policy_arg(&config.policy),
            config,
            endpoint,
            opener,
            keys,
            wake,
        });
        let backend = RedisBackend {
            listener: Arc::new(new_listener(&shared, &conn)?),
            conn,
            shared,
        };
        match backend.shared.config.migrate {
            true => backend.claim_layout().await?,
            false => backend.verify_layout().await?,
        }
        Ok(backend)
    }

    /// Opens a new connection to the same namespace (the createPeer model): a handle that
    /// shares nothing with this one but the store.
    pub async fn peer(&self) -> Result<Self> {
        let conn = self.shared.opener.open(&self.shared.config).await?;
        Ok(RedisBackend {
            listener: Arc::new(new_listener(&self.shared, &conn)?),
            conn,
            shared: self.shared.clone(),
        })
    }

    /// A receiver of this handle family's wake-ups (`ExecutionClient::wakeups`): `None` on a
    /// server without wake-ups (Redis 5) or outside a tokio runtime.
    pub(crate) fn wake_receiver(&self) -> Option<lease_core::WakeReceiver> {
        match self.shared.wake {
            WakeMode::Off => None,
            WakeMode::Sharded | WakeMode::Classic => self.listener.receiver(),
        }
    }

    /// The publish command the scripts take (`publish_wake` in `scripts/base.lua`).
    pub(crate) fn publish_word(&self) -> &'static [u8] {
        self.shared.wake.publish_word().as_bytes()
    }

    /// Waits for the wake-up listener's first subscriptions before a claim (see
    /// [`lease_core::FirstListen`]); at once when none was started.
    pub(crate) async fn await_first_subscribe(&self) {
        self.listener.first_listen().wait().await;
    }

    /// Completes once this handle's wake-up listener subscribed on every connection (at
    /// once when `wakeups()` was never called): from then on every wake-up published reaches
    /// its receivers. No time limit: for tests and start-up checks, under a timeout.
    pub async fn wakeups_subscribed(&self) {
        self.listener.first_listen().subscribed_everywhere().await;
    }

    /// The `CLIENT SETNAME` of this namespace's wake-up subscriber connections
    /// (`lease-wake:<namespace>`), for operators and fault-injection tests.
    pub fn listener_name(&self) -> String {
        listener_name(&self.shared.config.namespace)
    }

    /// Whether wake-ups use sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`, Redis >= 7).
    pub fn sharded_pubsub(&self) -> bool {
        self.shared.wake == WakeMode::Sharded
    }

    /// Removes every key of the namespace, every partition's included (`SCAN MATCH` +
    /// `UNLINK` on the node owning each prefix's slot), the token counters too: only for
    /// tests and decommissioning, never while handles are in use.
    pub async fn delete_namespace(&self) -> Result<()> {
        for (prefix, pattern) in self.shared.keys.patterns() {
            self.delete_matching(prefix, &pattern).await?;
        }
        Ok(())
    }

    /// Deletes the keys matching `pattern`, all in `prefix`'s slot.
    async fn delete_matching(&self, prefix: &str, pattern: &str) -> Result<()> {
        const OP: &str = "delete_namespace";
        let mut conn = self.conn.clone();
        let mut cursor: u64 = 0;
        loop {
            let (next, keys) = self
                .scan_slot_page(OP, Access::Write, prefix, pattern, cursor)
                .await?;
            if !keys.is_empty() {
                let _: Value = redis::cmd("UNLINK")
                    .arg(&keys)
                    .query_async(&mut conn)
                    .await
                    .map_err(|e| map_error(OP, Access::Write, e))?;
            }
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }

    /// One `SCAN cursor MATCH pattern COUNT 1000` page on the node owning `prefix`'s slot:
    /// the next cursor (0 at the end) and the keys (a key may come in more than one page).
    pub(crate) async fn scan_slot_page(
        &self,
        op: &'static str,
        access: Access,
        prefix: &str,
        pattern: &str,
        cursor: u64,
    ) -> Result<(u64, Vec<Vec<u8>>)> {
        let mut scan = redis::cmd("SCAN");
        scan.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000);
        let mut conn = self.conn.clone();
        let page = conn
            .on_slot_of(prefix, &scan)
            .await
            .map_err(|e| map_error(op, access, e))?;
        redis::from_redis_value(page).map_err(|e| map_error(op, access, e.into()))
    }

    /// The namespace's key prefix, `lease:{<namespace>}:` (with one partition every key
    /// starts with it; with more, the namespace-wide keys do).
    pub fn key_prefix(&self) -> &str {
        self.shared.keys.prefix()
    }

    /// Every prefix the namespace's keys start with: [`Self::key_prefix`], then, with more
    /// than one partition, each partition's `lease:{<namespace>#<i>}:`.
    pub fn key_prefixes(&self) -> Vec<String> {
        let keys = &self.shared.keys;
        keys.patterns()
            .into_iter()
            .map(|(prefix, _)| prefix.to_owned())
            .collect()
    }

    /// The number of partitions of the namespace ([`RedisConfig::partitions`]).
    pub fn partitions(&self) -> usize {
        self.shared.keys.partitions().len()
    }

    /// Whether this handle talks to a Redis Cluster (`redis+cluster://`).
    pub fn is_cluster(&self) -> bool {
        self.conn.is_cluster()
    }

    /// The namespace's cluster hash tag, `{<namespace>}`: with one partition, every key a
    /// [`FencedScript`] declares must carry it as its first hash tag (and lie outside
    /// [`Self::key_prefix`]), for example `format!("orders:{}:count", backend.hash_tag())`.
    /// With more partitions, use [`Self::hash_tag_for`].
    ///
    /// [`FencedScript`]: crate::FencedScript
    pub fn hash_tag(&self) -> String {
        format!("{{{}}}", self.shared.keys.namespace())
    }

    /// The cluster hash tag of execution `id`'s partition (`{<namespace>}` with one
    /// partition, `{<namespace>#<i>}` with more): a [`FencedScript`] run under a lease on
    /// `id` may declare only keys carrying it.
    ///
    /// [`FencedScript`]: crate::FencedScript
    pub fn hash_tag_for(&self, id: &lease_core::ExecutionId) -> String {
        format!("{{{}}}", self.shared.keys.tag_of(id))
    }

    /// Every partition's cluster hash tag, in partition order: `[{<namespace>}]` with one
    /// partition, `{<namespace>#0}`, `{<namespace>#1}`, ... with more (the tags
    /// [`Self::hash_tag_for`] returns), e.g. to read back keys an application wrote under
    /// each partition's tag.
    pub fn partition_hash_tags(&self) -> Vec<String> {
        let keys = &self.shared.keys;
        keys.partitions()
            .iter()
            .map(|prefix| {
                format!(
                    "{{{}}}",
                    &prefix["lease:{".len()..prefix.len() - "}:".len()]
                )
            })
            .collect()
    }

    /// The redelivery policy this handle evaluates gates with.
    pub fn policy(&self) -> RedeliveryPolicy {
        self.shared.config.policy
    }

    /// The underlying connection, for fault-injection tests (e.g. `CLIENT ID`, then
    /// `CLIENT KILL` from another connection). Not part of the stable API.
    #[doc(hidden)]
    pub fn connection(&self) -> Conn {
        self.conn.clone()
    }

    pub(crate) fn keys(&self) -> &Keys {
        &self.shared.keys
    }

    pub(crate) fn clock(&self) -> Option<&SharedClock> {
        self.shared.config.clock.as_ref()
    }

    /// The clock argument of a script: the injected clock's now, or `''` for Redis `TIME`.
    fn clock_arg(&self) -> Result<String> {
        match self.clock() {
            Some(clock) => Ok(exact_time("clock", clock.now())?.to_string()),
            None => Ok(String::new()),
        }
    }

    /// Runs one operation's script on the partition (or home) `prefix`: one round trip
    /// (plus a load after `NOSCRIPT`). `KEYS` are the prefix and its anchor
    /// ([`Keys::anchor`]), so a script whose slot is being migrated is refused with
    /// `TRYAGAIN` (retried by the cluster client) instead of running on either node.
    pub(crate) async fn eval(
        &self,
        op: &'static str,
        access: Access,
        prefix: &str,
        script: &Script,
        args: &[&[u8]],
    ) -> Result<Value> {
        let anchor = Keys::anchor(prefix);
        self.invoke(op, access, script, &[prefix, &anchor], args)
            .await?
            .map_err(|e| self.script_error(op, access, e))
    }

    /// Runs a script with `keys` as `KEYS` (the prefix first), the clock and policy
    /// arguments and then `args` as `ARGV`; the Redis error unmapped (a read whose
    /// connection dropped is retried once). With [`RedisConfig::wait_for_replicas`], under
    /// the replication barrier (`crate::replication`), whose failure is the `Err`.
    pub(crate) async fn invoke(
        &self,
        op: &'static str,
        access: Access,
        script: &Script,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<redis::RedisResult<Value>> {
        let clock = self.clock_arg()?;
        let mut conn = self.conn.clone();
        if let Some(barrier) = self.barrier() {
            let mut argv: Vec<&[u8]> = Vec::with_capacity(2 + args.len());
            argv.push(clock.as_bytes());
            argv.push(self.shared.policy_arg.as_bytes());
            argv.extend_from_slice(args);
            return barrier
                .invoke(&mut conn, op, access, script, keys, &argv)
                .await;
        }
        let mut invocation = script.prepare_invoke();
        for key in keys {
            invocation.key(*key);
        }
        invocation
            .arg(clock.as_str())
            .arg(self.shared.policy_arg.as_str());
        for arg in args {
            invocation.arg(*arg);
        }
        let mut result = invocation.invoke_async::<Value>(&mut conn).await;
        if access == Access::Read && result.as_ref().is_err_and(retry_read) {
            result = invocation.invoke_async::<Value>(&mut conn).await;
        }
        // `invoke_async` loads the script once after `NOSCRIPT`; a `SCRIPT FLUSH` (an
        // operator's, or a failover to a node without it) landing between that load and the
        // second `EVALSHA` answers `NOSCRIPT` again. The script never ran, so sending it
        // again is safe for writes too; a few tries, not a loop, bound a flush storm.
        for _ in 0..NOSCRIPT_RETRIES {
            if !result.as_ref().is_err_and(is_noscript) {
                break;
            }
            result = invocation.invoke_async::<Value>(&mut conn).await;
        }
        Ok(result)
    }

    /// The replication barrier of [`RedisConfig::wait_for_replicas`], if set.
    fn barrier(&self) -> Option<Barrier> {
        let (replicas, timeout) = self.shared.config.wait_replicas?;
        Some(Barrier::new(replicas, timeout))
    }

    /// The typed error of a failed script of `op`.
    pub(crate) fn script_error(
        &self,
        op: &'static str,
        access: Access,
        e: redis::RedisError,
    ) -> LeaseError {
        token_counter_error(self.shared.keys.prefix(), &e)
            .unwrap_or_else(|| map_error(op, access, e))
    }

    /// Runs one plain read command (its first key a library key). With
    /// [`RedisConfig::wait_for_replicas`], under the replication barrier of that key's
    /// slot: a read a caller acts on must not show a write a failover can take back.
    pub(crate) async fn query(&self, op: &'static str, cmd: &redis::Cmd) -> Result<Value> {
        let mut conn = self.conn.clone();
        if let Some(barrier) = self.barrier() {
            let key = cmd.args_iter().nth(1).and_then(|arg| match arg {
                redis::Arg::Simple(bytes) => crate::replication::prefix_of(bytes),
                _ => None,
            });
            let prefix = key.unwrap_or(self.shared.keys.prefix());
            return barrier
                .send(&mut conn, op, Access::Read, cmd.clone(), prefix)
                .await?
                .map_err(|e| map_error(op, Access::Read, e));
        }
        let mut result = cmd.query_async::<Value>(&mut conn).await;
        if result.as_ref().is_err_and(retry_read) {
            result = cmd.query_async::<Value>(&mut conn).await;
        }
        result.map_err(|e| map_error(op, Access::Read, e))
    }

    /// The backend clock: the injected one, or Redis `TIME`.
    pub(crate) async fn clock_now(&self) -> Result<Timestamp> {
        if let Some(clock) = self.clock() {
            return Ok(clock.now());
        }
        const OP: &str = "now";
        let reply = Reply::new(OP);
        let mut conn = self.conn.clone();
        let v = conn
            .on_slot_of(self.shared.keys.prefix(), &redis::cmd("TIME"))
            .await
            .map_err(|e| map_error(OP, Access::Read, e))?;
        let mut items = reply.array(v)?.into_iter();
        let secs: i64 = reply.number(reply.next(&mut items, "seconds")?, "seconds")?;
        let micros: i64 = reply.number(reply.next(&mut items, "microseconds")?, "microseconds")?;
        secs.checked_mul(1000)
            .and_then(|ms| ms.checked_add(micros / 1000))
            .map(Timestamp::from_millis)
            .ok_or_else(|| protocol(OP, "TIME out of range"))
    }

    /// Claims the layout of the home prefix, then of every partition's (their `meta` is
    /// each one's anchor), checking the stored partition count.
    async fn claim_layout(&self) -> Result<()> {
        let keys = &self.shared.keys;
        self.claim_prefix(keys.prefix()).await?;
        if keys.split() {
            for prefix in keys.partitions() {
                self.claim_prefix(prefix).await?;
            }
        }
        Ok(())
    }

    /// Claims `prefix`'s `meta` for this layout and partition count (`backend/meta.lua`).
    async fn claim_prefix(&self, prefix: &str) -> Result<()> {
        const OP: &str = "connect";
        let count = self.shared.keys.partitions().len().to_string();
        let v = self
            .eval(
                OP,
                Access::Write,
                prefix,
                &META,
                &[LAYOUT_VERSION.as_bytes(), count.as_bytes()],
            )
            .await?;
        let reply = Reply::new(OP);
        let mut items = reply.array(v)?.into_iter();
        let mut found = reply.string(reply.next(&mut items, "layout")?)?;
        let stored = reply.string(reply.next(&mut items, "partitions")?)?;
        let schema = |reason: String| LeaseError::Schema {
            location: prefix.to_owned(),
            reason,
        };
        if stored != count {
            return Err(schema(format!(
                "the namespace has {stored} partition(s); this handle was configured with \
                 {count} (every handle on a namespace must use the same count)"
            )));
        }
        if found == LAYOUT_V1 {
            found = self.migrate_from_v1().await?;
        }
        if found != LAYOUT_VERSION {
            return Err(schema(format!(
                "the namespace holds key layout {found:?}; this library writes layout \
                 {LAYOUT_VERSION:?}"
            )));
        }
        Ok(())
    }
}

/// Checks the server behind `conn` (version, eviction policy) on the node of every prefix
/// (each partition's, in a cluster); returns the lowest major version reported.
async fn check_server(conn: &Conn, keys: &Keys, config: &RedisConfig) -> Result<Option<u32>> {
    const OP: &str = "connect";
    let mut conn = conn.clone();
    let cmd = redis::cmd("INFO");
    let mut major: Option<u32> = None;
    for (prefix, _) in keys.patterns() {
        let mut result = conn.on_slot_of(prefix, &cmd).await;
        if result.as_ref().is_err_and(retry_read) {
            result = conn.on_slot_of(prefix, &cmd).await;
        }
        let v = result.map_err(|e| map_error(OP, Access::Read, e))?;
        let info = Reply::new(OP).string(v)?;
        guard::check_version(&info)?;
        guard::check_eviction(&info, config.allow_evicting_policy)?;
        if let Some(m) = guard::major_version(&info) {
            major = Some(major.map_or(m, |old| old.min(m)));
        }
        if !conn.is_cluster() {
            break;
        }
    }
    Ok(major)
}

/// A listener for a new handle family (it connects on the first `wakeups()` call): one
/// subscriber for every partition's channel on one server; in a cluster, one per partition,
/// on the primary owning its slot.
fn new_listener(shared: &Shared, conn: &Conn) -> Result<Listener> {
    let info = shared.opener.node_info(&shared.endpoint)?;
    let bad = |e: redis::RedisError| LeaseError::invalid("redis url", e.to_string());
    let channels: Vec<String> = shared
        .keys
        .partitions()
        .iter()
        .map(|p| channel(p))
        .collect();
    let subscriber = |target: Target, channels: Vec<String>| Subscriber {
        target,
        channels,
        name: listener_name(&shared.config.namespace),
        mode: shared.wake,
        connect_timeout: shared.config.connect_timeout,
    };
    let subscribers = match conn {
        Conn::Single(_) => vec![subscriber(
            Target::Server(Subscriber::resp3_client(info).map_err(bad)?),
            channels,
        )],
        Conn::Cluster(_) => channels
            .into_iter()
            .map(|channel| {
                let target = Target::SlotOwner {
                    cluster: conn.clone(),
                    info: info.clone(),
                };
                subscriber(target, vec![channel])
            })
            .collect(),
    };
    Ok(Listener::new(subscribers))
}
