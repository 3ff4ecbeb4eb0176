//! The embedded SQLite backend for RFC 002 execution leases (the default backend).
//!
//! [`SqliteBackend`] implements every [`lease_core`] client trait on a SQLite file (or a
//! process-private in-memory database) through rusqlite:
//!
//! * **Atomicity.** Every mutating operation is ONE `BEGIN IMMEDIATE` transaction: it
//!   loads the execution row, applies lease-core's state machine
//!   ([`lease_core::ExecutionRecord`]'s `effective`, `claimable`, `claim`, `holds`, `renew`,
//!   `release`, `acknowledge`, `request_wake`) and writes the row back. The write lock is
//!   held from the first read, so a fenced write can never interleave with a claim, in
//!   this process or another one opening the same file. Reads run in one read transaction.
//! * **Off the async runtime's tasks.** rusqlite blocks. Each connection has its own OS
//!   thread fed through a channel (callers await a oneshot reply); operations queued on it
//!   together share one group commit, each in its own savepoint. On a multi-thread tokio
//!   runtime an operation whose connection is idle (nothing queued, nothing running) runs
//!   inline on the calling thread instead: the channel hop cost about 24 us an operation,
//!   more than half of a small transaction. A light write (a few statements on at most 8
//!   executions) runs on the async worker itself, never waiting there: one attempt with no
//!   busy wait (on `SQLITE_BUSY` it goes, untouched, to the connection thread, which waits
//!   as usual) and WAL checkpoints sent to the thread; anything else runs inside
//!   `tokio::task::block_in_place`. Under
//!   concurrency operations still queue and group: while the thread keeps finding more than
//!   one operation waiting they queue even when the connection is momentarily idle (going
//!   inline unconditionally lost group commit; going inline whenever idle cost about 15% at
//!   a dispatcher concurrency of 64). On a current_thread runtime, where blocking in place
//!   is not allowed, every operation takes the hop. Either way operations run in submission
//!   order. Clones of a handle share its connection; [`SqliteBackend::peer`] opens another
//!   connection.
//! * **Contention.** A bounded retry of the whole transaction on `SQLITE_BUSY`/
//!   `SQLITE_LOCKED`, all attempts together waiting at most one `busy_timeout` (default 5 s,
//!   [`SqliteConfig::busy_timeout`]); still busy -> [`lease_core::LeaseError::Unavailable`]
//!   with nothing changed.
//! * **Claims through an index.** Each row carries two derived columns, the due time it is
//!   claimed with and `claimable_at` (the earliest instant it becomes claimable: due time,
//!   redelivery gate and lease expiry folded together). `claim_due` merges two partial
//!   indexes in (priority DESC, due, id) order: rows not running, walked one priority level
//!   at a time by due time over `claimable_at <= now`, and running rows keyed by `claimable_at` so only expired leases
//!   are read (a claim's cost does not grow with live leases). It re-checks each row with the
//!   state machine and claims a whole batch in one transaction with the namespace's one
//!   token counter. `acknowledge_and_claim` is one such transaction (ack, then claim).
//! * **The application's own writes, fenced.** [`SqliteBackend::fenced`] runs a synchronous
//!   closure with the application's SQL on the backend's connection, in the same
//!   `BEGIN IMMEDIATE` transaction (or group-commit savepoint) as write_step's token check,
//!   so a stale holder's rows never commit after a newer claim;
//!   [`SqliteBackend::step_in_tx`] adds the step's done record to that transaction (the
//!   effect and its record exist together or not at all, and a replay skips the closure).
//!   An authorizer keeps the closure from ending the transaction or writing `lease_`
//!   tables.
//! * **Admission in the application's transaction.** [`SqliteBackend::admit_in_tx`] and
//!   [`SqliteBackend::admit_batch_in_tx`] admit inside a rusqlite transaction of the same
//!   file (the application's own, or a fenced closure's), in a savepoint; a commit wakes
//!   dispatchers (at once from a fenced closure, through the wake log otherwise), a rollback
//!   admits nothing and wakes nobody.
//! * **Retention.** `purge_terminal` deletes old completed/failed executions with their
//!   steps, store receipts and start records in one transaction, walking a partial index of
//!   terminal rows in id order.
//! * **Ordered keys, start rates, browsing.** A claim reads the ordering and rate settings
//!   only when its opening statement found any, then checks an ordered key's head and live
//!   leases and a rate-limited key's recorded claim instants in its transaction, skipping
//!   (never counting) what they hold back. `list_executions` pages newest first through
//!   indexes in admission order (`admitted_seq`, set by every insert).
//! * **Namespaces.** Every row carries a namespace ([`SqliteConfig::namespace`]); two
//!   applications sharing a file never see each other's executions, tokens, steps, stores
//!   or starts, and each namespace has its own token counter.
//! * **Schema.** Embedded, versioned migrations (tables prefixed `lease_`, version and
//!   product marker in `lease_meta`). A newer schema, another product's marker or a file
//!   that is not a database fails with [`lease_core::LeaseError::Schema`]; nothing is
//!   rewritten. `open` migrates an older file by default; with
//!   [`SqliteConfig::migrate`]`(false)` (read-only tools) it only verifies, creating and
//!   changing nothing. See [`migrate`].
//!
//! # Durability
//!
//! Files run in WAL mode with `synchronous = NORMAL` by default ([`Synchronous`]): a commit
//! appends to the WAL without an fsync, which is what makes thousands of claims and
//! acknowledgements per second possible. A crashed *process* loses nothing it committed. A
//! power loss or OS crash may roll back the last transactions before the WAL's next sync
//! (at checkpoint), never leaving a corrupt or half-applied state. A rolled-back claim can
//! re-issue a token only after the machine itself went down, which also took down every
//! holder of that token, since SQLite's locking confines sharing to one machine; a system
//! off the machine that saw the token can still remember it. For that case
//! [`SqliteConfig::synchronous`] with [`Synchronous::Full`] syncs every COMMIT before it
//! returns (its measured cost is in docs/BENCHMARKS.md). In-memory databases are not durable at
//! all.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use lease_core::{
//!     Admission, ClaimRequest, ExecutionClient, ExecutionClientExt, ExecutionId, Fenced,
//!     HeapClient, Json,
//!     StepKey, StepWrite, WorkflowRunOutcome,
//! };
//! use lease_sqlite::{SqliteBackend, SqliteConfig};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! rt.block_on(async {
//!     let dir = tempfile::tempdir()?;
//!     let backend = SqliteBackend::open(
//!         SqliteConfig::file(dir.path().join("leases.db")).namespace("shop"),
//!     )
//!     .await?;
//!
//!     let id = ExecutionId::new("order-42")?;
//!     backend.admit(&Admission::new(id.clone())).await?;
//!
//!     // A dispatcher claims due executions; each lease carries a fresh fencing token.
//!     let now = backend.now().await?;
//!     let leases = backend
//!         .claim_due(ClaimRequest { now, limit: 10, duration: Duration::from_secs(30) })
//!         .await?;
//!     let lease = &leases[0];
//!
//!     // Fenced writes carry the lease; a stale holder would get `Fenced::Lost`.
//!     let step = StepWrite {
//!         step_key: StepKey::new("charge")?,
//!         step_attempt: 1,
//!         done: true,
//!         response: Json::parse("receipt", r#"{"charged":true}"#)?,
//!     };
//!     assert!(matches!(backend.write_step(lease, &step).await?, Fenced::Accepted(_)));
//!     let done = WorkflowRunOutcome::Completed(Json::null());
//!     assert!(matches!(backend.acknowledge(lease, &done).await?, Fenced::Accepted(_)));
//!
//!     // A second process (or a peer) opening the same file sees the outcome.
//!     let peer = backend.peer().await?;
//!     let record = peer.get(&id).await?.expect("admitted");
//!     assert!(record.status.is_terminal());
//!     Ok::<_, Box<dyn std::error::Error>>(())
//! })
//! # }
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

