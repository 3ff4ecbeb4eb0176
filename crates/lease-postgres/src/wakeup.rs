//! Wake-ups over LISTEN/NOTIFY, so dispatchers learn of new work at once instead of at
//! their next poll.
//!
//! Every statement that makes an execution claimable (admit, admit_batch, start,
//! request_wake on a row not running, release, a suspended acknowledgement with a wake, and
//! the claim for its new leases' expiry) calls `pg_notify` on the schema's channel
//! ([`channel_name`]) inside that same statement, with the row's `claimable_at` after the
//! write as payload (`ExecutionRecord::claimable_at`, backend-clock milliseconds).
//! PostgreSQL delivers a notification only when the sending transaction commits, and never
//! if it rolls back, so a listener cannot learn of work before it is visible to a claim.
//!
//! Each backend handle (shared by its clones; [`crate::PostgresBackend::peer`] makes a new
//! one) owns a [`WakeHub`] and, from its first [`lease_core::ExecutionClient::wakeups`]
//! call, one listener task on a dedicated connection outside the pool (application name
//! [`application_name`]). The task reconnects with backoff and signals "now" after every
//! (re)connect, because notifications sent while it was disconnected are lost.

use std::time::Duration;

use lease_core::{FirstListen, Timestamp, WakeHub};

use crate::hosts::Hosts;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio::task::JoinHandle;

/// Prefix of every wake-up channel.
const CHANNEL_PREFIX: &str = "lease_wake_";

/// Prefix of the listener connection's `application_name`.
const LISTENER_APP_PREFIX: &str = "lease-listen:";

/// Longest identifier PostgreSQL keeps (NAMEDATALEN - 1); longer channel names are
/// truncated by the server, so they are hashed instead.
const MAX_IDENTIFIER_BYTES: usize = 63;

/// First and longest pause between reconnect attempts.
const RECONNECT_BACKOFF: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(2));

/// The NOTIFY channel of `schema` (validated, unquoted): `lease_wake_<schema>` when that
/// fits in 63 bytes, else `lease_wake_<first 36 bytes of schema>_<16 hex digits of the
/// FNV-1a hash of the whole name>`, so distinct schemas never share a channel by truncation.
pub(crate) fn channel_name(schema: &str) -> String {
    let plain = format!("{CHANNEL_PREFIX}{schema}");
    if plain.len() <= MAX_IDENTIFIER_BYTES {
        return plain;
    }
    // Schema names are ASCII (checked by `config::check_schema_name`): any byte cut is safe.
    let keep = MAX_IDENTIFIER_BYTES - CHANNEL_PREFIX.len() - 17;
    format!(
        "{CHANNEL_PREFIX}{}_{:016x}",
        &schema[..keep],
        fnv1a(schema.as_bytes())
    )
}

/// The `application_name` of `schema`'s listener connections (the server keeps 63 bytes).
pub(crate) fn application_name(schema: &str) -> String {
    format!("{LISTENER_APP_PREFIX}{schema}")
}

/// 64-bit FNV-1a: stable across processes and Rust versions, unlike `DefaultHasher`.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The backend-clock instant a notification carries, or `None` for a payload that is not
/// a decimal `i64` (ignored: someone else used the channel).
pub(crate) fn parse_payload(payload: &str) -> Option<Timestamp> {
    payload
        .trim()
        .parse::<i64>()
        .ok()
        .map(Timestamp::from_millis)
}

/// The running listener task of one backend handle; aborted when dropped.
pub(crate) struct ListenerTask {
    task: JoinHandle<()>,
}

impl ListenerTask {
    /// Spawns the listener on the current tokio runtime; `None` outside one. `state` goes
    /// to `Connecting` unless the handle listened before, and to `Listened` at LISTEN.
    pub(crate) fn spawn(
        hosts: std::sync::Arc<Hosts>,
        channel: String,
        hub: WakeHub,
        state: std::sync::Arc<FirstListen>,
    ) -> Option<Self> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        state.starting(1);
        let task = runtime.spawn(listen_forever(hosts, channel, hub, state));
        Some(ListenerTask { task })
    }

    /// True once the task ended (its runtime shut down, or it was aborted).
    pub(crate) fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Stops the task; its connection closes when the task is dropped.
    pub(crate) fn abort(&self) {
        self.task.abort();
    }
}

impl Drop for ListenerTask {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Connects, listens and forwards notifications to `hub`, reconnecting with backoff after
/// every failure; signals "now" after every successful (re)connect.
async fn listen_forever(
    hosts: std::sync::Arc<Hosts>,
    channel: String,
    hub: WakeHub,
    state: std::sync::Arc<FirstListen>,
) {
    let mut pause = RECONNECT_BACKOFF.0;
    let mut first = true;
    loop {
        // The current host of the URL: after a failover, the one a probe found.
        match connect_listener(&hosts.listen_options(), &channel).await {
            Ok(mut listener) => {
                pause = RECONNECT_BACKOFF.0;
                // Anything committed before LISTEN took effect sent its notification to
                // nobody: signal so that a claim now sees it, unless this is the first
                // LISTEN and every claim waited for it (`FirstListen`).
                if state.subscribed(std::mem::take(&mut first)) {
                    hub.signal_now();
                }
                forward(&mut listener, &hub).await;
            }
            Err(e) => tracing::debug!(error = %e, channel, "wake-up listener connect failed"),
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RECONNECT_BACKOFF.1);
    }
}

/// A listener on its own one-connection pool (never the backend's pool), listening on
/// `channel`.
async fn connect_listener(
    options: &PgConnectOptions,
    channel: &str,
) -> Result<PgListener, sqlx::Error> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .min_connections(0)
        .max_lifetime(None)
        .idle_timeout(None)
        .acquire_timeout(Duration::from_secs(10))
        .connect_lazy_with(options.clone());
    let mut listener = PgListener::connect_with(&pool).await?;
    // Reconnecting is done by `listen_forever`, which must signal after it.
    listener.eager_reconnect(false);
    listener.listen(channel).await?;
    Ok(listener)
}

/// Forwards notifications until the connection is lost.
async fn forward(listener: &mut PgListener, hub: &WakeHub) {
    loop {
        match listener.try_recv().await {
            Ok(Some(note)) => match parse_payload(note.payload()) {
                Some(at) => hub.signal(at),
                None => tracing::debug!(payload = note.payload(), "ignored wake-up payload"),
            },
            Ok(None) => {
                tracing::debug!("wake-up listener connection lost");
                return;
            }
            Err(e) => {
                tracing::debug!(error = %e, "wake-up listener failed");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_fit_and_stay_distinct() {
        assert_eq!(channel_name("lease"), "lease_wake_lease");
        let a = "a".repeat(63);
        let mut b = a.clone();
        b.replace_range(62.., "b");
        let (ca, cb) = (channel_name(&a), channel_name(&b));
        assert!(ca.len() <= MAX_IDENTIFIER_BYTES && cb.len() <= MAX_IDENTIFIER_BYTES);
        assert_ne!(ca, cb);
        assert_eq!(channel_name(&"x".repeat(52)).len(), 63);
        assert!(
            channel_name(&"x".repeat(53))
                .ends_with(&format!("_{:016x}", fnv1a("x".repeat(53).as_bytes())))
        );
    }

    #[test]
    fn payloads_parse_or_are_ignored() {
        assert_eq!(parse_payload("1234"), Some(Timestamp::from_millis(1234)));
        assert_eq!(parse_payload("-5"), Some(Timestamp::from_millis(-5)));
        assert_eq!(parse_payload("soon"), None);
        assert_eq!(parse_payload(""), None);
    }
}
