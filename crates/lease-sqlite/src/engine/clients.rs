//! The client calls of [`SqliteBackend`], run on lease-core's engine over its own
//! connection: the rules written once.

use async_trait::async_trait;
use lease_core::limits::check_limit;
use lease_core::{
    CorruptRecord, EffectClient, ExecutionClient, ExecutionFilter, ExecutionPage, ForwardEffect,
    ForwardExecution, ForwardHeap, ForwardStart, ForwardStore, HeapClient, ListCursor, Result,
    StartClient, StoreClient,
};

use lease_core::engine::Tx;
use lease_core::{Admission, ExecutionRecord};
use rusqlite::Connection;

use super::SqliteTx;
use crate::backend::SqliteBackend;
use crate::browse;
use crate::error::OpResult;
use crate::group::{Woken, earliest};
use crate::scope::Scope;

impl ForwardHeap for SqliteBackend {
    fn inner_heap(&self) -> &dyn HeapClient {
        self.engine()
    }
}

impl ForwardStore for SqliteBackend {
    fn inner_store(&self) -> &dyn StoreClient {
        self.engine()
    }
}

impl ForwardEffect for SqliteBackend {
    fn inner_effect(&self) -> &dyn EffectClient {
        self.engine()
    }
}

impl ForwardStart for SqliteBackend {
    fn inner_start(&self) -> &dyn StartClient {
        self.engine()
    }
}

/// Executions and leases on the engine, with what only this backend has: the indexed
/// browse, the quarantined rows, and its namespace's name.
#[async_trait]
impl ForwardExecution for SqliteBackend {
    fn inner_execution(&self) -> &dyn ExecutionClient {
        self.engine()
    }

    /// One read transaction walking an index in admission order from the cursor, newest
    /// first; a bad limit or a cursor this backend did not write is `InvalidInput` before
    /// it starts.
    #[tracing::instrument(level = "debug", name = "list_executions", skip_all)]
    async fn list_executions(
        &self,
        filter: &ExecutionFilter,
        after: Option<&ListCursor>,
        limit: usize,
    ) -> Result<ExecutionPage> {
        check_limit("list limit", limit)?;
        let below = browse::check_cursor(after)?;
        let filter = filter.clone();
        self.read("list_executions", move |tx, s| {
            browse::list_executions(tx, s, &filter, below, limit)
        })
        .await
    }

    /// The records a claim quarantined because they do not decode, by id.
    #[tracing::instrument(level = "debug", name = "list_corrupt", skip_all)]
    async fn list_corrupt(&self, limit: usize) -> Result<Vec<CorruptRecord>> {
        check_limit("list limit", limit)?;
        self.read("list_corrupt", move |tx, s| {
            super::lists::corrupt(tx, &s.namespace, limit)
        })
        .await
    }

    fn namespace_name(&self) -> Option<String> {
        Some(self.namespace().to_owned())
    }
}

/// Admits `admissions` in the open transaction `conn` (the application's own, for
/// `admit_in_tx`), each as the engine's `admit` does: a new record, or the effective
/// stored one when its id exists. Wakes at the earliest instant a created one is
/// claimable.
pub(crate) fn admit_rows(
    conn: &Connection,
    scope: &Scope,
    operation: &'static str,
    admissions: &[Admission],
) -> OpResult<Woken<Vec<ExecutionRecord>>> {
    let now = scope.now();
    let mut tx = SqliteTx::new(conn, scope, operation);
    let mut records = Vec::with_capacity(admissions.len());
    let mut wake = None;
    for admission in admissions {
        let record = ExecutionRecord::admitted(admission, now);
        let stored = tx.admit_new(&record);
        match tx.failed(stored)? {
            Some(stored) => records.push(stored.effective(now)),
            None => {
                wake = earliest(wake, record.claimable_at(&scope.policy));
                records.push(record);
            }
        }
    }
    Ok(Woken::at(records, wake))
}

/// A claim of at most one execution at the scope's clock in the open transaction `conn`,
/// as the engine's claim makes it (for tests of what runs around an engine step).
#[cfg(test)]
pub(crate) fn claim_one(
    conn: &Connection,
    scope: &Scope,
    lease_ms: i64,
) -> OpResult<Woken<Option<lease_core::ExecutionLease>>> {
    use lease_core::LeaseError;
    use lease_core::engine::DeliveryEvent;
    let now = scope.now();
    let mut tx = SqliteTx::new(conn, scope, "claim_due");
    let mut claim = || {
        let selection = tx.select_claimable(now, &scope.policy, 1)?;
        let Some(id) = selection.take.first() else {
            return Ok(None);
        };
        let token = tx.next_token()?;
        let lease = tx.update_execution(id, |r| {
            *r = r.effective(now);
            r.claim(now, lease_ms, token)
        })?;
        tx.record_delivery(id, DeliveryEvent::Claimed { token, at: now })?;
        lease
            .map(Some)
            .ok_or_else(|| LeaseError::UnknownExecution(id.clone()))
    };
    let claimed = claim();
    Ok(Woken::quiet(tx.finish(claimed)?))
}
