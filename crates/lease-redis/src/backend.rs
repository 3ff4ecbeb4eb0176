//! [`RedisBackend`]: connecting, peers, namespace removal and the script call path.

use std::sync::Arc;

use lease_core::{LeaseError, RedeliveryPolicy, Result, SharedClock, Timestamp};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Script, Value};

use crate::config::RedisConfig;
use crate::errors::{Access, BACKEND, map_error, protocol, token_counter_error};
use crate::guard;
use crate::keys::{Keys, LAYOUT_V1, LAYOUT_VERSION};
use crate::reply::Reply;
use crate::scripts::SCRIPTS;
use crate::wake::{Listener, Subscriber, WakeMode, channel, listener_name};
use crate::wire::{exact_time, policy_arg};

/// The Redis backend: a cheap-to-clone handle on one namespace, implementing every
/// `lease_core` client trait (so it is a [`lease_core::LeaseBackend`]).
///
/// Clones share one multiplexed connection ([`ConnectionManager`], which reconnects after a
/// failure) and one wake-up listener; [`RedisBackend::peer`] opens another of each, as a
/// second runtime process would.
#[derive(Clone)]
pub struct RedisBackend {
    conn: ConnectionManager,
    listener: Arc<Listener>,
    shared: Arc<Shared>,
}

/// What every handle on the namespace shares.
struct Shared {
    config: RedisConfig,
    client: redis::Client,
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
    /// reached, `UnsafeConfiguration` for an evicting policy or an old server.
    pub async fn connect(config: RedisConfig) -> Result<Self> {
        let keys = Keys::new(&config.namespace)?;
        let client = crate::tls::client(&config)?;
        let conn = open(&client, &config).await?;
        let major = check_server(&conn, &config).await?;
        let wake = match WakeMode::for_version(major) {
            WakeMode::Sharded if config.classic_pubsub => WakeMode::Classic,
            mode => mode,
        };
        let shared = Arc::new(Shared {
            policy_arg: policy_arg(&config.policy),
            config,
            client,
            keys,
            wake,
        });
        let backend = RedisBackend {
            conn,
            listener: Arc::new(new_listener(&shared)?),
            shared,
        };
        backend.claim_layout().await?;
        Ok(backend)
    }

