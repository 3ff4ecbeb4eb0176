//! The eviction and version guard run at connect.
//!
//! Fencing is only as durable as the token counter and the execution records: a key that
//! Redis evicts under memory pressure resets a token or forgets an acknowledgement, and a
//! stale holder's writes would be accepted again. So `connect` reads `maxmemory_policy` and
//! refuses policies that may evict keys without a TTL (this library never sets one).

use lease_core::{LeaseError, Result};

use crate::error::BACKEND;

/// What the server's `INFO` says about eviction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Eviction {
    /// `noeviction` or a `volatile-*` policy: keys without a TTL are never evicted.
    Safe(String),
    /// An `allkeys-*` policy, an unknown one, or none reported.
    Unsafe(String),
}

/// Reads the eviction policy from `INFO` text.
pub(crate) fn eviction(info: &str) -> Eviction {
    match info_field(info, "maxmemory_policy") {
        Some(
            p @ ("noeviction" | "volatile-lru" | "volatile-lfu" | "volatile-random"
            | "volatile-ttl"),
        ) => Eviction::Safe(p.to_owned()),
        Some(p) => Eviction::Unsafe(format!(
            "maxmemory-policy is {p}, which may evict lease keys (they have no TTL): a lost \
             token counter or execution breaks fencing. Set maxmemory-policy to noeviction \
             (or a volatile-* policy), or opt out with RedisConfig::allow_evicting_policy(true)"
        )),
        None => Eviction::Unsafe(
            "the server does not report maxmemory_policy in INFO, so eviction cannot be ruled \
             out; opt out with RedisConfig::allow_evicting_policy(true)"
                .to_owned(),
        ),
    }
}

/// Applies the eviction verdict: an error, or a warning when `allow` is set.
pub(crate) fn check_eviction(info: &str, allow: bool) -> Result<()> {
    match eviction(info) {
        Eviction::Safe(policy) => {
            tracing::debug!(%policy, "redis eviction policy keeps lease keys");
            Ok(())
        }
        Eviction::Unsafe(reason) if allow => {
            tracing::warn!(%reason, "continuing with an evicting redis (allow_evicting_policy)");
            Ok(())
        }
        Eviction::Unsafe(reason) => Err(LeaseError::UnsafeConfiguration {
            backend: BACKEND,
            reason,
        }),
    }
}

/// Requires Redis 5 or later: scripts read `TIME` and then write, which needs script effects
/// replication (the default from 5.0 on).
pub(crate) fn check_version(info: &str) -> Result<()> {
    let Some(version) = info_field(info, "redis_version") else {
        // Compatible servers (Valkey, KeyDB, ...) may report their own fields; the scripts
        // themselves will fail loudly if a command is missing.
        return Ok(());
    };
    let major = version
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok())
        .unwrap_or(0);
    if major < 5 {
        return Err(LeaseError::UnsafeConfiguration {
            backend: BACKEND,
            reason: format!(
                "redis {version} is too old: scripts need effects replication (Redis >= 5)"
            ),
        });
    }
    Ok(())
}

/// The server's major version from `INFO` (`redis_version`), if it reports one.
pub(crate) fn major_version(info: &str) -> Option<u32> {
    info_field(info, "redis_version")?
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok())
}

/// A `name:value` line of `INFO` output.
fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == name).then(|| v.trim())
    })
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn info(policy: &str) -> String {
        format!("# Server\r\nredis_version:7.0.15\r\n# Memory\r\nmaxmemory_policy:{policy}\r\n")
    }

    #[rstest]
    fn policies_that_keep_keys_without_ttl_are_safe(
        #[values(
            "noeviction",
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl"
        )]
        p: &str,
    ) {
        assert_eq!(eviction(&info(p)), Eviction::Safe(p.to_owned()));
        assert!(check_eviction(&info(p), false).is_ok());
    }

    /// An unknown policy counts as evicting: only the known-safe ones pass.
    #[rstest]
    fn evicting_policies_are_a_typed_error_unless_allowed(
        #[values("allkeys-lru", "allkeys-lfu", "allkeys-random", "something-new")] p: &str,
    ) {
        let e = check_eviction(&info(p), false).expect_err("unsafe");
        assert!(matches!(e, LeaseError::UnsafeConfiguration { .. }), "{e:?}");
        assert!(check_eviction(&info(p), true).is_ok());
    }

    #[test]
    fn a_missing_policy_is_refused_unless_allowed() {
        assert!(check_eviction("# Server\r\n", false).is_err());
        assert!(check_eviction("# Server\r\n", true).is_ok());
    }

    #[test]
    fn old_servers_are_refused() {
        assert!(check_version(&info("noeviction")).is_ok());
        assert!(check_version("redis_version:4.0.14\r\n").is_err());
        assert!(check_version("redis_version:5.0.0\r\n").is_ok());
        assert!(check_version("").is_ok());
        assert_eq!(major_version(&info("noeviction")), Some(7));
        assert_eq!(major_version("redis_version:6.2.1\r\n"), Some(6));
        assert_eq!(major_version(""), None);
    }
}
