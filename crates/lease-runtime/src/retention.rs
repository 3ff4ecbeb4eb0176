//! The dispatcher-side retention schedule, so terminal executions do not pile up: with
//! [`crate::DispatcherOptions::retain_terminal`] set, the dispatcher purges terminal
//! executions older than the retention period through `purge_terminal`, in batches, every
//! purge interval, until it stops claiming.

use std::sync::Arc;
use std::time::Duration;

use crate::call::guarded;
use crate::shared::Shared;
use lease_core::error::LeaseError;
use lease_core::limits::MAX_CLAIM_LIMIT;

/// Batches one pass purges at most before it waits for the next interval, so a large
/// backlog is worked off without monopolising the backend.
const MAX_BATCHES_PER_PASS: usize = 100;

/// Runs passes every `every` until the dispatcher stops claiming. Stops for good when the
/// backend does not support retention.
pub(crate) async fn run(shared: Arc<Shared>, keep: Duration, every: Duration) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = shared.stopped_claiming() => return,
        }
        if !pass(&shared, keep).await {
            return;
        }
    }
}

/// One pass: purges batches of terminal executions that ended before `now - keep` until a
/// batch comes back short. `false` when retention is unsupported (stop the schedule).
async fn pass(shared: &Shared, keep: Duration) -> bool {
    let now = match guarded(shared, "now", shared.backend.now()).await {
        Ok(now) => now,
        Err(e) => {
            tracing::warn!(error = %e, "retention: reading the backend clock failed");
            return true;
        }
    };
    let cutoff = lease_core::Timestamp::from_millis(
        now.as_millis()
            .saturating_sub(i64::try_from(keep.as_millis()).unwrap_or(i64::MAX)),
    );
    for _ in 0..MAX_BATCHES_PER_PASS {
        if !shared.claiming() {
            return false;
        }
        let purge = shared.backend.purge_terminal(cutoff, MAX_CLAIM_LIMIT);
        match guarded(shared, "purge_terminal", purge).await {
            Ok(purged) => {
                shared.metrics.purged(purged.ids.len());
                if purged.ids.len() < MAX_CLAIM_LIMIT {
                    return true;
                }
            }
            Err(LeaseError::Unsupported { backend, .. }) => {
                tracing::warn!(
                    backend,
                    "retention: the backend cannot purge; schedule stopped"
                );
                return false;
            }
            Err(e) => {
                shared.metrics.backend_error();
                tracing::warn!(error = %e, "retention: purge_terminal failed");
                return true;
            }
        }
    }
    true
}