    /// Opens a new connection to the same namespace (the createPeer model): a handle that
    /// shares nothing with this one but the store.
    pub async fn peer(&self) -> Result<Self> {
        let conn = open(&self.shared.client, &self.shared.config).await?;
        Ok(RedisBackend {
            conn,
            listener: Arc::new(new_listener(&self.shared)?),
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

    /// The publish command the scripts take (`publish_wake` in `lua/base.lua`).
    pub(crate) fn publish_word(&self) -> &'static [u8] {
        self.shared.wake.publish_word().as_bytes()
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

    /// Removes every key of the namespace (`SCAN MATCH` + `UNLINK`), including the token
    /// counter: only for tests and decommissioning, never while handles are in use.
    pub async fn delete_namespace(&self) -> Result<()> {
        const OP: &str = "delete_namespace";
        let pattern = self.shared.keys.pattern();
        let mut conn = self.conn.clone();
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await
                .map_err(|e| map_error(OP, Access::Write, e))?;
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

    /// The namespace's key prefix, `lease:{<namespace>}:` (every key starts with it).
    pub fn key_prefix(&self) -> &str {
        self.shared.keys.prefix()
    }

    /// The namespace's cluster hash tag, `{<namespace>}`: every key a [`FencedScript`]
    /// declares must carry it as its first hash tag (and lie outside [`Self::key_prefix`]),
    /// for example `format!("orders:{}:count", backend.hash_tag())`.
    ///
    /// [`FencedScript`]: crate::FencedScript
    pub fn hash_tag(&self) -> String {
        format!("{{{}}}", self.shared.keys.namespace())
    }

    /// The redelivery policy this handle evaluates gates with.
    pub fn policy(&self) -> RedeliveryPolicy {
        self.shared.config.policy
    }

    /// The underlying connection, for fault-injection tests (e.g. `CLIENT ID`, then
    /// `CLIENT KILL` from another connection). Not part of the stable API.
    #[doc(hidden)]
    pub fn connection(&self) -> ConnectionManager {
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

    /// Runs one operation's script: one round trip (plus a load after `NOSCRIPT`).
    pub(crate) async fn eval(
        &self,
        op: &'static str,
        access: Access,
        script: &Script,
        args: &[&[u8]],
    ) -> Result<Value> {
        self.invoke(access, script, &[], args)
            .await?
            .map_err(|e| self.script_error(op, access, e))
    }

    /// Runs a script with the prefix and `keys` as `KEYS`, the clock and policy arguments
    /// and then `args` as `ARGV`; the Redis error unmapped (a read whose connection dropped
    /// is retried once).
    pub(crate) async fn invoke(
        &self,
        access: Access,
        script: &Script,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<redis::RedisResult<Value>> {
        let clock = self.clock_arg()?;
        let mut invocation = script.prepare_invoke();
        invocation.key(self.shared.keys.prefix());
        for key in keys {
            invocation.key(*key);
        }
        invocation
            .arg(clock.as_str())
            .arg(self.shared.policy_arg.as_str());
        for arg in args {
            invocation.arg(*arg);
        }
        let mut conn = self.conn.clone();
        let mut result = invocation.invoke_async::<Value>(&mut conn).await;
        if access == Access::Read && result.as_ref().is_err_and(retry_read) {
            result = invocation.invoke_async::<Value>(&mut conn).await;
        }
        Ok(result)
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

    /// Runs one plain read command.
    pub(crate) async fn query(&self, op: &'static str, cmd: &redis::Cmd) -> Result<Value> {
        let mut conn = self.conn.clone();
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
        let v = self.query(OP, &redis::cmd("TIME")).await?;
        let mut items = reply.array(v)?.into_iter();
        let secs: i64 = reply.number(reply.next(&mut items, "seconds")?, "seconds")?;
        let micros: i64 = reply.number(reply.next(&mut items, "microseconds")?, "microseconds")?;
        secs.checked_mul(1000)
            .and_then(|ms| ms.checked_add(micros / 1000))
            .map(Timestamp::from_millis)
            .ok_or_else(|| protocol(OP, "TIME out of range"))
    }

    async fn claim_layout(&self) -> Result<()> {
        const OP: &str = "connect";
        let v = self
            .eval(
                OP,
                Access::Write,
                &SCRIPTS.meta,
                &[LAYOUT_VERSION.as_bytes()],
            )
            .await?;
        let mut found = Reply::new(OP).string(v)?;
        if found == LAYOUT_V1 {
            found = self.migrate_from_v1().await?;
        }
        if found != LAYOUT_VERSION {
            return Err(LeaseError::Schema {
                location: self.shared.keys.prefix().to_owned(),
                reason: format!(
                    "the namespace holds key layout {found:?}; this library writes layout \
                     {LAYOUT_VERSION:?}"
                ),
            });
        }
        Ok(())
    }
}

/// A read that failed because its connection dropped is retried once: reads change nothing,
/// and the connection manager has started reconnecting. Refusals and timeouts are not
/// retried (the server is down or slow; a retry would only double the wait).
fn retry_read(e: &redis::RedisError) -> bool {
    e.is_io_error() && e.is_connection_dropped() && !e.is_connection_refusal()
}

/// Checks the server behind `conn` (version, eviction policy); returns its major version
/// when it reports one.
async fn check_server(conn: &ConnectionManager, config: &RedisConfig) -> Result<Option<u32>> {
    const OP: &str = "connect";
    let mut conn = conn.clone();
    let cmd = redis::cmd("INFO");
    let mut result = cmd.query_async::<Value>(&mut conn).await;
    if result.as_ref().is_err_and(retry_read) {
        result = cmd.query_async::<Value>(&mut conn).await;
    }
    let v = result.map_err(|e| map_error(OP, Access::Read, e))?;
    let info = Reply::new(OP).string(v)?;
    guard::check_version(&info)?;
    guard::check_eviction(&info, config.allow_evicting_policy)?;
    Ok(guard::major_version(&info))
}

/// A listener for a new handle family (it connects on the first `wakeups()` call).
fn new_listener(shared: &Shared) -> Result<Listener> {
    let client = Subscriber::resp3_client(&shared.client)
        .map_err(|e| LeaseError::invalid("redis url", e.to_string()))?;
    Ok(Listener::new(Subscriber {
        client,
        channel: channel(shared.keys.prefix()),
        name: listener_name(&shared.config.namespace),
        mode: shared.wake,
        connect_timeout: shared.config.connect_timeout,
    }))
}

/// Opens a connection manager for `config`.
async fn open(client: &redis::Client, config: &RedisConfig) -> Result<ConnectionManager> {
    let manager = ConnectionManagerConfig::new()
        .set_number_of_retries(2)
        .set_connection_timeout(Some(config.connect_timeout))
        .set_response_timeout(config.response_timeout);
    ConnectionManager::new_with_config(client.clone(), manager)
        .await
        .map_err(|e| LeaseError::Unavailable {
            backend: BACKEND,
            operation: "connect",
            source: Box::new(e),
        })
}
