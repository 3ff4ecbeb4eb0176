//! The application's own record of a charge: a `charges` table in the lease database
//! (SQLite: the shared file, one `namespace` column as the library's own rows have;
//! PostgreSQL: the run's schema). The charge step writes its row through the backend's
//! fenced `step_in_tx`, so the row and the step's done record commit together, and only
//! while the worker's token is current, or not at all: a stale holder cannot add a second
//! row for the same order. Backends without a
//! fenced transaction here (Redis, memory) have no `charges` table.

use std::time::Duration;

use lease::{Delivery, DeliveryError};
use serde_json::Value;

use crate::backend::{OpenResult, Store};
use crate::events::TARGET;

/// One row of `charges`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChargeRow {
    /// The order charged.
    pub order_id: i64,
    /// The execution that charged it.
    pub execution_id: String,
    /// The worker that wrote the row.
    pub worker: String,
    /// The fencing token of the delivery that wrote the row.
    pub token: u64,
    /// The provider's receipt.
    pub receipt: String,
    /// The amount.
    pub cents: i64,
}

/// A stored token as a token.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn token_of(stored: i64) -> u64 {
    u64::try_from(stored).unwrap_or(0)
}

/// The token as stored (tokens are below `i64::MAX` on every backend with this table).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn stored_token(token: u64) -> i64 {
    i64::try_from(token).unwrap_or(i64::MAX)
}

#[cfg(feature = "postgres")]
fn pg_table(backend: &lease::postgres::PostgresBackend) -> String {
    format!("\"{}\".charges", backend.schema().replace('"', "\"\""))
}

impl Store {
    /// Whether this backend has the `charges` table (a fenced charge step).
    pub fn has_charges(&self) -> bool {
        !matches!(self, Store::Other)
    }

