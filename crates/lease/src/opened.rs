//! [`Opened`]: what [`crate::open_with`] returns — the shared handle the dispatcher drives
//! and the same backend, concrete, for what the client traits do not cover (fenced
//! application transactions, schema maintenance, a second handle).

use std::path::PathBuf;

use lease_core::SharedBackend;

/// A backend opened by URL: one store, two views of it.
#[derive(Clone)]
#[non_exhaustive]
pub struct Opened {
    /// The backend behind the client traits (RFC 002's operations).
    pub shared: SharedBackend,
    /// The same handle, concrete.
    pub backend: Backend,
    /// The namespace (SQLite, Redis) or schema (PostgreSQL) in use; empty for `memory:`.
    pub namespace: String,
}

/// The concrete backend of an [`Opened`]. A variant exists when its feature is on.
#[derive(Clone)]
#[non_exhaustive]
pub enum Backend {
    /// SQLite; `path` is the database file (`None` for `sqlite::memory:`).
    #[cfg(feature = "sqlite")]
    Sqlite {
        /// The backend handle.
        backend: lease_sqlite::SqliteBackend,
        /// The database file.
        path: Option<PathBuf>,
    },
    /// PostgreSQL.
    #[cfg(feature = "postgres")]
    Postgres(lease_postgres::PostgresBackend),
    /// Redis (one server or a cluster).
    #[cfg(feature = "redis")]
    Redis(lease_redis::RedisBackend),
    /// The in-memory reference backend.
    #[cfg(feature = "memory")]
    Memory(lease_core::MemoryBackend),
    #[doc(hidden)]
    /// Keeps the enum inhabited when no backend feature is on.
    _None(std::convert::Infallible, std::marker::PhantomData<PathBuf>),
}
