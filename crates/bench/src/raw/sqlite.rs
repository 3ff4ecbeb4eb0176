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
                // No attempt limit and no last error: the bench sets no limits and its
                // raw rows never fail.
                None::<i64>,
                None::<String>,
                // No workflow's own redelivery policy; the delivery history left as stored
                // (the raw baseline keeps none).
                None::<String>,
                None::<String>,
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
        self.write("claim_due", |tx| self.claim_in(tx, limit))
    }

    /// The claim's statements in `tx`: the running-claim probe (the bench never leaves an
    /// expired lease, so it finds none), then the waiting candidates of priority level 0
    /// (the bench admits at the default priority only).
    fn claim_in(&self, tx: &rusqlite::Transaction<'_>, limit: usize) -> Result<Vec<RawLease>> {
        const OP: &str = "claim_due";
        {
            let now = now_ms();
            let expired = tx
                .prepare_cached(sql::ANY_RUNNING_CLAIMABLE)
                .map_err(err(OP))?
                .exists(params![self.namespace, now])
                .map_err(err(OP))?;
            if expired {
                return Err(raw(
                    "sqlite",
                    OP,
                    "an expired lease (the bench leaves none)",
                ));
            }
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
                .query_map(params![self.namespace, now, page, 0i64], read_row)
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
        }
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
        self.write("acknowledge", |tx| self.ack_in(tx, lease, outcome))
    }

    fn ack_in(
        &self,
        tx: &rusqlite::Transaction<'_>,
        lease: &RawLease,
        outcome: &str,
    ) -> Result<()> {
        const OP: &str = "acknowledge";
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
    }

    /// `acknowledge_and_claim` (sync): the acknowledgement's and the claim's statements in
    /// one `BEGIN IMMEDIATE` transaction.
    pub fn ack_and_claim_sync(
        &self,
        lease: &RawLease,
        outcome: &str,
        limit: usize,
    ) -> Result<Vec<RawLease>> {
        self.write("acknowledge_and_claim", |tx| {
            self.ack_in(tx, lease, outcome)?;
            self.claim_in(tx, limit)
        })
    }

    /// The bare purge (sync): the library's walk of the terminal index ([`sql::PURGEABLE`]),
    /// then one `DELETE` of the step records and one of the row per execution, in one
    /// `BEGIN IMMEDIATE` transaction.
    pub fn purge_sync(&self, limit: usize) -> Result<usize> {
        const OP: &str = "purge";
        self.write(OP, |tx| {
            let found: Vec<(i64, String)> = tx
                .prepare_cached(sql::PURGEABLE)
                .map_err(err(OP))?
                .query_map(
                    params![
                        self.namespace,
                        i64::MAX,
                        i64::try_from(limit).unwrap_or(i64::MAX)
                    ],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(err(OP))?
                .collect::<rusqlite::Result<_>>()
                .map_err(err(OP))?;
            let mut steps = tx
                .prepare_cached(
                    "DELETE FROM lease_steps WHERE namespace = ?1 AND execution_id = ?2",
                )
                .map_err(err(OP))?;
            let mut rows = tx
                .prepare_cached("DELETE FROM lease_executions WHERE rowid = ?1")
                .map_err(err(OP))?;
            for (rowid, id) in &found {
                steps
                    .execute(params![self.namespace, id])
                    .map_err(err(OP))?;
                rows.execute([rowid]).map_err(err(OP))?;
            }
            Ok(found.len())
        })
    }

    /// [`Raw::clone_terminal`] (sync): `INSERT .. SELECT` over a recursive series, every
    /// column copied from the template but the id and the admission position (each copy
    /// takes the next one, as an admission would, so `list_executions` pages through the
    /// copies), 100,000 rows per transaction.
    pub fn clone_terminal_sync(
        &self,
        template: &str,
        prefix: &str,
        from: u64,
        n: u64,
    ) -> Result<()> {
        const OP: &str = "clone_terminal";
        let columns = |table: &str| -> Result<Vec<String>> {
            let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
            let mut st = conn
                .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
                .map_err(err(OP))?;
            let names = st
                .query_map([], |r| r.get::<_, String>(0))
                .map_err(err(OP))?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(err(OP))?;
            Ok(names)
        };
        let insert = |table: &str, id_column: &str| -> Result<String> {
            let cols = columns(table)?;
            let select: Vec<String> = cols
                .iter()
                .map(|c| {
                    if c == id_column {
                        "printf('%s%09d', ?4, g.i)".to_owned()
                    } else if c == "admitted_seq" {
                        "?6 + g.i".to_owned()
                    } else {
                        format!("t.\"{c}\"")
                    }
                })
                .collect();
            let quoted: Vec<String> = cols.iter().map(|c| format!("\"{c}\"")).collect();
            Ok(format!(
                "WITH RECURSIVE g(i) AS (SELECT ?2 UNION ALL SELECT i + 1 FROM g WHERE i + 1 < ?3)
                 INSERT INTO {table} ({}) SELECT {} FROM {table} t, g
                 WHERE t.namespace = ?1 AND t.{id_column} = ?5",
                quoted.join(", "),
                select.join(", ")
            ))
        };
        let executions = insert("lease_executions", "id")?;
        let steps = insert("lease_steps", "execution_id")?;
        let mut at = from;
        while at < from + n {
            let end = (at + 100_000).min(from + n);
            self.write(OP, |tx| {
                let (a, b) = (
                    i64::try_from(at).unwrap_or(0),
                    i64::try_from(end).unwrap_or(0),
                );
                // The copies follow every stored execution in admission order.
                let last: i64 = tx
                    .query_row(
                        "SELECT COALESCE((SELECT admitted_seq FROM lease_executions
                         WHERE namespace = ?1 ORDER BY admitted_seq DESC LIMIT 1), 0)",
                        params![self.namespace],
                        |r| r.get(0),
                    )
                    .map_err(err(OP))?;
                let base = last + 1 - a;
                let made = tx
                    .execute(
                        &executions,
                        params![self.namespace, a, b, prefix, template, base],
                    )
                    .map_err(err(OP))?;
                if made != usize::try_from(end - at).unwrap_or(0) {
                    return Err(raw("sqlite", OP, format!("cloned {made} of {}", end - at)));
                }
                tx.execute(&steps, params![self.namespace, a, b, prefix, template])
                    .map_err(err(OP))?;
                Ok(())
            })?;
            at = end;
        }
        Ok(())
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

    async fn ack_and_claim(
        &self,
        lease: &RawLease,
        outcome: &str,
        limit: usize,
    ) -> Result<Vec<RawLease>> {
        self.ack_and_claim_sync(lease, outcome, limit)
    }

    async fn purge(&self, limit: usize) -> Result<usize> {
        self.purge_sync(limit)
    }

    async fn clone_terminal(&self, template: &str, prefix: &str, from: u64, n: u64) -> Result<()> {
        self.clone_terminal_sync(template, prefix, from, n)
    }
}
