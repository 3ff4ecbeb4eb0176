//! Leases, fencing tokens and the `Lost` result (RFC 002 "Runtime API").

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::ids::ExecutionId;
use crate::time::Timestamp;

/// A fencing token. Every claim issues a token greater than every token issued before it in
/// the same backend namespace, so tokens rise strictly per execution and no two executions
/// ever share one (which is how a token of another execution is recognised). 0 means "never
/// claimed".
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FencingToken(u64);

impl FencingToken {
    /// The token of an execution that was never claimed.
    pub const NONE: FencingToken = FencingToken(0);

    /// Wraps a raw token value.
    pub const fn new(value: u64) -> Self {
        FencingToken(value)
    }

    /// The raw value.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Debug for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// One delivery's claim on an execution: who (token) and until when (expiry).
///
/// RFC 002: `claimDue` returns these; renew, release, acknowledge and step writes carry one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExecutionLease {
    /// The execution this lease is for.
    pub execution_id: ExecutionId,
    /// The fencing token issued by the claim.
    pub token: FencingToken,
    /// When the lease runs out unless renewed (backend clock).
    pub expires_at: Timestamp,
}

/// The result of a fenced operation: accepted with the current token, or `Lost`.
///
/// RFC 002: "A rejected fenced write will change nothing and will return lost." A holder
/// that sees `Lost` must stop: no further fenced writes, no acknowledgement.
#[must_use = "a Lost lease means the holder must stop"]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fenced<T> {
    /// The token was current; the operation took effect.
    Accepted(T),
    /// A higher token exists or the delivery already ended; nothing changed.
    Lost,
}

impl<T> Fenced<T> {
    /// True for [`Fenced::Lost`].
    pub fn is_lost(&self) -> bool {
        matches!(self, Fenced::Lost)
    }

    /// The accepted value, or `None` when lost.
    pub fn accepted(self) -> Option<T> {
        match self {
            Fenced::Accepted(v) => Some(v),
            Fenced::Lost => None,
        }
    }

    /// Maps the accepted value.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Fenced<U> {
        match self {
            Fenced::Accepted(v) => Fenced::Accepted(f(v)),
            Fenced::Lost => Fenced::Lost,
        }
    }
}
