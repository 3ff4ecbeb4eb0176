//! Rule 2: at most one live lease of an execution at any instant (backend clock).

use super::op::{Op, OpKind, OpResult};
use super::violation::Violation;

/// Rule 2: At most one live lease at any instant (backend clock). A lease is live from its
/// claim until its latest accepted expiry, unless an accepted release or
/// acknowledgement ended it first. A fenced operation is only accepted while its token
/// is current, so every accepted release, acknowledgement or renewal of an earlier
/// lease that may have committed before the later claim (it was invoked before the
/// claim returned) did commit before it; one invoked after the claim returned is a
/// stale acceptance, reported by check 3. A release or acknowledgement whose outcome
/// is unknown (its reply never came) may have ended the lease too.
pub(super) fn one_live_lease(
    execution: &str,
    ops: &[&Op],
    claims: &[&Op],
    out: &mut Vec<Violation>,
) {
    let mut ordered = claims.to_vec();
    ordered.sort_by_key(|c| c.token);
    for (i, next) in ordered.iter().enumerate() {
        let OpKind::Claim {
            expires_at: next_expiry,
            duration_ms,
            ..
        } = next.kind
        else {
            continue;
        };
        let claimed_at = next_expiry - duration_ms;
        for prev in &ordered[..i] {
            let before_next = |op: &&&Op| {
                op.token == prev.token
                    && op.result == OpResult::Accepted
                    && op.start_us < next.end_us
            };
            let ended_before = ops.iter().any(|op| {
                op.token == prev.token
                    && matches!(op.result, OpResult::Accepted | OpResult::Unknown)
                    && op.start_us < next.end_us
                    && matches!(op.kind, OpKind::Release { .. } | OpKind::Acknowledge { .. })
            });
            if ended_before {
                continue;
            }
            let OpKind::Claim { expires_at, .. } = prev.kind else {
                continue;
            };
            let live_until = ops
                .iter()
                .filter(before_next)
                .filter_map(|op| match op.kind {
                    OpKind::Renew {
                        expires_at: Some(e),
                    } => Some(e),
                    _ => None,
                })
                .fold(expires_at, i64::max);
            if claimed_at < live_until {
                out.push(Violation::OverlappingLeases {
                    execution: execution.into(),
                    live: prev.token,
                    claimed: next.token,
                });
            }
        }
    }
}
