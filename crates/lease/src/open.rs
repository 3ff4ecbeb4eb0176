//! [`open`] and [`open_with`]: a backend chosen by URL; [`destroy`]: the store a URL names,
//! removed. The one place that turns a URL and options into a backend's config (the worker,
//! torture, the bench and the operator command all open through here).

use std::sync::Arc;

use lease_core::SharedBackend;

use crate::error::OpenError;
use crate::opened::{Backend, Opened};
use crate::options::OpenOptions;
use crate::url::{BackendUrl, Target};

/// Opens the backend a URL names, with that backend's defaults (system or server clock,
/// default redelivery policy):
///
/// | URL | backend | feature |
/// |---|---|---|
/// | `sqlite:PATH`, `sqlite://PATH` | SQLite file, created if missing | `sqlite` (default) |
/// | `sqlite::memory:` | private in-memory SQLite | `sqlite` |
/// | `postgres://...`, `postgresql://...` | PostgreSQL, schema `lease` | `postgres` |
/// | `redis://...`, `rediss://...`, `redis+cluster://...` | Redis, namespace `lease` | `redis` |
/// | `memory:` | in-memory reference backend | `memory` |
///
/// `?namespace=NAME` picks the namespace (SQLite, Redis) or schema (PostgreSQL) instead of
/// the default; it is taken out of the URL before the driver sees it, and other query
/// parameters of a PostgreSQL or Redis URL are passed on. A URL for a backend whose feature
/// is off is [`OpenError::FeatureDisabled`].
///
/// TLS (rustls, on with the `postgres` and `redis` features): a PostgreSQL URL takes libpq's
/// `sslmode=disable|prefer|require|verify-full` and `sslrootcert=PATH|system` as libpq means
/// them (what the driver cannot match, such as `verify-ca`, is
/// [`lease_core::LeaseError::InvalidInput`]); a `rediss://` URL verifies the server against
/// the system roots, or only against the CA certificates in the PEM file
/// `?sslrootcert=PATH` (an unreadable file is [`OpenError::InvalidUrl`]). A certificate that
/// does not verify, or a plain server behind a TLS URL, fails with
/// [`lease_core::LeaseError::Unavailable`] within the backend's connect timeout. To set a
/// clock, policy or pool size, use [`open_with`].
pub async fn open(url: &str) -> Result<SharedBackend, OpenError> {
    Ok(open_with(url, &OpenOptions::new()).await?.shared)
}

/// [`open`] with [`OpenOptions`] (namespace, policy, clock, pool size...), returning the
/// shared handle and the concrete backend ([`Opened`]).
pub async fn open_with(url: &str, options: &OpenOptions) -> Result<Opened, OpenError> {
    let url = BackendUrl::parse(url)?;
    let namespace = namespace_of(&url, options)?;
    if options.shared_only && matches!(url.target, Target::SqliteMemory | Target::Memory) {
        return Err(OpenError::NotShared {
            backend: url.backend_name(),
        });
    }
    let backend = open_target(&url.target, namespace.as_deref(), options).await?;
    Ok(Opened {
        shared: shared(&backend)?,
        namespace: namespace.unwrap_or_else(|| default_namespace(&url.target).to_owned()),
        backend,
    })
}

/// Removes the store a URL names: the PostgreSQL schema (with every table in it, the
/// application's fenced tables too), the Redis namespace's keys, the SQLite namespace's
/// rows. A `sqlite::memory:` or `memory:` URL names nothing durable: `Ok` at once.
pub async fn destroy(url: &str) -> Result<(), OpenError> {
    destroy_with(url, &OpenOptions::new()).await
}

/// [`destroy`] for the namespace of `options` (or the URL's, or the default).
pub async fn destroy_with(url: &str, options: &OpenOptions) -> Result<(), OpenError> {
    let parsed = BackendUrl::parse(url)?;
    if matches!(parsed.target, Target::SqliteMemory | Target::Memory) {
        return Ok(());
    }
    let opened = open_with(url, options).await?;
    drop(opened.shared);
    remove(opened.backend).await
}

