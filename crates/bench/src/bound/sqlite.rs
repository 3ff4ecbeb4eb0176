//! The SQLite bound: a file of its own, configured as the backend configures its own (WAL,
//! `synchronous = NORMAL`), one rusqlite connection (SQLite has one writer), each claim and
//! each acknowledgement one `BEGIN IMMEDIATE` transaction.

use rusqlite::{Connection, TransactionBehavior, params};

use super::protocol::{LEASE_MS, check_acknowledged, check_drained};
use crate::anchors::Counters;
use crate::error::{BenchError, Result};

const SETUP: &str = "\
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY,
    due_at INTEGER NOT NULL,
    state INTEGER NOT NULL DEFAULT 0,
    token INTEGER NOT NULL DEFAULT 0,
    lease_until INTEGER
);
CREATE INDEX jobs_due ON jobs (due_at, id) WHERE state = 0;";

const NOW: &str = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";

fn db(op: &str, e: impl std::fmt::Display) -> BenchError {
    BenchError::Setup(format!("bound sqlite {op}: {e}"))
}

/// One claim transaction: up to `batch` due jobs, token + 1, lease set.
fn claim(conn: &mut Connection, batch: usize) -> rusqlite::Result<Vec<(i64, i64)>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let claimed = {
        let mut stmt = tx.prepare_cached(&format!(
            "UPDATE jobs SET state = 1, token = token + 1, lease_until = {NOW} + ?2 \
             WHERE id IN (SELECT id FROM jobs WHERE state = 0 AND due_at <= {NOW} \
                          ORDER BY due_at, id LIMIT ?1) \
             RETURNING id, token"
        ))?;
        let rows = stmt.query_map(params![batch as i64, LEASE_MS], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
        rows.collect::<rusqlite::Result<Vec<_>>>()?
    };
    tx.commit()?;
    Ok(claimed)
}

/// One acknowledgement transaction: completes the jobs whose token still matches.
fn acknowledge(conn: &mut Connection, claimed: &[(i64, i64)]) -> rusqlite::Result<u64> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut done = 0u64;
    {
        let mut stmt = tx.prepare_cached(
            "UPDATE jobs SET state = 2, lease_until = NULL \
             WHERE id = ?1 AND token = ?2 AND state = 1",
        )?;
        for (id, token) in claimed {
            done += stmt.execute(params![id, token])? as u64;
        }
    }
    tx.commit()?;
    Ok(done)
}

fn drain_blocking(path: &std::path::Path, batch: usize, jobs: u64) -> Result<f64> {
    let mut conn = Connection::open(path).map_err(|e| db("open", e))?;
    conn.execute_batch(SETUP).map_err(|e| db("setup", e))?;
    conn.execute(
        &format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1) \
             INSERT INTO jobs (id, due_at) SELECT i, {NOW} FROM n"
        ),
        params![jobs as i64],
    )
    .map_err(|e| db("fill", e))?;
    let started = std::time::Instant::now();
    loop {
        let claimed = claim(&mut conn, batch).map_err(|e| db("claim", e))?;
        if claimed.is_empty() {
            break;
        }
        let n = acknowledge(&mut conn, &claimed).map_err(|e| db("acknowledge", e))?;
        check_acknowledged(n, claimed.len())?;
    }
    let secs = started.elapsed().as_secs_f64();
    let done: i64 = conn
        .query_row("SELECT count(*) FROM jobs WHERE state = 2", [], |r| {
            r.get(0)
        })
        .map_err(|e| db("count", e))?;
    check_drained(u64::try_from(done).unwrap_or(0), jobs)?;
    Ok(secs)
}

/// Makes the file with `jobs` due, drains it on a blocking thread, removes it.
pub async fn run(batch: usize, jobs: u64) -> Result<(f64, Counters, Counters)> {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let dir = std::env::temp_dir().join(format!("lease-bound-{}", &id[..12]));
    std::fs::create_dir_all(&dir).map_err(|e| db("dir", e))?;
    let path = dir.join("bound.db");
    let result = tokio::task::spawn_blocking(move || drain_blocking(&path, batch, jobs))
        .await
        .map_err(|e| db("thread", e))?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok((result?, Counters::None, Counters::None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_small_bound_run_drains_every_job() {
        let (secs, _, _) = run(32, 500).await.expect("bound run");
        assert!(secs > 0.0);
    }
}
