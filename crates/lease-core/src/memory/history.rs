//! The memory backend's delivery histories ([`crate::history`]) and workflows' own
//! redelivery policies ([`crate::RedeliveryPolicies`]), changed under the one lock in the
//! same critical section as the transition they record.

use crate::attempts::Release;
use crate::execution::{ExecutionRecord, ExecutionStatus, WorkflowRunOutcome};
use crate::history::{DeliveryEnd, DeliveryHistory};
use crate::ids::{ExecutionId, WorkflowName};
use crate::lease::FencingToken;
use crate::redelivery::RedeliveryPolicy;
use crate::time::Timestamp;
use crate::{LastError, LeaseError, Result};

use super::{MemoryBackend, State};

impl State {
    /// A claim of the stored record `before` issued `token` at `now`: a lease of it that
    /// expired unacknowledged is closed at its expiry first (a takeover).
    pub(super) fn history_claim(
        &mut self,
        before: &ExecutionRecord,
        token: FencingToken,
        now: Timestamp,
    ) {
        let expired = expired_lease(before, now);
        self.histories
            .entry(before.id.clone())
            .or_default()
            .claim(token, now, expired);
    }

    /// The delivery of `id` ended at `at` as `end`.
    pub(super) fn history_end(
        &mut self,
        id: &ExecutionId,
        end: DeliveryEnd,
        at: Timestamp,
        error: Option<crate::attempts::ErrorNote>,
    ) {
        if let Some(h) = self.histories.get_mut(id) {
            h.end(end, at, error);
        }
    }

    /// Before an operator's change to the stored record `before` (cancel): its lease, if it
    /// expired unacknowledged, ends as expired; a live one as cancelled.
    pub(super) fn history_cancel(&mut self, before: &ExecutionRecord, now: Timestamp) {
        if before.status != ExecutionStatus::Running {
            return;
        }
        match expired_lease(before, now) {
            Some(expiry) => self.history_end(
                &before.id,
                DeliveryEnd::Expired,
                expiry,
                Some(LastError::expiry_note()),
            ),
            None => self.history_end(&before.id, DeliveryEnd::Cancelled, now, None),
        }
    }
}

/// The expiry of `record`'s lease when it ran out unacknowledged by `now`.
fn expired_lease(record: &ExecutionRecord, now: Timestamp) -> Option<Timestamp> {
    let running = record.status == ExecutionStatus::Running;
    (running && !record.lease_live(now))
        .then_some(record.lease_expires_at)
        .flatten()
}

/// How an acknowledgement with `outcome` ends its delivery.
pub(super) fn ack_end(outcome: &WorkflowRunOutcome) -> DeliveryEnd {
    match outcome {
        WorkflowRunOutcome::Suspended => DeliveryEnd::Suspended,
        WorkflowRunOutcome::Completed(_) | WorkflowRunOutcome::Failed(_) => {
            DeliveryEnd::Acknowledged
        }
    }
}

/// How a release ends its delivery, with the error it reports.
pub(super) fn release_end(release: &Release) -> (DeliveryEnd, Option<crate::attempts::ErrorNote>) {
    match release.note() {
        Some(note) => (DeliveryEnd::Released, Some(note)),
        None => (DeliveryEnd::NotStarted, None),
    }
}

impl MemoryBackend {
    /// [`crate::ExecutionClient::set_redelivery_policy`]: removing or shortening a policy
    /// may make executions claimable sooner, so the wake-up path hears "now".
    pub(super) fn set_workflow_policy(
        &self,
        workflow: &WorkflowName,
        policy: Option<RedeliveryPolicy>,
    ) {
        let now = self.clock.now();
        self.lock().redelivery_policies.set(workflow, policy);
        self.hub.signal(now);
    }

    /// [`crate::ExecutionClient::deliveries`]: the stored history as a reader sees it now.
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
