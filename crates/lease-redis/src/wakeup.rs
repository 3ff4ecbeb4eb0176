//! Wake-ups over pub/sub: scripts that make work claimable publish the instant it
//! becomes claimable on the namespace's channel; each backend handle (with its clones) keeps
//! one subscriber connection that feeds a [`WakeHub`].
//!
//! - **Channel**: `lease:{<namespace>}:wake`, inside the namespace's hash tag, so it maps to
//!   the namespace's cluster slot; with partitions, one per partition
//!   (`lease:{<namespace>#<i>}:wake`).
//! - **Sharded or classic**: decided at connect from the server version
//!   ([`WakeMode::for_version`]): `SPUBLISH`/`SSUBSCRIBE` on Redis >= 7 (the message stays
//!   in the slot's shard instead of being broadcast to every node), `PUBLISH`/`SUBSCRIBE` on
//!   Redis 6, and nothing on Redis 5 (no RESP3, so no named subscriber on a multiplexed
//!   connection: [`lease_core::ExecutionClient::wakeups`] is `None` and the dispatcher
//!   polls).
//! - **Subscriber**: on one server, one RESP3 connection per handle family subscribed to
//!   every partition's channel; on a cluster, one per partition on the primary owning its
//!   slot (found with `CLUSTER SLOTS`; a moved slot's `sunsubscribe` push ends the session
//!   and the next one follows the slot). Each is started lazily on the first
//!   `wakeups()` call on the caller's tokio runtime, named `lease-wake:<namespace>` (CLIENT
//!   SETNAME) so operators and tests can find it; reconnected with backoff (10 ms doubling to
//!   2 s); every resubscribe signals "now" because messages may have been missed; a PING
//!   every 15 s detects a half-open connection. Claims wait (up to 2 s) for the first
//!   subscription of every connection, so that one needs no signal and an idle dispatcher
//!   does not claim twice at start ([`FirstListen`]).
//! - **Payload**: the backend-clock instant in ms from which the execution is claimable;
//!   anything else is ignored (debug log).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lease_core::{FirstListen, Timestamp, WakeHub, WakeReceiver};
use redis::{AsyncConnectionConfig, ProtocolVersion, PushInfo, PushKind};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How a server delivers wake-ups, decided at connect from its version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WakeMode {
    /// Redis >= 7: sharded pub/sub (`SPUBLISH` / `SSUBSCRIBE`).
    Sharded,
    /// Redis 6: classic pub/sub (`PUBLISH` / `SUBSCRIBE`).
    Classic,
    /// Redis 5: no wake-ups (the dispatcher polls).
    Off,
}

impl WakeMode {
    /// The mode for a server reporting `major` as its major version (`None`: a compatible
    /// server that does not say; the scripts would fail loudly on a missing command, so it is
    /// treated as current).
    pub(crate) fn for_version(major: Option<u32>) -> Self {
        match major {
            None => WakeMode::Sharded,
            Some(m) if m >= 7 => WakeMode::Sharded,
            Some(6) => WakeMode::Classic,
            Some(_) => WakeMode::Off,
        }
    }

    /// The publish command the scripts take (`publish_wake` in `scripts/base.lua`).
    pub(crate) fn publish_word(self) -> &'static str {
        match self {
            WakeMode::Sharded => "SPUBLISH",
            WakeMode::Classic => "PUBLISH",
            WakeMode::Off => "",
        }
    }
}

/// The wake channel of a namespace whose key prefix is `prefix`.
pub(crate) fn channel(prefix: &str) -> String {
    format!("{prefix}wake")
}

/// The `CLIENT SETNAME` of a namespace's subscriber connections.
pub fn listener_name(namespace: &str) -> String {
    format!("lease-wake:{namespace}")
}

/// Parses a wake payload: the claimable instant in ms, or `None` for anything else.
pub(crate) fn parse_payload(payload: &[u8]) -> Option<Timestamp> {
    std::str::from_utf8(payload)
        .ok()?
        .parse::<i64>()
        .ok()
        .map(Timestamp::from_millis)
}

/// One handle family's listener: the hub its receivers hang off and the subscriber tasks
/// (one per subscriber connection). Dropping it (the last clone of the handle) stops them.
pub(crate) struct Listener {
    hub: WakeHub,
    /// Whether every subscriber connection subscribed once: claims wait for it.
    first_listen: Arc<FirstListen>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    subscribers: Vec<Subscriber>,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("receivers", &self.hub.receivers())
            .field("subscribers", &self.subscribers.len())
            .finish_non_exhaustive()
    }
}

impl Listener {
    /// A listener that has not connected yet.
    pub(crate) fn new(subscribers: Vec<Subscriber>) -> Self {
        Listener {
            hub: WakeHub::new(),
            first_listen: Arc::new(FirstListen::new()),
            tasks: Mutex::new(Vec::new()),
            subscribers,
        }
    }

