//! The PostgreSQL bound: a table of its own in a schema of its own, plain SQL over sqlx.

use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, Row};

use super::protocol::{Claimed, LEASE_MS, check_acknowledged, check_drained, timed};
use crate::anchors::{Counters, Probe};
use crate::error::{BenchError, Result};

/// The table, its claim-order index of the due jobs, and `$1` jobs due now (token 0).
const SETUP: &str = "\
CREATE SCHEMA {s};
CREATE TABLE {s}.jobs (
    id bigint PRIMARY KEY,
    due_at bigint NOT NULL,
    state smallint NOT NULL DEFAULT 0,
    token bigint NOT NULL DEFAULT 0,
    lease_until bigint
);
CREATE INDEX jobs_due ON {s}.jobs (due_at, id) WHERE state = 0;";

const FILL: &str = "\
INSERT INTO {s}.jobs (id, due_at)
SELECT i, (extract(epoch FROM clock_timestamp()) * 1000)::bigint FROM generate_series(1, $1) AS i";

/// `$1` batch: the due jobs in order, skipping locked ones; token + 1, lease set; one commit.
const CLAIM: &str = "\
WITH clk AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now),
due AS (
    SELECT id FROM {s}.jobs, clk WHERE state = 0 AND due_at <= clk.now
    ORDER BY due_at, id LIMIT $1 FOR UPDATE SKIP LOCKED
)
UPDATE {s}.jobs AS j SET state = 1, token = j.token + 1, lease_until = clk.now + $2
FROM due, clk WHERE j.id = due.id
RETURNING j.id, j.token";

/// `$1` ids, `$2` tokens: completes those whose token still matches; one commit.
const ACK: &str = "\
UPDATE {s}.jobs AS j SET state = 2, lease_until = NULL
FROM unnest($1::bigint[], $2::bigint[]) AS a(id, token)
WHERE j.id = a.id AND j.token = a.token AND j.state = 1";

const DONE: &str = "SELECT count(*) FROM {s}.jobs WHERE state = 2";

fn sql(text: &str, schema: &str) -> String {
    text.replace("{s}", schema)
}

fn db(op: &str, e: impl std::fmt::Display) -> BenchError {
    BenchError::Setup(format!("bound postgres {op}: {e}"))
}

/// One client: claim, acknowledge, until a claim is empty.
async fn client(pool: PgPool, schema: String, batch: usize) -> Result<()> {
    let (claim, ack) = (sql(CLAIM, &schema), sql(ACK, &schema));
    loop {
        let rows = sqlx::query(AssertSqlSafe(claim.as_str()))
            .bind(i64::try_from(batch).unwrap_or(i64::MAX))
            .bind(LEASE_MS)
            .fetch_all(&pool)
            .await
            .map_err(|e| db("claim", e))?;
        if rows.is_empty() {
            return Ok(());
        }
        let claimed: Vec<Claimed> = rows
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<std::result::Result<_, sqlx::Error>>()
            .map_err(|e| db("claim reply", e))?;
        let (ids, tokens): (Vec<i64>, Vec<i64>) = claimed.iter().copied().unzip();
        let done = sqlx::query(AssertSqlSafe(ack.as_str()))
            .bind(&ids)
            .bind(&tokens)
            .execute(&pool)
            .await
            .map_err(|e| db("acknowledge", e))?;
        check_acknowledged(done.rows_affected(), claimed.len())?;
    }
}

/// Makes the table with `jobs` due, drains it, drops it: seconds and the probe's readings.
pub async fn run(
    url: &str,
    batch: usize,
    clients: usize,
    jobs: u64,
    probe: &Probe,
) -> Result<(f64, Counters, Counters)> {
    let pool = PgPoolOptions::new()
        .max_connections(u32::try_from(clients).unwrap_or(8))
        .connect(url)
        .await
        .map_err(|e| db("connect", e))?;
    let id = uuid::Uuid::new_v4().simple().to_string();
    let schema = format!("lease_bound_{}", &id[..12]);
    let result = drain(&pool, &schema, batch, clients, jobs, probe).await;
    let dropped = sqlx::raw_sql(AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE"
    )))
    .execute(&pool)
    .await
    .map_err(|e| db("drop", e));
    pool.close().await;
    let out = result?;
    dropped?;
    Ok(out)
}

async fn drain(
    pool: &PgPool,
    schema: &str,
    batch: usize,
    clients: usize,
    jobs: u64,
    probe: &Probe,
) -> Result<(f64, Counters, Counters)> {
    sqlx::raw_sql(AssertSqlSafe(sql(SETUP, schema)))
        .execute(pool)
        .await
        .map_err(|e| db("setup", e))?;
    sqlx::query(AssertSqlSafe(sql(FILL, schema)))
        .bind(i64::try_from(jobs).unwrap_or(i64::MAX))
        .execute(pool)
        .await
        .map_err(|e| db("fill", e))?;
    sqlx::raw_sql(AssertSqlSafe(format!("ANALYZE {schema}.jobs")))
        .execute(pool)
        .await
        .map_err(|e| db("analyze", e))?;
    let before = probe.read().await?;
    let secs = timed(clients, |_| client(pool.clone(), schema.to_owned(), batch)).await?;
    let after = probe.read().await?;
    let done: i64 = sqlx::query_scalar(AssertSqlSafe(sql(DONE, schema)))
        .fetch_one(pool)
        .await
        .map_err(|e| db("count", e))?;
    check_drained(u64::try_from(done).unwrap_or(0), jobs)?;
    Ok((secs, before, after))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small bound run on the shared PostgreSQL drains every job and leaves no schema.
    #[tokio::test]
    async fn a_small_bound_run_drains_every_job() {
        let url = lease_testserver::postgres_url();
        let (secs, _, _) = run(&url, 32, 3, 500, &Probe::None)
            .await
            .expect("bound run");
        assert!(secs > 0.0);
    }
}
