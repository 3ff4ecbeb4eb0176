//! lease-core's engine over this backend's connection: [`SqliteStore`] runs each engine
//! step as one operation of the connection's group commit (its own savepoint, re-run after
//! a busy database), and [`SqliteTx`] reads and writes the backend's own tables.
//!
//! The backend's steps, stores, effects and start requests run on the engine
//! ([`clients`]); its executions still run its own statements, which read and write the
//! same rows. The conformance suite runs on `Engine<SqliteStore>` as on the backend itself,
//! so the two agree on every rule.

mod cache;
mod claim;
pub(crate) mod claiming;
mod clients;
mod history;
pub(crate) mod lists;
mod namespace;
mod row;
mod rows;
mod scan;
mod store;
mod tables;
mod tx;

pub(crate) use clients::admit_rows;
#[cfg(test)]
pub(crate) use clients::claim_one;
pub use store::SqliteStore;
pub use tx::SqliteTx;