    /// A new receiver, starting (or restarting, after their runtime ended) the subscribers
    /// on the current tokio runtime; `None` outside a runtime (the dispatcher then polls).
    pub(crate) fn receiver(&self) -> Option<WakeReceiver> {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::debug!("wakeups() outside a tokio runtime: no listener");
            return None;
        };
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        let receiver = self.hub.subscribe();
        if tasks.is_empty() || tasks.iter().any(JoinHandle::is_finished) {
            for task in tasks.drain(..) {
                task.abort();
            }
            self.first_listen.starting(self.subscribers.len());
            for subscriber in &self.subscribers {
                let (subscriber, hub) = (subscriber.clone(), self.hub.clone());
                let first_listen = self.first_listen.clone();
                tasks.push(runtime.spawn(subscriber.run(hub, first_listen)));
            }
        }
        Some(receiver)
    }

    /// Whether every subscriber connection subscribed once: claims wait for it
    /// ([`FirstListen::wait`]), so a claim made then misses no wake-up and needs no "now"
    /// signal after.
    pub(crate) fn first_listen(&self) -> &FirstListen {
        &self.first_listen
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let tasks = self.tasks.get_mut().unwrap_or_else(|p| p.into_inner());
        for task in tasks.drain(..) {
            task.abort();
        }
    }
}

/// Where a subscriber connects.
#[derive(Clone)]
pub(crate) enum Target {
    /// One server, over RESP3 (pushes on a multiplexed connection).
    Server(redis::Client),
    /// The primary owning the channel's slot in a cluster, found with `CLUSTER SLOTS` on the
    /// cluster connection before every session (a slot that moved is followed: its old
    /// owner ends the subscription with an `sunsubscribe` push).
    SlotOwner {
        /// The backend's cluster connection.
        cluster: crate::conn::Conn,
        /// Credentials and settings for the node connection.
        info: redis::ConnectionInfo,
    },
}

/// How to open and run one subscriber connection.
#[derive(Clone)]
pub(crate) struct Subscriber {
    /// Where it connects.
    pub(crate) target: Target,
    /// The channels it subscribes to (all in the target's slots).
    pub(crate) channels: Vec<String>,
    pub(crate) name: String,
    pub(crate) mode: WakeMode,
    pub(crate) connect_timeout: Duration,
}

/// Interval of the health PING on an idle subscriber connection.
const HEALTH_PING: Duration = Duration::from_secs(15);
/// First reconnect delay; doubles per failure up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(10);
/// Longest reconnect delay.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Why a subscriber session ended.
#[derive(Debug)]
enum Ended {
    /// It never subscribed (connect, name or subscribe failed).
    Connecting(redis::RedisError),
    /// It had subscribed and then lost the connection.
    Lost(String),
}

impl Subscriber {
    /// A client for subscriber connections: `info`'s server and credentials over RESP3.
    pub(crate) fn resp3_client(info: redis::ConnectionInfo) -> redis::RedisResult<redis::Client> {
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        redis::Client::open(info.set_redis_settings(settings))
    }

