//! Leases claimed beyond the free slots and held locally until a slot frees (issue 24,
//! `DispatcherOptions::prefetch`).
//!
//! A held lease is a live lease in every sense RFC 002 means: it was issued by a claim with
//! its own token, its local deadline runs from that claim's send time (issue 11), and its
//! delivery's renewal schedule is counted from the claim too. The dispatcher only delays
//! starting its worker, never longer than `DispatcherOptions::get_prefetch_hold` (at most
//! half the lease, so it starts well inside its deadline); one held longer is released
//! unrun. Prefetch happens only while work is waiting (the last claim got everything it
//! asked for), never on an idle queue, and the number held adapts to the observed run time
//! so that the held leases are expected to start within half the hold bound.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::dispatcher::options::DispatcherOptions;
use crate::execution::Claimed;

/// A claimed lease waiting for a slot.
pub(crate) struct Held {
    /// The claim.
    pub(crate) claimed: Claimed,
    /// When the claim that issued it was sent (the start of its local deadline).
    pub(crate) sent: Instant,
    /// When it must have started; after this it is released unrun.
    pub(crate) hold_until: Instant,
}

/// The held leases of one dispatcher, and what sizes them.
#[derive(Default)]
pub(crate) struct Prefetch {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    held: VecDeque<Held>,
    /// The last claim got all it asked for: more work is probably due.
    waiting: bool,
    /// Moving average of a worker's run time, once one has run.
    avg_run: Option<Duration>,
}

/// What taking a held lease found.
pub(crate) struct Taken {
    /// The oldest held lease still inside its hold bound.
    pub(crate) next: Option<Held>,
    /// Held leases past their hold bound, to release unrun.
    pub(crate) expired: Vec<Held>,
}

impl Prefetch {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Holds `claimed` (claimed by a call sent at `sent`) until a slot frees.
    pub(crate) fn hold(&self, claimed: Claimed, sent: Instant, options: &DispatcherOptions) {
        let hold_until = Instant::now() + options.get_prefetch_hold();
        self.lock().held.push_back(Held {
            claimed,
            sent,
            hold_until,
        });
    }

    /// The oldest held lease that may still start at `now`, and every one that may not.
    pub(crate) fn take(&self, now: Instant) -> Taken {
        let mut state = self.lock();
        let mut expired = Vec::new();
        while let Some(h) = state.held.pop_front() {
            if h.hold_until <= now {
                expired.push(h);
            } else {
                return Taken {
                    next: Some(h),
                    expired,
                };
            }
        }
        Taken {
            next: None,
            expired,
        }
    }

    /// Held leases past their hold bound at `now` (all are, at worst, behind the oldest).
    pub(crate) fn take_expired(&self, now: Instant) -> Vec<Held> {
        let mut state = self.lock();
        let n = state
            .held
            .iter()
            .take_while(|h| h.hold_until <= now)
            .count();
        state.held.drain(..n).collect()
    }

    /// Every held lease (shutdown releases them).
    pub(crate) fn take_all(&self) -> Vec<Held> {
        self.lock().held.drain(..).collect()
    }

    /// Whether a held lease is waiting for a slot.
    pub(crate) fn has_held(&self) -> bool {
        !self.lock().held.is_empty()
    }

    /// When the oldest held lease's hold ends, if any is held.
    pub(crate) fn next_hold_end(&self) -> Option<Instant> {
        self.lock().held.front().map(|h| h.hold_until)
    }

    /// Records whether the last claim got everything it asked for.
    pub(crate) fn set_waiting(&self, waiting: bool) {
        self.lock().waiting = waiting;
    }

    /// Records one worker's run time (an exponential moving average, weight 1/8).
    pub(crate) fn record_run(&self, run: Duration) {
        let mut state = self.lock();
        state.avg_run = Some(match state.avg_run {
            None => run,
            Some(avg) => (avg * 7 + run) / 8,
        });
    }

    /// How many leases the next claim may take beyond the free slots: none unless work is
    /// waiting and a worker has run; otherwise a refill up to the target once at most half
    /// of it is held (so refills come in batches, not one claim per started lease).
    pub(crate) fn room(&self, options: &DispatcherOptions) -> usize {
        let state = self.lock();
        let (true, Some(avg)) = (state.waiting, state.avg_run) else {
            return 0;
        };
        let target = target(options, avg);
        let held = state.held.len();
        if held * 2 <= target { target - held } else { 0 }
    }
}

/// How many leases to hold for a run time of `avg`: the configured bound, and no more than
/// the slots start in half the hold bound (`concurrency` slots, each starting one per `avg`).
fn target(options: &DispatcherOptions, avg: Duration) -> usize {
    let half_hold = options.get_prefetch_hold() / 2;
    let per_slot = half_hold.as_nanos() / avg.as_nanos().max(1_000);
    let fits = per_slot.saturating_mul(options.get_concurrency() as u128);
    usize::try_from(fits)
        .unwrap_or(usize::MAX)
        .min(options.get_prefetch())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(c: usize) -> DispatcherOptions {
        DispatcherOptions::new().concurrency(c)
    }

    #[test]
    fn the_target_is_what_the_slots_start_in_half_the_hold() {
        // Hold 1 s: half of it is 500 ms.
        assert_eq!(target(&options(1), Duration::from_millis(100)), 5);
        assert_eq!(target(&options(4), Duration::from_millis(100)), 20);
        assert_eq!(target(&options(1), Duration::from_secs(2)), 0);
        assert_eq!(
            target(&options(1), Duration::ZERO),
            DEFAULT_PREFETCH_FOR_TESTS
        );
        assert_eq!(target(&options(1).prefetch(0), Duration::ZERO), 0);
    }

    const DEFAULT_PREFETCH_FOR_TESTS: usize = crate::dispatcher::options::DEFAULT_PREFETCH;

    #[test]
    fn no_room_before_a_worker_ran_or_while_no_work_waits() {
        let p = Prefetch::default();
        let o = options(1);
        assert_eq!(p.room(&o), 0, "no run time yet");
        p.record_run(Duration::from_millis(1));
        assert_eq!(p.room(&o), 0, "the last claim was short");
        p.set_waiting(true);
        assert_eq!(p.room(&o), DEFAULT_PREFETCH_FOR_TESTS);
        p.set_waiting(false);
        assert_eq!(p.room(&o), 0);
    }
}
