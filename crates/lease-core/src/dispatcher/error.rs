//! Why a delivery stopped before its worker replied.

use crate::error::{BoxError, LeaseError};
use crate::ids::StepKey;

/// The longest reason a refusal outcome carries, in characters.
pub const MAX_REASON_CHARS: usize = 1000;

/// The error a worker returns (usually with `?` from the step driver).
///
/// [`DeliveryError::Lost`] and [`DeliveryError::Cancelled`] end the delivery with no further
/// fenced write: the dispatcher neither acknowledges nor releases (RFC 002: "A holder whose
/// lease is lost will stop"). Every other variant releases the lease unacknowledged.
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
    /// [`crate::dispatcher::Delivery::step`]; a worker that returns it ends the execution
    /// as failed with [`DeliveryError::refusal_outcome`] (issue 25 item 21), instead of
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
}

impl DeliveryError {
    /// Wraps any error as [`DeliveryError::Worker`].
    pub fn worker(error: impl Into<BoxError>) -> Self {
        DeliveryError::Worker(error.into())
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

    /// The outcome a refused step's execution fails with:
    /// `{"error": "step_refused", "step": key, "reason": text}` (the reason cut to
    /// [`MAX_REASON_CHARS`] characters). `None` for every other error.
    pub fn refusal_outcome(&self) -> Option<crate::Json> {
        let DeliveryError::Refused { step, source } = self else {
            return None;
        };
        let reason: String = source.to_string().chars().take(MAX_REASON_CHARS).collect();
        let value = serde_json::json!({
            "error": "step_refused",
            "step": step.as_str(),
            "reason": reason,
        });
        crate::Json::to_json("refusal outcome", &value).ok()
    }

    /// True when the delivery must end without any further fenced write (`Lost` or
    /// `Cancelled`).
    pub fn is_stop(&self) -> bool {
        matches!(self, DeliveryError::Lost | DeliveryError::Cancelled)
    }
}
