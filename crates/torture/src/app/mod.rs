//! The application's own rows. Every value step `s{i}` of the torture
//! workflow has an effect besides its step record: one row in an application table of the
//! lease's own database, written through the backend's fenced path, so that the row and the
//! step's done record commit together and only while the holder's token is current (RFC 002
//! fencing: "the check and the write will be atomic"):
//!
//! - SQLite and PostgreSQL: `step_in_tx`, table `torture_app_rows` (SQLite: in the run's
//!   file; PostgreSQL: in the run's schema);
//! - Redis: `step_in_script`, a list in the namespace's slot (`app:{<namespace>}:rows`).
//!
//! A row names the operation that wrote it (its process and op-log sequence number), which
//! [`crate::appcheck`] matches with the op log. The tables have no unique key: a step
//! written twice shows up as two rows. [`AppWrite::Unfenced`] is the negative control: the
//! row is written in a plain transaction outside the fence, then the step is recorded with
//! `Delivery::step`, and the checker must report it.

mod postgres;
mod redis;
mod row;
mod sqlite;

pub use row::AppRow;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use lease_runtime::{Delivery, DeliveryError};

/// How the workflow writes its application rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppWrite {
    /// Through the fenced path, with the step record (`step_in_tx` / `step_in_script`).
    Fenced,
    /// NEGATIVE CONTROL: a plain write outside the fence, then `Delivery::step`.
    Unfenced,
}

impl AppWrite {
    /// Parses `fenced` / `unfenced`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "fenced" => Ok(AppWrite::Fenced),
            "unfenced" => Ok(AppWrite::Unfenced),
            _ => Err("fenced or unfenced".to_owned()),
        }
    }

    /// The flag value.
    pub fn name(self) -> &'static str {
        match self {
            AppWrite::Fenced => "fenced",
            AppWrite::Unfenced => "unfenced",
        }
    }
}

/// Where the application rows live: the backend under test, concretely typed.
#[derive(Clone)]
pub enum AppStore {
    /// A table in the SQLite file.
    Sqlite(sqlite::SqliteApp),
    /// A table in the run's PostgreSQL schema.
    Postgres(postgres::PostgresApp),
    /// A list in the Redis namespace's slot.
    Redis(redis::RedisApp),
}

impl AppStore {
    /// The store of a SQLite backend on the file at `path`.
    pub fn sqlite(backend: lease::sqlite::SqliteBackend, path: std::path::PathBuf) -> Self {
        AppStore::Sqlite(sqlite::SqliteApp::new(backend, path))
    }

    /// The store of a PostgreSQL backend (its schema).
    pub fn postgres(backend: lease::postgres::PostgresBackend) -> Self {
        AppStore::Postgres(postgres::PostgresApp::new(backend))
    }

    /// The store of a Redis backend (its namespace).
    pub fn redis(backend: lease::redis::RedisBackend) -> Self {
        AppStore::Redis(redis::RedisApp::new(backend))
    }

    /// Whether the fenced write reports that its body ran (the SQL closures do; Redis's
    /// `step_in_script` does not say whether its body ran or a record was found).
    pub fn reports_body(&self) -> bool {
        !matches!(self, AppStore::Redis(_))
    }

    /// Creates the table (SQL backends; once, by the controller, before any runtime).
    pub async fn create(&self) -> Result<(), String> {
        match self {
            AppStore::Sqlite(s) => s.create().await,
            AppStore::Postgres(p) => p.create().await,
            AppStore::Redis(_) => Ok(()),
        }
    }

    /// Step `row.step` of `d` with `row` as its effect and `value` (the row's, decoded) as
    /// its value, through the fenced path; sets `ran` when the body ran (SQL backends).
    /// Returns the recorded value.
    pub async fn step_fenced(
        &self,
        d: &Delivery,
        row: AppRow,
        value: String,
        ran: Arc<AtomicBool>,
    ) -> Result<String, DeliveryError> {
        match self {
            AppStore::Sqlite(s) => s.step_fenced(d, row, value, ran).await,
            AppStore::Postgres(p) => p.step_fenced(d, row, value, ran).await,
            AppStore::Redis(r) => r.step_fenced(d, row).await,
        }
    }

    /// NEGATIVE CONTROL: writes `row` with no fence at all.
    pub async fn write_unfenced(&self, row: &AppRow) -> Result<(), String> {
        match self {
            AppStore::Sqlite(s) => s.write_unfenced(row).await,
            AppStore::Postgres(p) => p.write_unfenced(row).await,
            AppStore::Redis(r) => r.write_unfenced(row).await,
        }
    }

    /// Every committed row, in commit order.
    pub async fn rows(&self) -> Result<Vec<AppRow>, String> {
        match self {
            AppStore::Sqlite(s) => s.rows().await,
            AppStore::Postgres(p) => p.rows().await,
            AppStore::Redis(r) => r.rows().await,
        }
    }

    /// Removes what the namespace's own cleanup does not (the Redis list lies outside the
    /// library's key prefix; the SQL tables go with the file / schema).
    pub async fn destroy(&self) -> Result<(), String> {
        match self {
            AppStore::Redis(r) => r.destroy().await,
            _ => Ok(()),
        }
    }
}
