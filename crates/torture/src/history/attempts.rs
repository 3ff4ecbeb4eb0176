//! Rule 11 (attempt limits and dead letters): an execution is never delivered again once
//! its attempts ran out, and nothing of it is accepted after it is dead.
//!
//! An attempt is a delivery that ended unacknowledged; a lease released unstarted
//! (`Release::NotStarted`) is none, and an acknowledgement (a suspension included) starts
//! the count again. Walking an execution's accepted claims in token order, a delivery is a
//! certain attempt when no acknowledgement of its token may have committed (accepted or of
//! unknown result) and no unstarted release of it may have: it ended before the next claim
//! was granted, by a release, an expiry or its process's death, each an attempt. An
//! acknowledgement that may have committed resets the count; a claim whose reply was lost
//! is not in the log. Both only lower the count, so the rule reports nothing the history
//! does not prove:
//!
//! - a claim granted after certain attempts reached the highest limit that may have been
//!   in force at the claims of those deliveries is reported (the execution was dead);
//! - once the delivery that used the last attempt ended by an accepted release, or a read
//!   found the execution dead, a fenced operation invoked after that returned and accepted
//!   is reported (the torture run never re-admits dead executions).
//!
//! The limit that applied to a claim is the execution's workflow's own (the workflow named
//! at its admission) when that workflow had one, else the namespace default, each as it
//! may have been at the claim ([`super::scoped`]).
//!
//! A death by expiry happens on the backend clock, which the log cannot place in real time:
//! only the next claim shows it.

use super::op::{Op, OpKind, OpResult, op_name};
use super::scoped::{Set, possible};
use super::violation::Violation;

/// The attempt limit sets: the namespace default's (scope `None`) and each workflow's own
/// (scope: the workflow name).
pub(super) type LimitSets<'a> = [Set<'a, Option<u32>>];

/// What the walk over one execution's deliveries found.
#[derive(Default)]
struct Walk {
    /// Certain attempts since the last acknowledgement that may have committed.
    attempts: u32,
    /// The highest limit possible at the claims of this run of attempts (`None`: one of
    /// them may have had none).
    limit: Option<u32>,
    /// The run has a claim whose limit is unknown (unlimited possible).
    unlimited: bool,
    /// Since when (µs) the execution was certainly dead, if known.
    dead_from_us: Option<i64>,
}

/// Rule 11 over one execution.
pub(super) fn attempts_within_limit(
    execution: &str,
    ops: &[&Op],
    claims: &[&Op],
    sets: &LimitSets<'_>,
    out: &mut Vec<Violation>,
) {
    if sets.is_empty() {
        return;
    }
    let workflow = workflow_of(ops);
    let mut ordered = claims.to_vec();
    ordered.sort_by_key(|c| c.token);
    let mut walk = Walk::default();
    for claim in ordered {
        if !walk.unlimited
            && let Some(limit) = walk.limit
            && walk.attempts >= limit
        {
            out.push(Violation::ClaimedAfterAttempts {
                execution: execution.into(),
                token: claim.token,
                attempts: walk.attempts,
                limit,
            });
        }
        match highest_limit(sets, workflow, claim) {
            Some(l) => walk.limit = Some(walk.limit.map_or(l, |w| w.max(l))),
            None => walk.unlimited = true,
        }
        end_delivery(&mut walk, claim.token, ops);
    }
    let dead_read = ops
        .iter()
        .filter(|op| op.kind == OpKind::ReadDead && op.result == OpResult::Accepted)
        .map(|op| op.end_us)
        .min();
    let dead_from = [walk.dead_from_us, dead_read].into_iter().flatten().min();
    nothing_accepted_after(execution, ops, dead_from, dead_read, out);
}