/// The namespace of `options` or of the URL; both given and different is an error.
fn namespace_of(url: &BackendUrl, options: &OpenOptions) -> Result<Option<String>, OpenError> {
    match (&url.namespace, &options.namespace) {
        (Some(a), Some(b)) if a != b => Err(OpenError::NamespaceConflict {
            url: a.clone(),
            options: b.clone(),
        }),
        (Some(a), _) => Ok(Some(a.clone())),
        (None, b) => Ok(b.clone()),
    }
}

fn default_namespace(target: &Target) -> &'static str {
    match target {
        #[cfg(feature = "sqlite")]
        Target::SqliteFile(_) | Target::SqliteMemory => lease_sqlite::DEFAULT_NAMESPACE,
        #[cfg(feature = "postgres")]
        Target::Postgres(_) => lease_postgres::DEFAULT_SCHEMA,
        #[cfg(feature = "redis")]
        Target::Redis(_) => lease_redis::DEFAULT_NAMESPACE,
        #[allow(unreachable_patterns)]
        _ => "",
    }
}

/// The backend of one URL target, its config built from `options`.
async fn open_target(
    target: &Target,
    namespace: Option<&str>,
    options: &OpenOptions,
) -> Result<Backend, OpenError> {
    let _ = (namespace, options);
    match target {
        #[cfg(feature = "sqlite")]
        Target::SqliteFile(path) => {
            let config = lease_sqlite::SqliteConfig::file(path);
            let backend = crate::configure::sqlite(config, namespace, options).await?;
            Ok(Backend::Sqlite {
                backend,
                path: Some(path.clone()),
            })
        }
        #[cfg(feature = "sqlite")]
        Target::SqliteMemory => {
            let config = lease_sqlite::SqliteConfig::in_memory();
            let backend = crate::configure::sqlite(config, namespace, options).await?;
            Ok(Backend::Sqlite {
                backend,
                path: None,
            })
        }
        #[cfg(feature = "postgres")]
        Target::Postgres(driver_url) => Ok(Backend::Postgres(
            crate::configure::postgres(driver_url, namespace, options).await?,
        )),
        #[cfg(feature = "redis")]
        Target::Redis(driver_url) => Ok(Backend::Redis(
            crate::configure::redis(driver_url, namespace, options).await?,
        )),
        #[cfg(feature = "memory")]
        Target::Memory => Ok(Backend::Memory(crate::configure::memory(options))),
        // Reached only for backends whose feature is off in this build.
        #[allow(unreachable_patterns)]
        _ => {
            let url = BackendUrl {
                target: target.clone(),
                namespace: None,
            };
            Err(OpenError::FeatureDisabled {
                backend: url.backend_name(),
                feature: url.feature(),
            })
        }
    }
}

/// The shared handle on `backend`.
fn shared(backend: &Backend) -> Result<SharedBackend, OpenError> {
    Ok(match backend {
        #[cfg(feature = "sqlite")]
        Backend::Sqlite { backend, .. } => Arc::new(backend.clone()),
        #[cfg(feature = "postgres")]
        Backend::Postgres(backend) => Arc::new(backend.clone()),
        #[cfg(feature = "redis")]
        Backend::Redis(backend) => Arc::new(backend.clone()),
        #[cfg(feature = "memory")]
        Backend::Memory(backend) => Arc::new(backend.clone()),
        Backend::_None(never, _) => match *never {},
    })
}

/// Removes what `backend`'s namespace holds, then closes it.
async fn remove(backend: Backend) -> Result<(), OpenError> {
    match backend {
        #[cfg(feature = "sqlite")]
        Backend::Sqlite { backend, .. } => Ok(backend.delete_namespace().await?),
        #[cfg(feature = "postgres")]
        Backend::Postgres(backend) => {
            let dropped = backend.drop_schema_forced().await;
            backend.close().await;
            Ok(dropped?)
        }
        #[cfg(feature = "redis")]
        Backend::Redis(backend) => Ok(backend.delete_namespace().await?),
        #[cfg(feature = "memory")]
        Backend::Memory(_) => Ok(()),
        Backend::_None(never, _) => match never {},
    }
}
