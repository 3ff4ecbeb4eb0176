//! Multi-host URLs and `target_session_attrs`, so a client follows a PostgreSQL failover to
//! the new primary: libpq's
//! `postgres://user@h1:p1,h2:p2/db?target_session_attrs=read-write`, which sqlx does not
//! parse (it takes one host and ignores the attribute).
//!
//! The URL is split into one single-host URL per host. The pool connects to the *current*
//! host; with `read-write` (or `primary`) every new connection is checked after connecting
//! (`SHOW transaction_read_only` / `pg_is_in_recovery()`) and refused when it does not
//! qualify, so the pool never hands out a connection to a standby. When a connection takes
//! longer than [`PROBE_AFTER`] to get (the current host is down, or a standby now), the
//! hosts are probed in URL order and the first that qualifies becomes current; the pool's
//! own connect loop picks the new options up on its next try. A fenced write is therefore
//! only ever sent to a writable server; whether that server holds every earlier commit is
//! the replication's business (docs/decisions/0031-postgresql-failover.md).

use std::str::FromStr;
use std::sync::RwLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lease_core::{LeaseError, Result};
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{Connection, PgPool};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::tls;

/// A connection that is not ready after this long starts a probe of the hosts.
pub(crate) const PROBE_AFTER: Duration = Duration::from_millis(300);
/// How long one host may take to connect and answer the probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// A probe finished less than this long ago is not repeated.
const PROBE_DEBOUNCE: Duration = Duration::from_millis(100);

/// libpq's `target_session_attrs`, as far as a lease backend can use them (it must write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionAttrs {
    /// Any server that accepts the connection (libpq's default).
    Any,
    /// A server whose sessions are read-write by default (`transaction_read_only = off`).
    ReadWrite,
    /// A server not in recovery (`pg_is_in_recovery()` is false).
    Primary,
}

impl FromStr for SessionAttrs {
    type Err = LeaseError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "any" => Ok(SessionAttrs::Any),
            "read-write" => Ok(SessionAttrs::ReadWrite),
            "primary" => Ok(SessionAttrs::Primary),
            other => Err(LeaseError::invalid(
                "postgres url",
                format!(
                    "target_session_attrs={other:?} is not supported (any, read-write, primary: \
                     the lease store must be writable)"
                ),
            )),
        }
    }
}

impl SessionAttrs {
    /// The query whose boolean answer says the connection qualifies; `None` for `Any`.
    fn check_sql(self) -> Option<&'static str> {
        match self {
            SessionAttrs::Any => None,
            SessionAttrs::ReadWrite => Some(include_str!("hosts/read_write.sql")),
            SessionAttrs::Primary => Some(include_str!("hosts/primary.sql")),
        }
    }

    /// Checks an open connection; an error names why it does not qualify.
    pub(crate) async fn check(
        self,
        conn: &mut PgConnection,
    ) -> std::result::Result<(), sqlx::Error> {
        let Some(sql) = self.check_sql() else {
            return Ok(());
        };
        let ok: bool = sqlx::query_scalar(crate::statements::fragment(sql))
            .fetch_one(&mut *conn)
            .await?;
        if ok {
            Ok(())
        } else {
            Err(sqlx::Error::Configuration(
                format!("server does not match target_session_attrs={self:?}").into(),
            ))
        }
    }
}

/// A URL split into its hosts: the single-host URLs, in order, and the session attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SplitUrl {
    /// One `postgres://` URL per host, without `target_session_attrs`.
    pub(crate) urls: Vec<String>,
    /// The attributes every connection must have.
    pub(crate) attrs: SessionAttrs,
}

/// Splits `postgres://[userinfo@]h1[:p1],h2[:p2]/db?query` (one host is fine too).
pub(crate) fn split(url: &str) -> Result<SplitUrl> {
    let bad = |why: &str| LeaseError::invalid("postgres url", why.to_owned());
    let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("no scheme"))?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => (&authority[..=at], &authority[at + 1..]),
        None => ("", authority),
    };
    let (path, query) = match tail.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (tail, None),
    };
    let mut attrs = SessionAttrs::Any;
    let mut kept = Vec::new();
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        match pair.split_once('=') {
            Some(("target_session_attrs", v)) => attrs = v.parse()?,
            _ if pair.is_empty() => {}
            _ => kept.push(pair),
        }
    }
    let query = if kept.is_empty() {
        String::new()
    } else {
        format!("?{}", kept.join("&"))
    };
    let hosts: Vec<&str> = hosts.split(',').collect();
    if hosts.len() > 1 && hosts.iter().any(|h| h.is_empty()) {
        return Err(bad("an empty host in the host list"));
    }
    let urls = hosts
        .iter()
        .map(|h| format!("{scheme}://{userinfo}{h}{path}{query}"))
        .collect();
    Ok(SplitUrl { urls, attrs })
}

/// The hosts of one backend handle and which of them the pool connects to.
pub(crate) struct Hosts {
    options: Vec<PgConnectOptions>,
    attrs: SessionAttrs,
    current: AtomicUsize,
    /// The listener's options follow the current host (its own `application_name`).
    listen: RwLock<PgConnectOptions>,
    listen_name: String,
    /// When the last probe ended; held while probing so only one task probes.
    probed: Mutex<Option<Instant>>,
}

