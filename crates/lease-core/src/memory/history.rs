//! The memory backend's delivery histories and workflows' own redelivery policies
//! ([`crate::history`], [`crate::RedeliveryPolicies`]): each history is written under the
//! one lock in the same critical section as the transition it records.

use crate::attempts::Release;
use crate::error::{LeaseError, Result};
use crate::execution::{Acknowledged, ExecutionStatus};
use crate::history::{DeliveryEnd, DeliveryHistory};
use crate::ids::{ExecutionId, WorkflowName};
use crate::lease::FencingToken;
use crate::redelivery::{RedeliveryPolicies, RedeliveryPolicy};
use crate::time::Timestamp;

use super::{MemoryBackend, State};

impl State {
    /// Closes `id`'s open entry when its stored delivery's lease has expired by `now`: the
    /// step about to apply the effective record (a claim, a cancel, a retry) writes down
    /// the expiry that `get` reads, so the history agrees with the record it keeps.
    pub(super) fn close_expired(&mut self, id: &ExecutionId, now: Timestamp) {
        let Some(record) = self.executions.get(id) else {
            return;
        };
        if record.status == ExecutionStatus::Running && !record.lease_live(now) {
            let expired = record.clone();
            let history = self.histories.entry(id.clone()).or_default();
            *history = std::mem::take(history).effective(&expired, now);
        }
    }

    /// Appends the open entry of a lease `token` claimed at `now` (after
    /// [`State::close_expired`]).
    pub(super) fn history_claim(&mut self, id: &ExecutionId, token: FencingToken, now: Timestamp) {
        self.histories
            .entry(id.clone())
            .or_default()
            .claim(token, now, None);
    }

    /// Closes `id`'s open entry as `end` at `at`.
    pub(super) fn history_end(
        &mut self,
        id: &ExecutionId,
        end: DeliveryEnd,
        at: Timestamp,
        error: Option<crate::attempts::ErrorNote>,
    ) {
        if let Some(history) = self.histories.get_mut(id) {
            history.end(end, at, error);
        }
    }

    /// Closes `id`'s open entry as its acknowledgement `acked` says.
    pub(super) fn history_acknowledged(
        &mut self,
        id: &ExecutionId,
        acked: &Acknowledged,
        now: Timestamp,
    ) {
        let end = match acked {
            Acknowledged::Suspended => DeliveryEnd::Suspended,
            Acknowledged::Terminal(_) => DeliveryEnd::Acknowledged,
        };
        self.history_end(id, end, now, None);
    }

    /// Closes `id`'s open entry as `release` ends it: an attempt is `Released` (with the
    /// worker's error when it reported one; a retry reply is no error), an unstarted lease
    /// `NotStarted`.
    pub(super) fn history_released(&mut self, id: &ExecutionId, release: &Release, now: Timestamp) {
        let (end, error) = match release {
            Release::NotStarted => (DeliveryEnd::NotStarted, None),
            Release::Failed(note) => (DeliveryEnd::Released, Some(note.clone())),
            Release::Retry => (DeliveryEnd::Released, None),
        };
        self.history_end(id, end, now, error);
    }
}

impl MemoryBackend {
    /// [`crate::ExecutionClient::set_redelivery_policy`]; any change may shorten a wait, so
    /// the wake-up path hears "now" (a spare signal only makes a dispatcher look again).
    pub(super) fn set_workflow_policy(
        &self,
        workflow: &WorkflowName,
        policy: Option<RedeliveryPolicy>,
    ) {
        self.lock().redelivery.set(workflow, policy);
        self.hub.signal(self.clock.now());
    }

    /// [`crate::ExecutionClient::redelivery_policies`].
    pub(super) fn workflow_policies(&self) -> RedeliveryPolicies {
        self.lock().redelivery.clone()
    }

    /// [`crate::ExecutionClient::deliveries`]: the stored history as a reader at now sees
    /// it beside the stored record.
    pub(super) fn history_of(&self, id: &ExecutionId) -> Result<DeliveryHistory> {
        let now = self.clock.now();
        let s = self.lock();
        let record = s
            .executions
            .get(id)
            .ok_or_else(|| LeaseError::UnknownExecution(id.clone()))?;
        let history = s.histories.get(id).cloned().unwrap_or_default();
        Ok(history.effective(record, now))
    }
}
