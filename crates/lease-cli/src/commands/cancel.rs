//! `lease cancel ID [--reason TEXT]`: ends an execution for good
//! ([`lease::ExecutionClient::cancel`]): its live lease ends in the same step, so its holder
//! is refused from then on and its dispatcher stops the worker at the next renewal.
//!
//! Exit 0 when the execution is cancelled (by this call or before: cancel is idempotent),
//! 3 when it had completed or failed (nothing changed), 1 for an unknown id or a backend
//! without cancel, 2 for a bad id or reason.

use lease::{CancelOutcome, CancelReason, ExecutionId, LeaseBackend};
use serde_json::json;

use crate::cli::CancelArgs;
use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::Output;

/// Cancels `args.id` with `args.reason`.
pub async fn run(
    backend: &dyn LeaseBackend,
    args: &CancelArgs,
    limits: &Limits,
) -> Result<Output, Failure> {
    let id = ExecutionId::new(args.id.as_str()).map_err(|e| Failure::Usage(e.to_string()))?;
    let reason =
        CancelReason::new(args.reason.as_str()).map_err(|e| Failure::Usage(e.to_string()))?;
    let outcome = limits.call("cancel", backend.cancel(&id, &reason)).await?;
    match outcome {
        CancelOutcome::Cancelled { ended_lease } => Ok(Output {
            text: if ended_lease {
                format!("cancelled {id}; its running delivery's lease ended\n")
            } else {
                format!("cancelled {id}\n")
            },
            json: json!({"id": id.as_str(), "result": "cancelled", "ended_lease": ended_lease,
                         "reason": reason.as_str()}),
        }),
        CancelOutcome::AlreadyCancelled(first) => Ok(Output {
            text: format!("{id} was already cancelled: {first}\n"),
            json: json!({"id": id.as_str(), "result": "already_cancelled",
                         "reason": first.as_str()}),
        }),
        CancelOutcome::AlreadyTerminal(outcome) => Err(Failure::AlreadyEnded(format!(
            "{id} had already {}: nothing cancelled",
            outcome.status()
        ))),
    }
}
