//! SQLite's side of the fenced rows: `SqliteBackend::fenced` and `step_in_tx` on the
//! lease's file, against `BEGIN IMMEDIATE; INSERT; COMMIT` on a connection configured as the
//! backend configures its own.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use lease_core::{ExecutionLease, Fenced};
use lease_runtime::Delivery;
use lease_sqlite::SqliteBackend;
use rusqlite::{Connection, Transaction, TransactionBehavior, params};

use crate::error::{BenchError, Result, raw};

const CREATE: &str = include_str!("sqlite_create.sql");
const INSERT: &str = include_str!("sqlite_insert.sql");

/// The backend and the unfenced side's own connection.
pub struct SqliteApp {
    backend: SqliteBackend,
    conn: Mutex<Connection>,
}

fn insert(tx: &Transaction<'_>, key: &str) -> rusqlite::Result<usize> {
    tx.execute(INSERT, params![key, 42])
}

fn failed(op: &'static str) -> impl Fn(rusqlite::Error) -> BenchError {
    move |e| raw("sqlite", op, e)
}

impl SqliteApp {
    /// Opens the unfenced side's connection to `file` and creates the table.
    pub fn new(backend: &SqliteBackend, file: &Path) -> Result<Self> {
        let conn = lease_sqlite::raw::open(file, Duration::from_secs(5))
            .map_err(|e| raw("sqlite", "open", e))?;
        conn.execute_batch(CREATE).map_err(failed("create"))?;
        Ok(SqliteApp {
            backend: backend.clone(),
            conn: Mutex::new(conn),
        })
    }

    /// The fenced transaction.
    pub async fn fenced(&self, lease: &ExecutionLease, key: &str) -> Result<()> {
        let key = key.to_owned();
        match self.backend.fenced(lease, move |tx| insert(tx, &key)).await {
            Ok(Fenced::Accepted(1)) => Ok(()),
            other => Err(BenchError::Setup(format!("fenced: {other:?}"))),
        }
    }

    /// The same transaction without the fence.
    pub fn unfenced(&self, key: &str) -> Result<()> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(failed("begin"))?;
        insert(&tx, key).map_err(failed("insert"))?;
        tx.commit().map_err(failed("commit"))
    }

    /// The row and the step record in one fenced transaction.
    pub async fn step_in_tx(&self, d: &Delivery, key: &str) -> Result<()> {
        let owned = key.to_owned();
        let got: String = self
            .backend
            .step_in_tx(d, key, move |tx| {
                insert(tx, &owned)?;
                Ok::<_, rusqlite::Error>(owned)
            })
            .await
            .map_err(|e| BenchError::Setup(format!("step_in_tx: {e}")))?;
        if got != key {
            return Err(BenchError::Setup(format!("step_in_tx recorded {got:?}")));
        }
        Ok(())
    }
}
