//! The memory backend's controls: cancel and the concurrency limits, each under the one
//! lock like every other operation.

use crate::control::{CancelReason, ConcurrencyLimit, LimitScope};
use crate::error::Result;
use crate::execution::CancelOutcome;
use crate::history::DeliveryEnd;
use crate::ids::ExecutionId;

use super::MemoryBackend;

impl MemoryBackend {
    /// [`crate::ExecutionClient::cancel`]: the effective record is cancelled in place (a
    /// delivery whose lease expired ends unacknowledged first, as `get` reads it).
    pub(super) fn cancel_execution(
        &self,
        id: &ExecutionId,
        reason: &CancelReason,
    ) -> Result<CancelOutcome> {
        let now = self.clock.now();
        let mut s = self.lock();
        if s.execution(id)?.lease_live(now) {
            s.history_end(id, DeliveryEnd::Cancelled, now, None);
        } else {
            s.close_expired(id, now);
        }
        let record = s.execution(id)?;
        // A dead execution (no outcome) may be cancelled: an operator's other answer to it.
        if record.outcome.is_some() {
            return Ok(record.clone().cancel(now, reason));
        }
        *record = record.effective(now);
        let outcome = record.cancel(now, reason);
        let record = record.clone();
        drop(s);
        self.signal(&record);
        Ok(outcome)
    }

    /// [`crate::ExecutionClient::set_concurrency_limit`]; any change may free places, so
    /// the wake-up path hears "now".
    pub(super) fn set_limit(&self, scope: &LimitScope, limit: Option<ConcurrencyLimit>) {
        let mut s = self.lock();
        match scope {
            LimitScope::Default => s.limits.default = limit,
            LimitScope::Key(key) => {
                s.limits.keys.retain(|(k, _)| k != key);
                if let Some(limit) = limit {
                    let at = s.limits.keys.partition_point(|(k, _)| k < key);
                    s.limits.keys.insert(at, (key.clone(), limit));
                }
            }
        }
        drop(s);
        self.hub.signal(self.clock.now());
    }
}
