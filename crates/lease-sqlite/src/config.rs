//! How to open a SQLite lease store: where it lives, which namespace, clock and policy.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use lease_core::{RedeliveryPolicy, SharedClock, SystemClock};

/// Default `busy_timeout`: how long one operation waits in total for another connection's
/// write lock.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Default [`SqliteConfig::wake_poll`]: how often a listening process looks for other
/// processes' wake-ups (one `PRAGMA data_version` on an idle connection).
pub const DEFAULT_WAKE_POLL: Duration = Duration::from_millis(5);

/// How a database file's commits reach the disk (SQLite `PRAGMA synchronous`, in WAL mode).
/// RFC 002 fencing needs a token, once a caller heard of it, never to be issued again; a
/// claim that a power loss rolled back is issued again by the next claim. The default stays
/// `NORMAL` for its measured cost (docs/decisions/0028-sqlite-write-transactions.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Synchronous {
    /// `NORMAL` (the default): commits append to the WAL without a sync (the WAL is synced
    /// at checkpoints). A process crash loses nothing; a power loss or OS crash may roll
    /// back the last commits, and a token issued by a lost claim can be issued again. Only
    /// a system off the machine can still remember the first: every holder on the machine
    /// went down with it, and SQLite's locking confines sharing to one machine.
    #[default]
    Normal,
    /// `FULL`: every COMMIT syncs the WAL before it returns, so whatever a caller was told
    /// (a claim's token included) survives a power loss or OS crash. For tokens that
    /// systems off the machine see. Each commit waits for the disk: one operation in
    /// flight runs about 30 times slower on the measured machine (group commit shares a
    /// sync, so high concurrency pays about 2x), and a writer in a tight loop holds the
    /// lock long enough to starve other processes' writes past their `busy_timeout`.
    Full,
}

impl Synchronous {
    /// The `PRAGMA synchronous` value.
    pub(crate) fn pragma(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        }
    }
}

/// The namespace used when none is configured.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Where the database lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Location {
    /// A database file; other processes may open the same file.
    File(PathBuf),
    /// A named in-memory database shared by every connection of this process that opens
    /// the same name; it disappears when its last connection closes.
    Memory(String),
}

impl Location {
    /// A human-readable name for errors.
    pub(crate) fn describe(&self) -> String {
        match self {
            Location::File(path) => path.display().to_string(),
            Location::Memory(name) => format!("in-memory database {name}"),
        }
    }
}

/// Configuration of a [`crate::SqliteBackend`] (plain owned-self setters).
///
/// ```
/// use std::time::Duration;
/// use lease_sqlite::SqliteConfig;
///
/// let config = SqliteConfig::file("/tmp/leases.db")
///     .namespace("billing")
///     .busy_timeout(Duration::from_secs(2));
/// # let _ = config;
/// ```
#[derive(Clone)]
pub struct SqliteConfig {
    pub(crate) location: Location,
    pub(crate) namespace: String,
    pub(crate) clock: SharedClock,
    pub(crate) policy: RedeliveryPolicy,
    pub(crate) busy_timeout: Duration,
    pub(crate) wake_poll: Duration,
    pub(crate) synchronous: Synchronous,
    pub(crate) migrate: bool,
}

impl SqliteConfig {
    /// A database file at `path`, created (with the schema) if missing. Several processes
    /// and peers may open the same file; writes serialise on SQLite's write lock.
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self::at(Location::File(path.into()))
    }

    /// A fresh named in-memory database, private to this process. Handles made by
    /// [`crate::SqliteBackend::peer`] open the same database; it disappears when the
    /// last handle is dropped. Nothing is durable.
    pub fn in_memory() -> Self {
        Self::at(Location::Memory(format!("lease-{}", uuid::Uuid::new_v4())))
    }

    fn at(location: Location) -> Self {
        SqliteConfig {
            location,
            namespace: DEFAULT_NAMESPACE.to_owned(),
            clock: Arc::new(SystemClock),
            policy: RedeliveryPolicy::default(),
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            wake_poll: DEFAULT_WAKE_POLL,
            synchronous: Synchronous::default(),
            migrate: true,
        }
    }

    /// The namespace (default `"default"`): executions, tokens, steps, stores and starts
    /// of different namespaces in one file never see each other, and each namespace has
    /// its own token counter (RFC 002: tokens rise per backend namespace).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// The authoritative clock for claims, renewals and releases (default: the system
    /// clock; tests inject a [`lease_core::ManualClock`]). Every process sharing a file
    /// should read the same clock: on one machine the system clock is that clock.
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// The redelivery policy (RFC 002 "Redelivery delay"). Every handle on a namespace
    /// should use the same policy: the gate a delivery's end sets is computed with the
    /// policy of the handle that wrote it, and a claim also checks its own.
    pub fn policy(mut self, policy: RedeliveryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// How long one operation waits in total on another connection's lock (SQLite
    /// `busy_timeout`, default 5 s), its own short bounded retries included (each retry
    /// waits only for what is left); after that the operation fails with
    /// [`lease_core::LeaseError::Unavailable`] and changed nothing.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// How often this process's wake-up watcher looks for other processes' writes to the
    /// file (default [`DEFAULT_WAKE_POLL`], 1 ms ..= 1 s, else `InvalidInput` at open): the
    /// bound on how late a dispatcher here hears of work another process admitted. Handles
    /// in this process on one file and namespace share one watcher, which uses the interval
    /// of the first handle opened. In-memory databases have no watcher.
    pub fn wake_poll(mut self, interval: Duration) -> Self {
        self.wake_poll = interval;
        self
    }

    /// How a file's commits reach the disk (default [`Synchronous::Normal`]: a power loss
    /// may roll back the last commits); [`Synchronous::Full`] makes every commit, and so
    /// every token, survive it, at a measured cost (see each variant). No effect on
    /// in-memory databases.
    pub fn synchronous(mut self, synchronous: Synchronous) -> Self {
        self.synchronous = synchronous;
        self
    }

    /// Whether `open` creates or upgrades the schema (the default, `true`: an application
    /// handle keeps its file current). With `false` it only verifies, changing nothing, that
    /// the file exists at this library's schema version and, for a namespace other than
    /// [`DEFAULT_NAMESPACE`], that the namespace holds something; otherwise it fails with
    /// [`lease_core::LeaseError::SchemaMismatch`] (found `None`: no file, no schema or an
    /// empty namespace). For read-only tools: an old file is not altered under live
    /// traffic, a mistyped path or namespace is not created.
    pub fn migrate(mut self, migrate: bool) -> Self {
        self.migrate = migrate;
        self
    }
}

impl fmt::Debug for SqliteConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteConfig")
            .field("location", &self.location)
            .field("namespace", &self.namespace)
            .field("clock", &self.clock)
            .field("policy", &self.policy)
            .field("busy_timeout", &self.busy_timeout)
            .field("wake_poll", &self.wake_poll)
            .field("synchronous", &self.synchronous)
            .field("migrate", &self.migrate)
            .finish()
    }
}
