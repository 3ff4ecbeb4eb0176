//! What stored work costs in space: bytes per completed execution and per
//! step record on each backend, PostgreSQL's table and index sizes at the largest stored
//! count, and PostgreSQL under churn (dead tuples and autovacuum while executions are
//! admitted, completed and purged round after round).
//!
//! Sizes are what the server reports for the fixture's own store only, so other users of
//! a shared server do not count: Redis `MEMORY USAGE` of every key of the namespace
//! (SCAN), PostgreSQL `pg_table_size` / `pg_indexes_size` of the schema's tables, SQLite
//! the file's used pages after a checkpoint. The completed executions are copies of one the
//! library completed ([`crate::raw::Raw::clone_terminal`]): live rows only, no dead
//! versions; the churn rows show what updates and deletes leave behind.
//!
//! The raw bound of a size is the payload the store has to keep: the execution id and, per
//! step record, its key and response text (no raw client involved).

use lease_core::ExecutionClientExt;
use std::time::Duration;

use futures::StreamExt;
use lease_core::{Fenced, Json, Timestamp, WorkflowRunOutcome};
use serde::Serialize;

use crate::args::{Kind, Options};
use crate::client::STEP_RESPONSE;
use crate::error::{BenchError, Context, Result};
use crate::fill;
use crate::fixture::{Fixture, StoreSpec};
use crate::load;

/// Completed executions of the per-execution rows.
pub const EXECUTIONS: u64 = 100_000;

/// Completed executions of PostgreSQL's table-size rows (capped by `--stored-max`).
pub const LARGE: u64 = 1_000_000;

/// Step records per execution of the step rows.
pub const STEPS: usize = 3;

/// Churn: rounds, and executions admitted, completed and purged in each.
pub const CHURN_ROUNDS: usize = 8;
/// Executions per churn round.
pub const CHURN_BATCH: u64 = 10_000;

/// The word that selects every row of this module (`--only footprint`).
pub const NAME: &str = "footprint";

/// One measured size.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Backend name.
    pub backend: &'static str,
    /// What was measured.
    pub name: String,
    /// The value.
    pub value: Option<f64>,
    /// Its unit.
    pub unit: &'static str,
    /// The payload bound, where one applies.
    pub payload: Option<f64>,
    /// 1-minute load average when measured.
    pub load_1m: f64,
    /// Why the measurement did not complete.
    pub error: Option<String>,
}

impl Row {
    fn new(kind: Kind, name: String, unit: &'static str, value: Result<f64>) -> Self {
        let load_1m = load::one_minute();
        let (value, error) = match value {
            Ok(v) => (Some(v), None),
            Err(e) => (None, Some(e.to_string())),
        };
        Row {
            backend: kind.name(),
            name,
            value,
            unit,
            payload: None,
            load_1m,
            error,
        }
    }

    fn payload(mut self, p: f64) -> Self {
        self.payload = Some(p);
        self
    }
}

/// Every footprint row of one backend (none for the memory backend).
pub async fn rows(kind: Kind, options: &Options) -> Vec<Row> {
    if kind == Kind::Memory || !options.selected(NAME) {
        return Vec::new();
    }
    let n = EXECUTIONS.min(options.stored_max);
    let mut out = Vec::new();
    let id_bytes = crate::raw::clone_id("p", n - 1).len() as f64;
    let step_bytes = ("step-0".len() + STEP_RESPONSE.len()) as f64;
    let per = |bytes: Result<(u64, u64)>| bytes.map(|(b, n)| b as f64 / n as f64);
    let zero = completed_size(kind, n, 0, options).await;
    let three = completed_size(kind, n, STEPS, options).await;
    let per_step = match (&zero, &three) {
        (Ok((b0, n0)), Ok((b3, n3))) => {
            Ok((*b3 as f64 / *n3 as f64 - *b0 as f64 / *n0 as f64) / STEPS as f64)
        }
        (Err(e), _) | (_, Err(e)) => Err(BenchError::Setup(e.to_string())),
    };
    out.push(
        Row::new(
            kind,
            format!("bytes per completed execution, 0 steps ({n} stored)"),
            "bytes",
            per(zero),
        )
        .payload(id_bytes),
    );
    out.push(
        Row::new(
            kind,
            format!("bytes per completed execution, {STEPS} steps ({n} stored)"),
            "bytes",
            per(three),
        )
        .payload(id_bytes + STEPS as f64 * step_bytes),
    );
    out.push(Row::new(kind, "bytes per step record".into(), "bytes", per_step).payload(step_bytes));
    if kind == Kind::Postgres {
        out.extend(postgres_tables(LARGE.min(options.stored_max), options).await);
        out.extend(postgres_churn(options).await);
    }
    out
}

