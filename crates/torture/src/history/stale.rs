//! Rule 3: nothing is accepted with a token lower than one issued before it was invoked.

use super::op::{Op, OpKind, OpResult, op_name};
use super::violation::Violation;

/// Rule 3: every fenced operation accepted with a token older than a claim that returned
/// before it was invoked.
pub(super) fn nothing_stale_accepted(
    execution: &str,
    ops: &[&Op],
    claims: &[&Op],
    out: &mut Vec<Violation>,
) {
    for op in ops {
        let fenced = matches!(
            op.kind,
            OpKind::Renew { .. }
                | OpKind::WriteStep { .. }
                | OpKind::Acknowledge { .. }
                | OpKind::Release { .. }
        );
        if !fenced || op.result != OpResult::Accepted {
            continue;
        }
        if let Some(newer) = claims
            .iter()
            .filter(|c| c.token > op.token && c.end_us < op.start_us)
            .map(|c| c.token)
            .max()
        {
            out.push(Violation::StaleAccepted {
                execution: execution.into(),
                token: op.token,
                newer,
                op: op_name(&op.kind),
            });
        }
    }
}
