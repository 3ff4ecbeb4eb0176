//! Rule 10 (schedules): every occurrence a schedule settled was admitted, exactly once.
//!
//! The controller derives the settled occurrences' ids from the stored entry after the run
//! ([`super::CheckOptions::settled_occurrences`]: from the registration to the cursor, under
//! catch-up `All`). A scheduler advances the cursor only after its admissions returned, and
//! the recorder logs each admission before returning it, so every settled occurrence has an
//! accepted admission in some log, or a claim or final read that shows it exists; one with
//! none was never admitted. Admission is idempotent by id, so a second execution of one
//! occurrence can only be the id admitted again after its first execution was purged: two
//! claims that each showed a first delivery.

use std::collections::BTreeMap;

use super::op::{Op, OpKind, OpResult};
use super::options::CheckOptions;
use super::violation::Violation;

/// Rule 10: each settled occurrence exists, and was delivered first at most once.
pub(super) fn occurrences_admitted_once(
    by_exec: &BTreeMap<&str, Vec<&Op>>,
    options: &CheckOptions<'_>,
    out: &mut Vec<Violation>,
) {
    for id in &options.settled_occurrences {
        let ops = by_exec
            .get(id.as_str())
            .map(Vec::as_slice)
            .unwrap_or_default();
        if !ops.iter().any(|op| shows_existence(op)) {
            out.push(Violation::OccurrenceMissing {
                execution: id.clone(),
            });
        }
        // A lease released unstarted (`Release::NotStarted`) leaves the next claim a first
        // delivery too, so only first deliveries a worker started count: their holder wrote
        // a step or acknowledged (every torture workflow's delivery writes a step first).
        let started: Vec<u64> = ops
            .iter()
            .filter(|op| {
                op.result == OpResult::Accepted
                    && matches!(
                        op.kind,
                        OpKind::WriteStep { .. } | OpKind::Acknowledge { .. }
                    )
            })
            .map(|op| op.token)
            .collect();
        let first_deliveries = ops
            .iter()
            .filter(|op| {
                op.result == OpResult::Accepted
                    && matches!(
                        op.kind,
                        OpKind::Claim {
                            first_delivery: true,
                            ..
                        }
                    )
                    && started.contains(&op.token)
            })
            .count();
        if first_deliveries > 1 {
            out.push(Violation::OccurrenceAdmittedTwice {
                execution: id.clone(),
                first_deliveries,
            });
        }
    }
}

/// Whether `op` shows its execution existed: an accepted admission, claim or final read
/// that found it.
fn shows_existence(op: &Op) -> bool {
    op.result == OpResult::Accepted
        && matches!(
            op.kind,
            OpKind::Admit { .. }
                | OpKind::Claim { .. }
                | OpKind::ReadStep { .. }
                | OpKind::ReadOutcome { .. }
        )
}