/// The store's size before and after `n` completed executions with `steps` step records
/// each: (bytes added, n).
async fn completed_size(kind: Kind, n: u64, steps: usize, options: &Options) -> Result<(u64, u64)> {
    let fx = Fixture::new(kind, options).await?;
    let result = async {
        let spec = fx
            .spec()
            .ok_or_else(|| BenchError::Setup("no store".into()))?;
        let before = size(&spec).await?;
        fill::completed(&fx, steps, n).await?;
        let after = size(&spec).await?;
        Ok((after.saturating_sub(before), n))
    }
    .await;
    fx.remove_after(result).await
}

/// Bytes the store holds now.
async fn size(spec: &StoreSpec) -> Result<u64> {
    match spec {
        StoreSpec::Sqlite { file, .. } => sqlite_size(file),
        StoreSpec::Postgres { url, schema } => {
            let pool = pg_pool(url).await?;
            let sizes = pg_sizes(&pool, schema).await?;
            pool.close().await;
            Ok(sizes.iter().map(|s| s.table + s.indexes).sum())
        }
        StoreSpec::Redis { url, namespace } => redis_size(url, namespace).await,
    }
}

/// Used pages of the SQLite file after a checkpoint (free pages not counted).
fn sqlite_size(file: &std::path::Path) -> Result<u64> {
    let conn = rusqlite::Connection::open(file)
        .map_err(|e| BenchError::Setup(format!("open {}: {e}", file.display())))?;
    let q = |sql: &str| -> Result<i64> {
        conn.query_row(sql, [], |r| r.get(0))
            .map_err(|e| BenchError::Setup(format!("{sql}: {e}")))
    };
    q("PRAGMA wal_checkpoint(TRUNCATE)")?;
    let used = (q("PRAGMA page_count")? - q("PRAGMA freelist_count")?) * q("PRAGMA page_size")?;
    Ok(u64::try_from(used).unwrap_or(0))
}

/// The sum of `MEMORY USAGE` over every key of the namespace (one slot: its hash tag).
async fn redis_size(url: &str, namespace: &str) -> Result<u64> {
    let mut conn = crate::anchors::redis_connect(url).await?;
    let pattern = format!("lease:{{{namespace}}}:*");
    let mut cursor: u64 = 0;
    let mut total = 0u64;
    loop {
        let (next, keys) = crate::anchors::scan_page(&mut conn, cursor, &pattern).await?;
        if !keys.is_empty() {
            let mut pipe = redis::pipe();
            for k in &keys {
                pipe.cmd("MEMORY").arg("USAGE").arg(k).arg("SAMPLES").arg(0);
            }
            let sizes: Vec<Option<u64>> = pipe
                .query_async(&mut conn)
                .await
                .map_err(|e| BenchError::Setup(format!("MEMORY USAGE: {e}")))?;
            total += sizes.into_iter().flatten().sum::<u64>();
        }
        if next == 0 {
            return Ok(total);
        }
        cursor = next;
    }
}

async fn pg_pool(url: &str) -> Result<sqlx::PgPool> {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .map_err(|e| BenchError::Setup(format!("connect: {e}")))
}

/// One table of a schema: sizes and the statistics collector's tuple counts.
#[derive(Debug)]
struct TableSize {
    name: String,
    table: u64,
    indexes: u64,
    dead: u64,
    autovacuums: u64,
}