/// Counts how the delivery `token` ended into `walk`.
fn end_delivery(walk: &mut Walk, token: u64, ops: &[&Op]) {
    let may_commit = |op: &&&Op| {
        op.token == token && matches!(op.result, OpResult::Accepted | OpResult::Unknown)
    };
    let acknowledged = ops
        .iter()
        .filter(may_commit)
        .any(|op| matches!(op.kind, OpKind::Acknowledge { .. }));
    if acknowledged {
        *walk = Walk {
            dead_from_us: walk.dead_from_us,
            ..Walk::default()
        };
        return;
    }
    let unstarted = ops
        .iter()
        .filter(may_commit)
        .any(|op| op.kind == (OpKind::Release { unstarted: true }));
    if unstarted {
        return;
    }
    walk.attempts += 1;
    let used_up = !walk.unlimited && walk.limit.is_some_and(|l| walk.attempts >= l);
    let released = ops
        .iter()
        .filter(|op| {
            op.token == token
                && op.result == OpResult::Accepted
                && op.kind == (OpKind::Release { unstarted: false })
        })
        .map(|op| op.end_us)
        .min();
    if used_up && walk.dead_from_us.is_none() {
        walk.dead_from_us = released;
    }
}

/// Reports every fenced operation of the execution invoked after `dead_from_us` and
/// accepted, and every claim invoked after a read found it dead (`dead_read_us`; the other
/// claims of a dead execution are the walk's).
fn nothing_accepted_after(
    execution: &str,
    ops: &[&Op],
    dead_from_us: Option<i64>,
    dead_read_us: Option<i64>,
    out: &mut Vec<Violation>,
) {
    let after = |from: Option<i64>, op: &Op| from.is_some_and(|from| op.start_us > from);
    for op in ops.iter().filter(|op| op.result == OpResult::Accepted) {
        let flagged = match op.kind {
            OpKind::Claim { .. } => after(dead_read_us, op),
            OpKind::Renew { .. }
            | OpKind::WriteStep { .. }
            | OpKind::Acknowledge { .. }
            | OpKind::Release { .. } => after(dead_from_us, op),
            _ => false,
        };
        if flagged {
            out.push(Violation::AcceptedAfterDead {
                execution: execution.into(),
                token: op.token,
                op: op_name(&op.kind),
            });
        }
    }
}

/// The workflow named at the execution's admission, if any (every admission of one id names
/// the same workflow).
fn workflow_of<'a>(ops: &[&'a Op]) -> Option<&'a str> {
    ops.iter().find_map(|op| match &op.kind {
        OpKind::Admit { workflow, .. } => workflow.as_deref(),
        _ => None,
    })
}

/// The highest attempt limit that may have been in force when `claim` committed for an
/// execution of `workflow`: the workflow's own where it may have had one, the default
/// where it may have had none (never set, or removed); `None` when it may have been
/// unlimited.
fn highest_limit(sets: &LimitSets<'_>, workflow: Option<&str>, claim: &Op) -> Option<u32> {
    let (start, end) = (claim.start_us, claim.end_us);
    let own = match workflow {
        Some(w) => possible(sets, Some(w), start, end),
        None => vec![None],
    };
    let mut highest = 0;
    let mut falls_back = false;
    for set in own {
        match set.and_then(|s| s.value) {
            Some(limit) => highest = highest.max(limit),
            None => falls_back = true,
        }
    }
    if falls_back {
        for set in possible(sets, None, start, end) {
            highest = highest.max(set.and_then(|s| s.value)?);
        }
    }
    Some(highest)
}

/// The most certain attempts the walk of any execution counted in one run (the figure that
/// shows a limit bound: at the limit, executions used every attempt they had).
pub fn peak_attempts(ops: &[Op]) -> u32 {
    let mut by_exec: std::collections::BTreeMap<&str, Vec<&Op>> = Default::default();
    for op in ops {
        by_exec.entry(op.execution.as_str()).or_default().push(op);
    }
    let mut peak = 0;
    for ops in by_exec.values() {
        let mut claims: Vec<&Op> = ops
            .iter()
            .copied()
            .filter(|op| matches!(op.kind, OpKind::Claim { .. }) && op.result == OpResult::Accepted)
            .collect();
        claims.sort_by_key(|c| c.token);
        let mut walk = Walk::default();
        for claim in claims {
            end_delivery(&mut walk, claim.token, ops);
            peak = peak.max(walk.attempts);
        }
    }
    peak
}
