//! Fenced application transactions: the application's own writes, in its own tables of the
//! lease's database, committed only while the lease's token is current.
//!
//! RFC 002 fencing: "the check and the write will be atomic". Here the write is a whole
//! application transaction and the check is made at its end, in the message that commits
//! it:
//!
//! 1. [`PostgresBackend::begin_fenced`] opens a READ COMMITTED transaction and sets two
//!    transaction-local limits derived from the lease ([`stall_bound_ms`]):
//!    `idle_in_transaction_session_timeout` and `lock_timeout`, in one message that leaves
//!    no transaction open if it fails.
//! 2. The application runs any statements on any tables through the transaction.
//! 3. [`FencedTx::commit`] sends ONE simple-query message: a `SELECT ... FOR SHARE` of the
//!    execution row (the lock `write_step` takes; it conflicts with the claim's `FOR UPDATE
//!    SKIP LOCKED`, with the `FOR NO KEY UPDATE` of renew and release and with the
//!    acknowledgement's update), a check that divides by zero unless the locked row carries
//!    the lease's token and is still running, `COMMIT`, and a `BEGIN` that sqlx's
//!    transaction guard rolls back when the connection returns to the pool. A failed check
//!    aborts the transaction, so the `COMMIT` never runs: nothing of it is applied and the
//!    result is `Lost`.
//!
//! The lock is taken as late as it can be and is held only while the server runs that one
//! message: a client frozen anywhere cannot hold it. [`PostgresBackend::step_in_tx`] writes
//! its step record with `write_step`'s own statement (which takes the same lock) and then
//! commits, so there the lock is held for one more client round trip; a client frozen in
//! that window holds it until `idle_in_transaction_session_timeout` ends its session.

use std::ops::{Deref, DerefMut};

use lease_core::{
    BoxError, ExecutionLease, Fenced, FencingToken, HeapRecord, Json, LeaseError, Result, StepKey,
};
use lease_runtime::next_step_attempt;
use lease_runtime::{Delivery, DeliveryError, StepSlot};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, PgConnection, Postgres, Transaction};

use crate::backend::{PostgresBackend, query};
use crate::config::quoted;
use crate::error::{self, Attempt, Effect, Verdict};
use crate::literals::{Literal, bind_literals};
use crate::rows::{self, FenceCheck, col, token_param};
use crate::statements::render;

/// The smallest stall bound, in milliseconds: a transaction opened with a lease that has
/// (nearly) run out still gets this long between statements and for each lock wait.
pub const MIN_STALL_BOUND_MS: i64 = 250;

/// The largest value PostgreSQL accepts for a millisecond setting (`INT_MAX`).
const MAX_SETTING_MS: i64 = i32::MAX as i64;

/// The message that opens a fenced transaction (`$1` the lease's expiry, `$2` the clock):
/// see the file's header for why `BEGIN` comes last.
const BEGIN: &str = include_str!("fenced/begin.sql");

/// The fence of [`FencedTx::commit`] and the commit (`$1` id, `$2` token, `$3` clock).
const COMMIT: &str = include_str!("fenced/commit.sql");

/// The statements of [`COMMIT`] that run before `COMMIT` itself.
const FENCE_STATEMENTS: usize = 2;

/// The deliberately broken unlocked token check of the race test.
#[cfg(lease_postgres_unlocked_commit_experiment)]
const UNLOCKED_CHECK: &str = include_str!("fenced/unlocked_check.sql");

/// The stall bound of a fenced transaction in milliseconds: the time left on the lease at
/// `now`, at least [`MIN_STALL_BOUND_MS`] and at most what PostgreSQL accepts. Used as
/// `idle_in_transaction_session_timeout` (a session idle inside the transaction for longer
/// is terminated by the server, which rolls it back and frees every lock it holds) and as
/// `lock_timeout` (a statement waiting longer for a lock fails, aborting the transaction).
/// The same expression runs in SQL in the transaction's `BEGIN` message; this is its
/// definition and unit test.
pub fn stall_bound_ms(lease: &ExecutionLease, now: lease_core::Timestamp) -> i64 {
    lease
        .expires_at
        .as_millis()
        .saturating_sub(now.as_millis())
        .clamp(MIN_STALL_BOUND_MS, MAX_SETTING_MS)
}