/// Every table of `schema` with its heap (+ TOAST) and index sizes.
async fn pg_sizes(pool: &sqlx::PgPool, schema: &str) -> Result<Vec<TableSize>> {
    let rows: Vec<(String, i64, i64, i64, i64)> =
        sqlx::query_as(include_str!("footprint_pg_sizes.sql"))
            .bind(schema)
            .fetch_all(pool)
            .await
            .map_err(|e| BenchError::Setup(format!("table sizes: {e}")))?;
    let u = |v: i64| u64::try_from(v).unwrap_or(0);
    Ok(rows
        .into_iter()
        .map(|(name, table, indexes, dead, autovacuums)| TableSize {
            name,
            table: u(table),
            indexes: u(indexes),
            dead: u(dead),
            autovacuums: u(autovacuums),
        })
        .collect())
}

/// PostgreSQL's tables and indexes after `n` completed executions with 3 steps each.
async fn postgres_tables(n: u64, options: &Options) -> Vec<Row> {
    let kind = Kind::Postgres;
    let measured = async {
        let fx = Fixture::new(kind, options).await?;
        let result = async {
            let Some(StoreSpec::Postgres { url, schema }) = fx.spec() else {
                return Err(BenchError::Setup("not a postgres store".into()));
            };
            fill::completed(&fx, STEPS, n).await?;
            let pool = pg_pool(&url).await?;
            let sizes = pg_sizes(&pool, &schema).await;
            pool.close().await;
            sizes
        }
        .await;
        fx.remove_after(result).await
    }
    .await;
    match measured {
        Err(e) => vec![Row::new(
            kind,
            format!("tables at {n} completed"),
            "MB",
            Err(e),
        )],
        Ok(sizes) => sizes
            .into_iter()
            .filter(|t| t.table + t.indexes >= 1 << 20)
            .flat_map(|t| {
                [
                    Row::new(
                        kind,
                        format!("{} table at {n} completed, {STEPS} steps", t.name),
                        "MB",
                        Ok(t.table as f64 / 1e6),
                    ),
                    Row::new(
                        kind,
                        format!("{} indexes at {n} completed, {STEPS} steps", t.name),
                        "MB",
                        Ok(t.indexes as f64 / 1e6),
                    ),
                ]
            })
            .collect(),
    }
}

/// Churn: [`CHURN_ROUNDS`] rounds of admit, claim, acknowledge and purge of
/// [`CHURN_BATCH`] executions on one schema; after each round the schema's size and the
/// executions table's dead tuples and autovacuum runs (as the statistics collector has
/// them: each backend reports at most once a second, so the last round's counts may lag).
async fn postgres_churn(options: &Options) -> Vec<Row> {
    let kind = Kind::Postgres;
    let measured = async {
        let fx = Fixture::new(kind, options).await?;
        let result = churn(&fx).await;
        fx.remove_after(result).await
    }
    .await;
    match measured {
        Err(e) => vec![Row::new(kind, "churn".into(), "MB", Err(e))],
        Ok((autovacuum, rounds)) => rounds
            .into_iter()
            .enumerate()
            .filter(|(i, _)| *i == 0 || *i == 1 || *i + 1 == CHURN_ROUNDS)
            .flat_map(|(i, s)| {
                let at = format!(
                    "after churn round {} of {CHURN_BATCH} (autovacuum {autovacuum})",
                    i + 1
                );
                [
                    Row::new(
                        kind,
                        format!("schema size {at}"),
                        "MB",
                        Ok(s.0 as f64 / 1e6),
                    ),
                    Row::new(
                        kind,
                        format!("executions dead tuples {at}"),
                        "rows",
                        Ok(s.1 as f64),
                    ),
                    Row::new(
                        kind,
                        format!("executions autovacuum runs {at}"),
                        "runs",
                        Ok(s.2 as f64),
                    ),
                ]
            })
            .collect(),
    }
}

