//! Raw PostgreSQL: the backend's own rendered statements (`lease_postgres::raw`), bound as
//! the backend binds them, on an sqlx pool of the same size as the library's.

use async_trait::async_trait;
use lease_core::RedeliveryPolicy;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, Row};

use super::{LEASE_MS, Raw, RawLease};
use crate::error::{Result, raw};

/// The raw PostgreSQL client of one schema.
pub struct RawPostgres {
    pool: PgPool,
    sql: lease_postgres::raw::Statements,
    admit_batch: String,
    purge: String,
    schema: String,
    delays: Vec<i64>,
    url: String,
    /// The connection `ack_and_claim` runs on, with its two statements prepared.
    combined: tokio::sync::Mutex<Option<sqlx::PgConnection>>,
}

/// The names `ack_and_claim` prepares its statements under.
const ACK_NAME: &str = "bench_ack";
const CLAIM_NAME: &str = "bench_claim";

/// `$1 limit`: the bare bound of `purge_terminal`, one statement deleting up to `$1`
/// completed or failed executions, oldest ended first (the library's index order), with
/// their step records; no row locks, re-checks, receipts or start records.
const PURGE: &str = "\
WITH v AS MATERIALIZED (
    SELECT id FROM {s}.executions WHERE status IN ('completed', 'failed')
    ORDER BY last_delivery_ended_at, id LIMIT $1
),
st AS (DELETE FROM {s}.steps s USING v WHERE s.execution_id = v.id)
DELETE FROM {s}.executions e USING v WHERE e.id = v.id RETURNING e.id";

/// A text literal (the bench's ids and JSON hold no quote or backslash it must escape
/// beyond doubling quotes).
fn text_literal(v: &str) -> String {
    format!("('{}'::text)", v.replace('\'', "''"))
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
            .connect_with(session_options(url)?)
            .await
            .map_err(|e| raw("postgres", "connect", e))?;
        Ok(RawPostgres {
            pool,
            sql: lease_postgres::raw::statements(schema),
            admit_batch: ADMIT_BATCH.replace("{s}", &quoted(schema)),
            purge: PURGE.replace("{s}", &quoted(schema)),
            schema: schema.to_owned(),
            url: url.to_owned(),
            combined: tokio::sync::Mutex::new(None),
            delays: policy
                .table_ms()
                .into_iter()
                .map(|d| i64::try_from(d).unwrap_or(i64::MAX))
                .collect(),
        })
    }
}

/// `url`'s options with the library's session options (`lease_postgres::raw::
/// SESSION_OPTIONS`: the same plans as the library's statements get).
fn session_options(url: &str) -> Result<PgConnectOptions> {
    let options: PgConnectOptions = url.parse().map_err(|e| raw("postgres", "connect", e))?;
    Ok(options.options(lease_postgres::raw::SESSION_OPTIONS))
}