impl Hosts {
    /// Parses every host's URL, checks its TLS settings against libpq's meaning
    /// ([`crate::tls`]) and applies `tweak` (application name, options).
    pub(crate) fn new(
        split: &SplitUrl,
        listen_name: &str,
        tweak: impl Fn(PgConnectOptions) -> PgConnectOptions,
    ) -> Result<Self> {
        let env_mode = std::env::var("PGSSLMODE").ok();
        let default_root = tls::default_root_cert();
        let options = split
            .urls
            .iter()
            .map(|u| {
                let parsed = u
                    .parse::<PgConnectOptions>()
                    .map_err(|e| LeaseError::invalid("postgres url", format!("{e}")))?;
                tls::check(parsed, u, env_mode.as_deref(), default_root.as_deref()).map(&tweak)
            })
            .collect::<Result<Vec<_>>>()?;
        let first = options
            .first()
            .cloned()
            .ok_or_else(|| LeaseError::invalid("postgres url", "no host"))?;
        Ok(Hosts {
            listen: RwLock::new(first.clone().application_name(listen_name)),
            listen_name: listen_name.to_owned(),
            options,
            attrs: split.attrs,
            current: AtomicUsize::new(0),
            probed: Mutex::new(None),
        })
    }

    /// More than one host: failing over between them is this module's job.
    pub(crate) fn is_multi(&self) -> bool {
        self.options.len() > 1
    }

    /// The attributes every connection must have.
    pub(crate) fn attrs(&self) -> SessionAttrs {
        self.attrs
    }

    /// The options of the current host (the pool's first connect options).
    pub(crate) fn current(&self) -> PgConnectOptions {
        self.options[self.current.load(Ordering::SeqCst) % self.options.len()].clone()
    }

    /// The listener connection's options on the current host.
    pub(crate) fn listen_options(&self) -> PgConnectOptions {
        self.listen
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Probes the hosts in URL order and makes the first that qualifies current (for
    /// `pool` and the listener). Returns whether one qualified. Concurrent callers wait
    /// for one probe; a probe that ended within [`PROBE_DEBOUNCE`] is not repeated.
    pub(crate) async fn probe(&self, pool: &PgPool) -> bool {
        let mut probed = self.probed.lock().await;
        if probed.is_some_and(|at| at.elapsed() < PROBE_DEBOUNCE) {
            return true;
        }
        let mut found = false;
        for (i, options) in self.options.iter().enumerate() {
            if self.qualifies(options).await {
                if self.current.swap(i, Ordering::SeqCst) != i {
                    tracing::info!(host = i, "postgres: switching to another host of the URL");
                }
                pool.set_connect_options(options.clone());
                *self.listen.write().unwrap_or_else(|p| p.into_inner()) =
                    options.clone().application_name(&self.listen_name);
                found = true;
                break;
            }
        }
        *probed = Some(Instant::now());
        found
    }

    async fn qualifies(&self, options: &PgConnectOptions) -> bool {
        let attempt = async {
            let mut conn = PgConnection::connect_with(options).await?;
            let checked = self.attrs.check(&mut conn).await;
            let _ = conn.close().await;
            checked
        };
        matches!(
            tokio::time::timeout(PROBE_TIMEOUT, attempt).await,
            Ok(Ok(()))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_host_urls_split_into_one_url_per_host() {
        let s = split(
            "postgres://u:p@127.0.0.1:5433,127.0.0.1:5434/test?sslmode=disable&target_session_attrs=read-write",
        )
        .expect("split");
        assert_eq!(
            s.urls,
            [
                "postgres://u:p@127.0.0.1:5433/test?sslmode=disable",
                "postgres://u:p@127.0.0.1:5434/test?sslmode=disable"
            ]
        );
        assert_eq!(s.attrs, SessionAttrs::ReadWrite);
        let one = split("postgresql://h/db").expect("one");
        assert_eq!(one.urls, ["postgresql://h/db"]);
        assert_eq!(one.attrs, SessionAttrs::Any);
        let no_path = split("postgres://a:1,b:2?target_session_attrs=primary").expect("no path");
        assert_eq!(no_path.urls, ["postgres://a:1", "postgres://b:2"]);
        assert_eq!(no_path.attrs, SessionAttrs::Primary);
        assert!(split("postgres://a,,b/db").is_err());
        assert!(split("postgres://a,b/db?target_session_attrs=standby").is_err());
        assert!(split("postgres://a,b/db?target_session_attrs=read-only").is_err());
    }

    /// Every host's options go through the sslmode check, so no host of a multi-host URL is
    /// reached with a mode sqlx would honour differently from libpq.
    #[test]
    fn sslmodes_libpq_means_otherwise_are_refused_for_every_host() {
        for url in [
            "postgres://h/db?sslmode=verify-ca",
            "postgres://a,b/db?sslmode=allow",
            "postgres://h/db?sslmode=require&sslrootcert=/ca.pem",
        ] {
            let s = split(url).expect("split");
            let err = Hosts::new(&s, "x", |o| o).err().expect("accepted");
            assert!(
                matches!(err, LeaseError::InvalidInput { .. }),
                "{url}: {err:?}"
            );
        }
    }
}
