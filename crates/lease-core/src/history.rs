//! Delivery history: what became of each of an execution's last deliveries (RFC 002 leases,
//! seen afterwards), so an operator can tell a takeover from a retry and read each
//! attempt's error.
//!
//! A backend writes the history in the same atomic steps that start and end deliveries,
//! never in a separate write a crash could lose or repeat: a claim appends an open entry
//! (and, when it takes over an expired lease, closes that lease's entry as
//! [`DeliveryEnd::Expired`] at its expiry); an acknowledgement, a release and a cancel close
//! the open entry. An expiry nobody has acted on yet writes nothing, like the rest of the
//! record: readers close it with [`DeliveryHistory::effective`], as `get` does for the
//! record. Only the last [`MAX_DELIVERY_HISTORY`] deliveries are kept, and
//! [`DeliveryHistory::earlier`] counts the ones dropped, so the history's size is bounded
//! whatever an execution's fate, and a write path carries at most that many entries.

use serde::{Deserialize, Serialize};

use crate::attempts::ErrorNote;
use crate::execution::{ExecutionRecord, ExecutionStatus};
use crate::lease::FencingToken;
use crate::time::Timestamp;

/// How many deliveries an execution's history keeps (the latest ones). Twenty covers a
/// default attempt budget several times over while keeping the history small enough to
/// travel with the record in one write.
pub const MAX_DELIVERY_HISTORY: usize = 20;

/// How a delivery ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryEnd {
    /// Acknowledged with a terminal outcome (completed or failed).
    Acknowledged,
    /// Acknowledged as suspended: the execution waits for a wake.
    Suspended,
    /// Released by its holder after the worker started it: an attempt (an error, a panic,
    /// a retry reply), with the error when there was one.
    Released,
    /// Released before any worker started it ([`crate::Release::NotStarted`]): no attempt.
    NotStarted,
    /// Its lease ran out unacknowledged; the entry's end is the lease's expiry. When a later
    /// entry follows, that claim took the execution over.
    Expired,
    /// An operator cancelled the execution while the lease was live.
    Cancelled,
}

impl DeliveryEnd {
    /// The word used by the CLI, the console and the stored forms that keep text.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryEnd::Acknowledged => "acknowledged",
            DeliveryEnd::Suspended => "suspended",
            DeliveryEnd::Released => "released",
            DeliveryEnd::NotStarted => "not_started",
            DeliveryEnd::Expired => "expired",
            DeliveryEnd::Cancelled => "cancelled",
        }
    }

    /// The end named by [`DeliveryEnd::as_str`].
    pub fn parse(text: &str) -> Option<Self> {
        [
            DeliveryEnd::Acknowledged,
            DeliveryEnd::Suspended,
            DeliveryEnd::Released,
            DeliveryEnd::NotStarted,
            DeliveryEnd::Expired,
            DeliveryEnd::Cancelled,
        ]
        .into_iter()
        .find(|e| e.as_str() == text)
    }
}

/// One delivery: the lease's token, when it was claimed, and how and when it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryEntry {
    /// The lease's fencing token.
    pub token: FencingToken,
    /// When the claim issued the lease (backend clock).
    pub claimed_at: Timestamp,
    /// When it ended (for an expiry, the lease's expiry); `None` while it is live.
    pub ended_at: Option<Timestamp>,
    /// How it ended; `None` while it is live.
    pub end: Option<DeliveryEnd>,
    /// The error its holder reported, or the lease-expired note, when it ended as an attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorNote>,
}

impl DeliveryEntry {
    /// The open entry of a lease `token` claimed at `at`.
    pub fn claimed(token: FencingToken, at: Timestamp) -> Self {
        DeliveryEntry {
            token,
            claimed_at: at,
            ended_at: None,
            end: None,
            error: None,
        }
    }

    /// True while the entry has no end.
    pub fn is_open(&self) -> bool {
        self.end.is_none()
    }
}

/// An execution's last deliveries, oldest first, as
/// [`crate::ExecutionClient::deliveries`] reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryHistory {
    /// At most [`MAX_DELIVERY_HISTORY`] entries, oldest first; only the last may be open.
    pub deliveries: Vec<DeliveryEntry>,
    /// How many earlier deliveries were dropped to keep the bound.
    pub earlier: u64,
}

