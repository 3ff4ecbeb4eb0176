//! Rule 8 (pause and resume): no claim commits while the namespace is paused.
//!
//! A pause and a resume return no backend instant, so the rule reads real-time intervals
//! only, as rule 6 does: a claim call is reported when a pause that returned accepted had
//! returned before the call was invoked, and no resume may have committed between that
//! pause's commit and the call's return. A resume may have committed there when it was
//! invoked before the call returned and either returned after the pause was invoked, or
//! its result is unknown (a reply lost in a fault may hide a commit much later than the
//! call that sent it). A resume that certainly failed changed nothing. Pauses of unknown
//! result open no window: only an accepted one proves the namespace was paused.

use super::op::{Op, OpKind, OpResult};
use super::violation::Violation;

/// Rule 8: every accepted claim against every certain pause window.
pub(super) fn nothing_claimed_while_paused(ops: &[Op], out: &mut Vec<Violation>) {
    let pauses: Vec<&Op> = ops
        .iter()
        .filter(|op| op.kind == OpKind::Pause && op.result == OpResult::Accepted)
        .collect();
    if pauses.is_empty() {
        return;
    }
    let resumes: Vec<&Op> = ops
        .iter()
        .filter(|op| op.kind == OpKind::Resume && op.result != OpResult::Failed)
        .collect();
    for claim in ops.iter().filter(|op| is_claim(op)) {
        let paused_by = pauses
            .iter()
            .filter(|pause| pause.end_us < claim.start_us)
            .find(|pause| !resumes.iter().any(|r| may_resume_before(r, pause, claim)));
        if let Some(pause) = paused_by {
            out.push(Violation::ClaimedWhilePaused {
                execution: claim.execution.clone(),
                token: claim.token,
                paused_at_us: pause.end_us,
            });
        }
    }
}

fn is_claim(op: &Op) -> bool {
    matches!(op.kind, OpKind::Claim { .. }) && op.result == OpResult::Accepted
}

/// Whether `resume` may have committed after `pause` committed and before `claim` did.
fn may_resume_before(resume: &Op, pause: &Op, claim: &Op) -> bool {
    resume.start_us < claim.end_us
        && (resume.result == OpResult::Unknown || resume.end_us > pause.start_us)
}
