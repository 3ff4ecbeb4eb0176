//! Why a delivery stopped before its worker replied.

use crate::error::{BoxError, LeaseError};
use crate::ids::StepKey;

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

    /// True when the delivery must end without any further fenced write (`Lost` or
    /// `Cancelled`).
    pub fn is_stop(&self) -> bool {
        matches!(self, DeliveryError::Lost | DeliveryError::Cancelled)
    }
}
