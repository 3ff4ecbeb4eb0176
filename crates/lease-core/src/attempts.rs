//! Attempt limits and dead letters: how many deliveries a worker may start and leave
//! unacknowledged before the execution is parked as [`crate::ExecutionStatus::Dead`] for an
//! operator, what a release says about the delivery it ends, and the last error kept on the
//! record.
//!
//! An attempt is a delivery a worker started that ended without an acknowledgement (an
//! error, a panic, a retry reply, a lease expiry, its process gone). A lease never handed to
//! a worker ([`Release::NotStarted`]) is no attempt. The attempts counted are
//! [`crate::ExecutionRecord::unacknowledged_deliveries`], the same consecutive count the
//! redelivery delay reads, so an acknowledgement (a suspension included) starts again at 0.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{LeaseError, Result};
use crate::ids::WorkflowName;
use crate::time::Timestamp;

/// The largest [`AttemptLimit`].
pub const MAX_ATTEMPT_LIMIT: u32 = 10_000;
/// The longest error message kept on a record, in bytes of UTF-8 (longer ones are cut on a
/// character boundary).
pub const MAX_ERROR_MESSAGE_BYTES: usize = 2048;
/// The longest error kind kept on a record, in bytes of UTF-8 (cut likewise).
pub const MAX_ERROR_KIND_BYTES: usize = 64;

/// The most attempts an execution may use before it is dead: 1 to [`MAX_ATTEMPT_LIMIT`].
/// "Unlimited" is no limit at all (`None` where a limit is optional), never a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u32", into = "u32")]
pub struct AttemptLimit(u32);

impl AttemptLimit {
    /// Validates a limit: 0 or over [`MAX_ATTEMPT_LIMIT`] is `InvalidInput`.
    pub fn new(value: u32) -> Result<Self> {
        if value == 0 || value > MAX_ATTEMPT_LIMIT {
            return Err(LeaseError::invalid(
                "attempt limit",
                format!("{value} is outside 1..={MAX_ATTEMPT_LIMIT}"),
            ));
        }
        Ok(AttemptLimit(value))
    }

    /// A limit a backend read back from its own storage (validated when written).
    pub fn from_stored(value: i64) -> Self {
        AttemptLimit(u32::try_from(value.clamp(1, MAX_ATTEMPT_LIMIT.into())).unwrap_or(1))
    }

    /// The value.
    pub fn get(self) -> u32 {
        self.0
    }

    /// True when `attempts` used attempts leave none.
    pub fn exhausted_by(self, attempts: u32) -> bool {
        attempts >= self.0
    }
}

impl TryFrom<u32> for AttemptLimit {
    type Error = LeaseError;
    fn try_from(value: u32) -> Result<Self> {
        Self::new(value)
    }
}

impl From<AttemptLimit> for u32 {
    fn from(value: AttemptLimit) -> Self {
        value.0
    }
}

impl fmt::Display for AttemptLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Which limit [`crate::ExecutionClient::set_attempt_limit`] sets.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "scope", content = "workflow")]
pub enum AttemptScope {
    /// The namespace default: applies to every workflow without a limit of its own (and to
    /// executions admitted without a workflow name).
    Default,
    /// One workflow name.
    Workflow(WorkflowName),
}

/// The attempt limits of a namespace, as [`crate::ExecutionClient::attempt_limits`] reads
/// them. No limit anywhere (the default) is today's behaviour: redelivered for ever.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptLimits {
    /// The namespace default; `None`: unlimited.
    pub default: Option<AttemptLimit>,
    /// Workflows with their own limit, by name.
    pub workflows: Vec<(WorkflowName, AttemptLimit)>,
}

impl AttemptLimits {
    /// The limit of an execution of `workflow`: the workflow's own, else the default.
    pub fn of(&self, workflow: Option<&WorkflowName>) -> Option<AttemptLimit> {
        workflow
            .and_then(|w| self.workflows.iter().find(|(name, _)| name == w))
            .map(|(_, l)| *l)
            .or(self.default)
    }

    /// Sets (`Some`) or removes (`None`) one limit, keeping the workflows sorted by name.
    pub fn set(&mut self, scope: &AttemptScope, limit: Option<AttemptLimit>) {
        match scope {
            AttemptScope::Default => self.default = limit,
            AttemptScope::Workflow(name) => {
                crate::named::set_sorted(&mut self.workflows, name, limit)
            }
        }
    }
}

/// What a worker's failed attempt reports: a short kind (`"error"`, `"panic"`, ...) and a
/// message, both cut to their bounds ([`MAX_ERROR_KIND_BYTES`], [`MAX_ERROR_MESSAGE_BYTES`])
/// on construction, never refused: an error text is whatever the worker produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorNote {
    kind: String,
    message: String,
}

impl ErrorNote {
    /// A note of `kind` with `message`, each cut to its bound on a character boundary.
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> Self {
        ErrorNote {
            kind: truncated(kind.into(), MAX_ERROR_KIND_BYTES),
            message: truncated(message.into(), MAX_ERROR_MESSAGE_BYTES),
        }
    }

