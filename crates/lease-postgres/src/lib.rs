//! RFC 002 execution leases on PostgreSQL (sqlx, tokio).
//!
//! [`PostgresBackend`] implements every lease-core client trait over one schema of a
//! PostgreSQL database (12 or newer; tested on 15), so any number of runtime processes sharing
//! that schema follow RFC 002: at most one live lease per execution, tokens that rise on every
//! claim, and fenced writes that a stale holder cannot make.
//!
//! ```no_run
//! # async fn demo() -> lease_core::Result<()> {
//! use lease_postgres::{PostgresBackend, PostgresConfig};
//! let backend = PostgresBackend::connect(
//!     PostgresConfig::new("postgres://postgres@127.0.0.1:5432/test").schema("leases"),
//! )
//! .await?;
//! let peer = backend.peer().await?; // a second process's view of the same store
//! # let _ = peer; Ok(()) }
//! ```
//!
//! How the RFC's rules map onto PostgreSQL:
//!
//! - **Schema**: every table, the token sequence and two SQL helper functions live in the
//!   configured schema, created by embedded migrations (one transaction under an advisory
//!   lock, version-checked; see [`SCHEMA_VERSION`]).
//! - **Tokens** come from one sequence per schema, so they are unique across executions and
//!   rise strictly per execution.
//! - **Claim** is one `UPDATE ... FROM (SELECT ... WHERE sort_due <= now AND claimable_at <=
//!   now ORDER BY sort_due, id LIMIT n FOR UPDATE SKIP LOCKED) RETURNING`, the select made of
//!   two (rows not running by due, expired leases by expiry), so no claim walks past a live
//!   lease. `claimable_at` (the
//!   instant the row becomes claimable, redelivery gate included) is stored and kept current by
//!   every write, using the policy's delay table (`RedeliveryPolicy::table_ms`, passed as a
//!   `bigint[]` parameter); `sort_due` (the effective due time) is a generated column. The
//!   waiting side walks a partial `(priority, sort_due, id)` index in claim order (priority
//!   levels highest first, each by due, then id) and stops after n claimable rows. A claim
//!   meeting a key with a concurrency limit runs as the keyed claim, one statement too
//!   (an advisory lock per bucket of keys, then a count in a snapshot taken after it;
//!   `gate.rs`). The same statement returns each claimed row as updated, so
//!   `claim_due_with_records` hands the dispatcher the record `get` would read right after
//!   the claim (decoded and made effective exactly as `get` does) without a second round
//!   trip; `claim_due` is that call without the records.
//! - **Fencing**: `write_step` locks the execution row `FOR SHARE`; `renew` and `release`
//!   lock it `FOR NO KEY UPDATE`; `acknowledge` compares the token in its update's WHERE,
//!   which PostgreSQL tests again on the newest row version under the update's own row lock
//!   when the row changed since the statement's snapshot. Each lock conflicts with the
//!   claim's row lock and the token is compared on the row version current after the lock
//!   is granted, in the same statement as the write. A fenced write reads a clock only for a row on its last attempt
//!   (attempt limits, schema v15): once that lease has expired the row counts as dead and
//!   every holder is `Lost`, as `get` reads it.
//! - **Batched acknowledgements**: `acknowledge_batch` is one statement over
//!   `unnest(ids, tokens, statuses, outcomes)`. Its update joins the items in id order and
//!   tests each item's token as `acknowledge` does, applying each item whose token is
//!   current exactly as `acknowledge` would; a stale item is `Lost` and untouched, judged on
//!   its newest version (the statement locks the rows it did not update to read them).
//!   If any item names an unknown execution, token 0 or a foreign token, the statement
//!   writes nothing and the first such item's error is returned. Like every write it is
//!   retried after a serialization failure or deadlock and never after a lost connection.
//! - **Wake-ups**: every statement that makes an execution claimable (admit, `admit_batch`,
//!   start, a wake on a row not running, release, a suspended acknowledgement with a wake,
//!   and the claim for its leases' expiry) calls `pg_notify` on the schema's channel with
//!   the row's `claimable_at` after the write, so it is delivered at commit and never
//!   before. [`lease_core::ExecutionClient::wakeups`] starts one listener connection per
//!   handle (outside the pool, `application_name` `lease-listen:<schema>`), reconnected
//!   with backoff and signalling "now" after every reconnect.
//! - **Admission in the application's transaction**: [`PostgresBackend::admit_in_tx`] and
//!   [`PostgresBackend::admit_batch_in_tx`] run admit's statements, `pg_notify` included, on
//!   the caller's connection inside its transaction (its own, a [`FencedTx`], a `step_in_tx`
//!   body's): the executions and their notification exist only once it commits.
//! - **Claim horizon**: the claim statement also returns the clock it ran at and the
//!   earliest `claimable_at` after the claim (its new leases and one index seek over the
//!   rest), so `claim_due_with_horizon` costs the same single round trip.
//! - **Acknowledge-and-claim**: the `acknowledge` statement and the claim statement sent as
//!   one simple-query message, which the server runs as one implicit transaction: one round
//!   trip, one commit. The claim runs in its own snapshot after the acknowledgement (so an
//!   acknowledged execution that is due again is claimed again), with its limit forced to 0
//!   when the acknowledgement is refused (unknown execution, token 0, foreign token), so a
//!   refused acknowledgement writes nothing. Both run as `EXECUTE`s of statements prepared
//!   once per connection (sqlx cannot pipeline bound statements), so nothing is planned per
//!   call.
//! - **Retention**: `purge_terminal` is one statement: `FOR UPDATE SKIP LOCKED` on up to
//!   `limit` terminal rows acknowledged before the cutoff, oldest first, from the partial
//!   index `executions_terminal` (schema v6), then deletes of those executions and of their
//!   steps, store receipts and start records (indexed by execution id and target).
//! - **Attempt limits** (schema v15): the claim copies the limit that applies onto each row
//!   it takes; the release that uses the last attempt stores status `dead` in the same
//!   statement; an expiry that uses it is read as dead at once and stored by the next claim,
//!   which leaves the row out. `list_dead` and `retry_dead` are one statement each.
//! - **Admission** may be scheduled (`Admission::not_before`); `admit_batch` is one
//!   `INSERT ... SELECT FROM unnest(...) ON CONFLICT DO NOTHING` statement.
//! - **Time** is the database's `clock_timestamp()` (one clock for every process), unless a
//!   clock is injected with [`PostgresConfig::clock`] for tests.
//! - **Failures** are typed: see [`lease_core::LeaseError`]. Serialization failures and
//!   deadlocks are retried; a connection lost after a write was sent is
//!   [`lease_core::LeaseError::OutcomeUnknown`] and never retried (a claim is never run twice
//!   for one call, so it cannot issue two tokens); reads are retried on a fresh connection.
//!
//! JSON payloads are stored as canonical text (not `jsonb`), so equality is byte equality as
//! in every other backend.
//!
//! # Cargo features
//!
#![doc = document_features::document_features!()]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod ack_and_claim;
mod admission;
mod admit_tx;
mod attempts;
mod backend;
mod browse;
mod config;
mod control;
mod counts;
mod effect;
mod error;
mod execution;
mod fenced;
mod gate;
mod heap;
mod hosts;
mod literals;
mod migrate;
mod policy;
mod redelivery;
mod rows;
mod start;
mod statements;
mod store;
mod tls;
mod wakeup;

pub use backend::PostgresBackend;
pub use config::{
    DEFAULT_ACQUIRE_TIMEOUT, DEFAULT_LOCK_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_SCHEMA,
    PostgresConfig,
};
pub use fenced::{FencedTx, MIN_STALL_BOUND_MS, stall_bound_ms};
pub use migrate::SCHEMA_VERSION;
/// The sqlx this crate links, whose `PgConnection` the fenced transactions
/// ([`PostgresBackend::begin_fenced`], [`PostgresBackend::step_in_tx`]) hand out: use it
/// rather than a separately declared sqlx, whose version could differ.
pub use sqlx;

/// The rendered SQL of the hot-path operations, so the benchmark (`crates/bench`, `cargo
/// xtask bench`) can issue exactly these statements without the library as its raw
/// baseline. Not a stable API.
#[doc(hidden)]
pub mod raw;
