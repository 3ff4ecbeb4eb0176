//! Key layout. With one partition (the default, and the layout before partitions existed)
//! every key of
//! a namespace starts with `lease:{<namespace>}:`; the braces make the namespace the cluster
//! hash tag, so every script touches one slot. With `P > 1` partitions, the execution keys
//! (`token`, `exec:`, `steps:`, the indexes, `counts`, `takeovers`, `start_of` and the `wake` channel, plus
//! an own `meta`) live under the partition prefix `lease:{<namespace>#<i>}:` of the execution's
//! partition `i` = [`partition_of`] its id, so each partition is its own slot; the
//! namespace-wide keys (`meta` with `partitions`, `starts`, `start_of`, `store:`,
//! `receipts:`, `rcpt:`) stay under the home prefix `lease:{<namespace>}:`.
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
//! | `running_es` | zset | the members of `running` once suspended (`es`), scored by lease expiry |
//! | `counts` | hash | records per stored status, `bad`, generation `g`, `ok` (complete) |
//! | `takeovers` | string | claims that took over an expired lease (INCRBY by those claims only; never lowered) |
//! | `attempts` | hash | workflow name (or `\x1fdefault`) -> attempt limit |
//! | `hist:<id>` | list | one execution's last deliveries, JSON arrays (`history`); `he` in its record counts dropped ones |
//! | `redelivery` | hash | workflow name -> its own redelivery policy, `base_ms,factor,cap_ms` |
//! | `dead` | zset | stored-dead executions, by id (score 0) |
//! | `running_last` | zset | the members of `running` on their last attempt, scored by lease expiry |
//!
//! `running_es` and `counts` (so `status_counts` is O(1), not a walk of every record) are
//! kept by the scripts
//! that change records; each record also stores the counting generation it is counted in
//! (`cg`, or `x` once set aside as corrupt). A namespace written before them is recounted by
//! its first `status_counts` (`crate::counts`), and so is one whose `counts` an operator
//! deletes; the layout version did not change.
//! The effect and store-waiter keys (`effect:`, `effects:`, `watch:`, `watching:`, and with
//! partitions the wake queue `wakes`/`wake_seq`) are listed in `scripts/effect.lua`; with
//! partitions they stay under the home prefix.
//!
//! Layout 2 added the last three (so retention finds what to purge without a scan);
//! connecting to a layout-1 namespace
//! builds them (`crate::migrate`) and then stores layout 2.
//!
//! The wake-up channel `wake` shares the prefix, so it has the namespace's slot.

use lease_core::{ExecutionId, LeaseError, Result, StoreId};

/// Version of the key layout above, stored in `meta` at connect.
pub(crate) const LAYOUT_VERSION: &str = "2";

/// The layout before the retention indexes, migrated at connect.
pub(crate) const LAYOUT_V1: &str = "1";

/// Longest namespace, in bytes.
pub const MAX_NAMESPACE_BYTES: usize = 128;

/// Separator inside hash fields; a control character, which no id or key may contain.
pub(crate) const SEP: char = '\u{1f}';

/// The key names of one namespace: its home prefix and its partitions' prefixes.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    /// `lease:{<namespace>}:`.
    prefix: String,
    /// One prefix per partition: just the home prefix for one partition (the layout before
    /// partitions, unchanged), else `lease:{<namespace>#<i>}:` for `i` in `0..P`.
    partitions: Vec<String>,
}

