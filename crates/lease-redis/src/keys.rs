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

/// The cluster hash tag of `key` as Redis computes it: the text between the first `{` and
/// the first `}` after it, if that text is not empty; `None` when the whole key is hashed.
pub(crate) fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let rest = &key[open + 1..];
    let close = rest.find('}')?;
    (close > 0).then(|| &rest[..close])
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

    /// The namespace, which is the hash tag of every key of the namespace.
    pub(crate) fn namespace(&self) -> &str {
        // The prefix is `lease:{<namespace>}:`, built by `Keys::new`.
        &self.prefix["lease:{".len()..self.prefix.len() - "}:".len()]
    }

    /// Checks a key an application's fenced script declares (issue 13): it must hash to the
    /// namespace's cluster slot (its hash tag is `{<namespace>}`), so the script touches one
    /// slot, and it must lie outside the library's prefix `lease:{<namespace>}:`, which only
    /// this library writes. `InvalidInput` naming the key otherwise.
    pub(crate) fn check_app_key(&self, key: &str) -> Result<()> {
        let ns = self.namespace();
        if hash_tag(key) != Some(ns) {
            return Err(LeaseError::invalid(
                "script key",
                format!(
                    "{key:?} does not hash to the namespace's slot: its first hash tag must be \
                     {{{ns}}}"
                ),
            ));
        }
        if key.starts_with(&self.prefix) {
            return Err(LeaseError::invalid(
                "script key",
                format!(
                    "{key:?} lies inside the library's own key space {:?}",
                    self.prefix
                ),
            ));
        }
        Ok(())
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
        assert_eq!(Keys::new("a-b").expect("valid").namespace(), "a-b");
        assert!(Keys::new(&"x".repeat(MAX_NAMESPACE_BYTES + 1)).is_err());
    }

    #[test]
    fn application_keys_must_share_the_slot_and_stay_outside_the_prefix() {
        assert_eq!(hash_tag("app:{ns}:x"), Some("ns"));
        assert_eq!(hash_tag("{}{ns}"), None);
        assert_eq!(hash_tag("a{b{c}d}"), Some("b{c"));
        assert_eq!(hash_tag("no-tag"), None);
        assert_eq!(hash_tag("open{only"), None);
        let keys = Keys::new("ns").expect("valid");
        for good in [
            "app:{ns}:counter",
            "{ns}",
            "x{ns}y{other}",
            "lease:{ns}",
            "lease:{ns}x",
        ] {
            assert!(keys.check_app_key(good).is_ok(), "{good:?}");
        }
        for bad in [
            "app:ns:counter",
            "app:{other}:x",
            "app:{}{ns}:x",
            "app:{other}{ns}",
            "app:{ns:x}",
            "lease:{ns}:exec:a",
            "lease:{ns}:token",
            "lease:{ns}:",
            "",
        ] {
            let e = keys.check_app_key(bad).expect_err(bad);
            assert!(
                matches!(&e, LeaseError::InvalidInput { reason, .. } if reason.contains(&format!("{bad:?}"))),
                "{bad:?}: {e:?}"
            );
        }
    }
}
