//! The answers [`super::Tx`]'s provided methods give by reading every execution at once:
//! the reference a store's own indexes must agree with.

use std::collections::{HashMap, HashSet};

use crate::execution::{ExecutionRecord, ExecutionStatus, Purged};
use crate::ids::ExecutionId;
use crate::key_rules::KeyRules;
use crate::redelivery::RedeliveryPolicy;
use crate::selection::{Gates, Selection, horizon, select};
use crate::time::Timestamp;

use super::values::{Namespace, Scan};

/// The gates and key rules a claim checks, from the namespace's values.
fn rules_of<'a>(
    namespace: &'a Namespace,
    admitted: &'a HashMap<ExecutionId, u64>,
) -> (Gates<'a>, KeyRules<'a>) {
    let gates = Gates {
        paused: &namespace.paused,
        limits: &namespace.limits,
    };
    let rules = KeyRules {
        ordering: &namespace.ordering,
        rates: &namespace.rates,
        starts: &namespace.rate_starts,
        admitted,
    };
    (gates, rules)
}

/// [`super::Tx::select_claimable`] over every record.
pub(super) fn select_claimable(
    scan: Scan<'_>,
    now: Timestamp,
    policy: &RedeliveryPolicy,
    limit: usize,
) -> Selection {
    let (gates, rules) = rules_of(scan.namespace, scan.admitted);
    select(scan.records, now, policy, gates, rules, limit)
}

/// [`super::Tx::claim_horizon`] over every record.
pub(super) fn claim_horizon(
    scan: Scan<'_>,
    now: Timestamp,
    policy: &RedeliveryPolicy,
    blocked: &HashSet<ExecutionId>,
) -> Option<Timestamp> {
    let (gates, rules) = rules_of(scan.namespace, scan.admitted);
    horizon(scan.records, now, policy, gates, rules, blocked)
}

/// [`super::Tx::failing`] over every record.
pub(super) fn failing(
    scan: Scan<'_>,
    min: u32,
    limit: usize,
    now: Timestamp,
) -> Vec<ExecutionRecord> {
    let mut out: Vec<ExecutionRecord> = scan
        .records
        .map(|r| r.effective(now))
        .filter(|r| r.unacknowledged_deliveries >= min.max(1))
        .collect();
    out.sort_by(crate::execution::failing_order);
    out.truncate(limit);
    out
}

/// [`super::Tx::live_leases`] over every record.
pub(super) fn live_leases(scan: Scan<'_>, limit: usize, now: Timestamp) -> Vec<ExecutionRecord> {
    let mut out: Vec<ExecutionRecord> = scan
        .records
        .filter(|r| r.lease_live(now))
        .cloned()
        .collect();
    out.sort_by(|a, b| a.live_lease_order().cmp(&b.live_lease_order()));
    out.truncate(limit);
    out
}

/// [`super::Tx::dead_after`] over every record.
pub(super) fn dead_after(
    scan: Scan<'_>,
    after: Option<&ExecutionId>,
    limit: usize,
    now: Timestamp,
) -> Vec<ExecutionRecord> {
    let mut dead: Vec<ExecutionRecord> = scan
        .records
        .filter(|r| after.is_none_or(|a| &r.id > a))
        .map(|r| r.effective(now))
        .filter(|r| r.status == ExecutionStatus::Dead)
        .collect();
    dead.sort_by(|a, b| a.id.cmp(&b.id));
    dead.truncate(limit);
    dead
}

/// [`super::Tx::purgeable`] over every record: the first `limit` by id, whatever order
/// the store scans in.
pub(super) fn purgeable(scan: Scan<'_>, before: Timestamp, limit: usize) -> Purged {
    let mut ids: Vec<ExecutionId> = scan
        .records
        // A dead execution waits for an operator (retry or cancel), not for retention.
        .filter(|r| r.status.is_terminal() && r.status != ExecutionStatus::Dead)
        .filter(|r| r.last_delivery_ended_at.is_some_and(|t| t < before))
        .map(|r| r.id.clone())
        .collect();
    ids.sort();
    ids.truncate(limit);
    Purged { ids }
}

/// Records the claim of `record` at `now` as a start of its key, if a rate applies.
pub(super) fn record_start(namespace: &mut Namespace, record: &ExecutionRecord, now: Timestamp) {
    if let Some(key) = &record.concurrency_key
        && namespace.rates.of(Some(key)).is_some()
    {
        let starts = &mut namespace.rate_starts;
        starts.entry(key.clone()).or_default().push(now);
    }
}

/// Drops the claim instants that left their key's window at `now` (and those of keys no
/// limit applies to), so the namespace stays as small as the rates allow.
pub(super) fn prune_starts(namespace: &mut Namespace, now: Timestamp) {
    let Namespace {
        rates, rate_starts, ..
    } = namespace;
    rate_starts.retain(|key, instants| {
        let Some(rate) = rates.of(Some(key)) else {
            return false;
        };
        let floor = now.as_millis().saturating_sub(rate.period_ms());
        instants.retain(|t| t.as_millis() > floor);
        !instants.is_empty()
    });
}
