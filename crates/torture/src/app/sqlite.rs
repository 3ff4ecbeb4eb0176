//! SQLite: the application rows in table `torture_app_rows` of the run's file, written with
//! `SqliteBackend::step_in_tx` (fenced) or `unfenced_for_tests` (the negative control).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lease::sqlite::SqliteBackend;
use lease_runtime::{Delivery, DeliveryError};
use rusqlite::{Transaction, params};

use super::row::{AppRow, loaded, stored_token};

const CREATE: &str = include_str!("sqlite_create.sql");
const INSERT: &str = include_str!("sqlite_insert.sql");
const ROWS: &str = include_str!("sqlite_rows.sql");

/// The SQLite application store.
#[derive(Clone)]
pub struct SqliteApp {
    backend: SqliteBackend,
    path: PathBuf,
}

fn insert(tx: &Transaction<'_>, row: &AppRow) -> rusqlite::Result<usize> {
    tx.execute(
        INSERT,
        params![
            row.execution,
            row.step,
            stored_token(row.token),
            i64::from(row.process),
            stored_token(row.seq),
            row.value,
        ],
    )
}

impl SqliteApp {
    /// The store of `backend`, whose file is `path`.
    pub fn new(backend: SqliteBackend, path: PathBuf) -> Self {
        SqliteApp { backend, path }
    }

    /// A plain connection to the file, for the table and the final reads.
    fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> impl Future<Output = Result<T, String>> {
        let path = self.path.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                let conn = rusqlite::Connection::open(&path)?;
                conn.busy_timeout(Duration::from_secs(10))?;
                f(&conn)
            })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("sqlite app rows: {e}"))
        }
    }

    pub async fn create(&self) -> Result<(), String> {
        self.blocking(|c| c.execute_batch(CREATE)).await
    }

    pub async fn step_fenced(
        &self,
        d: &Delivery,
        row: AppRow,
        value: String,
        ran: Arc<AtomicBool>,
    ) -> Result<String, DeliveryError> {
        let step = row.step.clone();
        self.backend
            .step_in_tx(d, &step, move |tx| {
                insert(tx, &row)?;
                ran.store(true, Ordering::SeqCst);
                Ok::<_, rusqlite::Error>(value)
            })
            .await
    }

    pub async fn write_unfenced(&self, row: &AppRow) -> Result<(), String> {
        let row = row.clone();
        self.backend
            .unfenced_for_tests(move |tx| insert(tx, &row))
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    pub async fn rows(&self) -> Result<Vec<AppRow>, String> {
        self.blocking(|c| {
            let mut stmt = c.prepare(ROWS)?;
            let rows = stmt.query_map([], |r| {
                Ok(AppRow {
                    execution: r.get(0)?,
                    step: r.get(1)?,
                    token: loaded(r.get(2)?),
                    process: loaded(r.get(3)?),
                    seq: loaded(r.get(4)?),
                    value: r.get(5)?,
                })
            })?;
            rows.collect()
        })
        .await
    }
}
