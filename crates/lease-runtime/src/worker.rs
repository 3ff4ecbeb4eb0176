//! What the dispatcher runs for each delivery, and how it replies.

use std::future::Future;

use async_trait::async_trait;

use crate::delivery::Delivery;
use crate::error::DeliveryError;
use lease_core::execution::WorkflowRunOutcome;

/// A worker's reply to one delivery (RFC 003: acknowledgement or retry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Acknowledge the delivery with this outcome (fenced; ends the lease).
    Acknowledge(WorkflowRunOutcome),
    /// Release the lease without acknowledging: `unacknowledged_deliveries + 1`, delivered
    /// again after the redelivery delay (RFC 002 "A delivery replies retry").
    Retry,
}

/// Runs one delivery of an execution (the workflow body, replayed through
/// [`Delivery::step`]).
///
/// Any `Fn(Delivery) -> impl Future<Output = Result<Reply, DeliveryError>>` closure is a
/// worker. A worker that returns an error or panics is released (unacknowledged); one that
/// returns [`DeliveryError::Lost`] or [`DeliveryError::Cancelled`] ends with no further
/// fenced write.
#[async_trait]
pub trait Worker: Send + Sync + 'static {
    /// Runs the delivery and replies.
    async fn run(&self, delivery: Delivery) -> Result<Reply, DeliveryError>;
}

#[async_trait]
impl<F, Fut> Worker for F
where
    F: Fn(Delivery) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Reply, DeliveryError>> + Send + 'static,
{
    async fn run(&self, delivery: Delivery) -> Result<Reply, DeliveryError> {
        (self)(delivery).await
    }
}
