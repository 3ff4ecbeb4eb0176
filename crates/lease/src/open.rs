//! [`open`]: a backend chosen by URL, behind `Arc<dyn LeaseBackend>`.

use std::sync::Arc;

use lease_core::LeaseBackend;

use crate::error::OpenError;
use crate::url::BackendUrl;

/// Opens the backend a URL names, with that backend's defaults (system or server clock,
/// default redelivery policy, default namespace or schema):
///
/// | URL | backend | feature |
/// |---|---|---|
/// | `sqlite:PATH`, `sqlite://PATH` | SQLite file, created if missing | `sqlite` (default) |
/// | `sqlite::memory:` | private in-memory SQLite | `sqlite` |
/// | `postgres://...`, `postgresql://...` | PostgreSQL, schema `lease` | `postgres` |
/// | `redis://...`, `rediss://...` | Redis, namespace `lease` | `redis` |
/// | `memory:` | in-memory reference backend | `memory` |
///
/// A URL for a backend whose feature is off is [`OpenError::FeatureDisabled`]. To set a
/// namespace, clock or policy, build the backend from its config in [`crate::sqlite`],
/// `lease::postgres` or `lease::redis` instead.
pub async fn open(url: &str) -> Result<Arc<dyn LeaseBackend>, OpenError> {
    let target = BackendUrl::parse(url)?;
    match target {
        #[cfg(feature = "sqlite")]
        BackendUrl::SqliteFile(path) => {
            let config = lease_sqlite::SqliteConfig::file(path);
            Ok(Arc::new(lease_sqlite::SqliteBackend::open(config).await?))
        }
        #[cfg(feature = "sqlite")]
        BackendUrl::SqliteMemory => {
            let config = lease_sqlite::SqliteConfig::in_memory();
            Ok(Arc::new(lease_sqlite::SqliteBackend::open(config).await?))
        }
        #[cfg(feature = "memory")]
        BackendUrl::Memory => Ok(Arc::new(lease_core::MemoryBackend::new())),
        // Reached only for backends whose feature is off in this build.
        #[allow(unreachable_patterns)]
        other => Err(OpenError::FeatureDisabled {
            backend: backend_name(&other),
            feature: other.feature(),
        }),
    }
}

fn backend_name(url: &BackendUrl) -> &'static str {
    match url {
        BackendUrl::SqliteFile(_) | BackendUrl::SqliteMemory => "SQLite",
        BackendUrl::Postgres(_) => "PostgreSQL",
        BackendUrl::Redis(_) => "Redis",
        BackendUrl::Memory => "in-memory",
    }
}
