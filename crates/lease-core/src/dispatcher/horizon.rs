//! When the claim loop claims next (issue 10): the earliest instant at which something is
//! known to become claimable, on the backend clock, mapped onto tokio's monotonic clock.
//!
//! The mapping anchors on the last claim that reported the backend clock: backend instant
//! `t` is local `arrived + (t - now)`, where `arrived` is when that reply came back. The
//! backend read its clock before replying, so the mapping never fires early by more than
//! clock drift; it fires late by at most the reply's transit. A wrong instant only changes
//! when a claim happens, never what it may claim.

use std::time::Duration;

use tokio::time::Instant;

use crate::time::Timestamp;

/// The next claim's time, as the claim loop knows it.
#[derive(Debug, Default)]
pub(crate) struct Horizon {
    /// (backend clock, local instant) of the last claim that reported its clock.
    anchor: Option<(Timestamp, Instant)>,
    /// Earliest backend instant something is known to become claimable.
    next: Option<Timestamp>,
    /// Short claims in a row that reported something already claimable.
    stale: u32,
}

impl Horizon {
    /// A claim came back at `arrived`, having run at backend clock `now` (if reported) and
    /// seen `next` as its earliest claimable instant. The claim saw the whole store, so its
    /// `next` replaces what was known before; wake-ups signalled since still arrive.
    ///
    /// A `short` claim (fewer leases than asked) that still reports something claimable at
    /// or before its own clock met a row it could not take (locked by another claim, say):
    /// the next try waits 1 ms, doubling while that repeats, so a wrong instant can never
    /// make the loop spin.
    pub(crate) fn claimed(
        &mut self,
        now: Option<Timestamp>,
        next: Option<Timestamp>,
        arrived: Instant,
        short: bool,
    ) {
        if let Some(now) = now {
            self.anchor = Some((now, arrived));
        }
        self.next = next;
        match (now, next) {
            (Some(now), Some(at)) if short && at <= now => {
                self.stale = self.stale.saturating_add(1);
                let wait = 1i64 << self.stale.min(12);
                self.next = Some(Timestamp::from_millis(now.as_millis().saturating_add(wait)));
            }
            _ => self.stale = 0,
        }
    }

    /// A wake-up said something becomes claimable at `at`; it arrived at `received`. A
    /// signal is sent after its write committed, so an instant no later than the backend
    /// clock's upper estimate now (the anchor was truncated to whole milliseconds: up to
    /// 1 ms behind) is due at once rather than at its mapped local instant, which could be up
    /// to a millisecond late. A future instant arms the timer.
    pub(crate) fn signalled(&mut self, at: Timestamp, received: Instant) {
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

    #[tokio::test(start_paused = true)]
    async fn maps_backend_instants_onto_the_local_clock() {
        let start = Instant::now();
        let backstop = start + Duration::from_secs(10);
        let mut h = Horizon::default();
        assert_eq!(h.deadline(backstop), backstop);
        h.claimed(Some(t(1_000)), Some(t(1_500)), start, true);
        assert_eq!(h.deadline(backstop), start + Duration::from_millis(500));
        h.signalled(t(1_200), start);
        assert_eq!(h.deadline(backstop), start + Duration::from_millis(200));
        h.signalled(t(1_300), start);
        assert_eq!(h.deadline(backstop), start + Duration::from_millis(200));
        h.signalled(Timestamp::MIN, start);
        assert_eq!(h.deadline(backstop), start);
        h.claimed(Some(t(1_000)), Some(t(900_000)), start, true);
        assert_eq!(h.deadline(backstop), backstop);
        h.claimed(Some(t(1_000)), None, start, true);
        assert_eq!(h.deadline(backstop), backstop);
    }

    #[tokio::test(start_paused = true)]
    async fn a_short_claim_that_saw_work_due_backs_off() {
        let start = Instant::now();
        let backstop = start + Duration::from_secs(10);
        let mut h = Horizon::default();
        h.claimed(Some(t(1_000)), Some(t(1_000)), start, true);
        assert_eq!(h.deadline(backstop), start + Duration::from_millis(2));
        h.claimed(Some(t(1_000)), Some(t(990)), start, true);
        assert_eq!(h.deadline(backstop), start + Duration::from_millis(4));
        h.claimed(Some(t(1_000)), Some(t(1_010)), start, true);
        assert_eq!(h.deadline(backstop), start + Duration::from_millis(10));
        h.claimed(Some(t(1_000)), Some(t(1_000)), start, true);
        assert_eq!(h.deadline(backstop), start + Duration::from_millis(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_signal_for_an_instant_already_reached_claims_at_once() {
        let start = Instant::now();
        let backstop = start + Duration::from_secs(10);
        let mut h = Horizon::default();
        h.claimed(Some(t(1_000)), None, start, true);
        // 4 s later (local), a signal for backend instant 5_001: within the anchor's
        // truncation, so due now rather than up to a millisecond late.
        let later = start + Duration::from_secs(4);
        h.signalled(t(5_001), later);
        assert!(h.deadline(backstop) <= start);
        h.claimed(Some(t(1_000)), None, start, true);
        h.signalled(t(5_500), later);
        assert_eq!(h.deadline(backstop), start + Duration::from_millis(4_500));
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_known_clock_a_signal_claims_at_once() {
        let backstop = Instant::now() + Duration::from_secs(10);
        let mut h = Horizon::default();
        h.claimed(None, None, Instant::now(), true);
        h.signalled(t(5_000), Instant::now());
        assert!(h.deadline(backstop) <= Instant::now());
    }
}
