//! Which cluster node a partition lands on: Redis Cluster's key slot
//! ([`lease_redis::key_slot`]), the slot split of a k-node cluster the row builds, and a
//! namespace whose partitions fall evenly on every node.

use lease_redis::key_slot;

/// The slots of a cluster.
pub const SLOTS: u16 = 16384;

/// The first slot of node `i` of a `nodes`-node cluster (`i == nodes`: one past the last):
/// an even split at `16384 * i / nodes`, except for two nodes, split at 5461. An even split
/// of two is bit 13 of the slot, and CRC16 is linear (`crc(a ^ b) = crc(a) ^ crc(b)` for
/// strings of one length), so the tags `{<ns>#0}` ..  `{<ns>#5}` differ in that bit by a
/// pattern no namespace changes: they always split 4 + 2 there.
fn boundary(i: usize, nodes: usize) -> u32 {
    let total = u32::from(SLOTS);
    match (i, nodes) {
        (1, 2) => 5461,
        _ => i as u32 * total / nodes as u32,
    }
}

/// The slots node `node` of a `nodes`-node cluster serves ([`boundary`]).
pub fn range(node: usize, nodes: usize) -> (u16, u16) {
    let n = nodes.max(1);
    let lo = boundary(node, n);
    let hi = boundary(node + 1, n) - 1;
    (lo as u16, hi as u16)
}

/// The node of a `nodes`-node cluster serving `slot`.
pub fn node_of(slot: u16, nodes: usize) -> usize {
    (0..nodes)
        .find(|&i| {
            let (lo, hi) = range(i, nodes);
            (lo..=hi).contains(&slot)
        })
        .unwrap_or(0)
}

/// How many of the namespace's `partitions` partitions (`{<ns>#<i>}`) each node serves.
pub fn spread(namespace: &str, partitions: u16, nodes: usize) -> Vec<u16> {
    let mut counts = vec![0; nodes.max(1)];
    for i in 0..partitions {
        counts[node_of(key_slot(&format!("{{{namespace}#{i}}}")), nodes.max(1))] += 1;
    }
    counts
}

/// The first of `base-0`, `base-1`, ... whose partitions fall evenly on the `nodes` nodes
/// (every node serves `partitions / nodes` rounded down or up), among the first 100,000.
pub fn even_namespace(base: &str, partitions: u16, nodes: usize) -> Option<String> {
    let nodes = nodes.max(1);
    let low = partitions / nodes as u16;
    let high = partitions.div_ceil(nodes as u16);
    (0..100_000).map(|i| format!("{base}-{i}")).find(|ns| {
        spread(ns, partitions, nodes)
            .iter()
            .all(|&c| c == low || c == high)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_clusters() {
        // Slots Redis reports (CLUSTER KEYSLOT).
        assert_eq!(key_slot("foo"), 12182);
        assert_eq!(key_slot("{user1000}.following"), key_slot("user1000"));
        assert_eq!(key_slot("{ns#3}"), key_slot("lease:{ns#3}:exec:e1"));
    }

    #[test]
    fn the_split_covers_every_slot_once() {
        for nodes in 1..=3 {
            assert_eq!(range(0, nodes).0, 0);
            assert_eq!(range(nodes - 1, nodes).1, SLOTS - 1);
            for i in 1..nodes {
                assert_eq!(range(i, nodes).0, range(i - 1, nodes).1 + 1);
            }
        }
        assert_eq!(range(1, 3), (5461, 10921));
        assert_eq!(range(0, 2), (0, 5460));
        assert_eq!(node_of(12182, 3), 2);
    }

    #[test]
    fn an_even_namespace_spreads_its_partitions() {
        for nodes in 1..=3 {
            let ns = even_namespace("t", 6, nodes).expect("a namespace");
            let counts = spread(&ns, 6, nodes);
            assert_eq!(counts.len(), nodes);
            assert!(
                counts.iter().all(|&c| usize::from(c) == 6 / nodes),
                "{counts:?}"
            );
        }
    }
}
