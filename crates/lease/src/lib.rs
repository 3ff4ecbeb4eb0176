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
//! This facade re-exports [`lease_core`] (types, the client traits, the redelivery policy,
//! clocks), [`lease_runtime`] (the [`Dispatcher`] and its [`Delivery::step`], also as the
//! module `dispatcher`) and each backend compiled
//! in by cargo feature, as a module: `sqlite`, `postgres`, `redis` (the in-memory reference
//! backend, feature `memory`, is `MemoryBackend` when on). [`open()`] picks the backend by
//! URL and returns it as `Arc<dyn LeaseBackend>`.
//!
//! # Cargo features
//!
#![doc = document_features::document_features!()]
//!
//! The rest of this page is the project's README: each of its Rust blocks is a doc test of
//! this crate (they use the default `sqlite` feature).
//!
#![cfg_attr(feature = "sqlite", doc = include_str!("../README.md"))]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod configure;
pub mod error;
pub mod open;
pub mod opened;
pub mod options;
pub mod url;

pub use lease_core::*;
pub use lease_runtime::*;

/// The runtime ([`lease_runtime`]) under the module name it had inside lease-core, so
/// `dispatcher::metric_names` and other module paths keep working.
pub use lease_runtime as dispatcher;

pub use crate::error::OpenError;
pub use crate::open::{destroy, destroy_with, open, open_with};
pub use crate::opened::{Backend, Opened};
pub use crate::options::OpenOptions;
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

/// Recurring admissions ([`lease_schedule`]), feature `schedule` (default): a cron
/// expression in an explicit time zone admits one execution per occurrence, id
/// `schedule:<name>:<unix ms>`, on any backend, with no leader.
#[cfg(feature = "schedule")]
pub use lease_schedule as schedule;
