//! Execution leases with fencing tokens (RFC 002), in one crate.
//!
//! A workflow execution (say `order-42`) is claimed by one worker at a time with a *lease*:
//! an expiry the worker keeps renewing while it is alive, and a *fencing token* that rises
//! with every claim. Every write that could conflict (a step result, the final
//! acknowledgement) carries the token and is checked against the current one in the same
//! atomic step as the write. A worker that was slow or frozen past its expiry, and lost the
//! execution to a newer claim, gets [`Fenced::Lost`] for its writes and changes nothing:
//! the current holder's saves win, not the first ones to arrive.
//!
//! This facade re-exports [`lease_core`] (types, the four client traits, the redelivery
//! policy, clocks, the dispatcher) and each backend compiled in by cargo feature:
//!
//! | feature | module | backend |
//! |---|---|---|
//! | `sqlite` (default) | [`sqlite`] | embedded SQLite file or in-memory database |
//! | `postgres` | [`postgres`] | PostgreSQL through sqlx |
//! | `redis` | [`redis`] | Redis through Lua scripts |
//! | `memory` | `memory` | the in-memory reference backend (tests) |
//!
//! [`open()`] picks the backend by URL and returns it as `Arc<dyn LeaseBackend>`.
//!
//! # Example
//!
//! Admit an execution, claim it, record a step, acknowledge it, and stop on `Lost`:
//!
//! ```
//! use std::time::Duration;
//! use lease::{
//!     Admission, ClaimRequest, ExecutionId, Fenced, Json, StepKey, StepWrite, WorkflowRunOutcome,
//! };
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # if !cfg!(feature = "sqlite") { return Ok(()); }
//! let backend = lease::open("sqlite::memory:").await?;
//! backend.admit(&Admission::new(ExecutionId::new("order-42")?)).await?;
//!
//! let now = backend.now().await?;
//! let request = ClaimRequest { now, limit: 10, duration: Duration::from_secs(30) };
//! for lease in backend.claim_due(request).await? {
//!     let charge = StepWrite {
//!         step_key: StepKey::new("charge")?,
//!         step_attempt: 1,
//!         done: true,
//!         response: Json::parse("receipt", r#"{"receipt":"r-1"}"#)?,
//!     };
//!     match backend.write_step(&lease, &charge).await? {
//!         // Continue with the *recorded* value: it may be an earlier write of this holder.
//!         Fenced::Accepted(record) => assert_eq!(record.response, charge.response),
//!         // A newer claim exists: stop, make no further writes, do not acknowledge.
//!         Fenced::Lost => continue,
//!     }
//!     let done = WorkflowRunOutcome::Completed(Json::parse("result", r#"{"ok":true}"#)?);
//!     if backend.acknowledge(&lease, &done).await?.is_lost() {
//!         continue; // nothing changed; the current holder decides the outcome
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Pickup and scheduling
//!
//! A [`Dispatcher`] claims, renews and acknowledges for you. It claims as soon as work is
//! admitted (wake-ups across processes) or becomes due (a timer on the next claimable
//! instant every claim reports), not at a poll; admissions can be scheduled and batched:
//!
//! ```
//! use std::time::Duration;
//! use lease::{Admission, Delivery, Dispatcher, DispatcherOptions, ExecutionId, Json, Reply,
//!             WorkflowRunOutcome};
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # if !cfg!(feature = "sqlite") { return Ok(()); }
//! let backend = lease::open("sqlite::memory:").await?;
//! let (tx, mut ran) = tokio::sync::mpsc::unbounded_channel();
//! let dispatcher = Dispatcher::start(backend.clone(), move |d: Delivery| {
//!     let tx = tx.clone();
//!     async move {
//!         let _ = tx.send(d.execution_id().to_string());
//!         Ok(Reply::Acknowledge(WorkflowRunOutcome::Completed(Json::parse("out", "true")?)))
//!     }
//! }, DispatcherOptions::new().concurrency(8))?;
//!
//! // Due now: a dispatcher in this process or any other starts it at once.
//! backend.admit(&Admission::new(ExecutionId::new("order-42")?)).await?;
//! assert_eq!(ran.recv().await.as_deref(), Some("order-42"));
//!
//! // Not claimable before a given instant of the backend clock.
//! let at = backend.now().await?.saturating_add(Duration::from_millis(50));
//! backend.admit(&Admission::new(ExecutionId::new("reminder-42")?).not_before(at)).await?;
//! assert_eq!(ran.recv().await.as_deref(), Some("reminder-42"));
//! assert!(backend.now().await? >= at);
//!
//! // Up to 1000 at once, atomically; bad input in any item admits nothing.
//! let batch = (0..100)
//!     .map(|i| ExecutionId::new(format!("import-{i:03}")).map(Admission::new))
//!     .collect::<Result<Vec<_>, _>>()?;
//! backend.admit_batch(&batch).await?;
//! for _ in 0..100 {
//!     assert!(ran.recv().await.is_some_and(|id| id.starts_with("import-")));
//! }
//! dispatcher.shutdown(Duration::from_secs(5)).await;
//! # Ok(())
//! # }
//! ```

pub mod error;
pub mod open;
pub mod url;

pub use lease_core::*;

pub use crate::error::OpenError;
pub use crate::open::open;
pub use crate::url::{BackendUrl, Target};

/// The embedded SQLite backend ([`lease_sqlite`]), feature `sqlite` (default):
/// `SqliteBackend::open(SqliteConfig::file(path))`, one `BEGIN IMMEDIATE` transaction per
/// operation, several processes may share a file.
#[cfg(feature = "sqlite")]
pub use lease_sqlite as sqlite;

/// The PostgreSQL backend ([`lease_postgres`]), feature `postgres`:
/// `PostgresBackend::connect(PostgresConfig::new(url).schema(name))`, row locks, one schema
/// per store.
#[cfg(feature = "postgres")]
pub use lease_postgres as postgres;

/// The Redis backend ([`lease_redis`]), feature `redis`:
/// `RedisBackend::connect(RedisConfig::new(url).namespace(name))`, one Lua script per
/// operation, every key of a namespace in one hash slot.
#[cfg(feature = "redis")]
pub use lease_redis as redis;