/// An application transaction fenced by a lease. Run the application's statements on it (it
/// derefs to [`PgConnection`]; `as_mut()` and [`FencedTx::conn`] give `&mut PgConnection`),
/// then [`FencedTx::commit`]: it commits only if the lease's token is still current,
/// checked atomically with the commit (RFC 002: "the check and the write will be atomic"),
/// and otherwise applies nothing and returns [`Fenced::Lost`].
///
/// Both ways out consume the transaction, so it cannot be used after a commit or after
/// `Lost`. Dropping it rolls back (sqlx's guard). Never send `COMMIT`, `ROLLBACK` or `SET
/// TRANSACTION` yourself: a `COMMIT` of yours would apply your writes unfenced. Nested
/// `begin()` calls on the connection are savepoints, as with any sqlx transaction.
pub struct FencedTx {
    tx: Transaction<'static, Postgres>,
    backend: PostgresBackend,
    lease: ExecutionLease,
    token: i64,
}

impl std::fmt::Debug for FencedTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FencedTx")
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl Deref for FencedTx {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        &self.tx
    }
}

impl DerefMut for FencedTx {
    fn deref_mut(&mut self) -> &mut PgConnection {
        &mut self.tx
    }
}

impl AsMut<PgConnection> for FencedTx {
    fn as_mut(&mut self) -> &mut PgConnection {
        &mut self.tx
    }
}

impl PostgresBackend {
    /// Opens an application transaction fenced by `lease`: see [`FencedTx`]. One round
    /// trip: a READ COMMITTED `BEGIN` and the two limits of [`stall_bound_ms`] (a failure
    /// leaves the connection outside any transaction). The lease is checked against the
    /// execution row at commit, where the check holds until the commit; nothing is locked
    /// before.
    ///
    /// Errors (nothing is sent): token 0 is [`LeaseError::InvalidInput`], a token above
    /// `i64::MAX` is [`LeaseError::ForeignToken`]; [`LeaseError::Unavailable`] when no
    /// connection can be had.
    pub async fn begin_fenced(&self, lease: &ExecutionLease) -> Result<FencedTx> {
        let token = lease_token(lease)?;
        let tx = self.open_fenced(lease).await?;
        Ok(FencedTx {
            tx,
            backend: self.clone(),
            lease: lease.clone(),
            token,
        })
    }

    /// [`PostgresBackend::begin_fenced`] around `body`: runs it on the transaction, then commits
    /// fenced. `Ok(Accepted(value))` when it committed; `Ok(Lost)` when the lease was stale
    /// (nothing applied); a failing body rolls back and its error is returned. Errors of the
    /// fence are converted into `E` (`DeliveryError`, boxed errors, `anyhow::Error`, ...).
    pub async fn fenced_with<T, E, F>(
        &self,
        lease: &ExecutionLease,
        body: F,
    ) -> std::result::Result<Fenced<T>, E>
    where
        F: AsyncFnOnce(&mut PgConnection) -> std::result::Result<T, E>,
        E: From<LeaseError>,
    {
        let mut tx = self.begin_fenced(lease).await?;
        match body(tx.conn()).await {
            Ok(value) => Ok(tx.commit().await?.map(|()| value)),
            Err(e) => {
                tx.rollback().await?;
                Err(e)
            }
        }
    }

