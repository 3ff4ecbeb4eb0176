//! The acknowledgement queue's data ([`AckQueue`]): what waits behind the acknowledgement in
//! flight, and where each result goes. It names nothing of the dispatcher's state, so
//! [`super::shared::Shared`] can hold it; sending, batching and answering are in
//! [`super::acks`].

use std::sync::Mutex;

use tokio::sync::oneshot;
use tokio::time::Instant;

use lease_core::execution::{Acknowledged, Acknowledgement};
use lease_core::lease::Fenced;

/// The result a delivery gets for its acknowledgement: `None` when it failed (the lease is
/// then left to expire and the execution delivered again).
pub(crate) type AckResult = Option<Fenced<Acknowledged>>;

/// The queue of one dispatcher.
#[derive(Default)]
pub(crate) struct AckQueue {
    pub(super) state: Mutex<State>,
}

#[derive(Default)]
pub(super) struct State {
    /// A leader or flusher is sending; new acknowledgements queue.
    pub(super) in_flight: bool,
    pub(super) queued: Vec<Queued>,
}

/// A queued acknowledgement, its delivery's local deadline, and where its result goes.
pub(super) struct Queued {
    pub(super) ack: Acknowledgement,
    pub(super) deadline: Option<Instant>,
    pub(super) reply: ReplyTo,
}

/// Where an acknowledgement's result goes.
pub(super) enum ReplyTo {
    /// The delivery's task waits for it.
    Waiting(oneshot::Sender<AckResult>),
    /// Nobody waits (the slot moved on to a prefetched lease): the result is counted
    /// and logged where it arrives, inside its delivery's span.
    Detached(tracing::Span),
}

impl AckQueue {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `ack` behind the one in flight (its result going to `reply()`), or, when
    /// nothing is in flight, marks one in flight and hands `ack` back for the caller to send
    /// as the leader.
    pub(super) fn queue_or_lead(
        &self,
        ack: Acknowledgement,
        deadline: Option<Instant>,
        reply: impl FnOnce() -> ReplyTo,
    ) -> Option<Acknowledgement> {
        let mut state = self.lock();
        if state.in_flight {
            state.queued.push(Queued {
                ack,
                deadline,
                reply: reply(),
            });
            None
        } else {
            state.in_flight = true;
            Some(ack)
        }
    }

    /// Acknowledgements waiting behind the one in flight.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.lock().queued.len()
    }
}
