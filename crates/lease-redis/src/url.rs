//! The URL forms [`crate::RedisConfig::new`] takes:
//!
//! - `redis://[user:password@]host:port[/db]` (`rediss://` for TLS when redis-rs is built
//!   with it): one server;
//! - `redis+cluster://[user:password@]host:port[,host:port...]`: a Redis Cluster reached
//!   through any of the listed nodes (the client learns the rest from `CLUSTER SLOTS`);
//!   no database number (a cluster has only database 0);
//! - either with `?partitions=N` (1 to [`MAX_PARTITIONS`]): the namespace's partition count
//!   when [`crate::RedisConfig::partitions`] is not set.
//!
//! Refused: a URL fragment, since redis-rs reads `#insecure` as
//! "accept any certificate" and a TLS check must not be switched off by a stray suffix;
//! and `sslrootcert=`, which crate `lease`'s `open()` reads (this crate takes the CA from
//! [`crate::RedisConfig::tls_root_certificates`]) and redis-rs would silently ignore.

use lease_core::{LeaseError, Result};

/// The scheme of a cluster URL.
pub const CLUSTER_SCHEME: &str = "redis+cluster://";

/// The most partitions a namespace can have.
pub const MAX_PARTITIONS: u16 = 1024;

/// A parsed URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// One `redis://` URL per node (one for a single server).
    pub(crate) nodes: Vec<String>,
    /// Whether the URL names a cluster.
    pub(crate) cluster: bool,
    /// The `partitions` query parameter.
    pub(crate) partitions: Option<u16>,
}

fn invalid(reason: impl Into<String>) -> LeaseError {
    LeaseError::invalid("redis url", reason)
}

/// Parses `url` (see the module documentation); `InvalidInput` names what is wrong.
pub(crate) fn parse(url: &str) -> Result<Endpoint> {
    // The message never repeats the fragment: a password with an unescaped `#` puts the
    // rest of the password there.
    if url.contains('#') {
        return Err(invalid(
            "a URL fragment ('#' and what follows) is refused: redis-rs reads #insecure as \
             \"do not verify the server's certificate\", which this crate does not offer \
             (a '#' in a password is written %23)",
        ));
    }
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let (others, partitions) = split_query(query)?;
    let rebuilt = |base: &str| match others.is_empty() {
        true => base.to_owned(),
        false => format!("{base}?{}", others.join("&")),
    };
    let Some(rest) = base.strip_prefix(CLUSTER_SCHEME) else {
        return Ok(Endpoint {
            nodes: vec![rebuilt(base)],
            cluster: false,
            partitions,
        });
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (auth, hosts) = match rest.rsplit_once('@') {
        Some((auth, hosts)) => (format!("{auth}@"), hosts),
        None => (String::new(), rest),
    };
    if hosts.contains('/') {
        return Err(invalid("a cluster URL takes no database number"));
    }
    let nodes: Vec<String> = hosts
        .split(',')
        .map(|host| match host.trim() {
            "" => Err(invalid("empty node in the cluster URL")),
            host if !host.contains(':') => Err(invalid(format!("node {host:?} has no port"))),
            host => Ok(rebuilt(&format!("redis://{auth}{host}"))),
        })
        .collect::<Result<_>>()?;
    Ok(Endpoint {
        nodes,
        cluster: true,
        partitions,
    })
}

/// The query parameters other than `partitions`, and `partitions`.
fn split_query(query: Option<&str>) -> Result<(Vec<&str>, Option<u16>)> {
    let mut others = Vec::new();
    let mut partitions = None;
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        match pair.split_once('=') {
            Some(("sslrootcert", _)) => {
                return Err(invalid(
                    "sslrootcert= is read by lease::open(); with RedisConfig give the CA to \
                     tls_root_certificates (redis-rs would ignore it and trust the system roots)",
                ));
            }
            Some(("partitions", value)) => {
                let n = value
                    .parse::<u16>()
                    .ok()
                    .filter(|n| (1..=MAX_PARTITIONS).contains(n))
                    .ok_or_else(|| {
                        invalid(format!(
                            "partitions={value:?} is not a number from 1 to {MAX_PARTITIONS}"
                        ))
                    })?;
                if partitions.replace(n).is_some() {
                    return Err(invalid("partitions given twice"));
                }
            }
            _ if pair.is_empty() => {}
            _ => others.push(pair),
        }
    }
    Ok((others, partitions))
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[test]
    fn single_servers_keep_their_url() {
        let e = parse("redis://127.0.0.1:6379/2").expect("valid");
        assert_eq!(e.nodes, ["redis://127.0.0.1:6379/2"]);
        assert!(!e.cluster);
        assert_eq!(e.partitions, None);
        let e = parse("redis://h:1/0?partitions=8&protocol=resp3").expect("valid");
        assert_eq!(e.nodes, ["redis://h:1/0?protocol=resp3"]);
        assert_eq!(e.partitions, Some(8));
    }

    #[test]
    fn cluster_urls_list_their_nodes() {
        let e = parse("redis+cluster://u:p@a:7000,b:7001/?partitions=4").expect("valid");
        assert!(e.cluster);
        assert_eq!(e.nodes, ["redis://u:p@a:7000", "redis://u:p@b:7001"]);
        assert_eq!(e.partitions, Some(4));
        assert_eq!(
            parse("redis+cluster://a:1").expect("valid").nodes,
            ["redis://a:1"]
        );
    }

    #[rstest]
    #[case::empty_cluster_node("redis+cluster://a:1,,b:2")]
    #[case::cluster_node_without_port("redis+cluster://a")]
    #[case::cluster_with_database("redis+cluster://a:1/0")]
    #[case::zero_partitions("redis://a:1?partitions=0")]
    #[case::too_many_partitions("redis://a:1?partitions=1025")]
    #[case::partitions_not_a_number("redis://a:1?partitions=x")]
    #[case::partitions_twice("redis://a:1?partitions=2&partitions=2")]
    #[case::insecure_fragment("rediss://h:6380/#insecure")]
    #[case::insecure_fragment_after_a_query("rediss://h:6380/0?protocol=resp3#insecure")]
    #[case::cluster_insecure_fragment("redis+cluster://a:1,b:2#insecure")]
    #[case::any_fragment("rediss://h:6380#x")]
    #[case::root_cert_parameter("rediss://h:6380?sslrootcert=/ca.pem")]
    #[case::cluster_root_cert_parameter("redis+cluster://a:1,b:2?sslrootcert=/ca.pem")]
    fn bad_urls_are_typed_errors(#[case] bad: &str) {
        let r = parse(bad);
        assert!(matches!(r, Err(LeaseError::InvalidInput { .. })), "{bad}");
    }

    /// A password with an unescaped `#`: the refusal names neither half of it.
    #[test]
    fn a_fragment_is_refused_without_repeating_it() {
        let err = parse("redis://u:hunter#secret@h:6379").expect_err("a fragment");
        let text = err.to_string();
        assert!(text.contains("%23"), "{text}");
        assert!(!text.contains("secret"), "{text}");
        assert!(!text.contains("hunter"), "{text}");
    }
}
