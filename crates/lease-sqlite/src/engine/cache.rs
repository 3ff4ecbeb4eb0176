//! The execution rows one engine step has read, kept until the step ends or a statement
//! over many rows must see them ([`SqliteTx::flush`]). A claim reads each candidate once
//! (its selection leaves what it decoded here), and each row is written once, with what
//! the step's delivery events say of its history in the same `UPDATE`, however many of the
//! engine's calls touched it: the drain's claim and acknowledgement neither decode nor
//! rewrite the history's JSON (see `crate::history`).

use lease_core::{DeliveryHistory, ExecutionId, ExecutionRecord, LeaseError};
use rusqlite::{OptionalExtension, params};

use super::SqliteTx;
use super::row::Row;
use crate::error::{OpError, OpResult};
use crate::history::StoredHistory;
use crate::rows;

/// `$1 namespace, $2 id` -> the problem recorded when `id` was quarantined.
const QUARANTINED: &str = include_str!("cache/quarantined.sql");

impl SqliteTx<'_> {
    /// Runs `f` on the row of `id`, read from the table at the first call; `None` when
    /// there is none.
    pub(super) fn with_row<R>(
        &self,
        id: &ExecutionId,
        f: impl FnOnce(&mut Row) -> R,
    ) -> OpResult<Option<R>> {
        let mut rows = self.rows.borrow_mut();
        if let Some(row) = rows.get_mut(id) {
            return Ok(Some(f(row)));
        }
        let Some(row) = self.load_row(id)? else {
            return Ok(None);
        };
        Ok(Some(f(rows.entry(id.clone()).or_insert(row))))
    }

    /// Keeps a row the step read by other means (a claim's candidate).
    pub(super) fn keep_row(&self, stored: ExecutionRecord, history: StoredHistory) {
        let id = stored.id.clone();
        self.rows
            .borrow_mut()
            .entry(id)
            .or_insert_with(|| Row::loaded(stored, history));
    }

    /// Whether the step has read the row of `id`: its record, if so.
    pub(super) fn kept<R>(
        &self,
        id: &ExecutionId,
        f: impl FnOnce(&ExecutionRecord) -> R,
    ) -> Option<R> {
        self.rows.borrow().get(id).map(|row| f(&row.record))
    }

    /// Writes every row the step changed, before a statement that reads many rows.
    pub(super) fn flush(&self) -> OpResult<()> {
        for row in self.rows.borrow_mut().values_mut() {
            row.write(self.conn, self.scope)?;
        }
        Ok(())
    }

    /// Forgets the rows of `ids` (after a statement changed or removed them).
    pub(super) fn forget_rows(&self, ids: &[ExecutionId]) {
        let mut rows = self.rows.borrow_mut();
        for id in ids {
            rows.remove(id);
        }
    }

    /// The row of `id` from the table. A record that does not decode is a typed error for
    /// its id: when a claim has quarantined it, the error says so and points at
    /// `list_corrupt`.
    fn load_row(&self, id: &ExecutionId) -> OpResult<Option<Row>> {
        match rows::load_with_history(self.conn, self.ns(), id) {
            Ok((stored, history)) => Ok(Some(Row::loaded(stored, history))),
            Err(OpError::Lease(LeaseError::UnknownExecution(_))) => Ok(None),
            Err(OpError::Corrupt(problem)) => {
                Err(OpError::Corrupt(match self.quarantined(id)? {
                    Some(note) => format!(
                        "execution {id} is quarantined as corrupt (listed by list_corrupt): {note}"
                    ),
                    None => problem,
                }))
            }
            Err(other) => Err(other),
        }
    }

    /// The problem a claim recorded when it quarantined `id`, if it did.
    fn quarantined(&self, id: &ExecutionId) -> OpResult<Option<String>> {
        Ok(self
            .conn
            .prepare_cached(QUARANTINED)?
            .query_row(params![self.ns(), id.as_str()], |row| row.get(0))
            .optional()?
            .flatten())
    }

    /// The stored (not effective) history of `id`, as written so far.
    pub(super) fn stored_history(&self, id: &ExecutionId) -> OpResult<Option<DeliveryHistory>> {
        self.flush()?;
        self.with_row(id, |row| row.stored_history())?.transpose()
    }
}
