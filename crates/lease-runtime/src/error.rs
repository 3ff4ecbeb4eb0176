//! Why a delivery stopped before its worker replied.

use lease_core::error::{BoxError, LeaseError};
use lease_core::ids::{StepKey, WorkflowName};
use lease_core::json::Json;
use lease_core::time::Timestamp;

/// The longest reason a refusal outcome carries, in characters.
pub const MAX_REASON_CHARS: usize = 1000;

/// The error a worker returns (usually with `?` from the step driver).
///
/// [`DeliveryError::Lost`] and [`DeliveryError::Cancelled`] end the delivery with no further
/// fenced write: the dispatcher neither acknowledges nor releases (RFC 002: "A holder whose
/// lease is lost will stop"). [`DeliveryError::Sleeping`] acknowledges the delivery as
/// suspended; [`DeliveryError::Failed`] and the variants no redelivery can cure
/// ([`DeliveryError::Refused`], [`DeliveryError::BadInput`],
/// [`DeliveryError::UnknownWorkflow`], [`DeliveryError::BadOutput`]) fail the execution
/// with [`DeliveryError::failure_outcome`]. Every other variant releases the lease
/// unacknowledged, for a redelivery.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeliveryError {
    /// A fenced write returned `Lost`: another claim holds a higher token, or this delivery
    /// already ended. The worker must stop.
    #[error("the lease was lost")]
    Lost,
    /// The delivery was cancelled (lease lost on renewal, shutdown deadline, or the
    /// dispatcher was dropped) before this write; nothing was written.
    #[error("the delivery was cancelled")]
    Cancelled,
    /// A step's closure failed; nothing was recorded for the step.
    #[error("step {step} failed: {source}")]
    Step {
        /// The step key.
        step: StepKey,
        /// The closure's error.
        #[source]
        source: BoxError,
    },
    /// A step's value was refused as bad input (too deep, too large, not representable, or
    /// past the attempt limit): the same code would produce the same value on every
    /// redelivery, so no redelivery can cure it. Returned to the worker by
    /// [`crate::Delivery::step`]; a worker that returns it ends the execution
    /// as failed with [`DeliveryError::refusal_outcome`], instead of
    /// being released and delivered again forever.
    #[error("step {step}'s value was refused: {source}")]
    Refused {
        /// The step key.
        step: StepKey,
        /// Why the value was refused (a bad-input [`LeaseError`]).
        #[source]
        source: LeaseError,
    },
    /// A backend call made by the delivery failed (or its input was rejected).
    #[error(transparent)]
    Backend(#[from] LeaseError),
    /// Any other failure reported by the worker.
    #[error("worker failed: {0}")]
    Worker(#[source] BoxError),
    /// The workflow failed on purpose with this outcome (see [`DeliveryError::fail`]): the
    /// execution is acknowledged as failed with it, not delivered again.
    #[error("the workflow failed with {0}")]
    Failed(Json),
    /// The execution's input does not decode into the type its handler (or
    /// [`crate::Delivery::input_as`]) asked for. Every redelivery would read the same input,
    /// so the execution fails with `{"error": "bad_input", ...}`.
    #[error("the input of workflow {} does not fit the type asked for: {reason}", workflow_text(.workflow))]
    #[non_exhaustive]
    BadInput {
        /// The execution's workflow, if named.
        workflow: Option<WorkflowName>,
        /// The decoder's message (what it expected, and where).
        reason: String,
    },
    /// No handler in this dispatcher's [`crate::Workflows`] runs the execution's
    /// workflow: it fails with `{"error": "unknown_workflow", ...}`.
    #[error("no handler for workflow {} in this dispatcher (it knows: {known})", workflow_text(.workflow))]
    #[non_exhaustive]
    UnknownWorkflow {
        /// The execution's workflow (`None`: admitted without one).
        workflow: Option<WorkflowName>,
        /// The names the dispatcher knows, comma separated.
        known: String,
    },
    /// A handler's output cannot be stored as the outcome (not representable as JSON, too
    /// large, too deep): the same code would produce it again, so the execution fails with
    /// `{"error": "bad_output", ...}`.
    #[error("the output of workflow {} cannot be stored: {source}", workflow_text(.workflow))]
    #[non_exhaustive]
    BadOutput {
        /// The execution's workflow, if named.
        workflow: Option<WorkflowName>,
        /// Why the output was refused.
        #[source]
        source: LeaseError,
    },
    /// A durable sleep ([`crate::Delivery::sleep`]) has not reached its instant: its wake is
    /// requested, and the dispatcher acknowledges the delivery as suspended. Return it with
    /// `?`; only the sleep helpers make it.
    #[error("sleeping until {until} (step {step})")]
    #[non_exhaustive]
    Sleeping {
        /// The sleep's step key.
        step: StepKey,
        /// The backend-clock instant it sleeps until.
        until: Timestamp,
    },
}

/// A workflow name for a message: the name, or that there is none.
fn workflow_text(workflow: &Option<WorkflowName>) -> String {
    match workflow {
        Some(name) => name.to_string(),
        None => "(none named at admission)".to_owned(),
    }
}

impl DeliveryError {
    /// Wraps any error as [`DeliveryError::Worker`].
    pub fn worker(error: impl Into<BoxError>) -> Self {
        DeliveryError::Worker(error.into())
    }

    /// Fails the workflow on purpose with `error` as its outcome ([`DeliveryError::Failed`]):
    /// `Err(DeliveryError::fail(&PaymentDeclined { .. }))`. An error that cannot be stored
    /// as JSON is [`DeliveryError::BadOutput`], which fails the execution too.
    pub fn fail<E: serde::Serialize + ?Sized>(error: &E) -> Self {
        match Json::to_json("workflow failure", error) {
            Ok(json) => DeliveryError::Failed(json),
            Err(source) => DeliveryError::BadOutput {
                workflow: None,
                source,
            },
        }
    }

    /// Wraps a step's refused value: a bad-input error becomes [`DeliveryError::Refused`],
    /// anything else (the backend was unavailable, the lease lost) stays as it was.
    pub(crate) fn refusing(step: &StepKey, e: DeliveryError) -> Self {
        match e {
            DeliveryError::Backend(
                source @ (LeaseError::InvalidInput { .. }
                | LeaseError::PayloadTooLarge { .. }
                | LeaseError::MalformedJson { .. }),
            ) => DeliveryError::Refused {
                step: step.clone(),
                source,
            },
            other => other,
        }
    }

    /// True when the delivery must end without any further fenced write (`Lost` or
    /// `Cancelled`).
    pub fn is_stop(&self) -> bool {
        matches!(self, DeliveryError::Lost | DeliveryError::Cancelled)
    }
}
