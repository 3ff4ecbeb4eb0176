//! The engine's releases and dead letters ([`crate::attempts`]), each one transaction.

use crate::attempts::{Release, check_retry_ids};
use crate::error::{LeaseError, Result};
use crate::execution::ExecutionRecord;
use crate::ids::ExecutionId;
use crate::json::Json;
use crate::lease::{ExecutionLease, Fenced};
use crate::limits::check_limit;

use super::{Engine, Tx, TxStore, history, with_held};

impl<S: TxStore> Engine<S> {
    /// [`crate::ExecutionClient::release_with`]: the held record ends as `release` says; a
    /// record still waiting afterwards signals when it is claimable.
    pub(super) async fn release_held(
        &self,
        lease: &ExecutionLease,
        release: &Release,
    ) -> Result<Fenced<()>> {
        let now = self.clock.now();
        let (this, lease, release) = (self.clone(), lease.clone(), release.clone());
        self.write("release", move |tx, wakes| {
            let released = with_held(tx, &lease, now, |record| {
                record.release_with(now, &release);
                this.note(wakes, record);
            })?;
            if released.is_none() {
                return Ok(Fenced::Lost);
            }
            history::released(tx, &lease.execution_id, &release, now)?;
            Ok(Fenced::Accepted(()))
        })
        .await
    }

    /// [`crate::ExecutionClient::list_dead`]: effective records, by id, after `after`.
    pub(super) async fn dead_page(
        &self,
        after: Option<&ExecutionId>,
        limit: usize,
    ) -> Result<Vec<ExecutionRecord>> {
        check_limit("list limit", limit)?;
        let now = self.clock.now();
        let after = after.cloned();
        self.read("list_dead", move |tx| {
            tx.dead_after(after.as_ref(), limit, now)
        })
        .await
    }

    /// [`crate::ExecutionClient::retry_dead`]: every id checked on a copy first, so a
    /// refusal changes nothing; then all are written.
    pub(super) async fn retry(
        &self,
        ids: &[ExecutionId],
        input: Option<&Json>,
    ) -> Result<Vec<ExecutionRecord>> {
        check_retry_ids(ids)?;
        let now = self.clock.now();
        let (ids, input) = (ids.to_vec(), input.cloned());
        self.write_many("retry_dead", ids.len(), move |tx, wakes| {
            let mut retried = Vec::with_capacity(ids.len());
            for id in &ids {
                let mut record = tx
                    .read_execution(id, |r| r.effective(now))?
                    .ok_or_else(|| LeaseError::UnknownExecution(id.clone()))?;
                record.retry_dead(now, input.as_ref())?;
                retried.push(record);
            }
            for record in &retried {
                // A death by expiry was only read so far: its history says so before it
                // moves on.
                history::close_expired(tx, &record.id, now)?;
                tx.update_execution(&record.id, |stored| *stored = record.clone())?;
            }
            wakes.push(now);
            Ok(retried)
        })
        .await
    }
}
