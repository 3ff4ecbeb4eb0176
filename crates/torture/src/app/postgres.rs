//! PostgreSQL: the application rows in table `torture_app_rows` of the run's schema,
//! written with `PostgresBackend::step_in_tx` (fenced) or a plain statement on the pool
//! (the negative control).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use lease::postgres::PostgresBackend;
use lease_runtime::{Delivery, DeliveryError};
use sqlx::{AssertSqlSafe, PgConnection, Row};

use super::row::{AppRow, loaded, stored_token};

const CREATE: &str = include_str!("postgres_create.sql");
const INSERT: &str = include_str!("postgres_insert.sql");
const ROWS: &str = include_str!("postgres_rows.sql");

/// The PostgreSQL application store.
#[derive(Clone)]
pub struct PostgresApp {
    backend: PostgresBackend,
    table: String,
}

impl PostgresApp {
    /// The store of `backend` (a table in its schema).
    pub fn new(backend: PostgresBackend) -> Self {
        let table = format!(
            "\"{}\".torture_app_rows",
            backend.schema().replace('"', "\"\"")
        );
        PostgresApp { backend, table }
    }

    fn sql(&self, template: &str) -> AssertSqlSafe<String> {
        AssertSqlSafe(template.replace("{table}", &self.table))
    }

    async fn insert(&self, conn: &mut PgConnection, row: &AppRow) -> sqlx::Result<()> {
        sqlx::query(self.sql(INSERT))
            .bind(&row.execution)
            .bind(&row.step)
            .bind(stored_token(row.token))
            .bind(i64::from(row.process))
            .bind(stored_token(row.seq))
            .bind(&row.value)
            .execute(conn)
            .await
            .map(|_| ())
    }

    pub async fn create(&self) -> Result<(), String> {
        sqlx::query(self.sql(CREATE))
            .execute(self.backend.pool())
            .await
            .map(|_| ())
            .map_err(|e| format!("postgres app rows: {e}"))
    }

    pub async fn step_fenced(
        &self,
        d: &Delivery,
        row: AppRow,
        value: String,
        ran: Arc<AtomicBool>,
    ) -> Result<String, DeliveryError> {
        self.backend
            .step_in_tx(d, &row.step, async |conn: &mut PgConnection| {
                self.insert(conn, &row).await?;
                ran.store(true, Ordering::SeqCst);
                Ok::<_, sqlx::Error>(value)
            })
            .await
    }

    pub async fn write_unfenced(&self, row: &AppRow) -> Result<(), String> {
        let mut conn = self
            .backend
            .pool()
            .acquire()
            .await
            .map_err(|e| e.to_string())?;
        self.insert(&mut conn, row).await.map_err(|e| e.to_string())
    }

    pub async fn rows(&self) -> Result<Vec<AppRow>, String> {
        let rows = sqlx::query(self.sql(ROWS))
            .fetch_all(self.backend.pool())
            .await
            .map_err(|e| format!("postgres app rows: {e}"))?;
        rows.iter()
            .map(|r| {
                Ok(AppRow {
                    execution: r.try_get(0)?,
                    step: r.try_get(1)?,
                    token: loaded(r.try_get(2)?),
                    process: loaded(r.try_get(3)?),
                    seq: loaded(r.try_get(4)?),
                    value: r.try_get(5)?,
                })
            })
            .collect::<sqlx::Result<Vec<_>>>()
            .map_err(|e| format!("postgres app rows: {e}"))
    }
}
