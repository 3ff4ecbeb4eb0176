//! What the activity page draws: the console samples the namespace's status counts every
//! `--sample-every` while it runs and keeps the last hour of samples in memory. From them
//! come the executions by status over time and, per minute, how many were admitted,
//! completed, failed, died and were taken over (the growth of each count between two
//! samples).
//!
//! Why sampling and not counters in the store: a per-minute counter written by every
//! acknowledgement would be one row (or key) every worker updates, a point of contention on
//! the hot path of every backend; the counts the console already reads cost one query per
//! sample whatever the load. What sampling cannot tell: anything before the console
//! started, and a purge between two samples lowers the counts it removed from (that minute
//! is marked, and its growth is not trusted).
//!
//! Takeovers (claims that took over a lease that ran out unacknowledged) leave no status
//! behind to count, so the store keeps one counter of them per namespace
//! ([`StatusCounts::takeovers`]), read with the counts and charted from its growth like
//! them. That one counter is acceptable where a per-minute one is not: only a takeover claim
//! writes it, in the same atomic step as the claim (a crash loses or repeats neither), and a
//! takeover already rewrites the expired delivery's history, so the drain's first claims and
//! acknowledgements write nothing more, and nothing contends on it while leases are
//! acknowledged in time. It never decreases (purges do not lower it), so its growth is exact
//! even in a purged minute. Each execution's delivery timeline shows which ones were taken
//! over.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lease::{LeaseBackend, StatusCounts};

/// How far back the page looks.
pub const WINDOW: Duration = Duration::from_secs(3600);
/// One bar of the per-minute charts.
pub const MINUTE_MS: i64 = 60_000;
/// How many bars: one per minute of [`WINDOW`].
pub const MINUTES: usize = 60;
/// How long one sample may take before it is skipped (a gap in the charts).
const SAMPLE_TIMEOUT: Duration = Duration::from_secs(5);

/// One reading of the status counts, at a wall-clock instant (Unix milliseconds).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub at_ms: i64,
    pub counts: StatusCounts,
}

/// How much each count grew during one minute.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Minute {
    /// The minute's start (Unix milliseconds).
    pub start_ms: i64,
    pub admitted: u64,
    pub completed: u64,
    pub failed: u64,
    pub dead: u64,
    /// Claims that took over an expired lease.
    pub takeovers: u64,
    /// Some count fell during the minute (a purge): its growth is a lower bound.
    pub purged: bool,
}

/// The samples of the last hour, shared by the sampler and the pages.
pub struct Activity {
    samples: Mutex<VecDeque<Sample>>,
    /// The sampling interval (an open page redraws as often).
    pub every: Duration,
}

impl Activity {
    /// No samples yet; one is taken every `every`.
    pub fn new(every: Duration) -> Self {
        Activity {
            samples: Mutex::new(VecDeque::new()),
            every,
        }
    }

    /// Keeps `sample` and drops the ones older than [`WINDOW`] before it.
    pub fn record(&self, sample: Sample) {
        let oldest = sample.at_ms - window_ms();
        let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        samples.push_back(sample);
        while samples.front().is_some_and(|s| s.at_ms < oldest) {
            samples.pop_front();
        }
    }

    /// The kept samples, oldest first.
    pub fn samples(&self) -> Vec<Sample> {
        let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        samples.iter().cloned().collect()
    }
}

/// [`WINDOW`] in milliseconds.
fn window_ms() -> i64 {
    i64::try_from(WINDOW.as_millis()).unwrap_or(i64::MAX)
}

/// The [`MINUTES`] minutes ending with the one holding `now_ms`, oldest first, each with the
/// growth between consecutive samples whose later one falls in it.
pub fn per_minute(samples: &[Sample], now_ms: i64) -> Vec<Minute> {
    let last_start = now_ms - now_ms.rem_euclid(MINUTE_MS);
    let first_start = last_start - MINUTE_MS * (MINUTES as i64 - 1);
    let mut minutes: Vec<Minute> = (0..MINUTES as i64)
        .map(|i| Minute {
            start_ms: first_start + i * MINUTE_MS,
            ..Minute::default()
        })
        .collect();
    for pair in samples.windows(2) {
        let (before, after) = (&pair[0].counts, &pair[1].counts);
        let Ok(index) = usize::try_from((pair[1].at_ms - first_start).div_euclid(MINUTE_MS)) else {
            continue;
        };
        let Some(minute) = minutes.get_mut(index) else {
            continue;
        };
        let grew = |old: u64, new: u64| new.saturating_sub(old);
        minute.admitted += grew(total(before), total(after));
        minute.completed += grew(before.completed, after.completed);
        minute.failed += grew(before.failed, after.failed);
        minute.dead += grew(before.dead, after.dead);
        minute.takeovers += grew(before.takeovers, after.takeovers);
        minute.purged |= after.completed < before.completed
            || after.failed < before.failed
            || after.cancelled < before.cancelled
            || total(after) < total(before);
    }
    minutes
}

