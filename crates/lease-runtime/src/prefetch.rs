//! Leases claimed beyond the free slots and held locally until a slot frees
//! (`DispatcherOptions::prefetch`), so a freed slot starts its next execution without a
//! claim round trip.
//!
//! A held lease is a live lease in every sense RFC 002 means: it was issued by a claim with
//! its own token, its local deadline runs from that claim's send time, and its
//! delivery's renewal schedule is counted from the claim too. The dispatcher only delays
//! starting its worker, never longer than `DispatcherOptions::get_prefetch_hold` (at most
//! half the lease, so it starts well inside its deadline); one held longer is released
//! unrun. Prefetch happens only while work is waiting (the last claim got everything it
//! asked for), never on an idle queue, and the number held is what the slots are expected to
//! start within half the hold bound: each slot from the time its running worker has run
//! against the average run time. A slot whose worker has run longer than the average is
//! not expected to free soon and counts for nothing, so a dispatcher whose slots are busy
//! with long deliveries stops claiming leases it would only hold and release.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::options::DispatcherOptions;
use lease_core::execution::Claimed;

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
    /// When each worker running now started (how many started at each instant).
    running: BTreeMap<Instant, usize>,
    /// How many workers run now (the sum of `running`).
    running_count: usize,
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

    /// Notes a worker starting now; the returned guard notes its end.
    pub(crate) fn worker_started(&self) -> RunningWorker<'_> {
        let started = Instant::now();
        let mut state = self.lock();
        *state.running.entry(started).or_default() += 1;
        state.running_count += 1;
        RunningWorker {
            prefetch: self,
            started,
        }
    }

    /// How many leases the next claim may take beyond the free slots (`in_flight` slots of
    /// the concurrency are taken) with at most `bound` held: none unless work is waiting and
    /// a worker has run; otherwise a refill up to the target once at most half of it is held
    /// (so refills come in batches, not one claim per started lease).
    pub(crate) fn room(&self, options: &DispatcherOptions, in_flight: usize, bound: usize) -> Room {
        let now = Instant::now();
        let state = self.lock();
        let (true, Some(avg)) = (state.waiting, state.avg_run) else {
            return Room::default();
        };
        let free = options.get_concurrency().saturating_sub(in_flight);
        let (target, bound_limited) = state.expected_starts(options, avg, now, (free, bound));
        let held = state.held.len();
        Room {
            take: if held * 2 <= target { target - held } else { 0 },
            bound_limited,
        }
    }
}

/// What the next claim may take beyond the free slots.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Room {
    /// Leases to claim for holding.
    pub(crate) take: usize,
    /// The prefetch bound, not the expected starts, set the target.
    pub(crate) bound_limited: bool,
}

/// A worker running in a slot; dropping it notes that the worker ended.
pub(crate) struct RunningWorker<'a> {
    prefetch: &'a Prefetch,
    started: Instant,
}

impl RunningWorker<'_> {
    /// The worker returned: its run time joins the moving average (weight 1/8).
    pub(crate) fn ended(self) {
        let run = self.started.elapsed();
        let mut state = self.prefetch.lock();
        state.avg_run = Some(match state.avg_run {
            None => run,
            Some(avg) => (avg * 7 + run) / 8,
        });
    }
}

impl Drop for RunningWorker<'_> {
    fn drop(&mut self) {
        let mut state = self.prefetch.lock();
        if let Some(n) = state.running.get_mut(&self.started) {
            *n -= 1;
            if *n == 0 {
                state.running.remove(&self.started);
            }
            state.running_count -= 1;
        }
    }
}

impl State {
    /// How many leases the slots are expected to start within half the hold bound at `now`,
    /// beyond the `free` slots' first ones (those are claimed for them directly), at most the
    /// prefetch `bound`; and whether the bound cut it. A slot with no worker running starts its next lease now; one whose
    /// worker has run no longer than `avg` starts it when the rest of `avg` has passed; then
    /// each starts one per `avg`. A slot whose worker has run longer than `avg` counts for
    /// nothing: nothing says when it will free.
    fn expected_starts(
        &self,
        options: &DispatcherOptions,
        avg: Duration,
        now: Instant,
        (free, bound): (usize, usize),
    ) -> (usize, bool) {
        let window = options.get_prefetch_hold() / 2;
        let avg = avg.max(Duration::from_micros(1));
        let cap = (bound + free) as u128;
        let idle = options.get_concurrency().saturating_sub(self.running_count);
        let mut sum = idle as u128 * starts_in_slot(window, avg, avg);
        // Oldest first (they free soonest), from those that have run exactly `avg`.
        let not_overdue = match now.checked_sub(avg) {
            Some(from) => self.running.range(from..),
            None => self.running.range(..),
        };
        for (&started, &n) in not_overdue {
            if sum >= cap {
                break;
            }
            let starts = starts_in_slot(window, avg, now.saturating_duration_since(started));
            if starts == 0 {
                // Younger workers end later still.
                break;
            }
            sum += starts * n as u128;
        }
        let expected = usize::try_from(sum.min(cap)).unwrap_or(usize::MAX);
        (expected.saturating_sub(free), sum >= cap && bound > 0)
    }
}

