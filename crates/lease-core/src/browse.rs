//! Browsing what is stored: executions by status, workflow name and concurrency key, newest
//! admitted first, a page at a time ([`crate::ExecutionClient::list_executions`]).
//!
//! A page costs the same however many executions are stored: every backend answers from an
//! index (or a sorted set) in admission order, never a scan. The cursor is the backend's own
//! position in that order, opaque to callers; a cursor a backend did not write is
//! `InvalidInput`, never a wrong page.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{LeaseError, Result};
use crate::execution::{ExecutionRecord, ExecutionStatus};
use crate::ids::{ConcurrencyKey, WorkflowName};

/// The longest [`ListCursor`], in bytes.
pub const MAX_CURSOR_BYTES: usize = 255;

/// Which executions [`crate::ExecutionClient::list_executions`] lists: each field set
/// narrows the list (all must match); an empty filter lists every execution.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionFilter {
    /// Only executions whose stored status is this one. A running execution whose lease
    /// expired lists as running until the next claim or `get` reads it otherwise; each
    /// record comes back as `get` would return it.
    pub status: Option<ExecutionStatus>,
    /// Only executions admitted with this workflow name.
    pub workflow: Option<WorkflowName>,
    /// Only executions admitted with this concurrency key.
    pub key: Option<ConcurrencyKey>,
}

/// A position in a backend's admission order, from [`ExecutionPage::next`]: printable ASCII,
/// 1 to [`MAX_CURSOR_BYTES`] bytes, meaningful only to the backend that wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ListCursor(String);

impl ListCursor {
    /// Validates a cursor's text: empty, over-long or non-printable is `InvalidInput`.
    /// (Whether it names a position is for the backend to check.)
    pub fn new(text: impl Into<String>) -> Result<Self> {
        let text = text.into();
        if text.is_empty() || text.len() > MAX_CURSOR_BYTES {
            return Err(LeaseError::invalid(
                "list cursor",
                format!("{} bytes is outside 1..={MAX_CURSOR_BYTES}", text.len()),
            ));
        }
        if !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(LeaseError::invalid(
                "list cursor",
                "must be printable ASCII without spaces",
            ));
        }
        Ok(ListCursor(text))
    }

    /// The cursor's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The `InvalidInput` a backend answers for a cursor it cannot read.
    pub fn unreadable(&self) -> LeaseError {
        LeaseError::invalid(
            "list cursor",
            format!("{:?} is not a cursor of this store", self.0),
        )
    }
}

impl TryFrom<String> for ListCursor {
    type Error = LeaseError;
    fn try_from(value: String) -> Result<Self> {
        Self::new(value)
    }
}

impl From<ListCursor> for String {
    fn from(value: ListCursor) -> Self {
        value.0
    }
}

impl fmt::Display for ListCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One page of [`crate::ExecutionClient::list_executions`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecutionPage {
    /// The executions, newest admitted first.
    pub records: Vec<ExecutionRecord>,
    /// Where the next (older) page starts; `None` when this page holds the oldest match.
    pub next: Option<ListCursor>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_bounded_printable_text() {
        assert!(ListCursor::new("12:abc").is_ok());
        for bad in [
            String::new(),
            "a b".into(),
            "x\n".into(),
            "é".into(),
            "9".repeat(256),
        ] {
            let r = ListCursor::new(bad);
            assert!(matches!(r, Err(LeaseError::InvalidInput { .. })), "{r:?}");
        }
        assert!(serde_json::from_str::<ListCursor>(r#""""#).is_err());
    }
}
