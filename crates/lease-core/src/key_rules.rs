//! The per-key claim rules beyond the concurrency limit ([`crate::keyed`]: ordered keys and
//! start rates) as the reference computation [`crate::selection`] runs: which candidate of
//! a key a claim may take, and from when a held-back one may be claimed (the horizon).

use std::collections::HashMap;

use crate::execution::ExecutionRecord;
use crate::ids::{ConcurrencyKey, ExecutionId};
use crate::keyed::{KeyOrdering, RateLimit, RateLimits};
use crate::redelivery::RedeliveryPolicy;
use crate::time::Timestamp;

/// What a backend keeps for the per-key rules.
#[derive(Debug, Clone, Copy)]
pub struct KeyRules<'a> {
    /// Which keys are ordered.
    pub ordering: &'a KeyOrdering,
    /// The start rates.
    pub rates: &'a RateLimits,
    /// Each rate-limited key's recorded claim instants (any order; older ones are ignored).
    pub starts: &'a HashMap<ConcurrencyKey, Vec<Timestamp>>,
    /// Each execution's place in admission order (smaller: admitted earlier).
    pub admitted: &'a HashMap<ExecutionId, u64>,
}

/// Why a candidate may not be claimed now, by the per-key rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Nothing holds it back.
    Open,
    /// Its key is ordered and it is not the head, or the key holds a live lease.
    Queued,
    /// Its key started as many executions as its rate allows in the current window.
    RateHeld,
}

/// A live lease of an ordered key.
#[derive(Debug, Clone)]
struct LiveLease {
    id: ExecutionId,
    expires_at: Timestamp,
    /// The expiry uses the execution's last attempt: it ends dead and leaves the line.
    ends_dead: bool,
}

/// An ordered key's line: its executions that are neither terminal nor dead.
#[derive(Debug, Clone, Default)]
struct Line {
    /// (place in admission order, id), earliest first once [`KeyLedger::observe_all`] ends.
    members: Vec<(u64, ExecutionId)>,
    live: Vec<LiveLease>,
}

impl Line {
    fn head(&self) -> Option<&ExecutionId> {
        self.members.first().map(|(_, id)| id)
    }

    /// The latest expiry of a live lease held by another execution than `id`.
    fn others_live_until(&self, id: &ExecutionId) -> Option<Timestamp> {
        self.live
            .iter()
            .filter(|l| &l.id != id)
            .map(|l| l.expires_at)
            .max()
    }
}

/// The per-key rules read over every record at one instant, for one claim or horizon.
#[derive(Debug)]
pub struct KeyLedger<'a> {
    rules: KeyRules<'a>,
    now: Timestamp,
    lines: HashMap<ConcurrencyKey, Line>,
    /// Executions this claim took, per rate-limited key.
    taken: HashMap<ConcurrencyKey, usize>,
}

