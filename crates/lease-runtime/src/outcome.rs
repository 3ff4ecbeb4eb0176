//! What the dispatcher acknowledges when a worker returns an error no redelivery can change:
//! a durable sleep is a suspended acknowledgement, a deliberate or certain failure a failed
//! one with a typed outcome (RFC 002 "A delivery replies retry" applies to the rest).

use crate::error::{DeliveryError, MAX_REASON_CHARS};
use lease_core::execution::WorkflowRunOutcome;
use lease_core::ids::WorkflowName;
use lease_core::json::Json;

impl DeliveryError {
    /// The outcome the execution fails with for this error, or `None` when the delivery is
    /// released (or stopped) instead:
    ///
    /// - [`DeliveryError::Failed`]: its own JSON.
    /// - [`DeliveryError::Refused`]: `{"error": "step_refused", "step": key, "reason": text}`.
    /// - [`DeliveryError::BadInput`], [`DeliveryError::UnknownWorkflow`],
    ///   [`DeliveryError::BadOutput`]: `{"error": "bad_input" | "unknown_workflow" |
    ///   "bad_output", "workflow": name or null, "reason": text}`.
    ///
    /// Reasons are cut to [`MAX_REASON_CHARS`] characters.
    pub fn failure_outcome(&self) -> Option<Json> {
        let value = match self {
            DeliveryError::Failed(json) => return Some(json.clone()),
            DeliveryError::Refused { step, source } => serde_json::json!({
                "error": "step_refused",
                "step": step.as_str(),
                "reason": reason(&source.to_string()),
            }),
            DeliveryError::BadInput { workflow, .. } => refusal("bad_input", workflow, self),
            DeliveryError::UnknownWorkflow { workflow, .. } => {
                refusal("unknown_workflow", workflow, self)
            }
            DeliveryError::BadOutput { workflow, .. } => refusal("bad_output", workflow, self),
            _ => return None,
        };
        Json::to_json("refusal outcome", &value).ok()
    }

    /// The outcome a refused step's execution fails with (see
    /// [`DeliveryError::failure_outcome`]); `None` for every other error.
    pub fn refusal_outcome(&self) -> Option<Json> {
        match self {
            DeliveryError::Refused { .. } => self.failure_outcome(),
            _ => None,
        }
    }

    /// True when the library, not the workflow, fails the execution: its value, input,
    /// workflow or output cannot be run or stored however often it is delivered. Counted as
    /// a worker failure and logged at `warn`.
    pub(crate) fn is_refusal(&self) -> bool {
        matches!(
            self,
            DeliveryError::Refused { .. }
                | DeliveryError::BadInput { .. }
                | DeliveryError::UnknownWorkflow { .. }
                | DeliveryError::BadOutput { .. }
        )
    }

    /// What the dispatcher acknowledges for this error: suspended for a sleep, failed with
    /// [`DeliveryError::failure_outcome`], or `None` (release, or stop when lost).
    pub(crate) fn acknowledgement(&self) -> Option<WorkflowRunOutcome> {
        match self {
            DeliveryError::Sleeping { .. } => Some(WorkflowRunOutcome::Suspended),
            _ => self.failure_outcome().map(WorkflowRunOutcome::Failed),
        }
    }
}

/// `{"error": kind, "workflow": name or null, "reason": the error's text}`.
fn refusal(
    kind: &str,
    workflow: &Option<WorkflowName>,
    error: &DeliveryError,
) -> serde_json::Value {
    serde_json::json!({
        "error": kind,
        "workflow": workflow.as_ref().map(|w| w.as_str()),
        "reason": reason(&error.to_string()),
    })
}

fn reason(text: &str) -> String {
    text.chars().take(MAX_REASON_CHARS).collect()
}