    /// The client of this session: the server's, or the current owner of the channel's slot.
    async fn client(&self) -> redis::RedisResult<redis::Client> {
        let (cluster, info) = match &self.target {
            Target::Server(client) => return Ok(client.clone()),
            Target::SlotOwner { cluster, info } => (cluster, info),
        };
        let mut cluster = cluster.clone();
        let slots = tokio::time::timeout(
            crate::conn::SLOTS_TIMEOUT,
            redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut cluster),
        )
        .await
        .map_err(|_| {
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut))
        })??;
        let channel = self.channels.first().map(String::as_str).unwrap_or("");
        let slot = crate::conn::key_slot(channel);
        let (host, port) = crate::conn::slot_owner(&slots, slot).ok_or_else(|| {
            redis::RedisError::from((
                redis::ErrorKind::Client,
                "no cluster node owns the wake channel's slot",
            ))
        })?;
        Self::resp3_client(
            info.clone()
                .set_addr(redis::ConnectionAddr::Tcp(host, port)),
        )
    }

    /// Runs sessions forever, reconnecting with backoff; aborted with its [`Listener`].
    async fn run(self, hub: WakeHub, first_listen: Arc<FirstListen>) {
        let mut failures: u32 = 0;
        let mut first = true;
        loop {
            match self.session(&hub, &first_listen, &mut first).await {
                Ended::Lost(why) => {
                    tracing::debug!(channels = ?self.channels, %why, "wake subscriber lost; reconnecting");
                    failures = 0;
                }
                Ended::Connecting(e) => {
                    failures = failures.saturating_add(1);
                    tracing::debug!(channels = ?self.channels, error = %e, failures, "wake subscriber cannot connect");
                }
            }
            tokio::time::sleep(backoff(failures)).await;
        }
    }

    /// One connection: name it, subscribe, signal "now" when needed, then forward messages until the
    /// connection ends.
    async fn session(&self, hub: &WakeHub, first_listen: &FirstListen, first: &mut bool) -> Ended {
        let (tx, mut rx) = mpsc::unbounded_channel::<PushInfo>();
        let config = AsyncConnectionConfig::new()
            .set_push_sender(tx)
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.connect_timeout));
        let client = match self.client().await {
            Ok(client) => client,
            Err(e) => return Ended::Connecting(e),
        };
        let mut conn = match client
            .get_multiplexed_async_connection_with_config(&config)
            .await
        {
            Ok(conn) => conn,
            Err(e) => return Ended::Connecting(e),
        };
        if let Err(e) = self.subscribe(&mut conn).await {
            return Ended::Connecting(e);
        }
        // Messages published before the subscription took effect were missed: signal, unless
        // this is the first subscription and every claim waited for it.
        if first_listen.subscribed(std::mem::take(first)) {
            hub.signal_now();
        }
        loop {
            tokio::select! {
                push = rx.recv() => match push {
                    None => return Ended::Lost("push channel closed".to_owned()),
                    Some(push) => {
                        if let Some(ended) = self.on_push(hub, push) {
                            return ended;
                        }
                    }
                },
                () = tokio::time::sleep(HEALTH_PING) => {
                    let pong: redis::RedisResult<()> = redis::cmd("PING").exec_async(&mut conn).await;
                    if let Err(e) = pong {
                        return Ended::Lost(format!("health ping failed: {e}"));
                    }
                }
            }
        }
    }

    /// `CLIENT SETNAME`, then `SSUBSCRIBE` or `SUBSCRIBE` to each channel.
    async fn subscribe(
        &self,
        conn: &mut redis::aio::MultiplexedConnection,
    ) -> redis::RedisResult<()> {
        redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg(&self.name)
            .exec_async(conn)
            .await?;
        for channel in &self.channels {
            match self.mode {
                // A single-channel SSUBSCRIBE is answered by one `ssubscribe` push, which the
                // multiplexed connection treats as the command's reply.
                WakeMode::Sharded => {
                    redis::cmd("SSUBSCRIBE")
                        .arg(channel)
                        .exec_async(conn)
                        .await?
                }
                WakeMode::Classic | WakeMode::Off => conn.subscribe(channel).await?,
            }
        }
        Ok(())
    }

    /// Handles one push: a message signals the hub; a disconnection ends the session.
    fn on_push(&self, hub: &WakeHub, push: PushInfo) -> Option<Ended> {
        match push.kind {
            PushKind::Disconnection => Some(Ended::Lost("disconnected".to_owned())),
            // The server ended a shard channel subscription: its slot moved to another node.
            PushKind::SUnsubscribe => Some(Ended::Lost("the channel's slot moved".to_owned())),
            PushKind::Message | PushKind::SMessage => {
                let payload = match push.data.get(1) {
                    Some(redis::Value::BulkString(bytes)) => parse_payload(bytes),
                    _ => None,
                };
                match payload {
                    Some(at) => hub.signal(at),
                    None => tracing::debug!(data = ?push.data, "ignoring a malformed wake payload"),
                }
                None
            }
            // Subscription confirmations (also forwarded here) and anything else.
            _ => None,
        }
    }
}

/// The reconnect delay after `failures` failed attempts in a row (0 after a lost session).
fn backoff(failures: u32) -> Duration {
    MIN_BACKOFF
        .saturating_mul(1u32 << failures.min(10))
        .min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[test]
    fn the_mode_follows_the_server_version() {
        assert_eq!(WakeMode::for_version(Some(7)), WakeMode::Sharded);
        assert_eq!(WakeMode::for_version(Some(8)), WakeMode::Sharded);
        assert_eq!(WakeMode::for_version(None), WakeMode::Sharded);
        assert_eq!(WakeMode::for_version(Some(6)), WakeMode::Classic);
        assert_eq!(WakeMode::for_version(Some(5)), WakeMode::Off);
        assert_eq!(WakeMode::Sharded.publish_word(), "SPUBLISH");
        assert_eq!(WakeMode::Classic.publish_word(), "PUBLISH");
        assert_eq!(WakeMode::Off.publish_word(), "");
    }

    #[test]
    fn payloads_are_millisecond_instants() {
        assert_eq!(parse_payload(b"1234"), Some(Timestamp::from_millis(1234)));
        assert_eq!(parse_payload(b"-5"), Some(Timestamp::from_millis(-5)));
    }

    #[rstest]
    #[case::empty(b"")]
    #[case::not_a_number(b"x")]
    #[case::fraction(b"1.5")]
    #[case::not_utf8(b"\xff")]
    #[case::beyond_i64(b"99999999999999999999")]
    fn bad_payloads_are_ignored(#[case] bad: &[u8]) {
        assert_eq!(parse_payload(bad), None, "{bad:?}");
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        assert_eq!(backoff(0), MIN_BACKOFF);
        assert_eq!(backoff(1), MIN_BACKOFF * 2);
        assert_eq!(backoff(30), MAX_BACKOFF);
    }
}
