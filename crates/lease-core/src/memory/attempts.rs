//! The memory backend's attempt limits and dead letters ([`crate::attempts`]), each under
//! the one lock like every other operation.

use crate::attempts::{AttemptLimit, AttemptScope, Release, check_retry_ids};
use crate::error::Result;
use crate::execution::{ExecutionRecord, ExecutionStatus};
use crate::ids::ExecutionId;
use crate::json::Json;
use crate::lease::{ExecutionLease, Fenced};
use crate::limits::check_limit;

use super::MemoryBackend;

impl MemoryBackend {
    /// [`crate::ExecutionClient::set_attempt_limit`].
    pub(super) fn set_attempts(&self, scope: &AttemptScope, limit: Option<AttemptLimit>) {
        self.lock().attempt_limits.set(scope, limit);
    }

    /// [`crate::ExecutionClient::release_with`]: the held record ends as `release` says; a
    /// record still waiting afterwards signals when it is claimable.
    pub(super) fn release_held(
        &self,
        lease: &ExecutionLease,
        release: &Release,
    ) -> Result<Fenced<()>> {
        let now = self.clock.now();
        let mut s = self.lock();
        let Some(record) = s.held(lease, now)? else {
            return Ok(Fenced::Lost);
        };
        record.release_with(now, release);
        let record = record.clone();
        let (end, error) = super::history::release_end(release);
        s.history_end(&record.id, end, now, error);
        drop(s);
        self.signal(&record);
        Ok(Fenced::Accepted(()))
    }

    /// [`crate::ExecutionClient::list_dead`]: effective records, by id, after `after`.
    pub(super) fn dead_page(
        &self,
        after: Option<&ExecutionId>,
        limit: usize,
    ) -> Result<Vec<ExecutionRecord>> {
        check_limit("list limit", limit)?;
        let now = self.clock.now();
        let s = self.lock();
        Ok(s.executions
            .values()
            .filter(|r| after.is_none_or(|a| &r.id > a))
            .map(|r| r.effective(now))
            .filter(|r| r.status == ExecutionStatus::Dead)
            .take(limit)
            .collect())
    }

    /// [`crate::ExecutionClient::retry_dead`]: every id checked on a copy first, so a
    /// refusal changes nothing; then all are written.
    pub(super) fn retry(
        &self,
        ids: &[ExecutionId],
        input: Option<&Json>,
    ) -> Result<Vec<ExecutionRecord>> {
        check_retry_ids(ids)?;
        let now = self.clock.now();
        let mut s = self.lock();
        let mut retried = Vec::with_capacity(ids.len());
        for id in ids {
            let mut record = s.execution(id)?.effective(now);
            record.retry_dead(now, input)?;
            retried.push(record);
        }
        for record in &retried {
            s.executions.insert(record.id.clone(), record.clone());
        }
        drop(s);
        self.hub.signal(now);
        Ok(retried)
    }
}
