//! Opening the shared backend a runtime process (and its orchestrator) works on: the URL
//! picks the backend, the namespace isolates one run, the policy sets redelivery delays.

use std::time::Duration;

use lease::{RedeliveryPolicy, SharedBackend, redact_url};

/// Any failure while opening or cleaning up, as text for the process's error line (a URL in
/// it has its password redacted, issue 25 item 2).
pub type OpenResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The redelivery policy of a run: `base`, doubling, capped at 32 times `base`.
pub fn policy(base: Duration) -> OpenResult<RedeliveryPolicy> {
    Ok(RedeliveryPolicy::new(base, 2, base.saturating_mul(32))?)
}

/// Opens `url` in `namespace` (SQLite/Redis namespace, Postgres schema) with `policy`.
///
/// `sqlite:PATH` (or `sqlite://PATH`) is a database file several processes share;
/// `postgres://...` and `redis://...` need the facade's `postgres` / `redis` feature. The
/// backend's own clock (system, database, Redis `TIME`) decides expiry for every process.
pub async fn open(
    url: &str,
    namespace: &str,
    policy: RedeliveryPolicy,
) -> OpenResult<SharedBackend> {
    Ok(open_store(url, namespace, policy).await?.shared)
}

/// A backend opened twice over: as the [`SharedBackend`] the dispatcher drives, and as the
/// concrete backend whose fenced transactions (`step_in_tx`) write the application's own
/// `charges` table (see `charges.rs`). Both are the same handle.
#[derive(Clone)]
pub struct Opened {
    /// The backend behind the client traits.
    pub shared: SharedBackend,
    /// The same backend, concrete.
    pub store: Store,
}

/// The concrete backend of an [`Opened`], for what the client traits do not cover.
#[derive(Clone)]
pub enum Store {
    /// Embedded SQLite: `path` is the shared file the `charges` table lives in.
    #[cfg(feature = "sqlite")]
    Sqlite {
        /// The backend handle.
        backend: lease::sqlite::SqliteBackend,
        /// The database file.
        path: std::path::PathBuf,
        /// The run's namespace (a column of `charges`, as of the library's own rows).
        namespace: String,
    },
    /// PostgreSQL: `charges` lives in the run's schema.
    #[cfg(feature = "postgres")]
    Postgres(lease::postgres::PostgresBackend),
    /// A backend without fenced application transactions here (Redis, memory): the charge
    /// step is a plain step and there is no `charges` table.
    Other,
}

/// [`open`], keeping the concrete backend next to the shared one.
pub async fn open_store(
    url: &str,
    namespace: &str,
    policy: RedeliveryPolicy,
) -> OpenResult<Opened> {
    let url = url.trim();
    if let Some(rest) = url.strip_prefix("sqlite:") {
        let path = rest.strip_prefix("//").unwrap_or(rest);
        if path.is_empty() || path == ":memory:" {
            return Err(format!(
                "{}: processes can only share a SQLite file",
                redact_url(url)
            )
            .into());
        }
        return open_sqlite(path, namespace, policy).await;
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return open_postgres(url, namespace, policy).await;
    }
    if url.starts_with("redis://") || url.starts_with("rediss://") {
        return open_redis(url, namespace, policy).await;
    }
    Err(format!(
        "{}: unsupported backend URL for a runtime process \
         (sqlite:PATH, postgres://..., redis://...)",
        redact_url(url)
    )
    .into())
}

#[cfg(feature = "sqlite")]
async fn open_sqlite(path: &str, namespace: &str, policy: RedeliveryPolicy) -> OpenResult<Opened> {
    let config = lease::sqlite::SqliteConfig::file(path)
        .namespace(namespace)
        .policy(policy);
    let backend = lease::sqlite::SqliteBackend::open(config).await?;
    Ok(Opened {
        shared: std::sync::Arc::new(backend.clone()),
        store: Store::Sqlite {
            backend,
            path: path.into(),
            namespace: namespace.to_owned(),
        },
    })
}

#[cfg(not(feature = "sqlite"))]
async fn open_sqlite(
    path: &str,
    _namespace: &str,
    _policy: RedeliveryPolicy,
) -> OpenResult<Opened> {
    Err(format!("sqlite:{path}: feature `sqlite` is off in this build").into())
}

#[cfg(feature = "postgres")]
async fn open_postgres(url: &str, schema: &str, policy: RedeliveryPolicy) -> OpenResult<Opened> {
    let config = lease::postgres::PostgresConfig::new(url)
        .schema(schema)
        .policy(policy);
    let backend = lease::postgres::PostgresBackend::connect(config).await?;
    Ok(Opened {
        shared: std::sync::Arc::new(backend.clone()),
        store: Store::Postgres(backend),
    })
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(url: &str, _schema: &str, _policy: RedeliveryPolicy) -> OpenResult<Opened> {
    Err(format!("{}: build with `--features postgres`", redact_url(url)).into())
}

#[cfg(feature = "redis")]
async fn open_redis(url: &str, namespace: &str, policy: RedeliveryPolicy) -> OpenResult<Opened> {
    let config = lease::redis::RedisConfig::new(url)
        .namespace(namespace)
        .policy(policy);
    Ok(Opened {
        shared: std::sync::Arc::new(lease::redis::RedisBackend::connect(config).await?),
        store: Store::Other,
    })
}

#[cfg(not(feature = "redis"))]
async fn open_redis(url: &str, _namespace: &str, _policy: RedeliveryPolicy) -> OpenResult<Opened> {
    Err(format!("{}: build with `--features redis`", redact_url(url)).into())
}

/// Removes what a run left in a server backend (its Postgres schema, its Redis keys). A
/// SQLite run lives in a file its orchestrator deletes.
pub async fn cleanup(url: &str, namespace: &str) -> OpenResult<()> {
    let url = url.trim();
    #[cfg(feature = "postgres")]
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let config = lease::postgres::PostgresConfig::new(url).schema(namespace);
        let backend = lease::postgres::PostgresBackend::connect(config).await?;
        backend.drop_schema_forced().await?;
        backend.close().await;
    }
    #[cfg(feature = "redis")]
    if url.starts_with("redis://") || url.starts_with("rediss://") {
        let config = lease::redis::RedisConfig::new(url).namespace(namespace);
        lease::redis::RedisBackend::connect(config)
            .await?
            .delete_namespace()
            .await?;
    }
    let _ = (url, namespace);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 25 item 2: a URL this process refuses is named without its password.
    #[tokio::test]
    async fn refusals_do_not_repeat_the_password() {
        let url = "mysql://u:hunter2@h/db";
        let Err(e) = open_store(url, "ns", RedeliveryPolicy::default()).await else {
            panic!("{url} opened");
        };
        let shown = e.to_string();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("mysql://u:***@h/db"), "{shown}");
    }
}
