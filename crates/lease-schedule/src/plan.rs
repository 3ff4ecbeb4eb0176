//! What one tick admits for one schedule: the catch-up policy applied to the occurrences
//! after the stored cursor (docs/decisions/0035-schedules.md: catch-up).
//!
//! An occurrence `o` is *due* at `now` when `o <= now`, and *missed* when it is more than
//! the grace window old: `o < now - grace`. Due occurrences that are not missed are always
//! admitted; missed ones per [`CatchUp`]. At most `max_per_tick` are admitted; when more are
//! due the plan says `more`.

use lease_core::Timestamp;

use crate::schedule::{CatchUp, Schedule};

/// One tick's decision for one schedule.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// The occurrences to admit, ascending.
    pub admit: Vec<Timestamp>,
    /// The new cursor: every occurrence at or before it is settled (admitted or skipped by
    /// the policy); `None` when this tick settles nothing.
    pub through: Option<Timestamp>,
    /// More occurrences are due than the bound let this tick admit.
    pub more: bool,
}

/// Plans the occurrences strictly after `cursor` that are due at `now`.
pub fn plan(schedule: &Schedule, cursor: Timestamp, now: Timestamp) -> Plan {
    let definition = schedule.definition();
    let bound = definition.max_per_tick;
    let grace = i64::try_from(definition.grace_ms).unwrap_or(i64::MAX);
    let threshold = Timestamp::from_millis(now.as_millis().saturating_sub(grace));
    let mut plan = Plan::default();
    // Missed occurrences: (cursor, threshold).
    let mut on_time_from = cursor;
    match definition.catch_up {
        CatchUp::All => {
            let (admit, more) = walk(schedule, cursor, now, bound);
            plan.admit = admit;
            plan.more = more;
            plan.through = plan.admit.last().copied();
            return plan;
        }
        CatchUp::Last | CatchUp::None => {
            if let Some(latest) = schedule.prev_before(threshold).filter(|p| *p > cursor) {
                if definition.catch_up == CatchUp::Last {
                    plan.admit.push(latest);
                }
                plan.through = Some(latest);
                on_time_from = latest;
            }
        }
    }
    // On time: [threshold, now], after whatever the policy settled.
    let from = on_time_from.max(Timestamp::from_millis(threshold.as_millis() - 1));
    let room = bound - plan.admit.len();
    if room == 0 {
        plan.more = schedule.next_after(from).is_some_and(|o| o <= now);
        return plan;
    }
    let (on_time, more) = walk(schedule, from, now, room);
    plan.admit.extend(on_time);
    plan.more = more;
    if let Some(last) = plan.admit.last().copied() {
        plan.through = Some(plan.through.map_or(last, |t| t.max(last)));
    }
    plan
}

/// Up to `bound` occurrences in `(after, until]`, ascending, and whether more lie there.
fn walk(
    schedule: &Schedule,
    after: Timestamp,
    until: Timestamp,
    bound: usize,
) -> (Vec<Timestamp>, bool) {
    let mut out = Vec::new();
    let mut cursor = after;
    while let Some(o) = schedule.next_after(cursor).filter(|o| *o <= until) {
        if out.len() == bound {
            return (out, true);
        }
        out.push(o);
        cursor = o;
    }
    (out, false)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const MIN: i64 = 60_000;
    /// 2026-01-01T00:00:00Z.
    const T0: i64 = 1_767_225_600_000;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    fn every_minute(catch_up: CatchUp) -> Schedule {
        Schedule::new("m", "* * * * *", "UTC")
            .expect("schedule")
            .catch_up(catch_up)
            .grace(Duration::from_secs(90))
            .expect("grace")
    }

    #[test]
    fn on_time_occurrences_are_admitted_under_every_policy() {
        for policy in [CatchUp::Last, CatchUp::All, CatchUp::None] {
            let p = plan(&every_minute(policy), at(T0 - 1), at(T0 + MIN + 5));
            assert_eq!(p.admit, vec![at(T0), at(T0 + MIN)], "{policy:?}");
            assert_eq!(p.through, Some(at(T0 + MIN)));
            assert!(!p.more);
        }
    }

    #[test]
    fn missed_occurrences_follow_the_policy() {
        // Cursor just before T0, now 10 min later: T0..T0+8m are missed (older than 90 s),
        // T0+9m and T0+10m on time.
        let now = at(T0 + 10 * MIN);
        let last = plan(&every_minute(CatchUp::Last), at(T0 - 1), now);
        assert_eq!(
            last.admit,
            vec![at(T0 + 8 * MIN), at(T0 + 9 * MIN), at(T0 + 10 * MIN)]
        );
        let none = plan(&every_minute(CatchUp::None), at(T0 - 1), now);
        assert_eq!(none.admit, vec![at(T0 + 9 * MIN), at(T0 + 10 * MIN)]);
        assert_eq!(none.through, Some(at(T0 + 10 * MIN)));
        let all = plan(&every_minute(CatchUp::All), at(T0 - 1), now);
        assert_eq!(all.admit.len(), 11);
        let bounded = every_minute(CatchUp::All).max_per_tick(4).expect("bound");
        let first = plan(&bounded, at(T0 - 1), now);
        assert_eq!(
            first.admit,
            (0..4).map(|i| at(T0 + i * MIN)).collect::<Vec<_>>()
        );
        assert!(first.more);
        assert_eq!(first.through, Some(at(T0 + 3 * MIN)));
    }

    #[test]
    fn none_skipping_everything_still_moves_the_cursor() {
        let s = every_minute(CatchUp::None)
            .grace(Duration::ZERO)
            .expect("grace");
        let p = plan(&s, at(T0 - 1), at(T0 + 5 * MIN + 1));
        assert!(p.admit.is_empty());
        assert_eq!(p.through, Some(at(T0 + 5 * MIN)));
        assert_eq!(
            plan(&s, at(T0 + 5 * MIN), at(T0 + 5 * MIN + 2)),
            Plan::default()
        );
    }
}
