//! Operator controls over what runs: cancel, pause and resume, priorities and
//! per-key concurrency limits. Each is exact through the fencing token: once a control's
//! atomic step commits, no process claims against it and a holder it ended is `Lost`.
//!
//! The values here are validated on construction (a typed `InvalidInput`, nothing changes);
//! the transitions they drive live in [`crate::execution`] and the backends.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{LeaseError, Result};
use crate::ids::{ConcurrencyKey, WorkflowName};

/// `TryFrom<raw>` through the validating `new` and `From<type> for raw`, for the newtypes
/// here (serde's `try_from`/`into` go through them).
macro_rules! raw_conversions {
    ($($ty:ident($raw:ty)),* $(,)?) => {$(
        impl TryFrom<$raw> for $ty {
            type Error = LeaseError;
            fn try_from(value: $raw) -> Result<Self> {
                Self::new(value)
            }
        }

        impl From<$ty> for $raw {
            fn from(value: $ty) -> Self {
                value.0
            }
        }
    )*};
}

raw_conversions!(CancelReason(String), Priority(i32), ConcurrencyLimit(u32));

/// The longest cancel reason, in bytes of UTF-8.
pub const MAX_REASON_BYTES: usize = 1024;
/// The highest (claimed first) [`Priority`].
pub const MAX_PRIORITY: i32 = 1000;
/// The lowest (claimed last) [`Priority`].
pub const MIN_PRIORITY: i32 = -1000;
/// The largest per-key [`ConcurrencyLimit`].
pub const MAX_CONCURRENCY_LIMIT: u32 = 100_000;

/// Why an execution was cancelled: stored in its [`crate::ExecutionOutcome::Cancelled`], shown by
/// `lease show`. 1 to [`MAX_REASON_BYTES`] bytes, no control characters but newline and tab.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CancelReason(String);

impl CancelReason {
    /// Validates a reason: empty, over-long or control-character input is `InvalidInput`.
    pub fn new(reason: impl Into<String>) -> Result<Self> {
        let reason = reason.into();
        if reason.is_empty() {
            return Err(LeaseError::invalid("cancel reason", "must not be empty"));
        }
        if reason.len() > MAX_REASON_BYTES {
            return Err(LeaseError::invalid(
                "cancel reason",
                format!(
                    "{} bytes, over the limit of {MAX_REASON_BYTES}",
                    reason.len()
                ),
            ));
        }
        if reason
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
        {
            return Err(LeaseError::invalid(
                "cancel reason",
                "must not contain control characters",
            ));
        }
        Ok(CancelReason(reason))
    }

    /// A reason a backend read back from its own storage: kept as stored, so a record is
    /// never refused for its reason (a backend validated it when it was written).
    pub fn from_stored(reason: impl Into<String>) -> Self {
        CancelReason(reason.into())
    }

    /// The reason as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for CancelReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CancelReason({:?})", self.0)
    }
}

impl fmt::Display for CancelReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What [`crate::ExecutionClient::pause`] and `resume` act on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "scope", content = "workflow")]
pub enum PauseScope {
    /// Every execution of the namespace (or PostgreSQL schema).
    Namespace,
    /// The executions admitted with this workflow name.
    Workflow(WorkflowName),
}

impl PauseScope {
    /// True when this scope holds back an execution of `workflow`.
    pub fn covers(&self, workflow: Option<&WorkflowName>) -> bool {
        match self {
            PauseScope::Namespace => true,
            PauseScope::Workflow(w) => workflow == Some(w),
        }
    }
}

impl fmt::Display for PauseScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PauseScope::Namespace => f.write_str("namespace"),
            PauseScope::Workflow(w) => write!(f, "workflow {w}"),
        }
    }
}

/// An execution's priority: claims take higher priorities first, then the
/// earliest due, then the smallest id. [`MIN_PRIORITY`] to [`MAX_PRIORITY`]; the default is 0.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(try_from = "i32", into = "i32")]
pub struct Priority(i32);

impl Priority {
    /// The priority of an admission that names none.
    pub const DEFAULT: Priority = Priority(0);

    /// Validates a priority: outside [`MIN_PRIORITY`]..=[`MAX_PRIORITY`] is `InvalidInput`.
    pub fn new(value: i32) -> Result<Self> {
        if !(MIN_PRIORITY..=MAX_PRIORITY).contains(&value) {
            return Err(LeaseError::invalid(
                "priority",
                format!("{value} is outside {MIN_PRIORITY}..={MAX_PRIORITY}"),
            ));
        }
        Ok(Priority(value))
    }

    /// A priority a backend read back from its own storage (validated when written).
    pub fn from_stored(value: i64) -> Self {
        Priority(i32::try_from(value.clamp(MIN_PRIORITY.into(), MAX_PRIORITY.into())).unwrap_or(0))
    }

    /// The value.
    pub fn get(self) -> i32 {
        self.0
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The most live leases one concurrency key may have at once: 1 to
/// [`MAX_CONCURRENCY_LIMIT`] (pause a workflow to hold everything back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u32", into = "u32")]
pub struct ConcurrencyLimit(u32);

impl ConcurrencyLimit {
    /// Validates a limit: 0 or over [`MAX_CONCURRENCY_LIMIT`] is `InvalidInput`.
    pub fn new(value: u32) -> Result<Self> {
        if value == 0 || value > MAX_CONCURRENCY_LIMIT {
            return Err(LeaseError::invalid(
                "concurrency limit",
                format!("{value} is outside 1..={MAX_CONCURRENCY_LIMIT}"),
            ));
        }
        Ok(ConcurrencyLimit(value))
    }

    /// A limit a backend read back from its own storage (validated when written).
    pub fn from_stored(value: i64) -> Self {
        ConcurrencyLimit(u32::try_from(value.clamp(1, MAX_CONCURRENCY_LIMIT.into())).unwrap_or(1))
    }

    /// The value.
    pub fn get(self) -> u32 {
        self.0
    }
}

/// Which limit [`crate::ExecutionClient::set_concurrency_limit`] sets.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "scope", content = "key")]
pub enum LimitScope {
    /// The namespace default: applies to every key without a limit of its own.
    Default,
    /// One key.
    Key(ConcurrencyKey),
}

/// The concurrency limits of a namespace, as [`crate::ExecutionClient::concurrency_limits`]
/// reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConcurrencyLimits {
    /// The namespace default, for keys without their own limit; `None`: unlimited.
    pub default: Option<ConcurrencyLimit>,
    /// Keys with their own limit, by key.
    pub keys: Vec<(ConcurrencyKey, ConcurrencyLimit)>,
}

impl ConcurrencyLimits {
    /// Sets (or with `None` removes) the limit of `scope`, keeping the keys' limits in key
    /// order (RFC 002 controls: `set_concurrency_limit`).
    pub fn set(&mut self, scope: &LimitScope, limit: Option<ConcurrencyLimit>) {
        match scope {
            LimitScope::Default => self.default = limit,
            LimitScope::Key(key) => crate::named::set_sorted(&mut self.keys, key, limit),
        }
    }

    /// The limit that applies to `key`: its own, else the default; `None` for no key or no
    /// limit (unlimited).
    pub fn of(&self, key: Option<&ConcurrencyKey>) -> Option<ConcurrencyLimit> {
        let key = key?;
        self.keys
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, l)| *l)
            .or(self.default)
    }
}
