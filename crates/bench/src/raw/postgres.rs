//! Raw PostgreSQL: the backend's own rendered statements (`lease_postgres::raw`), bound as
//! the backend binds them, on an sqlx pool of the same size as the library's.

use async_trait::async_trait;
use lease_core::RedeliveryPolicy;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, Row};

use super::{LEASE_MS, Raw, RawLease};
use crate::error::{Result, raw};

/// The raw PostgreSQL client of one schema.
pub struct RawPostgres {
    pool: PgPool,
    sql: lease_postgres::raw::Statements,
    admit_batch: String,
    delays: Vec<i64>,
}

/// `$1 ids text[]`: the bare multi-row form of the backend's admit statement (the same
/// columns and clock), skipping ids that exist.
const ADMIT_BATCH: &str = "\
INSERT INTO {s}.executions AS e
    (id, workflow, input, status, token, due_at, unacknowledged_deliveries, ever_suspended,
     claimable_at)
SELECT i.id, NULL, NULL, 'admitted', 0, clk.now, 0, false, clk.now
FROM unnest($1::text[]) AS i(id),
     (SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now) AS clk
ON CONFLICT (id) DO NOTHING";

impl RawPostgres {
    /// Connects to `url` for `schema` (created by the library) with a pool of
    /// `max_connections`.
    pub async fn connect(
        url: &str,
        schema: &str,
        policy: &RedeliveryPolicy,
        max_connections: u32,
    ) -> Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .connect(url)
            .await
            .map_err(|e| raw("postgres", "connect", e))?;
        Ok(RawPostgres {
            pool,
            sql: lease_postgres::raw::statements(schema),
            admit_batch: ADMIT_BATCH
                .replace("{s}", &format!("\"{}\"", schema.replace('"', "\"\""))),
            delays: policy
                .table_ms()
                .into_iter()
                .map(|d| i64::try_from(d).unwrap_or(i64::MAX))
                .collect(),
        })
    }
}

/// Checks a fenced statement's reply: the "took effect" column `column` is non-NULL.
fn took_effect<T>(op: &'static str, row: Option<sqlx::postgres::PgRow>, column: usize) -> Result<()>
where
    T: for<'r> sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    let row = row.ok_or_else(|| raw("postgres", op, "no row (unknown execution)"))?;
    let took: Option<T> = row.try_get(column).map_err(|e| raw("postgres", op, e))?;
    took.map(|_| ())
        .ok_or_else(|| raw("postgres", op, "not accepted (lost)"))
}

#[async_trait]
impl Raw for RawPostgres {
    async fn claim(&self, limit: usize) -> Result<Vec<RawLease>> {
        let rows = sqlx::query(AssertSqlSafe(self.sql.claim.as_str()))
            .bind(i64::MAX)
            .bind(None::<i64>)
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .bind(LEASE_MS)
            .bind(&self.delays)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| raw("postgres", "claim_due", e))?;
        rows.iter()
            .map(|r| {
                Ok(RawLease {
                    id: r.try_get(0).map_err(|e| raw("postgres", "claim_due", e))?,
                    token: r.try_get(1).map_err(|e| raw("postgres", "claim_due", e))?,
                })
            })
            .collect()
    }

    async fn renew(&self, lease: &RawLease) -> Result<()> {
        let row = sqlx::query(AssertSqlSafe(self.sql.renew.as_str()))
            .bind(&lease.id)
            .bind(lease.token)
            .bind(None::<i64>)
            .bind(LEASE_MS)
            .bind(&self.delays)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| raw("postgres", "renew", e))?;
        took_effect::<i64>("renew", row, 2)
    }

    async fn write_step(&self, lease: &RawLease, step_key: &str, response: &str) -> Result<()> {
        let row = sqlx::query(AssertSqlSafe(self.sql.write_step.as_str()))
            .bind(&lease.id)
            .bind(lease.token)
            .bind(step_key)
            .bind(1_i64)
            .bind(true)
            .bind(response)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| raw("postgres", "write_step", e))?;
        took_effect::<i64>("write_step", row, 4)
    }

    async fn acknowledge(&self, lease: &RawLease, outcome: &str) -> Result<()> {
        let row = sqlx::query(AssertSqlSafe(self.sql.acknowledge.as_str()))
            .bind(&lease.id)
            .bind(lease.token)
            .bind(None::<i64>)
            .bind("completed")
            .bind(Some(outcome))
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| raw("postgres", "acknowledge", e))?;
        took_effect::<bool>("acknowledge", row, 2)
    }

    async fn admit_batch(&self, ids: &[String]) -> Result<()> {
        sqlx::query(AssertSqlSafe(self.admit_batch.as_str()))
            .bind(ids)
            .execute(&self.pool)
            .await
            .map_err(|e| raw("postgres", "admit_batch", e))?;
        Ok(())
    }
}
