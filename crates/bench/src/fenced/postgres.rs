//! PostgreSQL's side of the fenced rows: `begin_fenced` + `commit` and `step_in_tx` in the
//! run's schema, against the same statements in a plain pool transaction.

use lease_core::{ExecutionLease, Fenced};
use lease_postgres::PostgresBackend;
use lease_runtime::Delivery;
use sqlx::{AssertSqlSafe, PgConnection};

use crate::error::{BenchError, Result, raw};

const CREATE: &str = include_str!("postgres_create.sql");
const INSERT: &str = include_str!("postgres_insert.sql");

/// The backend and its insert statement.
pub struct PostgresApp {
    backend: PostgresBackend,
    insert: String,
}

fn failed(op: &'static str) -> impl Fn(sqlx::Error) -> BenchError {
    move |e| raw("postgres", op, e)
}

impl PostgresApp {
    /// Creates the table in `backend`'s schema.
    pub async fn new(backend: &PostgresBackend) -> Result<Self> {
        let table = format!(
            "\"{}\".bench_charges",
            backend.schema().replace('"', "\"\"")
        );
        sqlx::query(AssertSqlSafe(CREATE.replace("{table}", &table)))
            .execute(backend.pool())
            .await
            .map_err(failed("create"))?;
        Ok(PostgresApp {
            backend: backend.clone(),
            insert: INSERT.replace("{table}", &table),
        })
    }

    async fn insert(&self, conn: &mut PgConnection, key: &str) -> sqlx::Result<()> {
        sqlx::query(AssertSqlSafe(self.insert.clone()))
            .bind(key)
            .bind(42_i64)
            .execute(conn)
            .await
            .map(|_| ())
    }

    /// The fenced transaction.
    pub async fn fenced(&self, lease: &ExecutionLease, key: &str) -> Result<()> {
        let mut tx = self
            .backend
            .begin_fenced(lease)
            .await
            .map_err(|e| BenchError::Setup(format!("begin_fenced: {e}")))?;
        self.insert(&mut tx, key).await.map_err(failed("insert"))?;
        match tx.commit().await {
            Ok(Fenced::Accepted(())) => Ok(()),
            other => Err(BenchError::Setup(format!("fenced commit: {other:?}"))),
        }
    }

    /// The same transaction without the fence.
    pub async fn unfenced(&self, key: &str) -> Result<()> {
        let mut tx = self.backend.pool().begin().await.map_err(failed("begin"))?;
        self.insert(&mut tx, key).await.map_err(failed("insert"))?;
        tx.commit().await.map_err(failed("commit"))
    }

    /// The row and the step record in one fenced transaction.
    pub async fn step_in_tx(&self, d: &Delivery, key: &str) -> Result<()> {
        let _: String = self
            .backend
            .step_in_tx(d, key, async |conn: &mut PgConnection| {
                self.insert(conn, key).await?;
                Ok::<_, sqlx::Error>(key.to_owned())
            })
            .await
            .map_err(|e| BenchError::Setup(format!("step_in_tx: {e}")))?;
        Ok(())
    }
}
