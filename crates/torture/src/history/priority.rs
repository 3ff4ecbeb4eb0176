//! Rule 9 (priorities): no claim takes an execution while one of higher priority was
//! certainly due and claimable at its commit (a claim takes higher priorities first, so it
//! would have taken that one before).
//!
//! An execution Y of higher priority than a claimed X was certainly claimable when the
//! claim call committed if:
//!
//! - Y's admission returned accepted before the call was invoked, with a due time (backend
//!   clock) at or before the call's claim instant: Y existed and was due;
//! - Y's first delivery was claimed by a call invoked after this call returned, and that
//!   claim's record showed no earlier delivery (`is_first_delivery`, read in the claim's own
//!   atomic step): so no claim of Y, logged or lost with a killed process, committed before
//!   this call, and Y was neither held, nor in a redelivery delay, nor terminal or
//!   cancelled (a terminal execution is never claimed again);
//! - Y has no concurrency key, or no concurrency limit, rate or ordering was ever set: a
//!   key at its limit or rate, or an ordered key's line, holds Y back legitimately.
//!
//! A pause of the namespace holds X back as well, so it needs no condition. Backends whose
//! claims skip rows locked by concurrent claims (PostgreSQL's `SKIP LOCKED`: a concurrent
//! claim that locked Y and then rolled back, its connection dropped, hid Y legitimately) are
//! not judged: [`super::CheckOptions::claims_skip_locked`].

use std::collections::BTreeMap;

use super::op::{Op, OpKind, OpResult};
use super::violation::Violation;

/// What rule 9 knows of one execution's admission.
struct Admitted<'a> {
    admit: &'a Op,
    priority: i32,
    keyed: bool,
    due_at: Option<i64>,
}

/// Rule 9: every accepted claim against every execution of higher priority certainly
/// claimable at its commit.
pub(super) fn higher_priorities_first(ops: &[Op], out: &mut Vec<Violation>) {
    let admitted = admissions(ops);
    // A concurrency limit, a rate or an ordered key may hold a keyed execution back.
    let limits_set = ops.iter().any(|op| {
        matches!(
            op.kind,
            OpKind::SetLimit { .. } | OpKind::SetRateLimit { .. } | OpKind::SetKeyOrdering { .. }
        ) && op.result != OpResult::Failed
    });
    // Each execution's earliest claim that may have committed; it proves Y unclaimed until
    // then only when it is accepted and shows a first delivery. A later first delivery does
    // not: a lease released unstarted (`Release::NotStarted`) leaves the next claim a first
    // delivery too, while the earlier claim held Y.
    let mut earliest: BTreeMap<&str, &Op> = BTreeMap::new();
    for op in ops
        .iter()
        .filter(|op| op.result != OpResult::Failed && matches!(op.kind, OpKind::Claim { .. }))
    {
        let slot = earliest.entry(op.execution.as_str()).or_insert(op);
        if op.start_us < slot.start_us {
            *slot = op;
        }
    }
    let first_claims: BTreeMap<&str, &Op> = earliest
        .into_iter()
        .filter(|(_, op)| {
            op.result == OpResult::Accepted
                && matches!(
                    op.kind,
                    OpKind::Claim {
                        first_delivery: true,
                        ..
                    }
                )
        })
        .collect();
    let waiting: Vec<(&str, &Admitted<'_>, &Op)> = admitted
        .iter()
        .filter(|(_, a)| !(a.keyed && limits_set))
        .filter_map(|(id, a)| Some((*id, a, *first_claims.get(id)?)))
        .collect();
    for claim in ops.iter().filter(|op| op.result == OpResult::Accepted) {
        let OpKind::Claim {
            expires_at,
            duration_ms,
            ..
        } = claim.kind
        else {
            continue;
        };
        let Some(taken) = admitted.get(claim.execution.as_str()) else {
            continue;
        };
        let claimed_at = expires_at - duration_ms;
        let passed_over = waiting
            .iter()
            .filter(|(_, y, first)| {
                y.priority > taken.priority
                    && y.admit.end_us < claim.start_us
                    && y.due_at.is_some_and(|due| due <= claimed_at)
                    && first.start_us > claim.end_us
            })
            .max_by_key(|(id, y, _)| (y.priority, std::cmp::Reverse(*id)));
        if let Some((id, y, _)) = passed_over {
            out.push(Violation::LowerPriorityClaimed {
                execution: claim.execution.clone(),
                token: claim.token,
                priority: taken.priority,
                passed_over: (*id).to_owned(),
                passed_over_priority: y.priority,
            });
        }
    }
}

/// Each execution's first accepted admission (the one that stands: admission is
/// idempotent by id).
fn admissions(ops: &[Op]) -> BTreeMap<&str, Admitted<'_>> {
    let mut admits: Vec<&Op> = ops
        .iter()
        .filter(|op| op.result == OpResult::Accepted && matches!(op.kind, OpKind::Admit { .. }))
        .collect();
    admits.sort_by_key(|op| op.end_us);
    let mut out = BTreeMap::new();
    for admit in admits {
        if let OpKind::Admit {
            key,
            priority,
            due_at,
            ..
        } = &admit.kind
        {
            out.entry(admit.execution.as_str()).or_insert(Admitted {
                admit,
                priority: *priority,
                keyed: key.is_some(),
                due_at: *due_at,
            });
        }
    }
    out
}