mod admit_tx;
mod app;
mod attempts;
mod authorizer;
mod backend;
mod browse;
mod candidates;
mod checkpoint;
mod config;
mod conn;
mod control;
mod effect;
mod engine;
mod error;
mod fenced;
mod group;
mod heap;
mod history;
mod keyed;
mod keyed_gate;
pub mod migrate;
mod namespace;
mod redelivery;
mod retention;
mod rows;
mod scope;
mod tx;
mod wakeup;

pub use app::FencedError;
pub use backend::{ConnectionHold, SqliteBackend};
pub use config::{
    DEFAULT_BUSY_TIMEOUT, DEFAULT_NAMESPACE, DEFAULT_WAKE_POLL, SqliteConfig, Synchronous,
};
pub use engine::{SqliteStore, SqliteTx};
/// The rusqlite this crate links, whose `Transaction` the fenced closures
/// ([`SqliteBackend::fenced`], [`SqliteBackend::step_in_tx`]) take: use it rather than a
/// separately declared rusqlite, whose version could differ.
pub use rusqlite;

/// The SQL of the hot-path operations, so the benchmark (`crates/bench`, `cargo xtask
/// bench`) can issue exactly these statements without the library as its raw baseline.
/// Each operation runs them in one `BEGIN IMMEDIATE` transaction. Not a stable API.
#[doc(hidden)]
pub mod raw {
    /// `$1 namespace, $2 id` -> the stored execution row (columns in the order of
    /// [`EXECUTION_COLUMNS`]).
    pub const LOAD_EXECUTION: &str = crate::rows::LOAD;
    /// The execution columns every execution read returns, in order.
    pub const EXECUTION_COLUMNS: &str = crate::rows::execution_columns!();
    /// Writes back every mutable field of an execution row (parameters in `rows.rs`).
    pub const SAVE_EXECUTION: &str = crate::rows::SAVE;
    /// `$1 namespace` -> the last issued token.
    pub const LAST_TOKEN: &str = crate::engine::claiming::LAST_TOKEN;
    /// `$1 namespace, $2 token`: records the last issued token.
    pub const STORE_LAST_TOKEN: &str = crate::engine::claiming::STORE_LAST_TOKEN;
    /// `$1 namespace, $2 now, $3 page size, $4 priority` -> claim candidates that are not
    /// running, of one priority level, in (due, id) order (columns of
    /// [`EXECUTION_COLUMNS`], then rowid, due, id). A claim walks the levels in use from
    /// the highest; admissions without a priority are at level 0.
    pub const CLAIM_FIRST: &str = crate::candidates::WAITING_FIRST;
    /// `$1 namespace, $2 now, $3 page size` -> running executions whose lease expired
    /// (and redelivery delay passed), in (priority DESC, due, id) order; a claim merges
    /// both.
    pub const CLAIM_RUNNING_FIRST: &str = crate::candidates::RUNNING_FIRST;
    /// `$1 namespace, $2 now` -> a row when some running execution is claimable (the probe
    /// a claim makes before [`CLAIM_RUNNING_FIRST`]; without a row it skips that query).
    pub const ANY_RUNNING_CLAIMABLE: &str = crate::candidates::ANY_RUNNING;
    /// `$1 namespace, $2 before, $3 limit` -> (rowid, id) of the terminal executions
    /// `purge_terminal` deletes, in id order.
    pub const PURGEABLE: &str = crate::retention::PURGEABLE;
    /// `$1..$7`: inserts a step record unless one exists.
    pub const INSERT_STEP: &str = crate::heap::INSERT_STEP;
    /// Opens a connection configured as the backend's by default (WAL, `synchronous = NORMAL`, busy
    /// timeout, statement cache), creating or migrating the schema like
    /// [`crate::SqliteBackend::open`].
    pub fn open(
        path: &std::path::Path,
        busy_timeout: std::time::Duration,
    ) -> lease_core::Result<rusqlite::Connection> {
        crate::migrate::open(
            &crate::config::Location::File(path.to_path_buf()),
            busy_timeout,
        )
    }
}
