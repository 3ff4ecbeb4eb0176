//! Admission inside the application's own transaction: [`PostgresBackend::admit_in_tx`]
//! and [`PostgresBackend::admit_batch_in_tx`] run `admit`'s and `admit_batch`'s own
//! statements on a connection the caller holds in a transaction, so the application's rows
//! and the executions it admits commit (or roll back) together. The statements' `pg_notify`
//! runs inside that transaction, and PostgreSQL delivers a transaction's notifications at
//! its commit only: a commit wakes idle dispatchers as a plain admit does, a rollback wakes
//! nobody.
//!
//! The statements depend on no session state of the caller's connection: every object is
//! qualified with the backend's schema, the clock is `clock_timestamp()` (or the injected
//! clock's parameter), and the library's session settings (planner choices) only make the
//! claims fast.

use lease_core::execution::check_admit_batch;
use lease_core::{Admission, ExecutionRecord, LeaseError, Result};
use sqlx::PgConnection;
use sqlx::postgres::PgRow;

use crate::admission::{
    AdmitColumns, AdmittedBatch, SNAPSHOT_RETRIES, admit_params, admitted, batch_admitted,
    invisible,
};
use crate::backend::{PostgresBackend, query};
use crate::error::{self, Attempt, Effect, Verdict};

const OP: &str = "admit_in_tx";
const OP_BATCH: &str = "admit_batch_in_tx";

impl PostgresBackend {
    /// Admits `admission` on `conn`, a connection of this backend's database inside the
    /// caller's transaction (`&mut *tx` of a `sqlx::Transaction`, a [`crate::FencedTx`], or
    /// the connection a [`PostgresBackend::step_in_tx`] body receives: a step and the
    /// children it admits commit together). RFC 001 admit, idempotent by id: the same
    /// validation, statement and answer as [`lease_core::ExecutionClient::admit`]; an
    /// existing id is returned as stored, unchanged. The execution exists once the caller
    /// commits, and not at all if it rolls back; its wake-up is sent at that commit only.
    ///
    /// Bad input is `InvalidInput` before any statement, leaving the transaction usable. A
    /// failed statement aborts the caller's transaction, as any failed statement does in
    /// PostgreSQL: roll it back. Nothing is retried (the caller's transaction cannot be
    /// replayed). The connection may be any of the application's (no session setting of
    /// the backend's pool is assumed), but must be on this backend's database.
    pub async fn admit_in_tx(
        &self,
        conn: &mut PgConnection,
        admission: &Admission,
    ) -> Result<ExecutionRecord> {
        admission.validate()?;
        let sql = &self.execution_sql().admit;
        let p = admit_params(admission);
        for _ in 0..SNAPSHOT_RETRIES {
            let row: Option<PgRow> = p
                .bind(query(sql), self.clock_param())
                .fetch_optional(&mut *conn)
                .await
                .map_err(|e| in_tx_error(OP, e))?;
            if let Some(record) = admitted(row.as_ref(), OP)? {
                return Ok(record);
            }
        }
        Err(invisible(OP))
    }

    /// [`PostgresBackend::admit_in_tx`] for a batch, with `admit_batch`'s statement: every
    /// item as `admit` admits it, records in order, one notification at the commit. Bad
    /// input in any item (over 1000, an id twice, an instant out of range) is
    /// `InvalidInput` before any statement, admitting nothing.
    pub async fn admit_batch_in_tx(
        &self,
        conn: &mut PgConnection,
        admissions: &[Admission],
    ) -> Result<Vec<ExecutionRecord>> {
        check_admit_batch(admissions)?;
        let sql = &self.execution_sql().admit_batch;
        let mut batch = AdmittedBatch::new(admissions);
        for _ in 0..SNAPSHOT_RETRIES {
            let Some(items) = batch.missing() else { break };
            let columns: AdmitColumns<'_> = items.iter().map(|a| admit_params(a)).collect();
            let found: Vec<PgRow> = columns
                .bind(query(sql), self.clock_param())
                .fetch_all(&mut *conn)
                .await
                .map_err(|e| in_tx_error(OP_BATCH, e))?;
            batch.found(batch_admitted(&found, &items, OP_BATCH)?);
        }
        batch.records(OP_BATCH)
    }
}

/// A failed statement inside the caller's transaction: nothing of it can commit (the
/// transaction is aborted, or its connection lost), and it is not retried.
fn in_tx_error(operation: &'static str, e: sqlx::Error) -> LeaseError {
    match error::classify(operation, Effect::Write, Attempt::before_commit(e)) {
        Verdict::Retry(e) | Verdict::Fail(e) => e,
    }
}
