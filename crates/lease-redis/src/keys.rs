//! Key layout. Every key of a namespace starts with `lease:{<namespace>}:`; the braces make
//! the namespace the cluster hash tag, so every script touches one slot.
//!
//! | key | type | holds |
//! |---|---|---|
//! | `meta` | hash | `layout` version of this key layout |
//! | `token` | string | the namespace's fencing-token counter (INCR, no TTL) |
//! | `exec:<id>` | hash | one execution record |
//! | `steps:<id>` | hash | step records of one execution, field `<step key>\x1f<attempt>` |
//! | `ready` | zset | due executions with an open redelivery gate, scored by due time |
//! | `waiting` | zset | executions claimable later than their due time, scored by that instant |
//! | `running` | zset | running executions, scored by lease expiry |
//! | `failing` | zset | executions with unacknowledged deliveries, scored by minus their count |
//! | `corrupt` | zset | records a claim could not use, by id (score 0) |
//! | `corrupt_why` | hash | id of a corrupt record -> its problem |
//! | `starts` | hash | start request id -> target execution id |
//! | `store:<id>` | hash | store entries, plus the existence marker field `""` |
//! | `receipts:<id>` | hash | store receipts, field `<execution>\x1f<step key>` |
//! | `done` | zset | completed and failed executions, scored by the end of their last delivery |
//! | `rcpt:<id>` | set | the receipts execution `<id>` made: `<store>\x1f<step key>` |
//! | `start_of` | hash | target execution id -> the start request id that created it |
//!
//! Layout 2 added the last three (retention, issue 12); connecting to a layout-1 namespace
//! builds them (`crate::migrate`) and then stores layout 2.
//!
//! The wake-up channel `wake` (issue 10) shares the prefix, so it has the namespace's slot.

use lease_core::{ExecutionId, LeaseError, Result, StoreId};

/// Version of the key layout above, stored in `meta` at connect.
pub(crate) const LAYOUT_VERSION: &str = "2";

/// The layout before the retention indexes, migrated at connect.
pub(crate) const LAYOUT_V1: &str = "1";

/// Longest namespace, in bytes.
pub const MAX_NAMESPACE_BYTES: usize = 128;

/// Separator inside hash fields; a control character, which no id or key may contain.
pub(crate) const SEP: char = '\u{1f}';

/// The key names of one namespace.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    prefix: String,
}

impl Keys {
    /// Validates `namespace` and builds its prefix.
    pub(crate) fn new(namespace: &str) -> Result<Self> {
        if namespace.is_empty() || namespace.len() > MAX_NAMESPACE_BYTES {
            return Err(LeaseError::invalid(
                "namespace",
                format!("must be 1 to {MAX_NAMESPACE_BYTES} bytes"),
            ));
        }
        if let Some(c) = namespace
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')))
        {
            return Err(LeaseError::invalid(
                "namespace",
                format!("{c:?} is not allowed (ASCII letters, digits, _ - . : only)"),
            ));
        }
        Ok(Keys {
            prefix: format!("lease:{{{namespace}}}:"),
        })
    }

    /// `lease:{<namespace>}:`, passed to every script as `KEYS[1]`.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The SCAN pattern matching every key of the namespace (the namespace has no glob
    /// characters).
    pub(crate) fn pattern(&self) -> String {
        format!("{}*", self.prefix)
    }

    /// An execution's step records.
    pub(crate) fn steps(&self, id: &ExecutionId) -> String {
        format!("{}steps:{}", self.prefix, id.as_str())
    }

    /// A store's entries.
    pub(crate) fn store(&self, id: &StoreId) -> String {
        format!("{}store:{}", self.prefix, id.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_validated() {
        assert_eq!(
            Keys::new("lease").expect("valid").prefix(),
            "lease:{lease}:"
        );
        assert!(Keys::new("a-b_c.d:e9").is_ok());
        for bad in ["", "a{b", "a}b", "a*", "a b", "é", "a?", "a[b]", "a\\b"] {
            assert!(
                matches!(Keys::new(bad), Err(LeaseError::InvalidInput { .. })),
                "{bad:?}"
            );
        }
        assert!(Keys::new(&"x".repeat(MAX_NAMESPACE_BYTES)).is_ok());
        assert!(Keys::new(&"x".repeat(MAX_NAMESPACE_BYTES + 1)).is_err());
    }
}
