//! The fencing token on its own: it names nothing else of the crate, so [`crate::LeaseError`]
//! can carry one without a circle through the lease types.

use std::fmt;

use serde::{Deserialize, Serialize};

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
