//! The history's record: one [`Op`] per logged call (what it did, how it ended, when).
//!
//! Each [`Op`] carries the real-time interval in which it was invoked and returned
//! (`start_us..end_us`, microseconds on one machine-wide clock such as the system clock, so
//! logs of several processes on one host merge).

use serde::{Deserialize, Serialize};

/// What an operation did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum OpKind {
    /// `claim_due` issued this lease (`token`) with this expiry and duration (backend ms).
    Claim {
        /// Lease expiry, backend clock ms.
        expires_at: i64,
        /// Lease duration in ms (so the backend's claim time is `expires_at - duration_ms`).
        duration_ms: i64,
        /// The claimed record showed no earlier delivery (`ExecutionRecord::is_first_delivery`:
        /// none ended unacknowledged or suspended), so no claim of it, logged or lost,
        /// committed before this one (rule 9). `false`: not shown.
        #[serde(default)]
        first_delivery: bool,
    },
    /// `renew`; on acceptance the new expiry.
    Renew {
        /// New expiry when accepted.
        expires_at: Option<i64>,
    },
    /// `write_step`; on acceptance the recorded value the backend returned.
    WriteStep {
        /// Step key.
        step_key: String,
        /// Step attempt.
        step_attempt: u32,
        /// The value the worker tried to write.
        written: String,
        /// The recorded value returned when accepted.
        recorded: Option<String>,
    },
    /// `acknowledge`; the outcome sent (`"suspended"` or the terminal JSON).
    Acknowledge {
        /// `suspended`, or `completed:<json>` / `failed:<json>`.
        outcome: String,
    },
    /// `release` or `release_with`.
    Release {
        /// Sent as [`lease_core::Release::NotStarted`]: no worker ran the delivery, so it
        /// is no attempt (rule 11).
        #[serde(default)]
        unstarted: bool,
    },
    /// A final read of a step record after the run.
    ReadStep {
        /// Step key.
        step_key: String,
        /// Step attempt.
        step_attempt: u32,
        /// The value read, if any.
        value: Option<String>,
    },
    /// A final read of an execution's terminal outcome after the run.
    ReadOutcome {
        /// `completed:<json>` / `failed:<json>` / `cancelled:<reason>`, or `None` when not
        /// terminal.
        outcome: Option<String>,
    },
    /// `cancel`; token 0. On acceptance what it found: `cancelled`,
    /// `already_cancelled` or `already_terminal`.
    Cancel {
        /// `cancelled` / `already_cancelled` / `already_terminal`; empty when not accepted.
        result: String,
    },
    /// An admission (for history rule 7), logged by the controller with
    /// token 0: the execution's concurrency key and priority as admitted.
    Admit {
        /// The concurrency key, if any.
        key: Option<String>,
        /// The priority (0 when none was set).
        priority: i32,
        /// The due time the admission returned, backend ms (rule 9; `None`: not known).
        #[serde(default)]
        due_at: Option<i64>,
        /// The workflow named at admission, whose own attempt limit applies to it (rule 11;
        /// `None`: none named, the namespace default applies).
        #[serde(default)]
        workflow: Option<String>,
    },
    /// `set_concurrency_limit` (history rule 7), logged by the controller with token 0 and an
    /// empty execution: which limit and its new value.
    SetLimit {
        /// The key whose own limit is set; `None`: the namespace default.
        key: Option<String>,
        /// The new limit; `None`: removed (the key falls back to the default, the default
        /// to unlimited).
        limit: Option<u32>,
    },
    /// `pause` of the namespace (rule 8), logged by the controller with token 0 and an empty
    /// execution.
    Pause,
    /// `resume` of the namespace (rule 8), logged like [`OpKind::Pause`].
    Resume,
    /// A read that found the execution dead (its attempts ran out; rule 11), logged with
    /// the read's interval next to its `ReadOutcome` (which shows no outcome).
    ReadDead,
    /// `set_attempt_limit` of the namespace default or of one workflow (rule 11), logged by
    /// the controller with token 0 and an empty execution.
    SetAttemptLimit {
        /// The workflow whose own limit is set; `None`: the namespace default.
        #[serde(default)]
        workflow: Option<String>,
        /// The new limit; `None`: unlimited.
        limit: Option<u32>,
    },
    /// `set_rate_limit` (rule 12), logged like [`OpKind::SetLimit`].
    SetRateLimit {
        /// The key whose own rate is set; `None`: the namespace default.
        key: Option<String>,
        /// The new rate; `None`: removed.
        rate: Option<Rate>,
    },
    /// `set_key_ordering` (rule 13), logged like [`OpKind::SetLimit`].
    SetKeyOrdering {
        /// The key marked or unmarked; `None`: every key (the namespace default).
        key: Option<String>,
        /// Marked ordered (`true`) or unmarked.
        ordered: bool,
    },
}

/// A rate limit as the log keeps it: at most `starts` claims of a key in any window of
/// `period_ms` of the backend clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rate {
    /// Claims allowed per window.
    pub starts: u32,
    /// The window, backend ms.
    pub period_ms: i64,
}

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpResult {
    /// Accepted with the current token (or a successful read / claim).
    Accepted,
    /// Refused: `Fenced::Lost`.
    Lost,
    /// Failed before taking effect.
    Failed,
    /// May or may not have taken effect (`LeaseError::OutcomeUnknown`, or invoked by a
    /// process that died before the reply came; then `end_us` is `i64::MAX`).
    Unknown,
}

/// One logged operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// Which runtime process made it.
    pub process: u32,
    /// The execution.
    pub execution: String,
    /// The lease token the operation carried (or issued, for a claim).
    pub token: u64,
    /// Invocation time, microseconds.
    pub start_us: i64,
    /// Return time, microseconds.
    pub end_us: i64,
    /// What it did.
    pub kind: OpKind,
    /// How it ended.
    pub result: OpResult,
}

/// The operation's name as a violation reports it (`claim`, `write_step <key>`, ...).
pub(super) fn op_name(kind: &OpKind) -> String {
    match kind {
        OpKind::Claim { .. } => "claim".into(),
        OpKind::Renew { .. } => "renew".into(),
        OpKind::WriteStep { step_key, .. } => format!("write_step {step_key}"),
        OpKind::Acknowledge { outcome } => format!("acknowledge {outcome}"),
        OpKind::Release { unstarted: false } => "release".into(),
        OpKind::Release { unstarted: true } => "release not_started".into(),
        OpKind::ReadStep { .. } => "read_step".into(),
        OpKind::ReadOutcome { .. } => "read_outcome".into(),
        OpKind::Cancel { result } => format!("cancel {result}"),
        OpKind::Admit { .. } => "admit".into(),
        OpKind::SetLimit { .. } => "set_limit".into(),
        OpKind::Pause => "pause".into(),
        OpKind::Resume => "resume".into(),
        OpKind::ReadDead => "read_dead".into(),
        OpKind::SetAttemptLimit { .. } => "set_attempt_limit".into(),
        OpKind::SetRateLimit { .. } => "set_rate_limit".into(),
        OpKind::SetKeyOrdering { .. } => "set_key_ordering".into(),
    }
}

/// How an error is logged: `Failed` when it certainly changed nothing, else `Unknown`.
pub fn error_result(e: &lease_core::LeaseError) -> OpResult {
    if e.is_retryable() || e.is_bad_input() {
        OpResult::Failed
    } else {
        OpResult::Unknown
    }
}