    /// Creates the `charges` table if it does not exist yet (every process calls it at
    /// start; concurrent calls are safe).
    pub async fn create_charges(&self) -> OpenResult<()> {
        match self {
            #[cfg(feature = "sqlite")]
            Store::Sqlite { path, .. } => {
                let path = path.clone();
                tokio::task::spawn_blocking(move || -> rusqlite::Result<()> {
                    let conn = rusqlite::Connection::open(path)?;
                    conn.busy_timeout(Duration::from_secs(5))?;
                    conn.execute_batch(
                        "CREATE TABLE IF NOT EXISTS charges (
                             namespace TEXT NOT NULL,
                             order_id INTEGER NOT NULL,
                             execution_id TEXT NOT NULL,
                             worker TEXT NOT NULL,
                             token INTEGER NOT NULL,
                             receipt TEXT NOT NULL,
                             cents INTEGER NOT NULL
                         )",
                    )
                })
                .await??;
                Ok(())
            }
            #[cfg(feature = "postgres")]
            Store::Postgres(backend) => {
                let table = pg_table(backend);
                let mut tx = backend.pool().begin().await?;
                // CREATE TABLE IF NOT EXISTS is not safe against itself: one at a time.
                sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
                    .bind(format!("lease-worker charges {table}"))
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "CREATE TABLE IF NOT EXISTS {table} (
                         id bigserial PRIMARY KEY,
                         order_id bigint NOT NULL,
                         execution_id text NOT NULL,
                         worker text NOT NULL,
                         token bigint NOT NULL,
                         receipt text NOT NULL,
                         cents bigint NOT NULL
                     )"
                )))
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(())
            }
            Store::Other => Ok(()),
        }
    }

    /// The charge step's fenced transaction: inserts `row` and records `value` as the done
    /// record of step `charge`, in one transaction of the backend's `step_in_tx`. With a
    /// non-zero `stall` the worker then blocks (a synchronous call) inside the transaction,
    /// after the insert and before the commit, so a test can freeze it there. A redelivery
    /// that finds the step recorded returns the recorded value and writes nothing.
    ///
    /// On a backend without `charges` ([`Store::has_charges`]) this is never called.
    pub async fn charge_in_tx(
        &self,
        d: &Delivery,
        row: ChargeRow,
        value: Value,
        stall: Duration,
    ) -> Result<Value, DeliveryError> {
        let announce = move |row: &ChargeRow| {
            tracing::info!(
                target: TARGET,
                token = row.token,
                order = row.order_id,
                receipt = %row.receipt,
                "charge row inserted"
            );
            if !stall.is_zero() {
                tracing::info!(
                    target: TARGET,
                    token = row.token,
                    stall_ms = u64::try_from(stall.as_millis()).unwrap_or(u64::MAX),
                    "stalling in the charge transaction"
                );
                std::thread::sleep(stall);
            }
        };
        match self {
            #[cfg(feature = "sqlite")]
            Store::Sqlite {
                backend, namespace, ..
            } => {
                let namespace = namespace.clone();
                backend
                    .step_in_tx(d, "charge", move |tx| {
                        tx.execute(
                            "INSERT INTO charges
                                 (namespace, order_id, execution_id, worker, token, receipt, cents)
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                            rusqlite::params![
                                namespace,
                                row.order_id,
                                row.execution_id,
                                row.worker,
                                stored_token(row.token),
                                row.receipt,
                                row.cents,
                            ],
                        )?;
                        announce(&row);
                        Ok::<_, rusqlite::Error>(value)
                    })
                    .await
            }
            #[cfg(feature = "postgres")]
            Store::Postgres(backend) => {
                let sql = format!(
                    "INSERT INTO {} (order_id, execution_id, worker, token, receipt, cents)
                     VALUES ($1, $2, $3, $4, $5, $6)",
                    pg_table(backend)
                );
                backend
                    .step_in_tx(d, "charge", async |conn: &mut sqlx::PgConnection| {
                        sqlx::query(sqlx::AssertSqlSafe(sql))
                            .bind(row.order_id)
                            .bind(&row.execution_id)
                            .bind(&row.worker)
                            .bind(stored_token(row.token))
                            .bind(&row.receipt)
                            .bind(row.cents)
                            .execute(&mut *conn)
                            .await?;
                        announce(&row);
                        Ok::<_, sqlx::Error>(value)
                    })
                    .await
            }
            Store::Other => {
                let _ = (d, row, value, announce);
                Err(DeliveryError::Backend(lease::LeaseError::invalid(
                    "charges",
                    "this backend has no charges table",
                )))
            }
        }
    }

    /// The committed `charges` rows of `order_id` in this run, in insertion order; `None`
    /// on a backend without the table.
    pub async fn charges(&self, order_id: i64) -> OpenResult<Option<Vec<ChargeRow>>> {
        match self {
            #[cfg(feature = "sqlite")]
            Store::Sqlite {
                path, namespace, ..
            } => {
                let (path, namespace) = (path.clone(), namespace.clone());
                let rows = tokio::task::spawn_blocking(move || -> rusqlite::Result<_> {
                    let conn = rusqlite::Connection::open(path)?;
                    conn.busy_timeout(Duration::from_secs(5))?;
                    let mut stmt = conn.prepare(
                        "SELECT order_id, execution_id, worker, token, receipt, cents
                         FROM charges WHERE namespace = ?1 AND order_id = ?2 ORDER BY rowid",
                    )?;
                    let rows = stmt.query_map(rusqlite::params![namespace, order_id], |r| {
                        Ok(ChargeRow {
                            order_id: r.get(0)?,
                            execution_id: r.get(1)?,
                            worker: r.get(2)?,
                            token: token_of(r.get(3)?),
                            receipt: r.get(4)?,
                            cents: r.get(5)?,
                        })
                    })?;
                    rows.collect::<rusqlite::Result<Vec<_>>>()
                })
                .await??;
                Ok(Some(rows))
            }
            #[cfg(feature = "postgres")]
            Store::Postgres(backend) => {
                use sqlx::Row;
                let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT order_id, execution_id, worker, token, receipt, cents
                     FROM {} WHERE order_id = $1 ORDER BY id",
                    pg_table(backend)
                )))
                .bind(order_id)
                .fetch_all(backend.pool())
                .await?;
                let mut out = Vec::with_capacity(rows.len());
                for r in rows {
                    out.push(ChargeRow {
                        order_id: r.try_get(0)?,
                        execution_id: r.try_get(1)?,
                        worker: r.try_get(2)?,
                        token: token_of(r.try_get(3)?),
                        receipt: r.try_get(4)?,
                        cents: r.try_get(5)?,
                    });
                }
                Ok(Some(out))
            }
            Store::Other => {
                let _ = order_id;
                Ok(None)
            }
        }
    }
}
