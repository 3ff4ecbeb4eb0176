//! Opening the shared backend a runtime process (and its orchestrator) works on: the URL
//! picks the backend, the namespace isolates one run, the policy sets redelivery delays.

use std::time::Duration;

use lease::{OpenOptions, RedeliveryPolicy, SharedBackend, redact_url};

/// Any failure while opening or cleaning up, as text for the process's error line (a URL in
/// it has its password redacted, so the error line does not leak it).
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

/// [`open`], keeping the concrete backend next to the shared one. Opened through
/// [`lease::open_with`], refusing stores other processes cannot reach.
pub async fn open_store(
    url: &str,
    namespace: &str,
    policy: RedeliveryPolicy,
) -> OpenResult<Opened> {
    let options = OpenOptions::new()
        .namespace(namespace)
        .policy(policy)
        .shared_only(true);
    let opened = lease::open_with(url.trim(), &options)
        .await
        .map_err(|e| format!("{}: {e}", redact_url(url.trim())))?;
    Ok(Opened {
        store: store_of(opened.backend, &opened.namespace),
        shared: opened.shared,
    })
}

/// The worker's view of the concrete backend: which one writes `charges`, and where.
fn store_of(backend: lease::Backend, namespace: &str) -> Store {
    match backend {
        #[cfg(feature = "sqlite")]
        lease::Backend::Sqlite {
            backend,
            path: Some(path),
        } => Store::Sqlite {
            backend,
            path,
            namespace: namespace.to_owned(),
        },
        #[cfg(feature = "postgres")]
        lease::Backend::Postgres(backend) => Store::Postgres(backend),
        _ => {
            let _ = namespace;
            Store::Other
        }
    }
}

/// Removes what a run left in a server backend (its Postgres schema, its Redis keys), with
/// [`lease::destroy_with`]. A SQLite run lives in a file its orchestrator deletes.
pub async fn cleanup(url: &str, namespace: &str) -> OpenResult<()> {
    let url = url.trim();
    if matches!(
        lease::BackendUrl::parse(url)?.target,
        lease::Target::SqliteFile(_) | lease::Target::SqliteMemory
    ) {
        return Ok(());
    }
    Ok(lease::destroy_with(url, &OpenOptions::new().namespace(namespace)).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A URL this process refuses is named without its password.
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
