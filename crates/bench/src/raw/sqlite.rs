//! Raw SQLite: the backend's own statements (`lease_sqlite::raw`) on one rusqlite
//! connection configured as the backend configures its own (WAL, `synchronous = NORMAL`),
//! each operation one `BEGIN IMMEDIATE` transaction, called directly on the caller's
//! thread: no connection thread, no channel, no group commit.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use lease_core::RedeliveryPolicy;
use lease_sqlite::raw as sql;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{LEASE_MS, Raw, RawLease};
use crate::error::{BenchError, Result, raw};

/// Candidates per claim page, as the backend reads them.
const PAGE_MIN: usize = 16;

/// The raw SQLite client of one namespace.
pub struct RawSqlite {
    conn: Mutex<Connection>,
    namespace: String,
    policy: RedeliveryPolicy,
}

/// The execution columns the raw operations need (of [`sql::EXECUTION_COLUMNS`]).
struct Row {
    id: String,
    status: String,
    token: i64,
    due: Option<i64>,
    wake: Option<i64>,
    unacked: i64,
    ended: Option<i64>,
    ever: bool,
    outcome: Option<String>,
}

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        id: r.get(0)?,
        status: r.get(3)?,
        token: r.get(4)?,
        due: r.get(6)?,
        wake: r.get(7)?,
        unacked: r.get(8)?,
        ended: r.get(9)?,
        ever: r.get(10)?,
        outcome: r.get(11)?,
    })
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn err(op: &'static str) -> impl Fn(rusqlite::Error) -> BenchError {
    move |e| raw("sqlite", op, e)
}

impl RawSqlite {
    /// Opens `path` (created by the library) for `namespace`.
    pub fn open(path: &Path, namespace: &str, policy: RedeliveryPolicy) -> Result<Self> {
        let conn = sql::open(path, Duration::from_secs(5)).map_err(|e| raw("sqlite", "open", e))?;
        Ok(RawSqlite {
            conn: Mutex::new(conn),
            namespace: namespace.to_owned(),
            policy,
        })
    }

