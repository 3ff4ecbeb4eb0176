//! [`open`]: a backend chosen by URL, behind `Arc<dyn LeaseBackend>`.

use std::sync::Arc;

use lease_core::LeaseBackend;

use crate::error::OpenError;
use crate::url::BackendUrl;

/// Opens the backend a URL names, with that backend's defaults (system or server clock,
/// default redelivery policy):
///
/// | URL | backend | feature |
/// |---|---|---|
/// | `sqlite:PATH`, `sqlite://PATH` | SQLite file, created if missing | `sqlite` (default) |
/// | `sqlite::memory:` | private in-memory SQLite | `sqlite` |
/// | `postgres://...`, `postgresql://...` | PostgreSQL, schema `lease` | `postgres` |
/// | `redis://...`, `rediss://...` | Redis, namespace `lease` | `redis` |
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
/// [`lease_core::LeaseError::InvalidInput`]; see lease-postgres' DESIGN notes); a `rediss://` URL verifies
/// the server against the system roots, or only against the CA certificates in the PEM file
/// `?sslrootcert=PATH` (an unreadable file is [`OpenError::InvalidUrl`]). A certificate that
/// does not verify, or a plain server behind a TLS URL, fails with
/// [`lease_core::LeaseError::Unavailable`] within the backend's connect timeout. To set a clock, policy or pool size, build the
/// backend from its config in `lease::sqlite`, `lease::postgres` or `lease::redis`.
pub async fn open(url: &str) -> Result<Arc<dyn LeaseBackend>, OpenError> {
    let url = BackendUrl::parse(url)?;
    match &url.target {
        #[cfg(feature = "sqlite")]
        crate::url::Target::SqliteFile(path) => {
            open_sqlite(lease_sqlite::SqliteConfig::file(path), &url).await
        }
        #[cfg(feature = "sqlite")]
        crate::url::Target::SqliteMemory => {
            open_sqlite(lease_sqlite::SqliteConfig::in_memory(), &url).await
        }
        #[cfg(feature = "postgres")]
        crate::url::Target::Postgres(driver_url) => {
            let mut config = lease_postgres::PostgresConfig::new(driver_url.as_str());
            if let Some(schema) = &url.namespace {
                config = config.schema(schema.as_str());
            }
            Ok(Arc::new(
                lease_postgres::PostgresBackend::connect(config).await?,
            ))
        }
        #[cfg(feature = "redis")]
        crate::url::Target::Redis(driver_url) => open_redis(driver_url, &url).await,
        #[cfg(feature = "memory")]
        crate::url::Target::Memory => Ok(Arc::new(lease_core::MemoryBackend::new())),
        // Reached only for backends whose feature is off in this build.
        #[allow(unreachable_patterns)]
        _ => Err(OpenError::FeatureDisabled {
            backend: url.backend_name(),
            feature: url.feature(),
        }),
    }
}

#[cfg(feature = "sqlite")]
async fn open_sqlite(
    mut config: lease_sqlite::SqliteConfig,
    url: &BackendUrl,
) -> Result<Arc<dyn LeaseBackend>, OpenError> {
    if let Some(namespace) = &url.namespace {
        config = config.namespace(namespace.as_str());
    }
    Ok(Arc::new(lease_sqlite::SqliteBackend::open(config).await?))
}

#[cfg(feature = "redis")]
async fn open_redis(
    driver_url: &str,
    url: &BackendUrl,
) -> Result<Arc<dyn LeaseBackend>, OpenError> {
    let (driver_url, root_cert) = crate::url::take_param(driver_url, crate::url::ROOT_CERT_PARAM);
    let mut config = lease_redis::RedisConfig::new(driver_url.as_str());
    if let Some(path) = root_cert {
        let pem = std::fs::read(&path).map_err(|e| {
            OpenError::invalid_url(
                &driver_url,
                &format!("cannot read {} {path:?}: {e}", crate::url::ROOT_CERT_PARAM),
            )
        })?;
        config = config.tls_root_certificates(pem);
    }
    if let Some(namespace) = &url.namespace {
        config = config.namespace(namespace.as_str());
    }
    Ok(Arc::new(lease_redis::RedisBackend::connect(config).await?))
}
