//! Leases, fencing tokens and the `Lost` result (RFC 002 "Runtime API").

use serde::{Deserialize, Serialize};

use crate::ids::ExecutionId;
use crate::time::Timestamp;

mod token;

pub use token::FencingToken;

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
