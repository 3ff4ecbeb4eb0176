//! Rule 5: an acknowledged outcome never changes, is the one the workflow derives, and
//! nothing is accepted for a later delivery; each delivery ends once.

use std::collections::BTreeSet;

use super::cancel::{CANCELLED_OUTCOME_PREFIX, may_be_cancelled};
use super::op::{Op, OpKind, OpResult, op_name};
use super::options::CheckOptions;
use super::violation::{MISSING, Violation};

/// Rule 5a: each delivery ends once (one accepted release or acknowledgement per token).
pub(super) fn each_delivery_ends_once(execution: &str, ops: &[&Op], out: &mut Vec<Violation>) {
    let mut ended: BTreeSet<u64> = BTreeSet::new();
    for op in ops {
        if op.result == OpResult::Accepted
            && matches!(op.kind, OpKind::Release { .. } | OpKind::Acknowledge { .. })
            && !ended.insert(op.token)
        {
            out.push(Violation::EndedTwice {
                execution: execution.into(),
                token: op.token,
            });
        }
    }
}

/// Rule 5b: nothing (claim or fenced operation) is accepted with a token above the one whose
/// acknowledgement made the execution terminal.
pub(super) fn nothing_after_outcome(execution: &str, ops: &[&Op], out: &mut Vec<Violation>) {
    let terminal_token = ops
        .iter()
        .filter(|op| {
            op.result == OpResult::Accepted
                && matches!(&op.kind, OpKind::Acknowledge { outcome } if outcome != "suspended")
        })
        .map(|op| op.token)
        .min();
    if let Some(outcome_token) = terminal_token {
        for op in ops {
            let fenced_or_claim = matches!(
                op.kind,
                OpKind::Claim { .. }
                    | OpKind::Renew { .. }
                    | OpKind::WriteStep { .. }
                    | OpKind::Acknowledge { .. }
                    | OpKind::Release { .. }
            );
            if fenced_or_claim && op.result == OpResult::Accepted && op.token > outcome_token {
                out.push(Violation::AfterOutcome {
                    execution: execution.into(),
                    outcome_token,
                    token: op.token,
                    op: op_name(&op.kind),
                });
            }
        }
    }
}

/// Rule 5c: every terminal outcome acknowledged or read is the derived one (when known) and
/// the first one. A `cancelled:<reason>` outcome of an execution a cancel may have cancelled
/// (rule 6) stands in for the derived one: it has no terminal acknowledgement.
pub(super) fn outcome_never_changes(
    execution: &str,
    ops: &[&Op],
    options: &CheckOptions<'_>,
    out: &mut Vec<Violation>,
) {
    let expected_outcome = options.expected_outcome.and_then(|f| f(execution));
    let cancelled = may_be_cancelled(ops);
    let mut outcome: Option<&str> = None;
    for op in ops {
        if op.result != OpResult::Accepted {
            continue;
        }
        let o = match &op.kind {
            OpKind::Acknowledge { outcome } if outcome != "suspended" => outcome.as_str(),
            OpKind::ReadOutcome {
                outcome: Some(outcome),
            } => outcome.as_str(),
            _ => continue,
        };
        let cancelled_outcome = cancelled && o.starts_with(CANCELLED_OUTCOME_PREFIX);
        if let Some(expected) = &expected_outcome
            && expected != o
            && !cancelled_outcome
        {
            out.push(Violation::OutcomeCorrupt {
                execution: execution.into(),
                expected: expected.clone(),
                found: o.into(),
            });
        }
        if let Some(first) = outcome
            && first != o
        {
            out.push(Violation::OutcomeChanged {
                execution: execution.into(),
                first: first.into(),
                other: o.into(),
            });
        }
        if outcome.is_none() {
            outcome = Some(o);
        }
    }
}

/// Rule 5d: a terminal outcome never disappears: a read that found the execution not
/// terminal after a terminal acknowledgement or read had returned.
pub(super) fn outcome_never_disappears(execution: &str, ops: &[&Op], out: &mut Vec<Violation>) {
    for read in ops {
        if read.result != OpResult::Accepted
            || !matches!(read.kind, OpKind::ReadOutcome { outcome: None })
        {
            continue;
        }
        let earlier = ops.iter().find_map(|op| match &op.kind {
            OpKind::Acknowledge { outcome }
            | OpKind::ReadOutcome {
                outcome: Some(outcome),
            } if op.result == OpResult::Accepted
                && outcome != "suspended"
                && op.end_us < read.start_us =>
            {
                Some(outcome)
            }
            _ => None,
        });
        if let Some(first) = earlier {
            out.push(Violation::OutcomeChanged {
                execution: execution.into(),
                first: first.clone(),
                other: MISSING.into(),
            });
        }
    }
}
