//! Operation counts for the report: the names of operation kinds and results, and the
//! per-kind, per-result counts of a history.

use std::collections::BTreeMap;

use crate::history::{Op, OpKind, OpResult};

/// Operation counts by kind, then by result.
pub type OpCounts = BTreeMap<&'static str, BTreeMap<&'static str, u64>>;

/// The kind name of an operation.
pub fn kind_name(kind: &OpKind) -> &'static str {
    match kind {
        OpKind::Claim { .. } => "claim",
        OpKind::Renew { .. } => "renew",
        OpKind::WriteStep { .. } => "write_step",
        OpKind::Acknowledge { .. } => "acknowledge",
        OpKind::Release { .. } => "release",
        OpKind::ReadStep { .. } => "read_step",
        OpKind::ReadOutcome { .. } => "read_outcome",
        OpKind::Cancel { .. } => "cancel",
        OpKind::Admit { .. } => "admit",
        OpKind::SetLimit { .. } => "set_limit",
        OpKind::Pause => "pause",
        OpKind::Resume => "resume",
        OpKind::ReadDead => "read_dead",
        OpKind::SetAttemptLimit { .. } => "set_attempt_limit",
        OpKind::SetRateLimit { .. } => "set_rate_limit",
        OpKind::SetKeyOrdering { .. } => "set_key_ordering",
    }
}

/// The result name of an operation.
pub fn result_name(r: OpResult) -> &'static str {
    match r {
        OpResult::Accepted => "accepted",
        OpResult::Lost => "lost",
        OpResult::Failed => "failed",
        OpResult::Unknown => "unknown",
    }
}

/// Counts `ops` by kind and result.
pub fn count_ops(ops: &[Op]) -> OpCounts {
    let mut m = OpCounts::new();
    for op in ops {
        *m.entry(kind_name(&op.kind))
            .or_default()
            .entry(result_name(op.result))
            .or_default() += 1;
    }
    m
}