    /// A step whose effect is the application's own writes, recorded in the same fenced
    /// transaction as those writes: the effect and its step record exist together or not at
    /// all.
    ///
    /// - A done record for `step_key` exists ([`Delivery::step_slot`]): its value is
    ///   returned and `body` does not run (the replay rule).
    /// - Otherwise one transaction: `body` writes the application's rows on the connection
    ///   and returns the step's value; the step record (done, at the slot's attempt) is
    ///   inserted by `write_step`'s own fenced statement (`FOR SHARE` on the execution row,
    ///   the token compared after the lock); then `COMMIT`. The recorded value is returned
    ///   and remembered by the delivery ([`Delivery::note_step_written`]).
    /// - A stale lease rolls everything back, marks the delivery lost
    ///   ([`Delivery::mark_lost`]) and returns [`DeliveryError::Lost`].
    /// - A done record written meanwhile by someone else: rolled back (the effect is not
    ///   applied twice) and that record's value is returned.
    /// - A failing `body` rolls back: [`DeliveryError::Step`], nothing recorded.
    ///
    /// `delivery` must be a delivery of an execution in this backend's schema.
    pub async fn step_in_tx<T, E, F>(
        &self,
        delivery: &Delivery,
        step_key: &str,
        body: F,
    ) -> std::result::Result<T, DeliveryError>
    where
        T: Serialize + DeserializeOwned,
        E: Into<BoxError>,
        F: AsyncFnOnce(&mut PgConnection) -> std::result::Result<T, E>,
    {
        let key = StepKey::new(step_key)?;
        let attempt = match delivery.step_slot(&key).await? {
            StepSlot::Recorded(record) => return Ok(record.response.decode()?),
            StepSlot::Free { attempt } => attempt,
        };
        let lease = delivery.lease();
        let token = lease_token(delivery.claimed_lease())?;
        let mut tx = self.open_fenced(&lease).await?;
        let value = match body(&mut tx).await {
            Ok(value) => value,
            Err(e) => {
                rollback(tx).await;
                return Err(DeliveryError::Step {
                    step: key,
                    source: e.into(),
                });
            }
        };
        let written = self
            .record_step(&mut tx, delivery, &key, attempt, token, &value)
            .await;
        match written {
            Ok(StepOutcome::Inserted(record)) => {
                commit_step(tx).await?;
                delivery.note_step_written(&record);
                Ok(record.response.decode()?)
            }
            Ok(StepOutcome::Existing(record)) => {
                rollback(tx).await;
                delivery.note_step_written(&record);
                Ok(record.response.decode()?)
            }
            Err(e) => {
                rollback(tx).await;
                if matches!(e, DeliveryError::Lost) {
                    delivery.mark_lost();
                }
                Err(e)
            }
        }
    }

