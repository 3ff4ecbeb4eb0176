//! When the claim loop claims next: the earliest instant at which something is known to
//! become claimable, on the backend clock, mapped onto tokio's monotonic clock, so the loop
//! sleeps until then instead of waiting for its next poll.
//!
//! The mapping anchors on the last claim that reported the backend clock: backend instant
//! `t` is local `arrived + (t - now)`, where `arrived` is when that reply came back. The
//! backend read its clock before replying, so the mapping never fires early by more than
//! clock drift; it fires late by at most the reply's transit. A wrong instant only changes
//! when a claim happens, never what it may claim.

use std::time::Duration;

use tokio::time::Instant;

use lease_core::time::Timestamp;

/// The next claim's time, as the claim loop knows it.
#[derive(Debug, Default)]
pub(crate) struct Horizon {
    /// (backend clock, local instant) of the last claim that reported its clock.
    anchor: Option<(Timestamp, Instant)>,
    /// Earliest backend instant something is known to become claimable.
    next: Option<Timestamp>,
    /// Short claims in a row that reported something already claimable.
    stale: u32,
    /// When the last wake-up was received.
    last_signal: Option<Instant>,
}

/// What a claim reported, and when it was sent and came back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClaimSeen {
    /// The backend clock the claim ran at.
    pub(crate) now: Option<Timestamp>,
    /// The earliest claimable instant it left.
    pub(crate) next: Option<Timestamp>,
    /// When the call was sent.
    pub(crate) sent: Instant,
    /// When its reply arrived.
    pub(crate) arrived: Instant,
    /// It returned fewer leases than asked for.
    pub(crate) short: bool,
}

impl Horizon {
    /// A claim sent at `sent` came back at `arrived`, having run at backend clock `now` (if
    /// reported) and seen `next` as its earliest claimable instant. The claim saw the whole
    /// store, so its `next` replaces what was known before, unless a wake-up was received
    /// after the claim was sent (it may announce a write the claim did not see): then the
    /// earlier of the two is kept. Returns whether such a wake-up came.
    ///
    /// A `short` claim (fewer leases than asked) that still reports something claimable at
    /// or before its own clock met a row it could not take (locked by another claim, say):
    /// the next try waits 1 ms, doubling while that repeats, so a wrong instant can never
    /// make the loop spin.
    pub(crate) fn claimed(&mut self, claim: ClaimSeen) -> bool {
        let ClaimSeen {
            now,
            next,
            sent,
            arrived,
            short,
        } = claim;
        if let Some(now) = now {
            self.anchor = Some((now, arrived));
        }
        let superseded = self.last_signal.is_some_and(|t| t > sent);
        let next = match (now, next) {
            (Some(now), Some(at)) if short && at <= now => {
                self.stale = self.stale.saturating_add(1);
                let wait = 1i64 << self.stale.min(12);
                Some(Timestamp::from_millis(now.as_millis().saturating_add(wait)))
            }
            _ => {
                self.stale = 0;
                next
            }
        };
        self.next = if superseded {
            match (self.next, next) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        } else {
            next
        };
        superseded
    }

    /// A wake-up said something becomes claimable at `at`; it arrived at `received`. A
    /// signal is sent after its write committed, so an instant no later than the backend
    /// clock's upper estimate now (the anchor was truncated to whole milliseconds: up to
    /// 1 ms behind) is due at once rather than at its mapped local instant, which could be up
    /// to a millisecond late. A future instant arms the timer.
    pub(crate) fn signalled(&mut self, at: Timestamp, received: Instant) {
        self.last_signal = Some(received);
        let at = if self.due_by(at, received) {
            Timestamp::MIN
        } else {
            at
        };
        self.next = Some(self.next.map_or(at, |n| n.min(at)));
    }

