//! Rule 13 (ordered keys): an ordered key's executions run one at a time, in admission
//! order. A claim is judged only when its key was certainly ordered at its commit (every
//! value the key's own mark and the default may have had orders it, [`super::scoped`]).
//!
//! - **One at a time**: rule 7's count with a limit of 1: a claim call that took a lease
//!   of the key while another of its leases was certainly live at its commit (or took two).
//! - **In admission order**: a claim of X while an execution Y of the same key, certainly
//!   admitted before X (Y's admission returned accepted before X's first admission that
//!   may have committed was invoked), was neither terminal nor dead: Y was claimed again
//!   by a call invoked after this claim returned (terminal and dead executions are never
//!   claimed; the torture run never re-admits dead ones). Redelivery keeps Y's place, so
//!   Y waiting for a redelivery delay or a wake holds X back as well.

use std::collections::BTreeMap;

use super::keys::{admitted_keys, claim_calls, leases_by_key, live_at};
use super::op::{Op, OpKind, OpResult};
use super::scoped::{Set, possible, sets_of};
use super::violation::Violation;

/// Rule 13 over every ordered key.
pub(super) fn ordered_keys_in_turn(
    ops: &[Op],
    by_exec: &BTreeMap<&str, Vec<&Op>>,
    out: &mut Vec<Violation>,
) {
    let sets = ordering_sets(ops);
    if sets.is_empty() {
        return;
    }
    for (key, leases) in &leases_by_key(ops, by_exec) {
        for took in claim_calls(leases).into_values() {
            if !certainly_ordered(&sets, key, took[0].claim) {
                continue;
            }
            let live = live_at(leases, took[0]);
            if took.len() + live.len() > 1 {
                out.push(Violation::OrderedKeyOverlap {
                    key: (*key).to_owned(),
                    claimed: took.iter().map(|l| l.name()).collect(),
                    live: live.iter().map(|l| l.name()).collect(),
                });
            }
        }
    }
    claims_in_admission_order(ops, &sets, out);
}

/// The second half of rule 13: no claim passes an earlier admitted execution of its key
/// that was still waiting.
fn claims_in_admission_order(ops: &[Op], sets: &[Set<'_, bool>], out: &mut Vec<Violation>) {
    let keys = admitted_keys(ops);
    let admitted = admission_spans(ops);
    let claims: Vec<&Op> = ops
        .iter()
        .filter(|op| matches!(op.kind, OpKind::Claim { .. }) && op.result == OpResult::Accepted)
        .collect();
    for claim in &claims {
        let execution = claim.execution.as_str();
        let (Some(key), Some(&(x_from, _))) = (keys.get(execution), admitted.get(execution)) else {
            continue;
        };
        if !certainly_ordered(sets, key, claim) {
            continue;
        }
        let waiting = claims.iter().find(|later| {
            let y = later.execution.as_str();
            y != execution
                && keys.get(y) == Some(key)
                && later.start_us > claim.end_us
                && admitted
                    .get(y)
                    .is_some_and(|&(_, y_done)| y_done.is_some_and(|d| d < x_from))
        });
        if let Some(y) = waiting {
            out.push(Violation::OrderedOutOfTurn {
                key: (*key).to_owned(),
                execution: execution.to_owned(),
                token: claim.token,
                waiting: y.execution.clone(),
            });
        }
    }
}

/// How often an ordered key held executions back: the claims of a certainly ordered key's
/// execution at which another execution of the key was waiting (its admission had returned
/// accepted before the claim was invoked, its first claim was invoked after the claim
/// returned), and the most waiting at one claim. With rule 13 passing, each waiting one was
/// neither run beside the claimed one nor let past it, so a count above 0 shows the ordering
/// bound (a rate on the key can hold them back as well).
pub fn ordered_backlog(ops: &[Op]) -> (u64, usize) {
    let sets = ordering_sets(ops);
    if sets.is_empty() {
        return (0, 0);
    }
    let keys = admitted_keys(ops);
    let admitted = admission_spans(ops);
    let claims: Vec<&Op> = ops
        .iter()
        .filter(|op| matches!(op.kind, OpKind::Claim { .. }) && op.result == OpResult::Accepted)
        .collect();
    let mut first_claim: BTreeMap<&str, i64> = BTreeMap::new();
    for c in &claims {
        let at = first_claim
            .entry(c.execution.as_str())
            .or_insert(c.start_us);
        *at = (*at).min(c.start_us);
    }
    let mut by_key: BTreeMap<&str, Vec<(&str, i64, i64)>> = BTreeMap::new();
    for (execution, first) in &first_claim {
        let (Some(key), Some((_, Some(returned)))) = (keys.get(execution), admitted.get(execution))
        else {
            continue;
        };
        by_key
            .entry(key)
            .or_default()
            .push((execution, *returned, *first));
    }
    let (mut waits, mut peak) = (0, 0);
    for claim in &claims {
        let execution = claim.execution.as_str();
        let Some(key) = keys.get(execution) else {
            continue;
        };
        if !certainly_ordered(&sets, key, claim) {
            continue;
        }
        let waiting = by_key.get(key).map_or(0, |others| {
            others
                .iter()
                .filter(|(x, returned, first)| {
                    *x != execution && *returned < claim.start_us && *first > claim.end_us
                })
                .count()
        });
        if waiting > 0 {
            waits += 1;
            peak = peak.max(waiting);
        }
    }
    (waits, peak)
}

/// Each execution's earliest admission that may have committed (invocation µs), and the
/// earliest return of an accepted one (`None`: none accepted).
fn admission_spans(ops: &[Op]) -> BTreeMap<&str, (i64, Option<i64>)> {
    let mut spans: BTreeMap<&str, (i64, Option<i64>)> = BTreeMap::new();
    for op in ops
        .iter()
        .filter(|op| matches!(op.kind, OpKind::Admit { .. }))
    {
        let accepted = (op.result == OpResult::Accepted).then_some(op.end_us);
        if !matches!(op.result, OpResult::Accepted | OpResult::Unknown) {
            continue;
        }
        let span = spans
            .entry(op.execution.as_str())
            .or_insert((op.start_us, accepted));
        span.0 = span.0.min(op.start_us);
        span.1 = match (span.1, accepted) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    spans
}

/// The ordering sets of the log.
fn ordering_sets(ops: &[Op]) -> Vec<Set<'_, bool>> {
    sets_of(ops, |op| match &op.kind {
        OpKind::SetKeyOrdering { key, ordered } => Some((key.as_deref(), *ordered)),
        _ => None,
    })
}

/// Whether `key` was ordered under every value its own mark and the default may have had
/// when `claim` committed (the default orders every key; unmarking a key leaves it ordered
/// while the default is set).
fn certainly_ordered(sets: &[Set<'_, bool>], key: &str, claim: &Op) -> bool {
    let own = possible(sets, Some(key), claim.start_us, claim.end_us);
    let default = possible(sets, None, claim.start_us, claim.end_us);
    let marked = |s: &Option<&Set<'_, bool>>| s.is_some_and(|s| s.value);
    own.iter()
        .all(|o| default.iter().all(|d| marked(o) || marked(d)))
}
