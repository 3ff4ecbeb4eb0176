//! Partitions on a Redis Cluster: a run whose `redis+cluster://` URL asks for
//! `?partitions=N` (N > 1) gets a namespace whose partitions' slots land on as many distinct
//! primaries as there are (up to N), so the run's executions are served by every primary
//! and a failover of any one of them hits the run; the failover script is then named every
//! partition's key and the home key ([`failover_keys`]) and takes them in turn.

use std::collections::BTreeSet;

/// The partition count of a Redis URL (`partitions=N` in its query), 1 without one.
pub fn partitions(url: &str) -> u16 {
    url.split_once('?')
        .into_iter()
        .flat_map(|(_, query)| query.split('&'))
        .find_map(|pair| pair.strip_prefix("partitions="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// The first `host:port` of a URL (the node the cluster is asked about).
pub fn first_node(url: &str) -> Result<&str, String> {
    url.split_once("://")
        .and_then(|(_, rest)| rest.rsplit('@').next())
        .and_then(|rest| rest.split([',', '?', '/']).next())
        .filter(|node| !node.is_empty())
        .ok_or_else(|| format!("no host in {url}"))
}

/// The keys whose slots hold the namespace: the home token counter first, then, with more
/// than one partition, a key of each partition (`lease:{<ns>#<i>}:`).
pub fn failover_keys(namespace: &str, partitions: u16) -> Vec<String> {
    let mut keys = vec![format!("lease:{{{namespace}}}:token")];
    if partitions > 1 {
        keys.extend((0..partitions).map(|i| format!("lease:{{{namespace}#{i}}}:")));
    }
    keys
}

/// `base`, or for a cluster URL with partitions the first of `base`, `base_1`, `base_2`, ...
/// whose partitions are served by `min(partitions, primaries)` distinct primaries (asked
/// of the URL's first node: `CLUSTER SLOTS`, `CLUSTER KEYSLOT`).
pub fn spread_namespace(url: &str, base: &str) -> Result<String, String> {
    let count = partitions(url);
    if !url.starts_with("redis+cluster://") || count <= 1 {
        return Ok(base.to_owned());
    }
    let node = first_node(url)?;
    let mut conn = redis::Client::open(format!("redis://{node}"))
        .and_then(|c| c.get_connection())
        .map_err(|e| format!("{node}: {e}"))?;
    let slots = slot_owners(&mut conn).map_err(|e| format!("{node}: CLUSTER SLOTS: {e}"))?;
    let primaries: BTreeSet<&str> = slots.iter().map(|(_, _, p)| p.as_str()).collect();
    let want = primaries.len().min(usize::from(count));
    for attempt in 0..1000 {
        let ns = match attempt {
            0 => base.to_owned(),
            n => format!("{base}_{n}"),
        };
        let mut owners = BTreeSet::new();
        for key in failover_keys(&ns, count).iter().skip(1) {
            let slot: u16 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(key)
                .query(&mut conn)
                .map_err(|e| format!("{node}: CLUSTER KEYSLOT: {e}"))?;
            if let Some((_, _, owner)) = slots.iter().find(|(a, b, _)| (*a..=*b).contains(&slot)) {
                owners.insert(owner.as_str());
            }
        }
        if owners.len() == want {
            return Ok(ns);
        }
    }
    Err(format!(
        "no namespace of 1000 spreads {count} partitions over the primaries {primaries:?}"
    ))
}

/// The slot ranges and each one's primary (`host:port`), from `CLUSTER SLOTS` (each entry
/// `[first, last, [host, port, id, ...], replicas...]`).
fn slot_owners(conn: &mut redis::Connection) -> Result<Vec<(u16, u16, String)>, String> {
    use redis::Value;
    let ranges: Vec<Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(conn)
        .map_err(|e| e.to_string())?;
    let text = |v: &Value| match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    };
    let slot = |v: Option<&Value>| match v {
        Some(Value::Int(n)) => u16::try_from(*n).ok(),
        _ => None,
    };
    ranges
        .iter()
        .map(|range| {
            let Value::Array(items) = range else {
                return None;
            };
            let Some(Value::Array(primary)) = items.get(2) else {
                return None;
            };
            let addr = format!("{}:{}", text(primary.first()?)?, text(primary.get(1)?)?);
            Some((slot(items.first())?, slot(items.get(1))?, addr))
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| format!("unexpected reply {ranges:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_names_partitions_and_the_first_node() {
        assert_eq!(partitions("redis+cluster://a:1,b:2?partitions=3"), 3);
        assert_eq!(partitions("redis+cluster://a:1?x=1&partitions=4"), 4);
        assert_eq!(partitions("redis+cluster://a:1"), 1);
        assert_eq!(
            first_node("redis+cluster://u:p@a:1,b:2?partitions=3"),
            Ok("a:1")
        );
        assert!(first_node("nothing").is_err());
        assert_eq!(
            failover_keys("ns", 2),
            ["lease:{ns}:token", "lease:{ns#0}:", "lease:{ns#1}:"]
        );
        assert_eq!(failover_keys("ns", 1), ["lease:{ns}:token"]);
    }

    #[test]
    fn a_standalone_or_one_partition_url_keeps_its_namespace() {
        assert_eq!(
            spread_namespace("redis://a:1?partitions=3", "t").as_deref(),
            Ok("t")
        );
        assert_eq!(
            spread_namespace("redis+cluster://a:1", "t").as_deref(),
            Ok("t")
        );
    }
}