    /// `BEGIN` with the stall bound of `lease` (see [`BEGIN`]).
    async fn open_fenced(&self, lease: &ExecutionLease) -> Result<Transaction<'static, Postgres>> {
        const OP: &str = "fenced";
        let template = BEGIN
            .replace("{floor}", &MIN_STALL_BOUND_MS.to_string())
            .replace("{ceiling}", &MAX_SETTING_MS.to_string());
        let sql = bind_literals(
            &render(&template, &quoted(self.schema())),
            &[
                Literal::BigInt(Some(lease.expires_at.as_millis())),
                Literal::BigInt(self.clock_param()),
            ],
        )
        .ok_or_else(|| error::protocol(OP, "the begin statement has no text parameter"))?;
        // The BEGIN runs in a task of its own, so a caller cancelled while it is in flight
        // (a delivery stopped at its deadline while the reply is delayed) cannot abandon it
        // half-way: sqlx 0.9 counts the transaction only once the server's reply has
        // arrived, so a `begin` dropped after sending BEGIN returns the connection to the
        // pool inside a transaction nobody rolls back. Its next user's statements then ran
        // in that transaction, and the session's idle timeout rolled them back after their
        // replies had reported success (a claim the torture run's packet loss showed
        // accepted, then granted again). Detached, the task finishes the BEGIN and drops
        // the transaction, which rolls it back.
        let pool = self.inner.pool.clone();
        tokio::spawn(async move { pool.begin_with(AssertSqlSafe(sql)).await })
            .await
            .map_err(|e| error::protocol(OP, format!("the begin task failed: {e}")))?
            .map_err(|e| failed_before_commit(OP, e))
    }

    /// Inserts the step record with `write_step`'s statement inside `tx`, at `attempt` or
    /// the first later attempt not recorded as not done.
    async fn record_step<T: Serialize>(
        &self,
        tx: &mut PgConnection,
        delivery: &Delivery,
        key: &StepKey,
        mut attempt: u32,
        token: i64,
        value: &T,
    ) -> std::result::Result<StepOutcome, DeliveryError> {
        let response = Json::to_json("step response", value)?;
        // The body may have run past a lost renewal: a cancelled delivery writes nothing.
        delivery.ensure_live()?;
        loop {
            let row = self
                .write_step_row(tx, delivery, key, attempt, token, &response)
                .await?;
            match step_outcome(&row, delivery, key, attempt)? {
                Some(StepOutcome::Existing(r)) if !r.done => {
                    attempt = next_step_attempt(key, attempt)?;
                }
                Some(outcome) => return Ok(outcome),
                None => {
                    let check = FenceCheck::decode(&row, OP_STEP)?;
                    check.rejection(delivery.execution_id(), delivery.token(), OP_STEP)?;
                    return Err(DeliveryError::Lost);
                }
            }
        }
    }

    /// One run of `write_step`'s statement on `tx`; `UnknownExecution` when it returns no
    /// row.
    async fn write_step_row(
        &self,
        tx: &mut PgConnection,
        delivery: &Delivery,
        key: &StepKey,
        attempt: u32,
        token: i64,
        response: &Json,
    ) -> Result<PgRow> {
        let row = query(&self.heap_sql().write_step)
            .bind(delivery.execution_id().as_str())
            .bind(token)
            .bind(key.as_str())
            .bind(i64::from(attempt))
            .bind(true)
            .bind(response.as_str())
            .bind(self.clock_param())
            .fetch_optional(tx)
            .await
            .map_err(|e| failed_before_commit(OP_STEP, e))?;
        row.ok_or_else(|| LeaseError::UnknownExecution(delivery.execution_id().clone()))
    }
}

/// `step_in_tx`'s operation name in errors.
const OP_STEP: &str = "step_in_tx";

/// What `write_step`'s statement did inside a `step_in_tx` transaction.
enum StepOutcome {
    /// This statement inserted the record: commit.
    Inserted(HeapRecord),
    /// A record of this attempt already existed (returned unchanged): the effect must not
    /// be committed.
    Existing(HeapRecord),
}

/// Decodes `write_step`'s row: `None` when the fence refused the write.
fn step_outcome(
    row: &PgRow,
    delivery: &Delivery,
    key: &StepKey,
    attempt: u32,
) -> Result<Option<StepOutcome>> {
    let Some(recorded_token) = col::<Option<i64>>(row, 4, OP_STEP)? else {
        return Ok(None);
    };
    let record = HeapRecord {
        execution_id: delivery.execution_id().clone(),
        step_key: key.clone(),
        step_attempt: attempt,
        done: col(row, 2, OP_STEP)?,
        response: Json::from_stored(col(row, 3, OP_STEP)?),
        token: rows::token(recorded_token, OP_STEP)?,
    };
    let inserted: bool = col(row, 5, OP_STEP)?;
    Ok(Some(if inserted {
        StepOutcome::Inserted(record)
    } else {
        StepOutcome::Existing(record)
    }))
}

impl FencedTx {
    /// The transaction's connection, for the application's statements.
    pub fn conn(&mut self) -> &mut PgConnection {
        &mut self.tx
    }

    /// The lease this transaction is fenced by.
    pub fn lease(&self) -> &ExecutionLease {
        &self.lease
    }

