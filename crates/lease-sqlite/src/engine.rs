//! lease-core's engine over this backend's connection: [`SqliteStore`] runs each engine
//! step as one operation of the connection's group commit (its own savepoint, re-run after
//! a busy database), and [`SqliteTx`] reads and writes the backend's own tables.
//!
//! The backend's steps, stores, effects and start requests run on the engine
//! ([`clients`]); its executions still run its own statements, which read and write the
//! same rows. The conformance suite runs on `Engine<SqliteStore>` as on the backend itself,
//! so the two agree on every rule.

mod clients;
mod history;
mod namespace;
mod rows;
mod scan;
mod store;
mod tables;
mod tx;

pub use store::SqliteStore;
pub use tx::SqliteTx;
