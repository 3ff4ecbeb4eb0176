//! [`SqliteTx`]: one engine step's view of an open SQLite transaction, and what it keeps
//! across the step's calls (the namespace's values, the first database error).

use std::cell::{Cell, OnceCell, RefCell};

use lease_core::engine::Namespace;
use lease_core::{AttemptLimits, LeaseError, RedeliveryPolicies, Result};
use rusqlite::Connection;

use crate::error::{BACKEND, OpError, OpResult};
use crate::scope::Scope;

use super::claiming::{ClaimGates, Counters};
use super::namespace;
use super::row::Rows;

/// The savepoint around a part of a step that may be undone alone ([`lease_core::engine::Tx::undoable`]),
/// opened and released through the statement cache.
const PART: &str = "SAVEPOINT lease_engine_part";
const PART_RELEASE: &str = "RELEASE lease_engine_part";
const PART_ROLLBACK: &str = "ROLLBACK TO lease_engine_part";

/// One engine step's view of an open SQLite transaction.
pub struct SqliteTx<'t> {
    pub(super) conn: &'t Connection,
    pub(super) scope: &'t Scope,
    /// The client call this step serves, named in its errors.
    pub(super) operation: &'static str,
    /// The namespace's values, loaded at the first call that reads them.
    namespace: OnceCell<Namespace>,
    /// The values as loaded, to write back only what changed.
    loaded: Option<Namespace>,
    /// The first SQLite error a call met, kept as it was: the engine sees it as a
    /// [`LeaseError`], while the group commit must see the busy database to run the step again.
    failure: RefCell<Option<OpError>>,
    /// The execution rows the step read, written at its end ([`super::cache`]).
    pub(super) rows: RefCell<Rows>,
    /// The token and takeover counters, while the namespace's values are not loaded.
    pub(super) counters: Cell<Option<Counters>>,
    /// The attempt limits and redelivery policies a claim stamps, read once.
    pub(super) settings: OnceCell<(AttemptLimits, RedeliveryPolicies)>,
    /// What this step's claim held back, for its horizon.
    pub(super) claim: Option<ClaimGates>,
}

impl<'t> SqliteTx<'t> {
    pub(crate) fn new(conn: &'t Connection, scope: &'t Scope, operation: &'static str) -> Self {
        SqliteTx {
            conn,
            scope,
            operation,
            namespace: OnceCell::new(),
            loaded: None,
            failure: RefCell::new(None),
            rows: RefCell::default(),
            counters: Cell::new(None),
            settings: OnceCell::new(),
            claim: None,
        }
    }

    /// The namespace column of every row this transaction reads or writes.
    pub(super) fn ns(&self) -> &str {
        &self.scope.namespace
    }

    /// `result` as the engine sees it: a lease error as it is, a row that does not decode
    /// as the `Protocol` error naming it; a database error is kept for
    /// [`SqliteTx::failed`] (the group commit must see a busy database to run the step again).
    pub(super) fn op<T>(&self, result: OpResult<T>) -> Result<T> {
        result.map_err(|e| match e {
            OpError::Lease(e) => e,
            OpError::Corrupt(reason) => LeaseError::Protocol {
                backend: BACKEND,
                operation: self.operation,
                reason,
            },
            OpError::Sqlite(e) => {
                let seen = LeaseError::Unavailable {
                    backend: BACKEND,
                    operation: self.operation,
                    source: e.to_string().into(),
                };
                self.failure.borrow_mut().get_or_insert(OpError::Sqlite(e));
                seen
            }
        })
    }

    /// The step's result, with a kept storage error in place of what the engine made of it.
    pub(super) fn failed<T>(&self, result: Result<T>) -> OpResult<T> {
        match self.failure.borrow_mut().take() {
            Some(failure) => Err(failure),
            None => result.map_err(OpError::Lease),
        }
    }

    /// Whether a call met a database error (then the whole step fails).
    pub(super) fn storage_failed(&self) -> bool {
        self.failure.borrow().is_some()
    }

    /// Opens the savepoint of a part that may be undone alone.
    pub(super) fn open_savepoint(&self) -> OpResult<()> {
        self.conn.prepare_cached(PART)?.execute([])?;
        Ok(())
    }

    /// Keeps the part's writes.
    pub(super) fn release_savepoint(&self) -> OpResult<()> {
        self.conn.prepare_cached(PART_RELEASE)?.execute([])?;
        Ok(())
    }

    /// Undoes the part's writes.
    pub(super) fn roll_back_savepoint(&self) -> OpResult<()> {
        self.conn.prepare_cached(PART_ROLLBACK)?.execute([])?;
        self.release_savepoint()
    }

    /// Whether the namespace's values are loaded (then they, not the counters, are what
    /// the step changes).
    pub(super) fn namespace_loaded(&self) -> bool {
        self.namespace.get().is_some()
    }

    /// The namespace's values, loaded at the first call (after the counters this step
    /// changed are written, so the values include them).
    pub(super) fn namespace_values(&self) -> Result<&Namespace> {
        if let Some(values) = self.namespace.get() {
            return Ok(values);
        }
        self.op(self.write_counters())?;
        let values = self.op(namespace::load(self.conn, self.ns()))?;
        Ok(self.namespace.get_or_init(|| values))
    }

    /// The namespace's values to change; what changed is written at the end of the step.
    pub(super) fn namespace_values_mut(&mut self) -> Result<&mut Namespace> {
        if self.loaded.is_none() {
            self.loaded = Some(self.namespace_values()?.clone());
        }
        self.namespace
            .get_mut()
            .ok_or_else(|| LeaseError::Protocol {
                backend: BACKEND,
                operation: "engine",
                reason: "the namespace's values were not loaded".to_owned(),
            })
    }

    /// Ends a writing step: the rows, counters and namespace values it changed are
    /// written, then the answer.
    pub(super) fn finish<T>(mut self, result: Result<T>) -> OpResult<T> {
        let value = self.failed(result)?;
        self.flush()?;
        self.write_counters()?;
        if let (Some(loaded), Some(now)) = (self.loaded.take(), self.namespace.take()) {
            namespace::save(self.conn, self.scope, &loaded, &now)?;
        }
        Ok(value)
    }
}
