//! `lease purge --older-than DURATION`: retention from the command line
//! ([`lease::ExecutionClient::purge_terminal`] in batches until a batch comes back short).
//!
//! The cutoff is the backend clock minus `--older-than`, read once, so executions that end
//! while the command runs are never taken and the loop ends. It refuses less than a day
//! unless `--force`: the dispatcher's retention ([`lease::DispatcherOptions::retain_terminal`])
//! has the same floor, because a purged execution's store receipts and start request are
//! forgotten and no holder may outlive the cutoff.

use std::time::Duration;

use lease::{LeaseBackend, Timestamp};
use serde_json::json;

use crate::cli::PurgeArgs;
use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::{Output, instant};

/// The shortest `--older-than` without `--force`: the dispatcher's retention floor.
pub const MIN_OLDER_THAN: Duration = Duration::from_secs(24 * 60 * 60);

/// Purges (or with `--dry-run` only counts) terminal executions older than the cutoff.
pub async fn run(
    backend: &dyn LeaseBackend,
    args: &PurgeArgs,
    limits: &Limits,
) -> Result<Output, Failure> {
    if args.older_than < MIN_OLDER_THAN && !args.force {
        return Err(Failure::Usage(format!(
            "--older-than {} is under a day, the dispatcher's retention floor (a purged \
             execution's receipts and start request are forgotten); pass --force to purge anyway",
            humantime::format_duration(args.older_than)
        )));
    }
    let now = limits.call("now", backend.now()).await?;
    let cutoff = cutoff(now, args.older_than);
    if args.dry_run {
        return dry_run(backend, cutoff, limits).await;
    }
    let mut purged = 0usize;
    let mut batches = 0usize;
    loop {
        let batch = limits
            .call("purge_terminal", backend.purge_terminal(cutoff, args.batch))
            .await
            .map_err(|e| after(e, purged))?;
        batches += 1;
        purged += batch.ids.len();
        if batch.ids.len() < args.batch {
            break;
        }
    }
    Ok(Output {
        text: format!(
            "purged {purged} terminal executions that ended before {} ({batches} batches of at \
             most {})\n",
            instant(Some(cutoff)),
            args.batch
        ),
        json: json!({
            "purged": purged,
            "batches": batches,
            "cutoff_ms": cutoff.as_millis(),
            "cutoff": instant(Some(cutoff)),
        }),
    })
}

/// `now - older_than` (saturating at the start of time).
fn cutoff(now: Timestamp, older_than: Duration) -> Timestamp {
    let ms = i64::try_from(older_than.as_millis()).unwrap_or(i64::MAX);
    Timestamp::from_millis(now.as_millis().saturating_sub(ms))
}

/// A failure after some batches: those were purged (each batch is atomic), so say how many.
fn after(failure: Failure, purged: usize) -> Failure {
    match failure {
        Failure::Failed(m) if purged > 0 => {
            Failure::Failed(format!("{m} (after {purged} executions were purged)"))
        }
        other => other,
    }
}

/// The cutoff and the terminal executions there are now: an upper bound of what would go.
async fn dry_run(
    backend: &dyn LeaseBackend,
    cutoff: Timestamp,
    limits: &Limits,
) -> Result<Output, Failure> {
    let counts = limits
        .call("status_counts", backend.status_counts())
        .await?;
    let terminal = counts.completed + counts.failed + counts.cancelled;
    Ok(Output {
        text: format!(
            "dry run: nothing purged; of the {terminal} terminal executions ({} completed, {} \
             failed, {} cancelled), those that ended before {} would go\n",
            counts.completed,
            counts.failed,
            counts.cancelled,
            instant(Some(cutoff))
        ),
        json: json!({
            "dry_run": true,
            "terminal": terminal,
            "completed": counts.completed,
            "failed": counts.failed,
            "cancelled": counts.cancelled,
            "cutoff_ms": cutoff.as_millis(),
            "cutoff": instant(Some(cutoff)),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cutoff_saturates() {
        let day = MIN_OLDER_THAN;
        let now = Timestamp::from_millis(100_000_000);
        assert_eq!(cutoff(now, day).as_millis(), 100_000_000 - 86_400_000);
        assert_eq!(cutoff(Timestamp::MIN, day), Timestamp::MIN);
        assert_eq!(
            cutoff(now, Duration::MAX).as_millis(),
            100_000_000 - i64::MAX
        );
    }
}