/// The leases a slot whose worker has run `elapsed` (at most `avg`) starts within `window`:
/// the next once the rest of `avg` has passed, then one per `avg`; none if that is later.
fn starts_in_slot(window: Duration, avg: Duration, elapsed: Duration) -> u128 {
    let remaining = avg.saturating_sub(elapsed);
    if remaining > window {
        return 0;
    }
    1 + (window - remaining).as_nanos() / avg.as_nanos().max(1)
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::DEFAULT_PREFETCH;

    fn options(c: usize) -> DispatcherOptions {
        DispatcherOptions::new().concurrency(c)
    }

    const MS: Duration = Duration::from_millis(1);

    /// The expected starts at the options' own prefetch bound.
    fn starts(s: &State, o: &DispatcherOptions, avg: Duration, now: Instant, free: usize) -> usize {
        s.expected_starts(o, avg, now, (free, o.get_prefetch())).0
    }

    /// The room at the options' own prefetch bound.
    fn room(p: &Prefetch, o: &DispatcherOptions, in_flight: usize) -> usize {
        p.room(o, in_flight, o.get_prefetch()).take
    }

    /// A state whose workers started `ago` before `now`, one per entry.
    fn running(now: Instant, ago: &[Duration]) -> State {
        let mut state = State::default();
        for &a in ago {
            *state.running.entry(now - a).or_default() += 1;
            state.running_count += 1;
        }
        state
    }

    #[test]
    fn a_slot_that_just_started_counts_what_it_starts_in_half_the_hold() {
        // Hold 1 s: half of it is 500 ms. One lease when the worker ends, then one per run.
        let now = Instant::now();
        let one = running(now, &[Duration::ZERO]);
        assert_eq!(starts(&one, &options(1), 100 * MS, now, 0), 5);
        let four = running(now, &[Duration::ZERO; 4]);
        assert_eq!(starts(&four, &options(4), 100 * MS, now, 0), 20);
        assert_eq!(starts(&one, &options(1), 2000 * MS, now, 0), 0);
        let bound = starts(&one, &options(1), Duration::ZERO, now, 0);
        assert_eq!(bound, DEFAULT_PREFETCH);
        let off = options(1).prefetch(0);
        assert_eq!(starts(&one, &off, Duration::ZERO, now, 0), 0);
    }

    #[test]
    fn a_slot_whose_worker_ran_longer_than_the_average_counts_for_nothing() {
        let now = Instant::now();
        let overdue = running(now, &[200 * MS]);
        assert_eq!(starts(&overdue, &options(1), 100 * MS, now, 0), 0);
        // Half-way: the next in 50 ms, then 4 more of 100 ms within 500 ms.
        let half_way = running(now, &[50 * MS]);
        assert_eq!(starts(&half_way, &options(1), 100 * MS, now, 0), 5);
        // One overdue slot, one half-way: only the second counts.
        let mixed = running(now, &[200 * MS, 50 * MS]);
        assert_eq!(starts(&mixed, &options(2), 100 * MS, now, 0), 5);
    }

    #[test]
    fn a_slot_with_no_worker_starts_its_next_lease_now() {
        let now = Instant::now();
        let idle = State::default();
        // Acknowledging (no worker, not free): the next lease now, then 5 more.
        assert_eq!(starts(&idle, &options(1), 100 * MS, now, 0), 6);
        // Free: its first lease is claimed for it directly, not held.
        assert_eq!(starts(&idle, &options(1), 100 * MS, now, 1), 5);
    }

    #[test]
    fn no_room_before_a_worker_ran_or_while_no_work_waits() {
        let p = Prefetch::default();
        let o = options(1);
        assert_eq!(room(&p, &o, 1), 0, "no run time yet");
        p.worker_started().ended();
        assert_eq!(room(&p, &o, 1), 0, "the last claim was short");
        p.set_waiting(true);
        assert_eq!(room(&p, &o, 1), DEFAULT_PREFETCH);
        p.set_waiting(false);
        assert_eq!(room(&p, &o, 1), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn no_room_once_the_only_worker_ran_longer_than_the_average() {
        let p = Prefetch::default();
        let o = options(1);
        p.set_waiting(true);
        let quick = p.worker_started();
        tokio::time::advance(MS).await;
        quick.ended();
        let _long = p.worker_started();
        assert_eq!(room(&p, &o, 1), DEFAULT_PREFETCH, "it may end within 1 ms");
        tokio::time::advance(2 * MS).await;
        assert_eq!(room(&p, &o, 1), 0, "it ran past the average");
    }
}