    /// Commits if and only if the lease's token is current and its delivery has not ended,
    /// checked on the execution row locked `FOR SHARE` in the same message as `COMMIT` (one
    /// round trip; see the module documentation), so no claim can commit between the check
    /// and the commit.
    ///
    /// `Ok(Accepted(()))`: committed. `Ok(Lost)`: a higher token exists or the delivery
    /// ended; rolled back, nothing applied. Errors, all rolled back with nothing applied
    /// unless stated: [`LeaseError::UnknownExecution`]; [`LeaseError::ForeignToken`] (a
    /// token this execution was never issued); [`LeaseError::Unavailable`] for a timeout
    /// (`lock_timeout`, `statement_timeout`) or a lost connection before anything was sent;
    /// [`LeaseError::Backend`] for a failed application statement earlier in the
    /// transaction (it aborted it) or a constraint checked at commit;
    /// [`LeaseError::OutcomeUnknown`] when the connection failed after the message was
    /// sent (it may have committed).
    pub async fn commit(self) -> Result<Fenced<()>> {
        const OP: &str = "fenced_commit";
        let FencedTx {
            mut tx,
            backend,
            lease,
            token,
        } = self;
        let sql = bind_literals(
            &render(COMMIT, &quoted(backend.schema())),
            &[
                Literal::Text(Some(lease.execution_id.as_str())),
                Literal::BigInt(Some(token)),
                Literal::BigInt(backend.clock_param()),
            ],
        )
        .ok_or_else(|| error::protocol(OP, "an execution id holds U+0000"))?;
        let (parts, failure) = message_parts(AssertSqlSafe(sql), &mut tx).await;
        if parts.len() > FENCE_STATEMENTS {
            // COMMIT ran; the guard rolls back the empty transaction that BEGIN opened.
            return Ok(Fenced::Accepted(()));
        }
        let Some(failure) = failure else {
            return Err(error::protocol(OP, "the commit message stopped early"));
        };
        // A lost connection after the message was sent: it may have committed, unless the
        // server ended the session for idling in the transaction (it had not read the
        // message then: that timeout fires only while the server waits for input).
        let failure = if has_code(&failure, IDLE_IN_TRANSACTION_TIMEOUT) {
            failed_before_commit(OP, failure)
        } else {
            classify(OP, Attempt::from(failure))
        };
        if matches!(failure, LeaseError::OutcomeUnknown { .. }) {
            return Err(failure);
        }
        rollback(tx).await;
        refusal(OP, &lease, token, &parts, failure)
    }

    /// Rolls back: nothing of the transaction is applied. Errors only when the connection
    /// failed ([`LeaseError::Unavailable`]); the server rolls back then as well.
    pub async fn rollback(self) -> Result<()> {
        self.tx
            .rollback()
            .await
            .map_err(|e| failed_before_commit("fenced_rollback", e))
    }

    /// TEST ONLY, deliberately NOT atomic: checks the token in an unlocked read, waits
    /// 1 ms, then commits in a separate message, so a claim committing in between goes
    /// unnoticed. Exists so that the race test (`tests/fenced_tx.rs`) can show it catches
    /// a non-atomic fence. Never use it.
    #[cfg(lease_postgres_unlocked_commit_experiment)]
    #[doc(hidden)]
    pub async fn commit_with_unlocked_check_for_race_test(self) -> Result<Fenced<()>> {
        const OP: &str = "fenced_commit_unlocked";
        let FencedTx {
            mut tx,
            backend,
            lease,
            token,
        } = self;
        let sql = render(UNLOCKED_CHECK, &quoted(backend.schema()));
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(lease.execution_id.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| failed_before_commit(OP, e))?;
        let current = row
            .map(|row| FenceCheck::decode(&row, OP))
            .transpose()?
            .is_some_and(|c| {
                i64::try_from(c.current.get()) == Ok(token)
                    && c.status == lease_core::ExecutionStatus::Running
            });
        if !current {
            rollback(tx).await;
            return Ok(Fenced::Lost);
        }
        tx.commit().await.map_err(|e| classify(OP, e.into()))?;
        Ok(Fenced::Accepted(()))
    }
}

