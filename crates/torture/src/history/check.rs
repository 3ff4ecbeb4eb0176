//! The checker's driver: groups the log by execution and runs every rule on each, then the
//! rules across executions (per key, pause, priority) and the liveness check.
//!
//! An operation that returned before another was invoked committed before it; overlapping
//! operations are concurrent and may commit in either order. The checker only reports what
//! the intervals prove.

use std::collections::BTreeMap;

use super::attempts::{LimitSets, attempts_within_limit};
use super::cancel::{already_terminal_was_terminal, nothing_after_cancel, reads_cancelled};
use super::keys::live_leases_per_key;
use super::live::one_live_lease;
use super::op::{Op, OpKind, OpResult};
use super::options::CheckOptions;
use super::ordering::ordered_keys_in_turn;
use super::outcomes::{
    each_delivery_ends_once, nothing_after_outcome, outcome_never_changes, outcome_never_disappears,
};
use super::pause::nothing_claimed_while_paused;
use super::priority::higher_priorities_first;
use super::rate::claims_within_rate;
use super::schedule::occurrences_admitted_once;
use super::scoped::sets_of;
use super::stale::nothing_stale_accepted;
use super::steps::{steps_never_disappear, steps_written_once};
use super::tokens::{tokens_increase, tokens_not_reused};
use super::violation::Violation;

/// Checks a history. Returns every violation found (empty = the history is consistent).
pub fn check(ops: &[Op], options: &CheckOptions<'_>) -> Vec<Violation> {
    let mut by_exec: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in ops {
        by_exec.entry(op.execution.as_str()).or_default().push(op);
    }
    let mut out = Vec::new();
    tokens_not_reused(ops, &mut out);
    let attempt_limits = sets_of(ops, |op| match &op.kind {
        OpKind::SetAttemptLimit { workflow, limit } => Some((workflow.as_deref(), *limit)),
        _ => None,
    });
    for (execution, ops) in &by_exec {
        check_execution(execution, ops, options, &attempt_limits, &mut out);
    }
    live_leases_per_key(ops, &by_exec, &mut out);
    claims_within_rate(ops, &by_exec, &mut out);
    ordered_keys_in_turn(ops, &by_exec, &mut out);
    nothing_claimed_while_paused(ops, &mut out);
    if !options.claims_skip_locked {
        higher_priorities_first(ops, &mut out);
    }
    occurrences_admitted_once(&by_exec, options, &mut out);
    not_completed(&by_exec, options, &mut out);
    out
}

/// Liveness: every execution that must complete was acknowledged terminal (or read so, or
/// read dead) by the bound.
fn not_completed(
    by_exec: &BTreeMap<&str, Vec<&Op>>,
    options: &CheckOptions<'_>,
    out: &mut Vec<Violation>,
) {
    for execution in &options.must_complete {
        let done = by_exec.get(execution.as_str()).is_some_and(|ops| {
            ops.iter().any(|op| {
                op.result == OpResult::Accepted
                    && options.complete_by_us.is_none_or(|by| op.end_us <= by)
                    && match &op.kind {
                        OpKind::Acknowledge { outcome } => outcome != "suspended",
                        OpKind::ReadOutcome { outcome } => outcome.is_some(),
                        // Its attempts ran out (rule 11 judges whether it died rightly).
                        OpKind::ReadDead => true,
                        _ => false,
                    }
            })
        });
        if !done {
            out.push(Violation::NotCompleted {
                execution: execution.clone(),
            });
        }
    }
}

/// Every per-execution rule, in the rules' order (the order of the report).
fn check_execution(
    execution: &str,
    ops: &[&Op],
    options: &CheckOptions<'_>,
    attempt_limits: &LimitSets<'_>,
    out: &mut Vec<Violation>,
) {
    let claims: Vec<&Op> = ops
        .iter()
        .copied()
        .filter(|op| matches!(op.kind, OpKind::Claim { .. }) && op.result == OpResult::Accepted)
        .collect();
    tokens_increase(execution, &claims, out);
    one_live_lease(execution, ops, &claims, out);
    nothing_stale_accepted(execution, ops, &claims, out);
    steps_written_once(execution, ops, options, out);
    steps_never_disappear(execution, ops, out);
    each_delivery_ends_once(execution, ops, out);
    nothing_after_outcome(execution, ops, out);
    outcome_never_changes(execution, ops, options, out);
    outcome_never_disappears(execution, ops, out);
    nothing_after_cancel(execution, ops, out);
    reads_cancelled(execution, ops, out);
    already_terminal_was_terminal(execution, ops, out);
    attempts_within_limit(execution, ops, &claims, attempt_limits, out);
}
