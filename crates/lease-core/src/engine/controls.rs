//! The engine's controls: cancel and the concurrency limits.

use crate::control::CancelReason;
use crate::error::{LeaseError, Result};
use crate::execution::CancelOutcome;
use crate::history::DeliveryEnd;
use crate::ids::ExecutionId;

use super::{DeliveryEvent, Engine, Tx, TxStore, history};

impl<S: TxStore> Engine<S> {
    /// [`crate::ExecutionClient::cancel`]: the effective record is cancelled in place (a
    /// delivery whose lease expired ends unacknowledged first, as `get` reads it).
    pub(super) async fn cancel_execution(
        &self,
        id: &ExecutionId,
        reason: &CancelReason,
    ) -> Result<CancelOutcome> {
        let now = self.clock.now();
        let (this, id, reason) = (self.clone(), id.clone(), reason.clone());
        self.write("cancel", move |tx, wakes| {
            let id = &id;
            let unknown = || LeaseError::UnknownExecution(id.clone());
            if tx
                .read_execution(id, |r| r.lease_live(now))?
                .ok_or_else(unknown)?
            {
                let event = DeliveryEvent::Ended {
                    end: DeliveryEnd::Cancelled,
                    at: now,
                    error: None,
                };
                tx.record_delivery(id, event)?;
            } else {
                history::close_expired(tx, id, now)?;
            }
            // A dead execution (no outcome) may be cancelled: an operator's other answer to it.
            if let Some(mut finished) = tx
                .read_execution(id, |r| r.outcome.is_some().then(|| r.clone()))?
                .flatten()
            {
                return Ok(finished.cancel(now, &reason));
            }
            tx.update_execution(id, |record| {
                *record = record.effective(now);
                let outcome = record.cancel(now, &reason);
                this.note(wakes, record);
                outcome
            })?
            .ok_or_else(unknown)
        })
        .await
    }
}
