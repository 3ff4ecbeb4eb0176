//! What the checker needs besides the log: liveness and the derived step values and outcomes.

use std::collections::BTreeSet;

/// Derives the value a step must hold from (execution, step key, step attempt), when known.
pub type ExpectedStep<'a> = &'a dyn Fn(&str, &str, u32) -> Option<String>;

/// Derives the terminal outcome (`completed:<json>` / `failed:<json>`) of an execution, when
/// known.
pub type ExpectedOutcome<'a> = &'a dyn Fn(&str) -> Option<String>;

/// What the checker needs besides the log.
#[derive(Default)]
pub struct CheckOptions<'a> {
    /// Executions that must have completed (liveness); empty = no liveness check.
    pub must_complete: BTreeSet<String>,
    /// Liveness bound: the completing acknowledgement (or final read) must have returned by
    /// this time (microseconds), e.g. the end of the fault schedule plus the allowed recovery.
    pub complete_by_us: Option<i64>,
    /// The value a step must hold, derived from execution and step key, when known.
    pub expected_step: Option<ExpectedStep<'a>>,
    /// The terminal outcome an execution must reach, derived from its id, when known.
    pub expected_outcome: Option<ExpectedOutcome<'a>>,
    /// The backend's claims skip rows other claims hold locked (PostgreSQL's `SKIP
    /// LOCKED`), so a claim may legitimately pass over a higher priority: rule 9 is not
    /// judged.
    pub claims_skip_locked: bool,
    /// The execution ids of every occurrence the run's schedule settled (rule 10; empty:
    /// no schedule).
    pub settled_occurrences: BTreeSet<String>,
}