    fn delay(&self, n: i64) -> i64 {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        i64::try_from(self.policy.delay_ms(n)).unwrap_or(i64::MAX)
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction.
    fn write<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T>,
    ) -> Result<T> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err(op))?;
        let value = f(&tx)?;
        tx.commit().map_err(err(op))?;
        Ok(value)
    }

    /// Loads the row a lease names and checks that the lease holds.
    fn held(
        &self,
        tx: &rusqlite::Transaction<'_>,
        op: &'static str,
        lease: &RawLease,
    ) -> Result<Row> {
        let row = tx
            .prepare_cached(sql::LOAD_EXECUTION)
            .map_err(err(op))?
            .query_row(params![self.namespace, lease.id], read_row)
            .optional()
            .map_err(err(op))?
            .ok_or_else(|| raw("sqlite", op, "unknown execution"))?;
        if row.token != lease.token || row.status != "running" {
            return Err(raw("sqlite", op, "not accepted (lost)"));
        }
        Ok(row)
    }

    #[allow(clippy::too_many_arguments)]
    fn save(
        &self,
        tx: &rusqlite::Transaction<'_>,
        op: &'static str,
        row: &Row,
        status: &str,
        lease_expires_at: Option<i64>,
        due: Option<i64>,
        unacked: i64,
        ended: Option<i64>,
        outcome: Option<&str>,
        claim_keys: (Option<i64>, Option<i64>),
    ) -> Result<()> {
        let changed = tx
            .prepare_cached(sql::SAVE_EXECUTION)
            .map_err(err(op))?
            .execute(params![
                self.namespace,
                row.id,
                status,
                row.token,
                lease_expires_at,
                due,
                None::<i64>,
                unacked,
                ended,
                row.ever,
                outcome,
                claim_keys.0,
                claim_keys.1,
            ])
            .map_err(err(op))?;
        if changed == 1 {
            Ok(())
        } else {
            Err(raw("sqlite", op, "row vanished"))
        }
    }

    /// Saves `row` as running with a lease until `expires` (claim and renew).
    fn save_running(
        &self,
        tx: &rusqlite::Transaction<'_>,
        op: &'static str,
        row: &Row,
        expires: i64,
    ) -> Result<()> {
        let keys = self.running_keys(row, expires);
        self.save(
            tx,
            op,
            row,
            "running",
            Some(expires),
            row.due,
            row.unacked,
            row.ended,
            row.outcome.as_deref(),
            keys,
        )
    }

    /// The claim keys of a running row: due `min(due, wake)`, claimable once the lease has
    /// expired and the delay it will then owe has passed.
    fn running_keys(&self, row: &Row, expires: i64) -> (Option<i64>, Option<i64>) {
        let due = match (row.due, row.wake) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let gate = expires.saturating_add(self.delay(row.unacked + 1));
        (due, due.map(|d| d.max(gate)))
    }

    /// The bare bound of `admit_batch` (sync): one `BEGIN IMMEDIATE` transaction with one
    /// multi-row `INSERT` of new rows, due now, with the claim keys the backend derives for
    /// them (both `now`), skipping ids that exist.
    pub fn admit_batch_sync(&self, ids: &[String]) -> Result<()> {
        const OP: &str = "admit_batch";
        if ids.is_empty() {
            return Ok(());
        }
        let mut sql = String::from(
            "INSERT INTO lease_executions (namespace, id, workflow, input, status, token,
                 lease_expires_at, due_at, wake_after_claim, unacknowledged,
                 last_delivery_ended_at, ever_suspended, outcome, claim_due_at, claimable_at)
             VALUES ",
        );
        for i in 0..ids.len() {
            if i > 0 {
                sql.push(',');
            }
            sql.push_str(&format!(
                "(?1, ?{}, NULL, NULL, 'admitted', 0, NULL, ?2, NULL, 0, NULL, 0, NULL, ?2, ?2)",
                i + 3
            ));
        }
        sql.push_str(" ON CONFLICT (namespace, id) DO NOTHING");
        self.write(OP, |tx| {
            let now = now_ms();
            let mut values: Vec<&dyn rusqlite::ToSql> = vec![&self.namespace, &now];
            values.extend(ids.iter().map(|id| id as &dyn rusqlite::ToSql));
            let n = tx
                .prepare_cached(&sql)
                .map_err(err(OP))?
                .execute(values.as_slice())
                .map_err(err(OP))?;
            if n == ids.len() {
                Ok(())
            } else {
                Err(raw("sqlite", OP, format!("inserted {n} of {}", ids.len())))
            }
        })
    }

    /// `claim_due` (sync).
    pub fn claim_sync(&self, limit: usize) -> Result<Vec<RawLease>> {
        const OP: &str = "claim_due";
        self.write(OP, |tx| {
            let now = now_ms();
            let mut token: i64 = tx
                .prepare_cached(sql::LAST_TOKEN)
                .map_err(err(OP))?
                .query_row([&self.namespace], |r| r.get(0))
                .optional()
                .map_err(err(OP))?
                .unwrap_or(0);
            let first = token;
            let page = i64::try_from(limit.max(PAGE_MIN)).unwrap_or(i64::MAX);
            let rows: Vec<Row> = tx
                .prepare_cached(sql::CLAIM_FIRST)
                .map_err(err(OP))?
                .query_map(params![self.namespace, now, page], read_row)
                .map_err(err(OP))?
                .collect::<rusqlite::Result<_>>()
                .map_err(err(OP))?;
            let mut out = Vec::with_capacity(limit);
            for mut row in rows {
                if out.len() == limit {
                    break;
                }
                // The bench only claims never-claimed executions; a running row here would
                // need the expiry path, which the raw baseline does not carry.
                if row.status == "running" {
                    continue;
                }
                token += 1;
                row.token = token;
                row.wake = None;
                self.save_running(tx, OP, &row, now + LEASE_MS)?;
                out.push(RawLease { id: row.id, token });
            }
            if token != first {
                tx.prepare_cached(sql::STORE_LAST_TOKEN)
                    .map_err(err(OP))?
                    .execute(params![self.namespace, token])
                    .map_err(err(OP))?;
            }
            Ok(out)
        })
    }

    /// `renew` (sync).
    pub fn renew_sync(&self, lease: &RawLease) -> Result<()> {
        const OP: &str = "renew";
        self.write(OP, |tx| {
            let row = self.held(tx, OP, lease)?;
            self.save_running(tx, OP, &row, now_ms() + LEASE_MS)
        })
    }

    /// `write_step` (sync).
    pub fn write_step_sync(&self, lease: &RawLease, step_key: &str, response: &str) -> Result<()> {
        const OP: &str = "write_step";
        self.write(OP, |tx| {
            self.held(tx, OP, lease)?;
            let inserted = tx
                .prepare_cached(sql::INSERT_STEP)
                .map_err(err(OP))?
                .execute(params![
                    self.namespace,
                    lease.id,
                    step_key,
                    1_i64,
                    true,
                    response,
                    lease.token
                ])
                .map_err(err(OP))?;
            if inserted == 1 {
                Ok(())
            } else {
                Err(raw("sqlite", OP, "step record already existed"))
            }
        })
    }

    /// `acknowledge` completed (sync).
    pub fn acknowledge_sync(&self, lease: &RawLease, outcome: &str) -> Result<()> {
        const OP: &str = "acknowledge";
        self.write(OP, |tx| {
            let row = self.held(tx, OP, lease)?;
            self.save(
                tx,
                OP,
                &row,
                "completed",
                None,
                None,
                0,
                Some(now_ms()),
                Some(outcome),
                (None, None),
            )
        })
    }
}

#[async_trait]
impl Raw for RawSqlite {
    async fn claim(&self, limit: usize) -> Result<Vec<RawLease>> {
        self.claim_sync(limit)
    }

    async fn renew(&self, lease: &RawLease) -> Result<()> {
        self.renew_sync(lease)
    }

    async fn write_step(&self, lease: &RawLease, step_key: &str, response: &str) -> Result<()> {
        self.write_step_sync(lease, step_key, response)
    }

    async fn acknowledge(&self, lease: &RawLease, outcome: &str) -> Result<()> {
        self.acknowledge_sync(lease, outcome)
    }

    async fn admit_batch(&self, ids: &[String]) -> Result<()> {
        self.admit_batch_sync(ids)
    }
}
