//! Admissions inside the application's own transaction, for the `pickup in-tx` rows: each
//! writes one application row (Redis: one key) and admits one execution, committed
//! together. SQLite: `admit_in_tx` on a rusqlite transaction (`BEGIN IMMEDIATE`) of the
//! application's own connection to the lease's file; PostgreSQL: `admit_in_tx` on an sqlx
//! transaction of the application's own connection; Redis: `admit_script` with a body that
//! counts the order. The admission's instant is taken just before the admit call, after the
//! application's own write: what follows it is the admission and the commit, as a plain
//! `admit` is its statement and its commit.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lease_core::{Admission, ExecutionId};
use lease_postgres::PostgresBackend;
use lease_redis::{AdmitScript, RedisBackend};
use lease_sqlite::SqliteBackend;
use rusqlite::{Connection, TransactionBehavior};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, PgConnection};

use super::worker::unix_us;
use crate::error::{BenchError, Context, Result, raw};
use crate::fixture::{Fixture, Handle, StoreSpec};

/// The application's table (SQLite: in the lease's file; PostgreSQL: in the run's schema,
/// removed with it).
const CREATE: &str = "CREATE TABLE IF NOT EXISTS {table} (order_id text NOT NULL)";
const INSERT_SQLITE: &str = "INSERT INTO bench_orders (order_id) VALUES (?1)";

/// The Redis body: count the order in the application's key.
const BODY: &str = "redis.call('INCR', KEYS[1]) return 1";

/// One backend's way of admitting inside the application's transaction.
pub enum TxAdmitter {
    /// The backend and the application's connection to its file.
    Sqlite(SqliteBackend, Arc<Mutex<Connection>>),
    /// The backend, the application's pool (one connection) and its insert statement.
    Postgres(PostgresBackend, PgPool, String),
    /// The backend, the admitting script and the application's key.
    Redis(RedisBackend, AdmitScript, String),
}

impl TxAdmitter {
    /// The application's side of `fx`'s store: its connection and table, or its key.
    pub async fn new(fx: &Fixture) -> Result<Self> {
        match (fx.handle(), fx.spec()) {
            (Handle::Sqlite(b, file), _) => {
                let conn = lease_sqlite::raw::open(file, Duration::from_secs(5))
                    .map_err(|e| raw("sqlite", "open", e))?;
                conn.execute_batch(&CREATE.replace("{table}", "bench_orders"))
                    .map_err(|e| raw("sqlite", "create", e))?;
                Ok(TxAdmitter::Sqlite(b.clone(), Arc::new(Mutex::new(conn))))
            }
            (Handle::Postgres(b), Some(StoreSpec::Postgres { url, .. })) => {
                let table = format!("\"{}\".bench_orders", b.schema().replace('"', "\"\""));
                let pool = PgPoolOptions::new()
                    .max_connections(1)
                    .connect(&url)
                    .await
                    .map_err(|e| raw("postgres", "connect", e))?;
                sqlx::query(AssertSqlSafe(CREATE.replace("{table}", &table)))
                    .execute(&pool)
                    .await
                    .map_err(|e| raw("postgres", "create", e))?;
                let insert = format!("INSERT INTO {table} (order_id) VALUES ($1)");
                Ok(TxAdmitter::Postgres(b.clone(), pool, insert))
            }
            (Handle::Redis(b), _) => {
                let key = format!("app:{}:orders", b.hash_tag());
                Ok(TxAdmitter::Redis(b.clone(), AdmitScript::new(BODY), key))
            }
            _ => Err(BenchError::Setup(
                "no transactional admission on this backend".into(),
            )),
        }
    }

    /// Writes the application's row and admits `id` in one transaction; returns the instant
    /// (µs since the Unix epoch) just before the admit call.
    pub async fn admit(&self, id: &ExecutionId) -> Result<i64> {
        let admission = Admission::new(id.clone());
        match self {
            TxAdmitter::Sqlite(backend, conn) => {
                let (backend, conn) = (backend.clone(), conn.clone());
                tokio::task::spawn_blocking(move || sqlite_admit(&backend, &conn, &admission))
                    .await
                    .map_err(|e| BenchError::Setup(format!("admit_in_tx task: {e}")))?
            }
            TxAdmitter::Postgres(backend, pool, insert) => {
                postgres_admit(backend, pool, insert, &admission).await
            }
            TxAdmitter::Redis(backend, script, key) => {
                let t0 = unix_us();
                backend
                    .admit_script(script, &[key.as_str()], &[], &[admission])
                    .await
                    .context(|| "admit_script".into())?;
                Ok(t0)
            }
        }
    }

    /// Closes the application's connections and deletes its Redis key (outside the
    /// library's prefix, so the namespace's removal leaves it).
    pub async fn remove(self) -> Result<()> {
        match self {
            TxAdmitter::Sqlite(..) => Ok(()),
            TxAdmitter::Postgres(_, pool, _) => {
                pool.close().await;
                Ok(())
            }
            TxAdmitter::Redis(backend, _, key) => {
                let _: redis::Value = redis::cmd("DEL")
                    .arg(&key)
                    .query_async(&mut backend.connection())
                    .await
                    .map_err(|e| raw("redis", "delete key", e))?;
                Ok(())
            }
        }
    }
}

/// `BEGIN IMMEDIATE`, the application's row, `admit_in_tx`, `COMMIT`.
fn sqlite_admit(
    backend: &SqliteBackend,
    conn: &Mutex<Connection>,
    admission: &Admission,
) -> Result<i64> {
    let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| raw("sqlite", "begin", e))?;
    tx.execute(INSERT_SQLITE, [admission.id.as_str()])
        .map_err(|e| raw("sqlite", "insert", e))?;
    let t0 = unix_us();
    backend
        .admit_in_tx(&tx, admission)
        .context(|| "admit_in_tx".into())?;
    tx.commit().map_err(|e| raw("sqlite", "commit", e))?;
    Ok(t0)
}

/// `BEGIN`, the application's row, `admit_in_tx`, `COMMIT`.
async fn postgres_admit(
    backend: &PostgresBackend,
    pool: &PgPool,
    insert: &str,
    admission: &Admission,
) -> Result<i64> {
    let mut tx = pool
        .begin()
        .await
        .map_err(|e| raw("postgres", "begin", e))?;
    sqlx::query(AssertSqlSafe(insert.to_owned()))
        .bind(admission.id.as_str())
        .execute(&mut *tx)
        .await
        .map_err(|e| raw("postgres", "insert", e))?;
    let t0 = unix_us();
    let conn: &mut PgConnection = &mut tx;
    backend
        .admit_in_tx(conn, admission)
        .await
        .context(|| "admit_in_tx".into())?;
    tx.commit()
        .await
        .map_err(|e| raw("postgres", "commit", e))?;
    Ok(t0)
}
