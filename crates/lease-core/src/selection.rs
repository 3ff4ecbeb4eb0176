//! Which claimable executions one claim takes (RFC 002 `claimDue` with the operator
//! controls: pause, priorities, concurrency limits), as the reference computation the
//! memory backend runs and the SQL and Lua encode:
//!
//! 1. Only effective, claimable records ([`ExecutionRecord::claimable`]) that no paused
//!    scope covers are candidates.
//! 2. Candidates are taken in order: higher [`crate::Priority`] first, then the earliest due
//!    time, then the smallest id (ties in priority and due time go by id).
//! 3. A candidate with a concurrency key is skipped while its key holds as many live leases
//!    as its limit ([`ConcurrencyLimits::of`]), counting the leases this claim already
//!    issued; a skipped candidate does not stop later ones.
//! 4. The horizon leaves out what the gates hold back: paused records, and candidates
//!    skipped for their key (the key's live leases, whose expiry frees a place, are in it;
//!    an acknowledgement, release or cancel that frees a place signals the wake-up path).
//! 5. A candidate of an ordered key is skipped unless it is the key's earliest admitted
//!    execution that is neither terminal nor dead and the key holds no live lease; one
//!    whose key started as many executions as its rate allows in the window is skipped too
//!    ([`crate::key_rules`]). Skipped candidates cost the claim nothing.
//! 6. The horizon gives a head the end of its key's other live leases and a rate-held
//!    execution the instant its key's window has room; the rest of an ordered line waits
//!    for a write, which signals.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::control::{ConcurrencyLimits, PauseScope, Priority};
use crate::execution::ExecutionRecord;
use crate::ids::{ConcurrencyKey, ExecutionId};
use crate::key_rules::{Hold, KeyLedger, KeyRules};
use crate::redelivery::RedeliveryPolicy;
use crate::time::Timestamp;

/// What holds executions back from a claim: the paused scopes and the concurrency limits.
#[derive(Debug, Clone, Copy)]
pub struct Gates<'a> {
    /// The paused scopes.
    pub paused: &'a BTreeSet<PauseScope>,
    /// The limits per key and the namespace default.
    pub limits: &'a ConcurrencyLimits,
}

impl Gates<'_> {
    /// True when a paused scope covers `record`.
    pub fn paused(&self, record: &ExecutionRecord) -> bool {
        self.paused
            .iter()
            .any(|scope| scope.covers(record.workflow.as_ref()))
    }
}

/// What a claim takes and what it held back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// The executions to claim, in claim order.
    pub take: Vec<ExecutionId>,
    /// Claimable candidates skipped because their key is at its limit.
    pub blocked: HashSet<ExecutionId>,
}

/// Selects up to `limit` executions from `records` (stored records; each is read as
/// effective at `now`), by the rules of this module.
pub fn select<'r>(
    records: impl IntoIterator<Item = &'r ExecutionRecord>,
    now: Timestamp,
    policy: &RedeliveryPolicy,
    gates: Gates<'_>,
    rules: KeyRules<'_>,
    limit: usize,
) -> Selection {
    let records: Vec<&ExecutionRecord> = records.into_iter().collect();
    let mut ledger = KeyLedger::observe_all(rules, records.iter().copied(), now);
    let mut live: HashMap<ConcurrencyKey, u32> = HashMap::new();
    let mut candidates: Vec<(std::cmp::Reverse<Priority>, Timestamp, ExecutionRecord)> = Vec::new();
    for stored in records {
        let record = stored.effective(now);
        if record.lease_live(now) {
            if let Some(key) = &record.concurrency_key {
                *live.entry(key.clone()).or_default() += 1;
            }
            continue;
        }
        if !record.claimable(now, policy) || gates.paused(&record) {
            continue;
        }
        if let Some(due) = record.due_at {
            candidates.push((std::cmp::Reverse(record.priority), due, record));
        }
    }
    candidates.sort_by(|a, b| (a.0, a.1, &a.2.id).cmp(&(b.0, b.1, &b.2.id)));
    let mut selection = Selection::default();
    for (_, _, record) in candidates {
        if selection.take.len() == limit {
            break;
        }
        let hold = ledger.hold(&record);
        if hold == Hold::Queued {
            continue;
        }
        if let Some(key) = &record.concurrency_key {
            let held = live.get(key).copied().unwrap_or(0);
            if gates.limits.of(Some(key)).is_some_and(|l| held >= l.get()) {
                selection.blocked.insert(record.id);
                continue;
            }
        }
        if hold == Hold::RateHeld {
            continue;
        }
        if let Some(key) = &record.concurrency_key {
            *live.entry(key.clone()).or_default() += 1;
        }
        ledger.took(&record);
        selection.take.push(record.id);
    }
    selection
}

/// The earliest instant something held in `records` becomes claimable, leaving out what the
/// gates hold back (rules 4 and 6): the claim's horizon, read at `now` after its changes.
pub fn horizon<'r>(
    records: impl IntoIterator<Item = &'r ExecutionRecord>,
    now: Timestamp,
    policy: &RedeliveryPolicy,
    gates: Gates<'_>,
    rules: KeyRules<'_>,
    blocked: &HashSet<ExecutionId>,
) -> Option<Timestamp> {
    let records: Vec<&ExecutionRecord> = records.into_iter().collect();
    let ledger = KeyLedger::observe_all(rules, records.iter().copied(), now);
    records
        .into_iter()
        .filter(|r| !gates.paused(r) && !blocked.contains(&r.id))
        .filter_map(|r| ledger.claimable_at(r, policy))
        .min()
}