impl<'a> KeyLedger<'a> {
    /// Reads `records` (stored records, each read as effective at `now`).
    pub fn observe_all<'r>(
        rules: KeyRules<'a>,
        records: impl IntoIterator<Item = &'r ExecutionRecord>,
        now: Timestamp,
    ) -> Self {
        let mut lines: HashMap<ConcurrencyKey, Line> = HashMap::new();
        for stored in records {
            let Some(key) = &stored.concurrency_key else {
                continue;
            };
            if !rules.ordering.is_ordered(Some(key)) {
                continue;
            }
            let record = stored.effective(now);
            if record.status.is_terminal() {
                continue;
            }
            let line = lines.entry(key.clone()).or_default();
            let place = rules.admitted.get(&record.id).copied().unwrap_or(u64::MAX);
            line.members.push((place, record.id.clone()));
            if let Some(expires_at) = record.lease_expires_at.filter(|_| record.lease_live(now)) {
                line.live.push(LiveLease {
                    id: record.id.clone(),
                    expires_at,
                    ends_dead: record.effective(expires_at).status.is_terminal(),
                });
            }
        }
        for line in lines.values_mut() {
            line.members.sort();
        }
        KeyLedger {
            rules,
            now,
            lines,
            taken: HashMap::new(),
        }
    }

    fn rate(&self, key: &ConcurrencyKey) -> Option<RateLimit> {
        self.rules.rates.of(Some(key))
    }

    fn recent(&self, key: &ConcurrencyKey) -> &[Timestamp] {
        self.rules.starts.get(key).map_or(&[], Vec::as_slice)
    }

    /// Whether the per-key rules let this claim take `record` (effective, claimable) now.
    pub fn hold(&self, record: &ExecutionRecord) -> Hold {
        let Some(key) = &record.concurrency_key else {
            return Hold::Open;
        };
        if let Some(line) = self.lines.get(key)
            && (line.head() != Some(&record.id) || !line.live.is_empty())
        {
            return Hold::Queued;
        }
        if let Some(rate) = self.rate(key) {
            let floor = self.now.as_millis().saturating_sub(rate.period_ms());
            let inside = self
                .recent(key)
                .iter()
                .filter(|t| t.as_millis() > floor)
                .count();
            let taken = self.taken.get(key).copied().unwrap_or(0);
            let starts = usize::try_from(rate.starts()).unwrap_or(usize::MAX);
            if inside.saturating_add(taken) >= starts {
                return Hold::RateHeld;
            }
        }
        Hold::Open
    }

    /// Notes that this claim took `record` (which [`KeyLedger::hold`] found open): it uses
    /// a place of its key's rate. (Its ordered line needs no note: it stays the head, so
    /// the rest of the line stays queued.)
    pub fn took(&mut self, record: &ExecutionRecord) {
        if let Some(key) = &record.concurrency_key
            && self.rate(key).is_some()
        {
            *self.taken.entry(key.clone()).or_default() += 1;
        }
    }

    /// The earliest instant `stored` may be claimed by the per-key rules if nothing else
    /// happens, never later than the truth: its own [`ExecutionRecord::claimable_at`],
    /// after the live leases of its ordered key end and after its key's rate has room.
    /// `None` for an execution waiting behind its ordered key's head, which only a write
    /// (acknowledgement, cancel) moves, and that write signals the wake-up path.
    pub fn claimable_at(
        &self,
        stored: &ExecutionRecord,
        policy: &RedeliveryPolicy,
    ) -> Option<Timestamp> {
        let mut at = stored.claimable_at(policy)?;
        let Some(key) = &stored.concurrency_key else {
            return Some(at);
        };
        if let Some(line) = self.lines.get(key) {
            at = at.max(self.line_opens_for(line, &stored.id)?);
        }
        if let Some(next) = self
            .rate(key)
            .and_then(|rate| rate.next_start(self.recent(key), self.now))
        {
            at = at.max(next);
        }
        Some(at)
    }

    /// When `id` may lead `line`: as its head, once every other live lease ended; as the
    /// one after a live head whose expiry ends it dead, at that expiry; else `None`.
    fn line_opens_for(&self, line: &Line, id: &ExecutionId) -> Option<Timestamp> {
        if line.head() == Some(id) {
            return Some(line.others_live_until(id).unwrap_or(self.now));
        }
        let head = line.live.iter().find(|l| line.head() == Some(&l.id))?;
        let second = line.members.get(1).map(|(_, id)| id);
        (head.ends_dead && second == Some(id) && line.others_live_until(&head.id).is_none())
            .then_some(head.expires_at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::LimitScope;
    use crate::execution::Admission;
    use crate::lease::FencingToken;
    use std::time::Duration;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    fn keyed(id: &str) -> ExecutionRecord {
        let admission = Admission::new(ExecutionId::new(id).expect("id"))
            .concurrency_key(ConcurrencyKey::new("k").expect("key"));
        ExecutionRecord::admitted(&admission, at(0))
    }

    #[test]
    fn an_ordered_line_opens_for_its_head_only_without_live_leases() {
        let key = ConcurrencyKey::new("k").expect("key");
        let mut ordering = KeyOrdering::default();
        ordering.set(&LimitScope::Key(key), true);
        let rates = RateLimits::default();
        let starts = HashMap::new();
        let (mut a, b) = (keyed("b-first"), keyed("a-second"));
        let admitted = HashMap::from([(a.id.clone(), 1), (b.id.clone(), 2)]);
        let rules = KeyRules {
            ordering: &ordering,
            rates: &rates,
            starts: &starts,
            admitted: &admitted,
        };
        let ledger = KeyLedger::observe_all(rules, [&a, &b], at(0));
        assert_eq!(ledger.hold(&a), Hold::Open);
        assert_eq!(ledger.hold(&b), Hold::Queued);
        a.claim(at(0), 1000, FencingToken::new(1));
        let ledger = KeyLedger::observe_all(rules, [&a, &b], at(10));
        assert_eq!(ledger.hold(&a.effective(at(10))), Hold::Queued);
        let policy = RedeliveryPolicy::default();
        assert_eq!(ledger.claimable_at(&b, &policy), None);
    }

    #[test]
    fn a_rate_holds_a_key_until_its_window_has_room() {
        let key = ConcurrencyKey::new("k").expect("key");
        let ordering = KeyOrdering::default();
        let mut rates = RateLimits::default();
        let rate = RateLimit::new(1, Duration::from_millis(100)).expect("rate");
        rates.set(&LimitScope::Key(key.clone()), Some(rate));
        let starts = HashMap::from([(key, vec![at(50)])]);
        let admitted = HashMap::new();
        let rules = KeyRules {
            ordering: &ordering,
            rates: &rates,
            starts: &starts,
            admitted: &admitted,
        };
        let a = keyed("a");
        let ledger = KeyLedger::observe_all(rules, [&a], at(60));
        assert_eq!(ledger.hold(&a), Hold::RateHeld);
        let policy = RedeliveryPolicy::default();
        assert_eq!(ledger.claimable_at(&a, &policy), Some(at(150)));
        let ledger = KeyLedger::observe_all(rules, [&a], at(150));
        assert_eq!(ledger.hold(&a), Hold::Open);
    }
}
