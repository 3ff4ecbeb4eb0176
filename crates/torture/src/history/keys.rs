//! Rule 7 (concurrency limits): at no instant more live leases of one
//! concurrency key than its limit (its own, else the namespace default).
//!
//! The count only grows at a claim, so the rule checks every claim call that took leases of
//! a keyed execution: the leases it took, plus the earlier leases of the key that were
//! certainly live when it committed, must not exceed the highest limit that may have been in
//! force then. As in rule 2, real-time intervals order operations and the backend's own clock
//! (the claim's instant `expires_at - duration_ms`, the expiries) says what was live:
//!
//! - an earlier lease certainly committed before the claim: its claim returned before the
//!   claim call was invoked, or it was taken by the same call (same process, interval and
//!   claim instant: the call's atomic step counts what it already took);
//! - it was certainly not ended before: nothing that may have ended it was invoked before
//!   the claim returned (an acknowledgement or release accepted or of unknown result, any
//!   fenced operation refused `Lost`, a cancel, a later claim of its execution, a final read
//!   that found the execution terminal);
//! - it had certainly not expired at the claim's instant: its expiry, raised by the accepted
//!   renewals that returned before the claim was invoked (renewals committing meanwhile are
//!   not counted), is after the claim's instant (an expiry at that instant is not live, as
//!   the backends count).
//!
//! A claim whose reply was lost is not in the log, so missing leases only lower the count:
//! the rule reports nothing the history does not prove.

use std::collections::BTreeMap;

use super::op::{Op, OpKind, OpResult};
use super::violation::Violation;

/// One lease of a keyed execution as the rule sees it.
pub(super) struct Lease<'a> {
    pub(super) claim: &'a Op,
    /// The claim's instant, backend ms.
    pub(super) claimed_at: i64,
    /// The claim's expiry, backend ms.
    expires_at: i64,
    /// Earliest invocation (µs) of anything that may have ended the lease (`i64::MAX`: none).
    ended_from_us: i64,
    /// Accepted renewals: (return µs, new expiry ms).
    renewals: Vec<(i64, i64)>,
}

impl Lease<'_> {
    /// The expiry the lease certainly had at a commit after `before_us`: its claim's, raised
    /// by every accepted renewal that returned before then (a renewal sets the holder's
    /// instant plus the duration, later than any earlier expiry: rule 2 reads it the same way).
    fn expiry_before(&self, before_us: i64) -> i64 {
        self.renewals
            .iter()
            .filter(|(end_us, _)| *end_us < before_us)
            .map(|(_, expiry)| *expiry)
            .fold(self.expires_at, i64::max)
    }

    /// Whether the lease was certainly live when the claim call `call` committed.
    fn live_at(&self, call: &Lease<'_>) -> bool {
        self.claim.end_us < call.claim.start_us
            && self.ended_from_us >= call.claim.end_us
            && self.expiry_before(call.claim.start_us) > call.claimed_at
    }

    pub(super) fn name(&self) -> String {
        format!("{}#{}", self.claim.execution, self.claim.token)
    }
}

/// The claim call that logged a claim: its process, interval and backend instant (one call
/// logs every lease it took with the same three).
pub(super) type Call = (u32, i64, i64, i64);

/// Rule 7: every claim call of a keyed execution kept the key within its limit.
pub(super) fn live_leases_per_key(
    ops: &[Op],
    by_exec: &BTreeMap<&str, Vec<&Op>>,
    out: &mut Vec<Violation>,
) {
    let by_key = leases_by_key(ops, by_exec);
    let sets: Vec<&Op> = ops
        .iter()
        .filter(|op| {
            matches!(op.kind, OpKind::SetLimit { .. })
                && matches!(op.result, OpResult::Accepted | OpResult::Unknown)
        })
        .collect();
    for (key, leases) in &by_key {
        check_key(key, leases, &sets, out);
    }
}

/// The most leases of one key certainly live at a claim call's commit, counting the ones
/// it took (rule 7's count): a run whose peak reaches the limit shows the limit bound.
pub fn peak_live_leases(ops: &[Op]) -> usize {
    let mut by_exec: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in ops {
        by_exec.entry(op.execution.as_str()).or_default().push(op);
    }
    leases_by_key(ops, &by_exec)
        .values()
        .flat_map(|leases| {
            claim_calls(leases)
                .into_values()
                .map(|took| took.len() + live_at(leases, took[0]).len())
        })
        .max()
        .unwrap_or(0)
}

/// The leases of every keyed execution, by key.
pub(super) fn leases_by_key<'a>(
    ops: &'a [Op],
    by_exec: &BTreeMap<&str, Vec<&'a Op>>,
) -> BTreeMap<&'a str, Vec<Lease<'a>>> {
    let mut by_key: BTreeMap<&str, Vec<Lease<'_>>> = BTreeMap::new();
    for (execution, key) in admitted_keys(ops) {
        if let Some(ops) = by_exec.get(execution) {
            by_key.entry(key).or_default().extend(leases_of(ops));
        }
    }
    by_key
}

/// The claim calls that took `leases`, each with the leases it took.
pub(super) fn claim_calls<'l, 'a>(leases: &'l [Lease<'a>]) -> BTreeMap<Call, Vec<&'l Lease<'a>>> {
    let mut calls: BTreeMap<Call, Vec<&Lease<'_>>> = BTreeMap::new();
    for lease in leases {
        let c = lease.claim;
        calls
            .entry((c.process, c.start_us, c.end_us, lease.claimed_at))
            .or_default()
            .push(lease);
    }
    calls
}