    /// The kind.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn truncated(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// How the delivery that [`crate::ExecutionClient::release_with`] ends went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    /// No worker ever started it (a prefetched lease its dispatcher could not start): no
    /// attempt. The counter and the redelivery delay stay as they were and the execution is
    /// due again at once; only the token moved on.
    NotStarted,
    /// The worker failed (an error or a panic): an attempt, kept as the last error.
    Failed(ErrorNote),
    /// The worker asked to be delivered again (RFC 002 "a delivery replies retry"): an
    /// attempt. Plain [`crate::ExecutionClient::release`] means this.
    Retry,
}

impl Release {
    /// The note this release keeps as the last error; `None` when it is no attempt.
    pub fn note(&self) -> Option<ErrorNote> {
        match self {
            Release::NotStarted => None,
            Release::Failed(note) => Some(note.clone()),
            Release::Retry => Some(ErrorNote::new(
                LastError::RETRY,
                "the worker asked to be delivered again",
            )),
        }
    }
}

/// The last failed attempt of an execution, kept on its record
/// ([`crate::ExecutionRecord::last_error`]) until a later one replaces it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastError {
    /// What kind of failure ([`LastError::LEASE_EXPIRED`], [`LastError::RETRY`], or what
    /// the worker reported: the dispatcher sends `"error"` and `"panic"`).
    pub kind: String,
    /// Its message, at most [`MAX_ERROR_MESSAGE_BYTES`].
    pub message: String,
    /// The attempt it ended (1 for the first).
    pub attempt: u32,
    /// When it ended, on the backend clock (for an expiry: the lease's expiry).
    pub at: Timestamp,
}

impl LastError {
    /// The kind of an attempt whose lease expired unacknowledged.
    pub const LEASE_EXPIRED: &'static str = "lease_expired";
    /// The kind of an attempt whose worker replied retry.
    pub const RETRY: &'static str = "retry";

    /// The last error of attempt `attempt`, ended at `at` with `note`.
    pub fn new(note: ErrorNote, attempt: u32, at: Timestamp) -> Self {
        LastError {
            kind: note.kind,
            message: note.message,
            attempt,
            at,
        }
    }

    /// The note of an attempt whose lease expired.
    pub fn expiry_note() -> ErrorNote {
        ErrorNote::new(
            Self::LEASE_EXPIRED,
            "the lease expired before the delivery was acknowledged",
        )
    }
}

impl fmt::Display for LastError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "attempt {} at {} ms: {}: {}",
            self.attempt,
            self.at.as_millis(),
            self.kind,
            self.message
        )
    }
}

/// Validates the ids of a [`crate::ExecutionClient::retry_dead`] call before anything is
/// written: 1 to [`crate::limits::MAX_ADMIT_BATCH`] ids, none twice.
pub fn check_retry_ids(ids: &[crate::ExecutionId]) -> Result<()> {
    if ids.is_empty() || ids.len() > crate::limits::MAX_ADMIT_BATCH {
        return Err(LeaseError::invalid(
            "retry_dead ids",
            format!(
                "{} ids, outside 1..={}",
                ids.len(),
                crate::limits::MAX_ADMIT_BATCH
            ),
        ));
    }
    let mut seen = std::collections::HashSet::with_capacity(ids.len());
    if let Some(twice) = ids.iter().find(|id| !seen.insert(*id)) {
        return Err(LeaseError::invalid(
            "retry_dead ids",
            format!("execution {twice} appears twice"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_of_zero_or_over_the_maximum_is_refused() {
        for bad in [0, MAX_ATTEMPT_LIMIT + 1, u32::MAX] {
            assert!(matches!(
                AttemptLimit::new(bad),
                Err(LeaseError::InvalidInput { .. })
            ));
        }
        assert_eq!(AttemptLimit::new(1).expect("1").get(), 1);
        assert_eq!(
            AttemptLimit::new(MAX_ATTEMPT_LIMIT).expect("max").get(),
            MAX_ATTEMPT_LIMIT
        );
    }

    #[test]
    fn a_message_is_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_ERROR_MESSAGE_BYTES);
        let note = ErrorNote::new("k".repeat(100), long);
        assert_eq!(note.kind().len(), MAX_ERROR_KIND_BYTES);
        assert!(note.message().len() <= MAX_ERROR_MESSAGE_BYTES);
        assert!(note.message().len() > MAX_ERROR_MESSAGE_BYTES - 2);
        assert!(note.message().chars().all(|c| c == 'é'));
    }

    #[test]
    fn a_workflow_limit_overrides_the_default() {
        let mut limits = AttemptLimits::default();
        let w = WorkflowName::new("w").expect("name");
        let other = WorkflowName::new("other").expect("name");
        assert_eq!(limits.of(Some(&w)), None, "unlimited by default");
        limits.set(&AttemptScope::Default, Some(AttemptLimit(5)));
        limits.set(&AttemptScope::Workflow(w.clone()), Some(AttemptLimit(2)));
        assert_eq!(limits.of(Some(&w)), Some(AttemptLimit(2)));
        assert_eq!(limits.of(Some(&other)), Some(AttemptLimit(5)));
        assert_eq!(limits.of(None), Some(AttemptLimit(5)));
        limits.set(&AttemptScope::Workflow(w.clone()), None);
        assert_eq!(limits.of(Some(&w)), Some(AttemptLimit(5)));
    }
}
