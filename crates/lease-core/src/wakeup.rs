//! Wake-ups: how a backend tells dispatchers that something became (or will become)
//! claimable, so they claim at once instead of at their next poll.
//!
//! A backend that can learn of writes made by other processes (PostgreSQL LISTEN/NOTIFY,
//! Redis pub/sub, a change signal on a SQLite file) owns a [`WakeHub`] and returns a
//! [`WakeReceiver`] from [`crate::ExecutionClient::wakeups`]. Every signal carries the
//! backend-clock instant from which the execution it concerns is claimable
//! ([`crate::ExecutionRecord::claimable_at`]); [`Timestamp::MIN`] means "now" (for example
//! after a reconnect, when notifications may have been missed).
//!
//! Correctness never rests on a wake-up: a lost, duplicated or early one only changes when a
//! claim happens. The dispatcher keeps polling as a backstop.

use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Notify;

use crate::time::Timestamp;

mod first_listen;
pub use first_listen::{FIRST_LISTEN_WAIT, FirstListen};

/// One receiver's mailbox: the earliest instant signalled since it last looked.
#[derive(Debug, Default)]
struct Slot {
    notify: Notify,
    earliest: Mutex<Option<Timestamp>>,
}

impl Slot {
    fn put(&self, at: Timestamp) {
        let mut e = self.earliest.lock().unwrap_or_else(|p| p.into_inner());
        *e = Some(e.map_or(at, |old| old.min(at)));
        drop(e);
        self.notify.notify_one();
    }

    fn take(&self) -> Option<Timestamp> {
        self.earliest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

/// Fans signals out to every live [`WakeReceiver`]. Cheap to clone; clones share receivers.
#[derive(Debug, Clone, Default)]
pub struct WakeHub {
    slots: Arc<Mutex<Vec<Weak<Slot>>>>,
}

impl WakeHub {
    /// A hub with no receivers.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new receiver of every later signal.
    pub fn subscribe(&self) -> WakeReceiver {
        let slot = Arc::new(Slot::default());
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.retain(|s| s.strong_count() > 0);
        slots.push(Arc::downgrade(&slot));
        WakeReceiver { slot }
    }

    /// Something becomes claimable at `at` (backend clock). Receivers keep the earliest
    /// instant signalled since they last looked; none is ever lost.
    pub fn signal(&self, at: Timestamp) {
        let slots: Vec<Arc<Slot>> = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for slot in slots {
            slot.put(at);
        }
    }

    /// Something may be claimable now (a reconnect: notifications may have been missed).
    pub fn signal_now(&self) {
        self.signal(Timestamp::MIN);
    }

    /// How many receivers are alive.
    pub fn receivers(&self) -> usize {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|s| s.strong_count() > 0)
            .count()
    }
}

/// The dispatcher's end of a [`WakeHub`]. Dropping it unsubscribes.
#[derive(Debug)]
pub struct WakeReceiver {
    slot: Arc<Slot>,
}

impl WakeReceiver {
    /// Waits for the next signal and returns the earliest instant signalled since the last
    /// call. Pends forever when nothing is ever signalled (the dispatcher then polls).
    pub async fn recv(&self) -> Timestamp {
        loop {
            if let Some(at) = self.slot.take() {
                return at;
            }
            self.slot.notify.notified().await;
        }
    }

    /// The earliest instant signalled since the last look, without waiting.
    pub fn try_recv(&self) -> Option<Timestamp> {
        self.slot.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    #[tokio::test]
    async fn every_receiver_gets_the_earliest_signal() {
        let hub = WakeHub::new();
        let a = hub.subscribe();
        let b = hub.subscribe();
        hub.signal(t(50));
        hub.signal(t(20));
        hub.signal(t(30));
        assert_eq!(a.recv().await, t(20));
        assert_eq!(b.recv().await, t(20));
        assert_eq!(a.try_recv(), None);
        hub.signal_now();
        assert_eq!(a.recv().await, Timestamp::MIN);
    }

    #[tokio::test]
    async fn a_signal_before_waiting_is_kept() {
        let hub = WakeHub::new();
        let a = hub.subscribe();
        hub.signal(t(7));
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), a.recv()).await;
        assert_eq!(got.ok(), Some(t(7)));
    }

    #[tokio::test]
    async fn dropped_receivers_are_pruned() {
        let hub = WakeHub::new();
        let a = hub.subscribe();
        let b = hub.subscribe();
        assert_eq!(hub.receivers(), 2);
        drop(b);
        assert_eq!(hub.receivers(), 1);
        hub.signal(t(1));
        assert_eq!(a.try_recv(), Some(t(1)));
    }
}