/// The leases certainly live when the call that took `call` committed.
pub(super) fn live_at<'l, 'a>(leases: &'l [Lease<'a>], call: &Lease<'_>) -> Vec<&'l Lease<'a>> {
    leases.iter().filter(|l| l.live_at(call)).collect()
}

/// The key each execution was admitted with (its first admission that may have committed:
/// admission is idempotent by id, the first one stands).
pub(super) fn admitted_keys(ops: &[Op]) -> BTreeMap<&str, &str> {
    let mut admits: Vec<&Op> = ops
        .iter()
        .filter(|op| {
            matches!(op.kind, OpKind::Admit { .. })
                && matches!(op.result, OpResult::Accepted | OpResult::Unknown)
        })
        .collect();
    admits.sort_by_key(|op| op.start_us);
    let mut keys = BTreeMap::new();
    for op in admits {
        if let OpKind::Admit { key: Some(key), .. } = &op.kind {
            keys.entry(op.execution.as_str()).or_insert(key.as_str());
        }
    }
    keys
}

/// The accepted claims of one execution, each with what may have ended it and its renewals.
fn leases_of<'a>(ops: &[&'a Op]) -> Vec<Lease<'a>> {
    ops.iter()
        .filter(|op| op.result == OpResult::Accepted)
        .filter_map(|claim| match claim.kind {
            OpKind::Claim {
                expires_at,
                duration_ms,
                ..
            } => Some(Lease {
                claim,
                claimed_at: expires_at - duration_ms,
                expires_at,
                ended_from_us: ended_from(claim.token, ops),
                renewals: ops
                    .iter()
                    .filter(|op| op.token == claim.token && op.result == OpResult::Accepted)
                    .filter_map(|op| match op.kind {
                        OpKind::Renew {
                            expires_at: Some(e),
                        } => Some((op.end_us, e)),
                        _ => None,
                    })
                    .collect(),
            }),
            _ => None,
        })
        .collect()
}

/// The earliest invocation of anything in the execution's `ops` that may have ended the
/// lease `token`.
fn ended_from(token: u64, ops: &[&Op]) -> i64 {
    ops.iter()
        .filter(|op| may_end(token, op))
        .map(|op| op.start_us)
        .min()
        .unwrap_or(i64::MAX)
}

/// Whether `op` may have ended the lease `token` of its execution (or proves it had ended).
fn may_end(token: u64, op: &Op) -> bool {
    let took_effect = matches!(op.result, OpResult::Accepted | OpResult::Unknown);
    match &op.kind {
        OpKind::Acknowledge { .. } | OpKind::Release { .. } if op.token == token => {
            took_effect || op.result == OpResult::Lost
        }
        OpKind::Renew { .. } | OpKind::WriteStep { .. } if op.token == token => {
            op.result == OpResult::Lost
        }
        OpKind::Cancel { .. } => took_effect,
        OpKind::Claim { .. } => op.token > token && op.result == OpResult::Accepted,
        OpKind::ReadOutcome { outcome } => outcome.is_some() && op.result == OpResult::Accepted,
        _ => false,
    }
}

/// Checks every claim call of `key`'s leases against the highest limit it may have had.
fn check_key(key: &str, leases: &[Lease<'_>], sets: &[&Op], out: &mut Vec<Violation>) {
    for ((_, start_us, end_us, _), took) in &claim_calls(leases) {
        let Some(limit) = highest_limit(sets, key, *start_us, *end_us) else {
            continue;
        };
        let live = live_at(leases, took[0]);
        if took.len() + live.len() > limit as usize {
            out.push(Violation::TooManyLiveLeases {
                key: key.into(),
                limit,
                claimed: took.iter().map(|l| l.name()).collect(),
                live: live.iter().map(|l| l.name()).collect(),
            });
        }
    }
}

/// The highest limit `key` may have had when a claim call invoked at `start_us` and
/// returned at `end_us` committed: its own, else the default (`None`: it may have been
/// unlimited, nothing to check).
fn highest_limit(sets: &[&Op], key: &str, start_us: i64, end_us: i64) -> Option<u32> {
    let own = possible_limits(sets, Some(key), start_us, end_us);
    let default = possible_limits(sets, None, start_us, end_us);
    let mut highest = 0;
    for o in &own {
        for d in &default {
            highest = highest.max(o.or(*d)?);
        }
    }
    Some(highest)
}

/// The values the limit of `scope` (a key, or `None`: the default) may have had at a commit
/// inside `start_us..end_us`: every set that may have committed before it and was not
/// certainly overwritten before it (by an accepted set that began after it returned and
/// returned before `start_us`), and "unset" while no accepted set certainly came before.
fn possible_limits(
    sets: &[&Op],
    scope: Option<&str>,
    start_us: i64,
    end_us: i64,
) -> Vec<Option<u32>> {
    let of_scope: Vec<(&Op, Option<u32>)> = sets
        .iter()
        .filter_map(|op| match &op.kind {
            OpKind::SetLimit { key, limit } if key.as_deref() == scope => Some((*op, *limit)),
            _ => None,
        })
        .collect();
    let certain = |op: &Op| op.result == OpResult::Accepted && op.end_us < start_us;
    let mut values: Vec<Option<u32>> = of_scope
        .iter()
        .filter(|(op, _)| {
            op.start_us < end_us
                && !of_scope
                    .iter()
                    .any(|(later, _)| certain(later) && op.end_us < later.start_us)
        })
        .map(|(_, limit)| *limit)
        .collect();
    if !of_scope.iter().any(|(op, _)| certain(op)) {
        values.push(None);
    }
    values
}