/// Why the fence refused (or failed), from the rows statement 1 returned before the
/// server's error `failure` (classified; the transaction was rolled back).
fn refusal(
    operation: &'static str,
    lease: &ExecutionLease,
    token: i64,
    parts: &[Vec<PgRow>],
    failure: LeaseError,
) -> Result<Fenced<()>> {
    let Some(locked) = parts.first() else {
        // Statement 1 itself failed (an aborted transaction, a lock timeout, the schema).
        return Err(failure);
    };
    let Some(row) = locked.first() else {
        return Err(LeaseError::UnknownExecution(lease.execution_id.clone()));
    };
    let check = FenceCheck::decode(row, operation)?;
    check.refusal(&lease.execution_id, lease.token)?;
    let current = i64::try_from(check.current.get()).ok() == Some(token);
    if current && check.status == lease_core::ExecutionStatus::Running {
        // The fence held; something else failed (a timeout, a deferred constraint).
        return Err(failure);
    }
    Ok(Fenced::Lost)
}

/// The lease's token as a bigint, refusing token 0 and tokens never issued by a bigint
/// sequence before anything is sent.
fn lease_token(lease: &ExecutionLease) -> Result<i64> {
    if lease.token == FencingToken::NONE {
        return Err(LeaseError::invalid("lease token", "0 is never issued"));
    }
    token_param(lease)
}

/// Commits a `step_in_tx` transaction. A server error at commit rolled it back; a lost
/// connection leaves the outcome unknown.
async fn commit_step(tx: Transaction<'static, Postgres>) -> Result<()> {
    tx.commit().await.map_err(|e| {
        if has_code(&e, IDLE_IN_TRANSACTION_TIMEOUT) {
            failed_before_commit(OP_STEP, e)
        } else {
            classify(OP_STEP, e.into())
        }
    })
}

/// Rolls back, ignoring a failure: the transaction can no longer commit either way (a lost
/// connection rolls it back on the server; sqlx closes a broken connection on release).
async fn rollback(tx: Transaction<'static, Postgres>) {
    if let Err(e) = tx.rollback().await {
        tracing::debug!(error = %e, "rollback of a fenced transaction failed");
    }
}

/// A driver failure before `COMMIT` could have run: nothing was applied.
fn failed_before_commit(operation: &'static str, e: sqlx::Error) -> LeaseError {
    classify(operation, Attempt::before_commit(e))
}

/// The error of a failed attempt (nothing here is retried: the application's statements
/// cannot be replayed by the library).
fn classify(operation: &'static str, attempt: Attempt) -> LeaseError {
    match error::classify(operation, Effect::Write, attempt) {
        Verdict::Retry(e) | Verdict::Fail(e) => e,
    }
}

/// SQLSTATE `idle_in_transaction_session_timeout`: the server ended the session (FATAL)
/// and rolled its transaction back.
const IDLE_IN_TRANSACTION_TIMEOUT: &str = "25P03";

/// Whether `e` is a server error with SQLSTATE `code`.
fn has_code(e: &sqlx::Error, code: &str) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|c| c == code)
}

/// Runs a simple-query message and returns the rows of every statement that completed, in
/// order, and the error that stopped it (if any).
async fn message_parts(
    sql: AssertSqlSafe<String>,
    conn: &mut PgConnection,
) -> (Vec<Vec<PgRow>>, Option<sqlx::Error>) {
    use futures::StreamExt;
    let mut parts = Vec::with_capacity(4);
    let mut rows = Vec::new();
    let mut stream = sqlx::raw_sql(sql).fetch_many(conn);
    while let Some(item) = stream.next().await {
        match item {
            Ok(sqlx::Either::Left(_done)) => parts.push(std::mem::take(&mut rows)),
            Ok(sqlx::Either::Right(row)) => rows.push(row),
            Err(e) => return (parts, Some(e)),
        }
    }
    (parts, None)
}
