//! One application row ([`AppRow`]) and how the SQL stores keep its numbers.

use serde::{Deserialize, Serialize};

/// One application row: the step it is the effect of, who wrote it, and the step's value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppRow {
    /// The execution.
    pub execution: String,
    /// The step key (`s0`, `s1`, ...).
    pub step: String,
    /// The token of the delivery that wrote it.
    pub token: u64,
    /// The runtime process that wrote it (the op log's process number).
    pub process: u32,
    /// The sequence number of the writing operation in that process's op log.
    pub seq: u64,
    /// The step's value as JSON text (what its record holds).
    pub value: String,
}

/// A token as SQL stores it (tokens stay below `i64::MAX` on the SQL backends).
pub(super) fn stored_token(token: u64) -> i64 {
    i64::try_from(token).unwrap_or(i64::MAX)
}

/// A stored token or number read back (a negative one cannot match any op: 0).
pub(super) fn loaded<T: TryFrom<i64> + Default>(stored: i64) -> T {
    T::try_from(stored).unwrap_or_default()
}