    /// `at` is no later than the backend clock can be at local instant `when`.
    fn due_by(&self, at: Timestamp, when: Instant) -> bool {
        let Some((now, arrived)) = self.anchor else {
            return true;
        };
        let elapsed = when.saturating_duration_since(arrived);
        let elapsed_ms = i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX);
        // +1 for the truncated anchor, +1 for the truncated elapsed time.
        at.as_millis() <= now.as_millis().saturating_add(elapsed_ms).saturating_add(2)
    }

    /// The local instant of backend instant `at`: `None` when the backend clock was never
    /// reported (then the caller claims at once to learn it).
    fn local(&self, at: Timestamp) -> Option<Instant> {
        let (now, arrived) = self.anchor?;
        let ahead = at.as_millis().saturating_sub(now.as_millis());
        Some(match u64::try_from(ahead) {
            Ok(ms) => arrived + Duration::from_millis(ms),
            Err(_) => arrived,
        })
    }

    /// When to claim next, at the latest `backstop` (the poll).
    pub(crate) fn deadline(&self, backstop: Instant) -> Instant {
        match self.next {
            None => backstop,
            Some(at) => self.local(at).map_or(Instant::now(), |t| t.min(backstop)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    fn seen(
        now: Option<Timestamp>,
        next: Option<Timestamp>,
        at: Instant,
        short: bool,
    ) -> ClaimSeen {
        ClaimSeen {
            now,
            next,
            sent: at,
            arrived: at,
            short,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_wake_up_after_the_claim_was_sent_is_not_overwritten() {
        let start = Instant::now();
        let backstop = start + Duration::from_secs(10);
        let mut h = Horizon::default();
        h.claimed(seen(Some(t(1_000)), None, start, true));
        tokio::time::advance(Duration::from_millis(5)).await;
        let sent = Instant::now();
        tokio::time::advance(Duration::from_millis(1)).await;
        // A wake-up for an admission the claim in flight cannot have seen.
        h.signalled(t(1_006), Instant::now());
        tokio::time::advance(Duration::from_millis(1)).await;
        let superseded = h.claimed(ClaimSeen {
            now: Some(t(1_005)),
            next: None,
            sent,
            arrived: Instant::now(),
            short: true,
        });
        assert!(superseded);
        assert!(
            h.deadline(backstop) <= Instant::now(),
            "the wake-up still claims"
        );
        // A claim sent after the wake-up replaces what was known.
        let later = Instant::now();
        assert!(!h.claimed(seen(Some(t(1_010)), None, later, true)));
        assert_eq!(h.deadline(backstop), backstop);
    }

    #[tokio::test(start_paused = true)]
    async fn maps_backend_instants_onto_the_local_clock() {
        let start = Instant::now();
        let backstop = start + Duration::from_secs(10);
        let mut h = Horizon::default();
        assert_eq!(h.deadline(backstop), backstop);
        h.claimed(seen(Some(t(1_000)), Some(t(1_500)), start, true));
        assert_eq!(h.deadline(backstop), start + Duration::from_millis(500));
        h.signalled(t(1_200), start);
        assert_eq!(h.deadline(backstop), start + Duration::from_millis(200));
        h.signalled(t(1_300), start);
        assert_eq!(h.deadline(backstop), start + Duration::from_millis(200));
        h.signalled(Timestamp::MIN, start);
        assert_eq!(h.deadline(backstop), start);
        h.claimed(seen(Some(t(1_000)), Some(t(900_000)), start, true));
        assert_eq!(h.deadline(backstop), backstop);
        h.claimed(seen(Some(t(1_000)), None, start, true));
        assert_eq!(h.deadline(backstop), backstop);
    }

    #[tokio::test(start_paused = true)]
    async fn a_short_claim_that_saw_work_due_backs_off() {
        let start = Instant::now();
        let backstop = start + Duration::from_secs(10);
        let mut h = Horizon::default();
        h.claimed(seen(Some(t(1_000)), Some(t(1_000)), start, true));
        assert_eq!(h.deadline(backstop), start + Duration::from_millis(2));
        h.claimed(seen(Some(t(1_000)), Some(t(990)), start, true));
        assert_eq!(h.deadline(backstop), start + Duration::from_millis(4));
        h.claimed(seen(Some(t(1_000)), Some(t(1_010)), start, true));
        assert_eq!(h.deadline(backstop), start + Duration::from_millis(10));
        h.claimed(seen(Some(t(1_000)), Some(t(1_000)), start, true));
        assert_eq!(h.deadline(backstop), start + Duration::from_millis(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_signal_for_an_instant_already_reached_claims_at_once() {
        let start = Instant::now();
        let backstop = start + Duration::from_secs(10);
        let mut h = Horizon::default();
        h.claimed(seen(Some(t(1_000)), None, start, true));
        // 4 s later (local), a signal for backend instant 5_001: within the anchor's
        // truncation, so due now rather than up to a millisecond late.
        let later = start + Duration::from_secs(4);
        h.signalled(t(5_001), later);
        assert!(h.deadline(backstop) <= start);
        h.claimed(seen(Some(t(5_000)), None, later, true));
        h.signalled(t(5_500), later);
        assert_eq!(h.deadline(backstop), later + Duration::from_millis(500));
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_known_clock_a_signal_claims_at_once() {
        let backstop = Instant::now() + Duration::from_secs(10);
        let mut h = Horizon::default();
        h.claimed(seen(None, None, Instant::now(), true));
        h.signalled(t(5_000), Instant::now());
        assert!(h.deadline(backstop) <= Instant::now());
    }
}