impl DeliveryHistory {
    /// Appends the open entry of a new lease, first closing an open entry left by an expired
    /// lease (a takeover) as [`DeliveryEnd::Expired`] at `previous_expiry`, then dropping the
    /// oldest entries past [`MAX_DELIVERY_HISTORY`].
    pub fn claim(
        &mut self,
        token: FencingToken,
        at: Timestamp,
        previous_expiry: Option<Timestamp>,
    ) {
        if let Some(expiry) = previous_expiry {
            self.end(
                DeliveryEnd::Expired,
                expiry,
                Some(crate::LastError::expiry_note()),
            );
        }
        self.deliveries.push(DeliveryEntry::claimed(token, at));
        let excess = self.deliveries.len().saturating_sub(MAX_DELIVERY_HISTORY);
        if excess > 0 {
            self.deliveries.drain(..excess);
            self.earlier = self.earlier.saturating_add(excess as u64);
        }
    }

    /// Closes the open entry, if any, with `end` at `at`; a closed history is unchanged.
    pub fn end(&mut self, end: DeliveryEnd, at: Timestamp, error: Option<ErrorNote>) {
        if let Some(last) = self.deliveries.last_mut().filter(|e| e.is_open()) {
            last.ended_at = Some(at);
            last.end = Some(end);
            last.error = error;
        }
    }

    /// The history as a reader at `now` sees it beside `record` (the stored record, not
    /// the effective one): an open entry whose lease is no longer live reads as
    /// [`DeliveryEnd::Expired`] at the lease's expiry, the way `get` reads the record.
    pub fn effective(mut self, record: &ExecutionRecord, now: Timestamp) -> Self {
        let expired = record.status == ExecutionStatus::Running && !record.lease_live(now);
        if expired && let Some(expiry) = record.lease_expires_at {
            self.end(
                DeliveryEnd::Expired,
                expiry,
                Some(crate::LastError::expiry_note()),
            );
        }
        self
    }

    /// The number of deliveries ever recorded.
    pub fn total(&self) -> u64 {
        self.earlier.saturating_add(self.deliveries.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Timestamp {
        Timestamp::from_millis(i64::try_from(ms).expect("small"))
    }

    #[test]
    fn a_takeover_closes_the_expired_entry_at_its_expiry() {
        let mut h = DeliveryHistory::default();
        h.claim(FencingToken::new(1), t(10), None);
        h.claim(FencingToken::new(2), t(50), Some(t(40)));
        assert_eq!(h.deliveries[0].end, Some(DeliveryEnd::Expired));
        assert_eq!(h.deliveries[0].ended_at, Some(t(40)));
        assert!(h.deliveries[1].is_open());
        h.end(DeliveryEnd::Acknowledged, t(60), None);
        h.end(DeliveryEnd::Released, t(70), None);
        assert_eq!(
            h.deliveries[1].end,
            Some(DeliveryEnd::Acknowledged),
            "closed once"
        );
    }

    #[test]
    fn the_history_keeps_the_latest_and_counts_the_dropped() {
        let mut h = DeliveryHistory::default();
        for i in 1..=(MAX_DELIVERY_HISTORY as u64 + 5) {
            h.claim(FencingToken::new(i), t(i), None);
            h.end(DeliveryEnd::Released, t(i), None);
        }
        assert_eq!(h.deliveries.len(), MAX_DELIVERY_HISTORY);
        assert_eq!(h.earlier, 5);
        assert_eq!(h.deliveries[0].token, FencingToken::new(6));
        assert_eq!(h.total(), MAX_DELIVERY_HISTORY as u64 + 5);
    }

    #[test]
    fn ends_read_back_from_their_words() {
        for e in [
            DeliveryEnd::Acknowledged,
            DeliveryEnd::Suspended,
            DeliveryEnd::Released,
            DeliveryEnd::NotStarted,
            DeliveryEnd::Expired,
            DeliveryEnd::Cancelled,
        ] {
            assert_eq!(DeliveryEnd::parse(e.as_str()), Some(e));
        }
        assert_eq!(DeliveryEnd::parse("lost"), None);
    }
}