/// Runs the churn rounds: the server's `autovacuum` setting, and per round (schema bytes,
/// executions dead tuples, autovacuums).
async fn churn(fx: &Fixture) -> Result<(String, Vec<(u64, u64, u64)>)> {
    let Some(StoreSpec::Postgres { url, schema }) = fx.spec() else {
        return Err(BenchError::Setup("not a postgres store".into()));
    };
    let pool = pg_pool(&url).await?;
    let autovacuum: String = sqlx::query_scalar("SELECT current_setting('autovacuum')")
        .fetch_one(&pool)
        .await
        .map_err(|e| BenchError::Setup(format!("autovacuum setting: {e}")))?;
    let mut out = Vec::new();
    for round in 0..CHURN_ROUNDS {
        let from = round as u64 * CHURN_BATCH;
        fill::admit(&fx.lib, "c", from, CHURN_BATCH, None).await?;
        complete_everything(fx).await?;
        let before = Timestamp::from_millis(fill::unix_ms() + 60_000);
        let mut purged = 0u64;
        loop {
            let got = fx
                .lib
                .purge_terminal(before, 1000)
                .await
                .context(|| "purge_terminal".into())?
                .ids
                .len();
            purged += got as u64;
            if got < 1000 {
                break;
            }
        }
        if purged != CHURN_BATCH {
            return Err(BenchError::Setup(format!(
                "purged {purged} of {CHURN_BATCH}"
            )));
        }
        let sizes = pg_sizes(&pool, &schema).await?;
        let total = sizes.iter().map(|s| s.table + s.indexes).sum();
        let exec = sizes.iter().find(|s| s.name == "executions");
        out.push((
            total,
            exec.map_or(0, |s| s.dead),
            exec.map_or(0, |s| s.autovacuums),
        ));
    }
    pool.close().await;
    Ok((autovacuum, out))
}

/// Claims every due execution and acknowledges each completed, 32 at a time.
async fn complete_everything(fx: &Fixture) -> Result<()> {
    let outcome = WorkflowRunOutcome::Completed(Json::null());
    loop {
        let leases = fx
            .lib
            .claim_due(fill::request(1000, Duration::from_secs(600)))
            .await
            .context(|| "claim_due".into())?;
        if leases.is_empty() {
            return Ok(());
        }
        let results: Vec<_> = futures::stream::iter(leases)
            .map(|lease| {
                let outcome = outcome.clone();
                async move { fx.lib.acknowledge(&lease, &outcome).await }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        for r in results {
            match r.context(|| "acknowledge".into())? {
                Fenced::Accepted(_) => {}
                Fenced::Lost => return Err(BenchError::Setup("acknowledge: lost".into())),
            }
        }
    }
}

/// The rows as a markdown table.
pub fn markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "| backend | measurement | value | unit | payload bound | load 1m |\n|---|---|---:|---|---:|---:|\n",
    );
    for r in rows {
        let value = match (&r.value, &r.error) {
            (Some(v), _) => format!("{v:.1}"),
            (None, Some(e)) => format!("error: {e}"),
            (None, None) => "-".into(),
        };
        let payload = r.payload.map_or_else(String::new, |p| format!("{p:.0}"));
        s.push_str(&format!(
            "| {} | {} | {value} | {} | {payload} | {:.2} |\n",
            r.backend, r.name, r.unit, r.load_1m
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-execution rows on SQLite (no server needed), small: every row measured, a
    /// step record costs something, and nothing is smaller than its payload.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_rows_measure_every_size() {
        let options = crate::args::parse(&["--stored-max".into(), "2000".into()]).expect("options");
        let rows = rows(Kind::Sqlite, &options).await;
        assert_eq!(rows.len(), 3, "{rows:?}");
        for r in &rows {
            let (Some(v), Some(p)) = (r.value, r.payload) else {
                panic!("{r:?}");
            };
            assert!(v >= p, "{r:?}");
        }
        assert!(markdown(&rows).contains("| sqlite | bytes per step record |"));
    }
}
