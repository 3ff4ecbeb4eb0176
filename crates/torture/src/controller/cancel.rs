//! `--cancel-every N` (checked by history rule 6): the controller cancels every Nth
//! admitted execution while the faults run, through a recorder logging to the controller
//! log, so the checker sees each cancel next to the deliveries it ends.

use std::time::Duration;

use lease_core::{CancelReason, ExecutionClient, ExecutionId};
use tokio::time::Instant;

use super::state::Controller;

/// The reason every torture cancel gives (its outcome reads `cancelled:torture`).
const REASON: &str = "torture";

impl Controller {
    /// Cancels the executions picked by `--cancel-every` that were admitted at least half a
    /// lease ago (so some are mid-delivery), each once. A cancel that returned ends the
    /// execution (cancelled, or terminal already); one that failed is left to the outcome
    /// reads, which find it cancelled or let it complete.
    pub(super) async fn cancel_some(&mut self) {
        let Some(every) = self.a.cancel_every else {
            return;
        };
        let now = Instant::now();
        let age = Duration::from_millis(self.a.lease_ms / 2);
        let picked: Vec<String> = self
            .admitted
            .iter()
            .filter(|(id, at)| {
                number(id).is_some_and(|n| n % every.get() == 0)
                    && !self.done.contains(*id)
                    && !self.cancel_tried.contains(*id)
                    && now.duration_since(**at) >= age
            })
            .map(|(id, _)| id.clone())
            .collect();
        let Ok(reason) = CancelReason::new(REASON) else {
            return;
        };
        for id in picked {
            self.cancel_tried.insert(id.clone());
            let Ok(eid) = ExecutionId::new(id.clone()) else {
                continue;
            };
            if self.recorded.cancel(&eid, &reason).await.is_ok() {
                self.cancels += 1;
                self.done.insert(id);
                self.last_done_at = Instant::now();
            }
        }
    }
}

/// The number of an execution named by `execution_name`.
fn number(id: &str) -> Option<u64> {
    id.strip_prefix('e')?.parse().ok()
}
