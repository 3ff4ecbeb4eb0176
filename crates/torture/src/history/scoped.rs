//! Per-key or namespace-wide settings read back from the log (rules 11 to 13): which
//! values a setting may have had when a claim committed.
//!
//! A set's commit lies somewhere in its interval, so at a claim call invoked at `start_us`
//! and returned at `end_us` a scope may hold the value of every set that may have committed
//! before the claim (invoked before `end_us`) and was not certainly overwritten before it
//! (by an accepted set of the same scope invoked after it returned and returned before
//! `start_us`), and its initial value while no accepted set certainly came before. Rule 7
//! reads its limits the same way.

use super::op::{Op, OpResult};

/// One logged set of a setting: the operation, its scope (`None`: the namespace default)
/// and the value it set.
pub(super) struct Set<'a, T> {
    /// The logged call.
    pub op: &'a Op,
    /// The key (or workflow) it set; `None`: the namespace default.
    pub scope: Option<&'a str>,
    /// The value it set.
    pub value: T,
}

/// Every set `read` recognises among the operations that may have taken effect.
pub(super) fn sets_of<'a, T>(
    ops: &'a [Op],
    read: impl Fn(&'a Op) -> Option<(Option<&'a str>, T)>,
) -> Vec<Set<'a, T>> {
    ops.iter()
        .filter(|op| matches!(op.result, OpResult::Accepted | OpResult::Unknown))
        .filter_map(|op| read(op).map(|(scope, value)| Set { op, scope, value }))
        .collect()
}

/// The sets of `scope` whose value it may have held at a commit inside `start_us..end_us`;
/// `None` in the list: the initial value (never set) is possible too.
pub(super) fn possible<'s, 'a, T>(
    sets: &'s [Set<'a, T>],
    scope: Option<&str>,
    start_us: i64,
    end_us: i64,
) -> Vec<Option<&'s Set<'a, T>>> {
    let of_scope: Vec<&Set<'a, T>> = sets.iter().filter(|s| s.scope == scope).collect();
    let certain = |op: &Op| op.result == OpResult::Accepted && op.end_us < start_us;
    let mut values: Vec<Option<&Set<'a, T>>> = of_scope
        .iter()
        .filter(|s| {
            s.op.start_us < end_us
                && !of_scope
                    .iter()
                    .any(|later| certain(later.op) && s.op.end_us < later.op.start_us)
        })
        .map(|s| Some(*s))
        .collect();
    if !of_scope.iter().any(|s| certain(s.op)) {
        values.push(None);
    }
    values
}