/// The partition (of `count`) execution `id` lives in: FNV-1a (64 bit) of the id's bytes,
/// modulo `count`. Stable across processes, versions and platforms: it is part of the key
/// layout.
pub(crate) fn partition_of(id: &str, count: usize) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in id.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    // `count` is at most MAX_PARTITIONS, so the remainder fits.
    (hash % count.max(1) as u64) as usize
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
    /// Validates `namespace` and builds its prefixes for `partitions` partitions (1 to
    /// [`crate::url::MAX_PARTITIONS`]).
    pub(crate) fn new(namespace: &str, partitions: u16) -> Result<Self> {
        if !(1..=crate::url::MAX_PARTITIONS).contains(&partitions) {
            return Err(LeaseError::invalid(
                "partitions",
                format!("must be 1 to {}", crate::url::MAX_PARTITIONS),
            ));
        }
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
        let prefix = format!("lease:{{{namespace}}}:");
        let partitions = match partitions {
            1 => vec![prefix.clone()],
            n => (0..n)
                .map(|i| format!("lease:{{{namespace}#{i}}}:"))
                .collect(),
        };
        Ok(Keys { prefix, partitions })
    }

    /// Every partition's prefix, in partition order.
    pub(crate) fn partitions(&self) -> &[String] {
        &self.partitions
    }

    /// The prefix of the partition execution `id` lives in.
    pub(crate) fn of(&self, id: &ExecutionId) -> &str {
        &self.partitions[partition_of(id.as_str(), self.partitions.len())]
    }

    /// Whether the namespace is split (more than one partition).
    pub(crate) fn split(&self) -> bool {
        self.partitions.len() > 1
    }

    /// The key every script also declares after its prefix: `<prefix>meta`, which exists
    /// from connect on, so a script of a slot being migrated is refused with `TRYAGAIN`
    /// before it runs (see `crate::conn`).
    pub(crate) fn anchor(prefix: &str) -> String {
        format!("{prefix}meta")
    }

    /// `lease:{<namespace>}:`, passed to every script as `KEYS[1]`.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The namespace, the hash tag of every key of the home prefix.
    pub(crate) fn namespace(&self) -> &str {
        // The prefix is `lease:{<namespace>}:`, built by `Keys::new`.
        &self.prefix["lease:{".len()..self.prefix.len() - "}:".len()]
    }

    /// The hash tag (without braces) of the partition execution `id` lives in: the
    /// namespace for one partition, else `<namespace>#<i>`.
    pub(crate) fn tag_of(&self, id: &ExecutionId) -> &str {
        let prefix = self.of(id);
        &prefix["lease:{".len()..prefix.len() - "}:".len()]
    }

    /// Checks a key an application's fenced script for execution `id` declares:
    /// it must hash to the execution's cluster slot (its hash tag is [`Keys::tag_of`]), so
    /// the script touches one slot, and it must lie outside the library's prefixes, which
    /// only this library writes. `InvalidInput` naming the key otherwise.
    pub(crate) fn check_app_key(&self, key: &str, id: &ExecutionId) -> Result<()> {
        let ns = self.tag_of(id);
        if hash_tag(key) != Some(ns) {
            return Err(LeaseError::invalid(
                "script key",
                format!(
                    "{key:?} does not hash to the namespace's slot: its first hash tag must be \
                     {{{ns}}}"
                ),
            ));
        }
        if let Some(own) = std::iter::once(&self.prefix)
            .chain(&self.partitions)
            .find(|own| key.starts_with(own.as_str()))
        {
            return Err(LeaseError::invalid(
                "script key",
                format!("{key:?} lies inside the library's own key space {own:?}"),
            ));
        }
        Ok(())
    }

    /// Every prefix the namespace writes under: the home prefix, then the partitions' (when
    /// split), each with its SCAN pattern (the namespace has no glob characters).
    pub(crate) fn patterns(&self) -> Vec<(&str, String)> {
        let mut all = vec![self.prefix.as_str()];
        if self.split() {
            all.extend(self.partitions.iter().map(String::as_str));
        }
        all.into_iter().map(|p| (p, format!("{p}*"))).collect()
    }

    /// An execution's record (in its partition).
    pub(crate) fn exec(&self, id: &ExecutionId) -> String {
        format!("{}exec:{}", self.of(id), id.as_str())
    }

    /// An execution's step records (in its partition).
    pub(crate) fn steps(&self, id: &ExecutionId) -> String {
        format!("{}steps:{}", self.of(id), id.as_str())
    }

    /// A store's entries.
    pub(crate) fn store(&self, id: &StoreId) -> String {
        format!("{}store:{}", self.prefix, id.as_str())
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::default_name("lease", "lease:{lease}:")]
    #[case::every_allowed_punctuation("a-b_c.d:e9", "lease:{a-b_c.d:e9}:")]
    #[case::longest(&"x".repeat(MAX_NAMESPACE_BYTES), &format!("lease:{{{}}}:", "x".repeat(MAX_NAMESPACE_BYTES)))]
    fn good_namespaces_name_their_prefix(#[case] name: &str, #[case] prefix: &str) {
        let keys = Keys::new(name, 1).expect("valid");
        assert_eq!(keys.prefix(), prefix);
        assert_eq!(keys.namespace(), name);
    }

    /// Names that could break out of the hash tag or be read as a glob are refused.
    #[rstest]
    #[case::empty("")]
    #[case::open_brace("a{b")]
    #[case::close_brace("a}b")]
    #[case::star("a*")]
    #[case::space("a b")]
    #[case::non_ascii("é")]
    #[case::question_mark("a?")]
    #[case::brackets("a[b]")]
    #[case::backslash("a\\b")]
    #[case::too_long(&"x".repeat(MAX_NAMESPACE_BYTES + 1))]
    fn bad_namespaces_are_refused(#[case] bad: &str) {
        let r = Keys::new(bad, 1);
        assert!(matches!(r, Err(LeaseError::InvalidInput { .. })), "{bad:?}");
    }

    /// Redis Cluster's rule: the first `{...}` with something inside.
    #[rstest]
    #[case::middle("app:{ns}:x", Some("ns"))]
    #[case::empty_first_tag("{}{ns}", None)]
    #[case::first_close_brace_ends_it("a{b{c}d}", Some("b{c"))]
    #[case::no_braces("no-tag", None)]
    #[case::never_closed("open{only", None)]
    fn hash_tags(#[case] key: &str, #[case] tag: Option<&str>) {
        assert_eq!(hash_tag(key), tag);
    }

    #[rstest]
    #[case::tagged("app:{ns}:counter")]
    #[case::only_the_tag("{ns}")]
    #[case::first_tag_counts("x{ns}y{other}")]
    #[case::prefix_without_the_colon("lease:{ns}")]
    #[case::prefix_lookalike("lease:{ns}x")]
    fn application_keys_in_the_slot_outside_the_prefix_are_allowed(#[case] good: &str) {
        let keys = Keys::new("ns", 1).expect("valid");
        let id = ExecutionId::new("a").expect("valid");
        assert!(keys.check_app_key(good, &id).is_ok(), "{good:?}");
    }

    /// Refused, with the key named in the error.
    #[rstest]
    #[case::no_tag("app:ns:counter")]
    #[case::another_tag("app:{other}:x")]
    #[case::empty_first_tag("app:{}{ns}:x")]
    #[case::another_tag_first("app:{other}{ns}")]
    #[case::tag_with_more_inside("app:{ns:x}")]
    #[case::an_execution_key("lease:{ns}:exec:a")]
    #[case::the_token_counter("lease:{ns}:token")]
    #[case::the_prefix_itself("lease:{ns}:")]
    #[case::empty("")]
    fn application_keys_elsewhere_are_refused(#[case] bad: &str) {
        let keys = Keys::new("ns", 1).expect("valid");
        let id = ExecutionId::new("a").expect("valid");
        let e = keys.check_app_key(bad, &id).expect_err(bad);
        assert!(
            matches!(&e, LeaseError::InvalidInput { reason, .. } if reason.contains(&format!("{bad:?}"))),
            "{bad:?}: {e:?}"
        );
    }

    #[test]
    fn one_partition_keeps_the_old_layout_and_more_spread_by_id() {
        let one = Keys::new("ns", 1).expect("valid");
        let id = ExecutionId::new("order-42").expect("valid");
        assert_eq!(one.partitions(), ["lease:{ns}:"]);
        assert_eq!(one.of(&id), "lease:{ns}:");
        assert_eq!(one.steps(&id), "lease:{ns}:steps:order-42");
        assert_eq!(one.patterns().len(), 1);
        let four = Keys::new("ns", 4).expect("valid");
        assert_eq!(four.partitions()[3], "lease:{ns#3}:");
        assert_eq!(four.prefix(), "lease:{ns}:");
        assert_eq!(four.patterns().len(), 5);
        // The placement is part of the layout: pinned values.
        assert_eq!(partition_of("order-42", 4), partition_of("order-42", 4));
        assert_eq!(partition_of("", 4), (0xcbf2_9ce4_8422_2325u64 % 4) as usize);
        let mut seen = [0usize; 4];
        for i in 0..400 {
            seen[partition_of(&format!("e{i}"), 4)] += 1;
        }
        assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
        let tag = four.tag_of(&id).to_owned();
        assert!(tag.starts_with("ns#"));
        assert!(four.check_app_key(&format!("app:{{{tag}}}:x"), &id).is_ok());
        assert!(four.check_app_key("app:{ns}:x", &id).is_err());
        assert!(
            four.check_app_key(&format!("lease:{{{tag}}}:x"), &id)
                .is_err()
        );
        assert!(Keys::new("ns", 0).is_err());
        assert!(Keys::new("ns", crate::url::MAX_PARTITIONS + 1).is_err());
    }
}
