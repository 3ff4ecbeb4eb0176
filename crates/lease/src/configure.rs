//! Each backend's config built from a URL and [`OpenOptions`]: the only place options meet
//! a backend's own config type.

#[cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]
use crate::error::OpenError;
#[cfg(any(
    feature = "sqlite",
    feature = "postgres",
    feature = "redis",
    feature = "memory"
))]
use crate::options::OpenOptions;

/// Opens SQLite with `config` (file or in-memory) and the options SQLite takes.
#[cfg(feature = "sqlite")]
pub(crate) async fn sqlite(
    mut config: lease_sqlite::SqliteConfig,
    namespace: Option<&str>,
    options: &OpenOptions,
) -> Result<lease_sqlite::SqliteBackend, OpenError> {
    if let Some(namespace) = namespace {
        config = config.namespace(namespace);
    }
    if let Some(policy) = options.policy {
        config = config.policy(policy);
    }
    if let Some(clock) = &options.clock {
        config = config.clock(clock.clone());
    }
    if let Some(timeout) = options.busy_timeout {
        config = config.busy_timeout(timeout);
    }
    config = config.migrate(!options.verify_only);
    Ok(lease_sqlite::SqliteBackend::open(config).await?)
}

/// Connects to PostgreSQL at `driver_url` with the options PostgreSQL takes.
#[cfg(feature = "postgres")]
pub(crate) async fn postgres(
    driver_url: &str,
    schema: Option<&str>,
    options: &OpenOptions,
) -> Result<lease_postgres::PostgresBackend, OpenError> {
    let mut config = lease_postgres::PostgresConfig::new(driver_url);
    if let Some(schema) = schema {
        config = config.schema(schema);
    }
    if let Some(policy) = options.policy {
        config = config.policy(policy);
    }
    if let Some(clock) = &options.clock {
        config = config.clock(clock.clone());
    }
    if let Some(size) = options.pool_size {
        config = config.max_connections(size);
    }
    if let Some(timeout) = options.lock_timeout {
        config = config.lock_timeout(timeout);
    }
    config = config.migrate(!options.verify_only);
    Ok(lease_postgres::PostgresBackend::connect(config).await?)
}

/// Connects to Redis at `driver_url` (`?sslrootcert=PATH` read here) with the options
/// Redis takes.
#[cfg(feature = "redis")]
pub(crate) async fn redis(
    driver_url: &str,
    namespace: Option<&str>,
    options: &OpenOptions,
) -> Result<lease_redis::RedisBackend, OpenError> {
    let (driver_url, root_cert) = crate::url::take_param(driver_url, crate::url::ROOT_CERT_PARAM);
    let mut config = lease_redis::RedisConfig::new(driver_url.as_str());
    if let Some(path) = root_cert {
        config = config.tls_root_certificates(read_root_cert(&driver_url, &path)?);
    }
    if let Some(namespace) = namespace {
        config = config.namespace(namespace);
    }
    if let Some(policy) = options.policy {
        config = config.policy(policy);
    }
    if let Some(clock) = &options.clock {
        config = config.clock(clock.clone());
    }
    if let Some((replicas, timeout)) = options.wait_for_replicas {
        config = config.wait_for_replicas(replicas, timeout);
    }
    config = config.migrate(!options.verify_only);
    Ok(lease_redis::RedisBackend::connect(config).await?)
}

/// The PEM file of `?sslrootcert=PATH`; unreadable is [`OpenError::InvalidUrl`].
#[cfg(feature = "redis")]
fn read_root_cert(driver_url: &str, path: &str) -> Result<Vec<u8>, OpenError> {
    std::fs::read(path).map_err(|e| {
        OpenError::invalid_url(
            driver_url,
            &format!("cannot read {} {path:?}: {e}", crate::url::ROOT_CERT_PARAM),
        )
    })
}

/// The in-memory backend with the options it takes (clock, policy).
#[cfg(feature = "memory")]
pub(crate) fn memory(options: &OpenOptions) -> lease_core::MemoryBackend {
    let backend = match &options.clock {
        Some(clock) => lease_core::MemoryBackend::with_clock(clock.clone()),
        None => lease_core::MemoryBackend::new(),
    };
    match options.policy {
        Some(policy) => backend.with_policy(policy),
        None => backend,
    }
}