fn quoted(schema: &str) -> String {
    format!("\"{}\"", schema.replace('"', "\"\""))
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
            .bind(None::<i64>)
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

    /// The backend's acknowledge and claim statements, prepared (SQL `PREPARE`) on one
    /// connection, run as `EXECUTE ack(..); EXECUTE claim(..)` in one simple-query message
    /// (one implicit transaction, one round trip), as the library sends them, without the
    /// library's claim-limit guard.
    async fn ack_and_claim(
        &self,
        lease: &RawLease,
        outcome: &str,
        limit: usize,
    ) -> Result<Vec<RawLease>> {
        use sqlx::Connection;
        const OP: &str = "acknowledge_and_claim";
        let mut guard = self.combined.lock().await;
        if guard.is_none() {
            let mut conn = sqlx::PgConnection::connect_with(&session_options(&self.url)?)
                .await
                .map_err(|e| raw("postgres", OP, e))?;
            let prepare = format!(
                "PREPARE {ACK_NAME}(text, bigint, bigint, text, text) AS {};\n\
                 PREPARE {CLAIM_NAME}(bigint, bigint, bigint, bigint, bigint[]) AS {}",
                self.sql.acknowledge, self.sql.claim
            );
            sqlx::raw_sql(AssertSqlSafe(prepare))
                .execute(&mut conn)
                .await
                .map_err(|e| raw("postgres", OP, e))?;
            *guard = Some(conn);
        }
        let conn = guard
            .as_mut()
            .ok_or_else(|| raw("postgres", OP, "no connection"))?;
        let delays: Vec<String> = self.delays.iter().map(|d| format!("{d}::bigint")).collect();
        let query = format!(
            "EXECUTE {ACK_NAME}({}, ({}::bigint), (NULL::bigint), ('completed'::text), {}); \
             EXECUTE {CLAIM_NAME}(({}::bigint), (NULL::bigint), ({}::bigint), ({LEASE_MS}::bigint), \
             (ARRAY[{}]::bigint[]))",
            text_literal(&lease.id),
            lease.token,
            text_literal(outcome),
            i64::MAX,
            i64::try_from(limit).unwrap_or(i64::MAX),
            delays.join(",")
        );
        let rows = sqlx::raw_sql(AssertSqlSafe(query))
            .fetch_all(&mut *conn)
            .await
            .map_err(|e| raw("postgres", OP, e))?;
        let mut it = rows.into_iter();
        took_effect::<bool>(OP, it.next(), 2)?;
        it.map(|r| {
            Ok(RawLease {
                id: r.try_get(0).map_err(|e| raw("postgres", OP, e))?,
                token: r.try_get(1).map_err(|e| raw("postgres", OP, e))?,
            })
        })
        .collect()
    }

    async fn settle(&self) -> Result<()> {
        let s = quoted(&self.schema);
        sqlx::raw_sql(AssertSqlSafe(format!("ANALYZE {s}.executions, {s}.steps")))
            .execute(&self.pool)
            .await
            .map_err(|e| raw("postgres", "analyze", e))?;
        Ok(())
    }

    async fn vacuum(&self) -> Result<()> {
        let s = quoted(&self.schema);
        sqlx::raw_sql(AssertSqlSafe(format!("VACUUM {s}.executions, {s}.steps")))
            .execute(&self.pool)
            .await
            .map_err(|e| raw("postgres", "vacuum", e))?;
        Ok(())
    }

    async fn purge(&self, limit: usize) -> Result<usize> {
        let rows = sqlx::query(AssertSqlSafe(self.purge.as_str()))
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await
            .map_err(|e| raw("postgres", "purge", e))?;
        Ok(rows.len())
    }

    async fn clone_terminal(&self, template: &str, prefix: &str, from: u64, n: u64) -> Result<()> {
        const OP: &str = "clone_terminal";
        let s = quoted(&self.schema);
        for (table, id_column) in [("executions", "id"), ("steps", "execution_id")] {
            // Every column but the admission number: its default takes the next one from
            // the schema's sequence, as an admission does, so each copy has its own place
            // in the admission order (its index is unique) and `list_executions` pages
            // through the copies.
            let cols: Vec<String> = sqlx::query_scalar(
                "SELECT column_name::text FROM information_schema.columns
                 WHERE table_schema = $1 AND table_name = $2 AND is_generated = 'NEVER'
                   AND column_name <> 'admission_seq'
                 ORDER BY ordinal_position",
            )
            .bind(&self.schema)
            .bind(table)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| raw("postgres", OP, e))?;
            let select: Vec<String> = cols
                .iter()
                .map(|c| {
                    if c == id_column {
                        "$1 || lpad(g::text, 9, '0')".to_owned()
                    } else {
                        format!("t.\"{c}\"")
                    }
                })
                .collect();
            let quoted_cols: Vec<String> = cols.iter().map(|c| format!("\"{c}\"")).collect();
            let sql = format!(
                "INSERT INTO {s}.{table} ({}) SELECT {} FROM {s}.{table} t,
                 generate_series($2::bigint, $3::bigint - 1) g WHERE t.{id_column} = $4",
                quoted_cols.join(", "),
                select.join(", ")
            );
            let mut at = from;
            while at < from + n {
                let end = (at + 100_000).min(from + n);
                sqlx::query(AssertSqlSafe(sql.as_str()))
                    .bind(prefix)
                    .bind(i64::try_from(at).unwrap_or(0))
                    .bind(i64::try_from(end).unwrap_or(0))
                    .bind(template)
                    .execute(&self.pool)
                    .await
                    .map_err(|e| raw("postgres", OP, e))?;
                at = end;
            }
        }
        Ok(())
    }
}