/// Every stored execution the counts name (corrupt records are in no status).
fn total(c: &StatusCounts) -> u64 {
    c.admitted + c.running + c.suspended + c.completed + c.failed + c.cancelled + c.dead
}

/// The wall clock in Unix milliseconds.
pub fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

/// Samples `backend`'s counts every `activity.every` for as long as the console runs. A
/// backend without status counts, or a sample that fails or takes too long, leaves a gap.
pub fn spawn_sampler(backend: Arc<dyn LeaseBackend>, activity: Arc<Activity>) {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(activity.every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let read = tokio::time::timeout(SAMPLE_TIMEOUT, backend.status_counts()).await;
            if let Ok(Ok(counts)) = read {
                activity.record(Sample {
                    at_ms: now_ms(),
                    counts,
                });
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(admitted: u64, completed: u64, failed: u64, dead: u64) -> StatusCounts {
        StatusCounts {
            admitted,
            completed,
            failed,
            dead,
            ..StatusCounts::default()
        }
    }

    fn taken_over(admitted: u64, takeovers: u64) -> StatusCounts {
        StatusCounts {
            takeovers,
            ..counts(admitted, 0, 0, 0)
        }
    }

    fn at(minute: i64, second: i64) -> i64 {
        minute * MINUTE_MS + second * 1000
    }

    #[test]
    fn growth_lands_in_the_minute_of_the_later_sample() {
        let now = at(100, 30);
        let samples = [
            Sample {
                at_ms: at(98, 50),
                counts: counts(10, 0, 0, 0),
            },
            Sample {
                at_ms: at(99, 10),
                counts: counts(12, 3, 1, 0),
            },
            Sample {
                at_ms: at(100, 5),
                counts: counts(2, 20, 1, 1),
            },
        ];
        let minutes = per_minute(&samples, now);
        assert_eq!(minutes.len(), MINUTES);
        let last = &minutes[MINUTES - 1];
        assert_eq!(last.start_ms, at(100, 0));
        assert_eq!(
            (last.admitted, last.completed, last.failed, last.dead),
            (8, 17, 0, 1)
        );
        let before = &minutes[MINUTES - 2];
        assert_eq!(
            (before.admitted, before.completed, before.failed),
            (6, 3, 1)
        );
        assert!(!before.purged && !last.purged);
        assert!(minutes[..MINUTES - 2].iter().all(|m| *m
            == Minute {
                start_ms: m.start_ms,
                ..Minute::default()
            }));
    }

    #[test]
    fn a_purge_marks_its_minute_and_never_counts_negative() {
        let samples = [
            Sample {
                at_ms: at(5, 0),
                counts: counts(0, 50, 0, 0),
            },
            Sample {
                at_ms: at(5, 20),
                counts: counts(4, 10, 0, 0),
            },
        ];
        let minutes = per_minute(&samples, at(5, 30));
        let m = &minutes[MINUTES - 1];
        assert!(m.purged);
        assert_eq!((m.admitted, m.completed), (0, 0));
    }

    #[test]
    fn takeovers_count_from_their_counter_even_in_a_purged_minute() {
        let samples = [
            Sample {
                at_ms: at(7, 0),
                counts: taken_over(9, 4),
            },
            Sample {
                at_ms: at(7, 30),
                counts: taken_over(9, 6),
            },
            Sample {
                at_ms: at(8, 10),
                counts: taken_over(2, 9),
            },
        ];
        let minutes = per_minute(&samples, at(8, 20));
        let (before, last) = (&minutes[MINUTES - 2], &minutes[MINUTES - 1]);
        assert_eq!((before.takeovers, before.purged), (2, false));
        assert_eq!((last.takeovers, last.purged), (3, true));
    }

    #[test]
    fn samples_older_than_the_window_are_dropped() {
        let activity = Activity::new(Duration::from_secs(10));
        activity.record(Sample {
            at_ms: 0,
            counts: StatusCounts::default(),
        });
        activity.record(Sample {
            at_ms: 1_000,
            counts: StatusCounts::default(),
        });
        activity.record(Sample {
            at_ms: window_ms() + 500,
            counts: StatusCounts::default(),
        });
        let kept: Vec<i64> = activity.samples().iter().map(|s| s.at_ms).collect();
        assert_eq!(kept, [1_000, window_ms() + 500]);
    }
}
