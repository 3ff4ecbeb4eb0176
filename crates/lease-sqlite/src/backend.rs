//! [`SqliteBackend`], the handle: opening, peers, and the transactions the engine and the
//! fenced application transactions run on its connection.

use std::fmt;
use std::sync::Arc;

use lease_core::engine::Engine;
use lease_core::limits::MAX_ID_BYTES;
use lease_core::{LeaseError, Result};
use rusqlite::Transaction;

use crate::config::SqliteConfig;
use crate::conn::{ConnHandle, Weight};
use crate::engine::SqliteStore;
use crate::error::OpResult;
use crate::migrate;
use crate::scope::Scope;
use crate::wakeup::{self, Wakes};

/// The SQLite lease backend: implements every lease-core client trait, so it is a
/// [`lease_core::LeaseBackend`].
///
/// Each handle owns one connection with its own OS thread; clones share that connection
/// (an operation runs inline when it is idle, else queues on its thread),
/// [`SqliteBackend::peer`] opens another one to the same database, as a second runtime
/// process would. Every mutating operation is one `BEGIN IMMEDIATE` transaction, so the
/// fencing check and the write it guards are atomic across every connection and process
/// sharing the file (RFC 002 "Fencing").
///
/// Every handle of this process on one database and namespace shares one wake-up hub
/// ([`lease_core::ExecutionClient::wakeups`]), signalled right after each commit that made
/// an execution claimable; other processes' such writes reach it through a wake log watched
/// with `PRAGMA data_version` (see docs/decisions/0025-wake-ups.md).
#[derive(Clone)]
pub struct SqliteBackend {
    engine: Engine<SqliteStore>,
    config: Arc<SqliteConfig>,
}

impl fmt::Debug for SqliteBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteBackend")
            .field("location", &self.config.location)
            .field("namespace", &self.store().scope.namespace)
            .finish_non_exhaustive()
    }
}

/// Test support: see [`SqliteBackend::hold_connection_for_tests`].
#[doc(hidden)]
#[must_use = "the connection is released when the hold is dropped"]
pub struct ConnectionHold<'a>(#[allow(dead_code)] std::sync::MutexGuard<'a, rusqlite::Connection>);

fn check_namespace(namespace: &str) -> Result<()> {
    if namespace.is_empty() {
        return Err(LeaseError::invalid("namespace", "must not be empty"));
    }
    if namespace.len() > MAX_ID_BYTES {
        return Err(LeaseError::invalid(
            "namespace",
            format!(
                "{} bytes, over the limit of {MAX_ID_BYTES}",
                namespace.len()
            ),
        ));
    }
    if namespace.chars().any(char::is_control) {
        return Err(LeaseError::invalid(
            "namespace",
            "must not contain control characters",
        ));
    }
    Ok(())
}

impl SqliteBackend {
    /// Opens (creating if needed) the database, migrates its schema and starts the
    /// connection thread. With [`SqliteConfig::migrate`] `false` it creates and changes
    /// nothing: a missing file or a schema at another version is
    /// [`LeaseError::SchemaMismatch`], an empty non-default namespace `InvalidInput`.
    ///
    /// Fails with [`LeaseError::Schema`] when the file is not a SQLite database, belongs to
    /// another product, or has a newer schema version; with `InvalidInput` for a bad
    /// namespace; with `Unavailable` when the database stays locked.
    pub async fn open(config: SqliteConfig) -> Result<Self> {
        check_namespace(&config.namespace)?;
        wakeup::check_poll(config.wake_poll)?;
        let location = config.location.clone();
        let busy_timeout = config.busy_timeout;
        let synchronous = config.synchronous;
        // A COMMIT that syncs the disk must not run on an async worker (crate::conn).
        let worker_writes = matches!(config.location, crate::config::Location::Memory(_))
            || synchronous == crate::config::Synchronous::Normal;
        let (migrate, namespace) = (config.migrate, config.namespace.clone());
        let conn = ConnHandle::spawn(
            move || match migrate {
                true => migrate::open_with(&location, busy_timeout, synchronous),
                false => migrate::open_verified(&location, busy_timeout, synchronous, &namespace),
            },
            busy_timeout,
            worker_writes,
        )
        .await?;
        let scope = Arc::new(Scope {
            location: config.location.describe(),
            namespace: config.namespace.clone(),
            clock: config.clock.clone(),
            policy: config.policy,
        });
        let wakes = wakeup::shared(&config.location, &config.namespace, config.wake_poll);
        let store = SqliteStore {
            conn,
            scope,
            wakes,
            busy_timeout,
        };
        let engine = Engine::over(store, config.clock.clone()).with_policy(config.policy);
        Ok(SqliteBackend {
            engine,
            config: Arc::new(config),
        })
    }

    /// A new connection (own thread) to the same database, namespace, clock and policy
    /// (the createPeer model).
    pub async fn peer(&self) -> Result<Self> {
        Self::open((*self.config).clone()).await
    }

    /// Test support, not a stable API: holds this handle's connection until the guard is
    /// dropped, so operations submitted meanwhile (on this handle and its clones) queue and
    /// then run together as one group commit (up to 64). Deterministic grouping for tests.
    #[doc(hidden)]
    pub fn hold_connection_for_tests(&self) -> ConnectionHold<'_> {
        ConnectionHold(self.store().conn.hold())
    }

    /// Test support, not a stable API: operations queued for this handle's connection
    /// thread and not yet taken by it.
    #[doc(hidden)]
    pub fn queued_operations_for_tests(&self) -> usize {
        self.store().conn.queued()
    }

    /// Test support, not a stable API: whole-transaction retries on lock contention that
    /// this handle's connection made so far (all attempts of one operation share one
    /// `busy_timeout`; a test counts them instead of timing them).
    #[doc(hidden)]
    pub fn busy_retries_for_tests(&self) -> u64 {
        self.store().conn.busy_retries()
    }

    /// The namespace this handle reads and writes.
    pub fn namespace(&self) -> &str {
        &self.store().scope.namespace
    }

    /// This handle's scope (namespace, clock, policy).
    pub(crate) fn scope(&self) -> &Arc<Scope> {
        &self.store().scope
    }

    /// This handle's wake-up hub (shared by every handle on its database and namespace).
    pub(crate) fn wakes(&self) -> &Arc<Wakes> {
        &self.store().wakes
    }

    /// This handle's connection.
    pub(crate) fn connection(&self) -> &ConnHandle {
        &self.store().conn
    }

    /// The engine over this handle's connection: the client calls written once in
    /// lease-core run on it.
    pub(crate) fn engine(&self) -> &Engine<SqliteStore> {
        &self.engine
    }

    /// The engine's store over this handle's connection and namespace.
    pub fn store(&self) -> &SqliteStore {
        self.engine.store()
    }

    /// A mutating operation that never makes anything claimable, of `weight` (where it may
    /// run: [`Weight`]).
    pub(crate) async fn write<T: Send + 'static>(
        &self,
        operation: &'static str,
        weight: Weight,
        f: impl FnMut(&Transaction<'_>, &Scope) -> OpResult<T> + Send + 'static,
    ) -> Result<T> {
        self.store().write(operation, weight, f).await
    }

    /// A read-only operation, in a transaction of its own.
    pub(crate) async fn read<T: Send + 'static>(
        &self,
        operation: &'static str,
        f: impl FnMut(&Transaction<'_>, &Scope) -> OpResult<T> + Send + 'static,
    ) -> Result<T> {
        self.store().read(operation, f).await
    }
}
