//! Typed errors. `Lost` is *not* an error: it is [`crate::Fenced::Lost`].

use crate::{EffectId, ExecutionId, FencingToken};

/// A boxed source error from a backend driver.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result alias used across the crate.
pub type Result<T, E = LeaseError> = std::result::Result<T, E>;

/// Everything that can go wrong in a lease operation, apart from losing the lease.
///
/// Bad input (the first group of variants) is rejected before anything changes.
/// Backend failures say whether the operation certainly did not happen
/// ([`LeaseError::Unavailable`], safe to retry) or may have happened
/// ([`LeaseError::OutcomeUnknown`]): the library never guesses.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseError {
    /// An argument is out of its documented range (empty id, zero duration, limit 0, ...).
    #[error("invalid {field}: {reason}")]
    InvalidInput {
        /// Which argument was rejected.
        field: &'static str,
        /// Why it was rejected.
        reason: String,
    },
    /// A JSON payload's canonical text is larger than [`crate::limits::MAX_PAYLOAD_BYTES`],
    /// or its raw input larger than [`crate::limits::MAX_JSON_INPUT_BYTES`].
    #[error("{field} is {size} bytes, over the limit of {max} bytes")]
    PayloadTooLarge {
        /// Which payload.
        field: &'static str,
        /// Its size in bytes.
        size: usize,
        /// The limit in bytes.
        max: usize,
    },
    /// A JSON payload does not parse.
    #[error("{field} is not valid JSON: {reason}")]
    MalformedJson {
        /// Which payload.
        field: &'static str,
        /// The parser's message.
        reason: String,
    },
    /// A valid JSON payload that does not decode into the type asked for (a field missing,
    /// a string where a number belongs): the payload is fine, the program's type differs.
    #[error("{field} does not match the type {expected}: {reason}")]
    WrongShape {
        /// Which payload.
        field: &'static str,
        /// The Rust type it was decoded into.
        expected: &'static str,
        /// The decoder's message (what differs, and where).
        reason: String,
    },
    /// The execution named by an id or a lease does not exist.
    #[error("unknown execution {0}")]
    UnknownExecution(ExecutionId),
    /// The store named by an update does not exist (call `get_or_create` first).
    #[error("unknown store {0}")]
    UnknownStore(String),
    /// The effect named by a `settle` or `wait` was never begun (RFC 004, reduced).
    #[error("unknown effect {0}")]
    UnknownEffect(EffectId),
    /// An effect call names an effect another execution began: each effect has one owner,
    /// so nothing changed.
    #[error("effect {effect} belongs to execution {owner}, not {caller}")]
    EffectOfAnotherExecution {
        /// The effect.
        effect: EffectId,
        /// The execution that began it.
        owner: ExecutionId,
        /// The execution that called.
        caller: ExecutionId,
    },
    /// A lease carries a token that was never issued to its execution: a token of another
    /// execution, or a forged one. Tokens are unique per backend namespace, so such a token
    /// is always higher than the execution's own latest token or lower (then `Lost`).
    #[error("token {token} was never issued to execution {execution}")]
    ForeignToken {
        /// The execution the lease names.
        execution: ExecutionId,
        /// The token it carries.
        token: FencingToken,
    },
    /// The backend's token counter cannot issue a token above every token already stored
    /// (the counter was deleted or rolled back by a restore, or its range is used up): the
    /// claim is refused and nothing changed, so no token is ever issued twice.
    /// An operator must repair the counter (set it above the highest stored token).
    #[error("token counter of {location} is unusable: {reason}")]
    TokenCounter {
        /// Database file, schema or key prefix.
        location: String,
        /// What was found (e.g. "next token 3 is not above token 7 of execution order-42").
        reason: String,
    },
    /// The backend does not implement this optional operation (for example retention on an
    /// adapter that cannot delete); nothing changed.
    #[error("{backend} does not support {operation}")]
    Unsupported {
        /// Backend name.
        backend: &'static str,
        /// Operation name.
        operation: &'static str,
    },
    /// The operation certainly did not take effect: connection refused, pool exhausted,
    /// connection lost before the write was sent. Safe to retry.
    #[error("{backend} unavailable during {operation}: {source}")]
    Unavailable {
        /// Backend name.
        backend: &'static str,
        /// Operation name.
        operation: &'static str,
        /// Driver error.
        #[source]
        source: BoxError,
    },
    /// The operation may or may not have committed (connection lost during commit,
    /// timeout after the write was sent). Read the state back before acting on it.
    #[error("outcome of {operation} on {backend} is unknown: {source}")]
    OutcomeUnknown {
        /// Backend name.
        backend: &'static str,
        /// Operation name.
        operation: &'static str,
        /// Driver error.
        #[source]
        source: BoxError,
    },
    /// The stored schema is newer than this library or belongs to something else.
    #[error("schema mismatch in {location}: {reason}")]
    Schema {
        /// Database file, schema or key prefix.
        location: String,
        /// What was found.
        reason: String,
    },
    /// The store is not at this library's schema version (or does not exist) and the
    /// caller opened it to verify, not to migrate (a read-only operator command): nothing was
    /// created or changed. Migrating is a separate, explicit step.
    #[error(
        "{location} is at schema version {}, this library's is {expected}; it was opened \
         without migrating",
        found.map_or_else(|| "none (no store there)".to_owned(), |v| v.to_string())
    )]
    SchemaMismatch {
        /// Database file, schema or key prefix.
        location: String,
        /// The version the store records; `None` when there is no store at all.
        found: Option<u32>,
        /// The version this library writes.
        expected: u32,
    },
    /// The backend replied with something this library cannot interpret
    /// (corrupt row, unexpected script reply).
    #[error("{backend} returned an unexpected reply to {operation}: {reason}")]
    Protocol {
        /// Backend name.
        backend: &'static str,
        /// Operation name.
        operation: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// The backend refused its configuration (for example a Redis eviction policy that may
    /// drop lease keys).
    #[error("{backend} is configured unsafely: {reason}")]
    UnsafeConfiguration {
        /// Backend name.
        backend: &'static str,
        /// What is unsafe and how to fix it.
        reason: String,
    },
    /// Any other backend failure that did not change anything.
    #[error("{backend} failed during {operation}: {source}")]
    Backend {
        /// Backend name.
        backend: &'static str,
        /// Operation name.
        operation: &'static str,
        /// Driver error.
        #[source]
        source: BoxError,
    },
}

impl LeaseError {
    /// Shorthand for [`LeaseError::InvalidInput`].
    pub fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        LeaseError::InvalidInput {
            field,
            reason: reason.into(),
        }
    }

    /// True for errors caused by the caller's input (nothing was attempted).
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            LeaseError::InvalidInput { .. }
                | LeaseError::PayloadTooLarge { .. }
                | LeaseError::MalformedJson { .. }
                | LeaseError::WrongShape { .. }
                | LeaseError::UnknownExecution(_)
                | LeaseError::UnknownStore(_)
                | LeaseError::UnknownEffect(_)
                | LeaseError::EffectOfAnotherExecution { .. }
                | LeaseError::ForeignToken { .. }
        )
    }

    /// True when the operation certainly did not happen and may be retried as is.
    pub fn is_retryable(&self) -> bool {
        matches!(self, LeaseError::Unavailable { .. })
    }
}
