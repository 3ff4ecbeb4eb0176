//! Rule 6 (cancel): once a cancel that returned `cancelled` has returned,
//! nothing of the execution's old or new deliveries is accepted, it is never claimed again,
//! and it reads back cancelled; a cancel that found it `already_terminal` saw a real
//! terminal acknowledgement.
//!
//! Only what the intervals prove is reported: an operation invoked before the cancel
//! returned may have committed before it.

use super::op::{Op, OpKind, OpResult, op_name};
use super::violation::{MISSING, Violation};

/// The cancel result text that means "this call cancelled it".
pub const CANCELLED: &str = "cancelled";
/// The cancel result text that means "it had completed or failed".
pub const ALREADY_TERMINAL: &str = "already_terminal";
/// The cancel result text that means "it was cancelled before".
pub const ALREADY_CANCELLED: &str = "already_cancelled";
/// How a cancelled execution's stored outcome reads in the log (`cancelled:<reason>`).
pub const CANCELLED_OUTCOME_PREFIX: &str = "cancelled:";

/// The earliest return of an accepted cancel that cancelled the execution, if any.
fn cancelled_by(ops: &[&Op]) -> Option<i64> {
    ops.iter()
        .filter(|op| {
            op.result == OpResult::Accepted
                && matches!(&op.kind, OpKind::Cancel { result } if result == CANCELLED)
        })
        .map(|op| op.end_us)
        .min()
}

/// Whether a cancel may have cancelled the execution (returned `cancelled`, or its result is
/// unknown): rule 5 then accepts a `cancelled:` outcome in place of the derived one.
pub(super) fn may_be_cancelled(ops: &[&Op]) -> bool {
    ops.iter().any(|op| match &op.kind {
        OpKind::Cancel { result } => {
            op.result == OpResult::Unknown
                || (op.result == OpResult::Accepted && result == CANCELLED)
        }
        _ => false,
    })
}

/// Rule 6a and 6b: no fenced operation (any token) is accepted and no claim is granted when
/// invoked after a cancel that returned `cancelled` had returned.
pub(super) fn nothing_after_cancel(execution: &str, ops: &[&Op], out: &mut Vec<Violation>) {
    let Some(cancelled_at) = cancelled_by(ops) else {
        return;
    };
    for op in ops {
        if op.result != OpResult::Accepted || op.start_us <= cancelled_at {
            continue;
        }
        match op.kind {
            OpKind::Claim { .. } => out.push(Violation::ClaimedAfterCancel {
                execution: execution.into(),
                token: op.token,
            }),
            OpKind::Renew { .. }
            | OpKind::WriteStep { .. }
            | OpKind::Acknowledge { .. }
            | OpKind::Release { .. } => out.push(Violation::AcceptedAfterCancel {
                execution: execution.into(),
                token: op.token,
                op: op_name(&op.kind),
            }),
            _ => {}
        }
    }
}

/// Rule 6c: the final outcome read (invoked after the cancel returned) of a cancelled
/// execution is the cancelled outcome.
pub(super) fn reads_cancelled(execution: &str, ops: &[&Op], out: &mut Vec<Violation>) {
    let Some(cancelled_at) = cancelled_by(ops) else {
        return;
    };
    let last_read = ops
        .iter()
        .filter(|op| {
            op.result == OpResult::Accepted
                && op.start_us > cancelled_at
                && matches!(op.kind, OpKind::ReadOutcome { .. })
        })
        .max_by_key(|op| op.start_us);
    if let Some(OpKind::ReadOutcome { outcome }) = last_read.map(|op| &op.kind) {
        let found = outcome.as_deref().unwrap_or(MISSING);
        if !found.starts_with(CANCELLED_OUTCOME_PREFIX) {
            out.push(Violation::NotReadCancelled {
                execution: execution.into(),
                found: found.into(),
            });
        }
    }
}

/// Rule 6d: a cancel that returned `already_terminal` follows a terminal acknowledgement
/// invoked before the cancel returned (accepted, or of unknown result: its process may have
/// died before the reply).
pub(super) fn already_terminal_was_terminal(
    execution: &str,
    ops: &[&Op],
    out: &mut Vec<Violation>,
) {
    for cancel in ops {
        let claims_terminal = cancel.result == OpResult::Accepted
            && matches!(&cancel.kind, OpKind::Cancel { result } if result == ALREADY_TERMINAL);
        if !claims_terminal {
            continue;
        }
        let acknowledged = ops.iter().any(|op| {
            matches!(op.result, OpResult::Accepted | OpResult::Unknown)
                && op.start_us < cancel.end_us
                && matches!(&op.kind, OpKind::Acknowledge { outcome } if outcome != "suspended")
        });
        if !acknowledged {
            out.push(Violation::TerminalWithoutAcknowledgement {
                execution: execution.into(),
            });
        }
    }
}
