//! The refusal words every fenced script shares (`unknown`, `zero`, `foreign`, `lost`) and
//! what they mean to the caller.

use lease_core::{ExecutionLease, LeaseError, Result};

use crate::reply::Reply;

/// The typed error for the refusal words every fenced script shares: `unknown` (no such
/// execution), `zero` (token 0) and `foreign` (a token above the execution's own); `None`
/// for any other word.
pub(crate) fn refusal(status: &str, lease: &ExecutionLease) -> Option<LeaseError> {
    match status {
        "unknown" => Some(LeaseError::UnknownExecution(lease.execution_id.clone())),
        "zero" => Some(LeaseError::invalid("lease token", "0 is never issued")),
        "foreign" => Some(LeaseError::ForeignToken {
            execution: lease.execution_id.clone(),
            token: lease.token,
        }),
        _ => None,
    }
}

/// Interprets the status words every fenced script shares: `Ok(true)` for `lost`,
/// `Ok(false)` for the words the caller handles (`ok`, `new`, `existing`), or the
/// [`refusal`] error.
pub(crate) fn is_lost(reply: Reply, status: &str, lease: &ExecutionLease) -> Result<bool> {
    if let Some(e) = refusal(status, lease) {
        return Err(e);
    }
    match status {
        "lost" => Ok(true),
        "ok" | "new" | "existing" => Ok(false),
        other => Err(reply.unexpected(other)),
    }
}
