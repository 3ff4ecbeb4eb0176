//! Opening the backend under test from a URL and a namespace, with the short redelivery
//! delays a torture run needs (the default policy caps at 5 minutes, far past any liveness
//! bound of a short run).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use lease::url::{BackendUrl, Target};
use lease::{Backend, OpenOptions};
use lease_core::{LeaseBackend, RedeliveryPolicy};

use crate::app::AppStore;

/// Which backend a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SQLite file shared by the processes.
    Sqlite,
    /// PostgreSQL.
    Postgres,
    /// Redis.
    Redis,
}

impl Kind {
    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Sqlite => "sqlite",
            Kind::Postgres => "postgres",
            Kind::Redis => "redis",
        }
    }

    /// The backend of `url`.
    pub fn of(url: &str) -> Result<Kind, String> {
        match BackendUrl::parse(url).map_err(|e| e.to_string())?.target {
            Target::SqliteFile(_) => Ok(Kind::Sqlite),
            Target::Postgres(_) => Ok(Kind::Postgres),
            Target::Redis(_) => Ok(Kind::Redis),
            other => Err(format!("torture needs a shared store, not {other:?}")),
        }
    }
}

/// Redelivery delays of a torture run: 50 ms, doubling, capped at 1 s.
pub fn policy() -> RedeliveryPolicy {
    RedeliveryPolicy::new(Duration::from_millis(50), 2, Duration::from_secs(1)).unwrap_or_default()
}

/// Replicas a Redis write waits for in this process, set by the controller for its own
/// writes (admissions, final reads) in `--replication wait` mode.
static WAIT_REPLICAS: OnceLock<u32> = OnceLock::new();

/// Makes every Redis backend this process opens from now on `WAIT` for `replicas` after each
/// write, as the runtimes do under [`crate::failover::WAIT_ENV`]: a run measuring `wait`
/// must not lose the controller's admissions to a failover either.
pub fn wait_for_replicas(replicas: u32) {
    let _ = WAIT_REPLICAS.set(replicas);
}

/// The replicas to wait for: [`wait_for_replicas`], else [`crate::failover::WAIT_ENV`].
fn wait_replicas() -> Option<u32> {
    WAIT_REPLICAS.get().copied().or_else(|| {
        std::env::var(crate::failover::WAIT_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
    })
}

/// Opens the backend at `url` in `namespace` (schema for PostgreSQL) with a pool of
/// `pool` connections (PostgreSQL), through [`lease::open_with`]; the same handle,
/// concretely typed, is the store of the workflow's application rows.
pub async fn open(
    url: &str,
    namespace: &str,
    pool: u32,
) -> Result<(Arc<dyn LeaseBackend>, AppStore), String> {
    let mut options = OpenOptions::new()
        .namespace(namespace)
        .policy(policy())
        .pool_size(pool.max(1))
        .busy_timeout(Duration::from_secs(10))
        .shared_only(true);
    // `--replication wait` (crate::failover): WAIT for replicas after each write.
    if let Some(n) = wait_replicas() {
        options = options.wait_for_replicas(n, Duration::from_millis(500));
    }
    let opened = lease::open_with(url, &options)
        .await
        .map_err(|e| e.to_string())?;
    let app = match opened.backend {
        Backend::Sqlite {
            backend,
            path: Some(path),
        } => AppStore::sqlite(backend, path),
        Backend::Postgres(backend) => AppStore::postgres(backend),
        Backend::Redis(backend) => AppStore::redis(backend),
        _ => return Err(format!("torture needs a shared store, not {url}")),
    };
    Ok((opened.shared, app))
}

/// Opens with retries until `within` has passed (the server may be restarting).
pub async fn open_retrying(
    url: &str,
    namespace: &str,
    pool: u32,
    within: Duration,
) -> Result<(Arc<dyn LeaseBackend>, AppStore), String> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match open(url, namespace, pool).await {
            Ok(b) => return Ok(b),
            Err(e) if tokio::time::Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Removes the run's schema (PostgreSQL) or keys (Redis) with [`lease::destroy_with`];
/// SQLite files go with the work dir.
pub async fn destroy(url: &str, namespace: &str) -> Result<(), String> {
    match Kind::of(url)? {
        Kind::Sqlite => Ok(()),
        Kind::Postgres | Kind::Redis => {
            lease::destroy_with(url, &OpenOptions::new().namespace(namespace))
                .await
                .map_err(|e| e.to_string())
        }
    }
}
