//! `status_counts` (issue 15): executions by effective status, the partition's `exec:*`
//! keys walked with `SCAN` between scripts and each page's records read by one script
//! (`counts/status_counts.lua`). No script walks the key space (issue 25 item 7: a `KEYS`
//! inside a script blocked the server past the busy-script limit, and every client's
//! renewal failed with `BUSY`).

use std::collections::HashSet;

use lease_core::{Result, StatusCounts};

use crate::backend::RedisBackend;
use crate::error::Access;
use crate::reply::Reply;
use crate::scripts::operation_script;

// The operation scripts this module runs, each compiled once per process.
operation_script!(STATUS_COUNTS = script(include_str!("counts/status_counts.lua")));

/// The counts in the script's reply order, after its clock.
const ORDER: [&str; 7] = [
    "admitted",
    "running",
    "suspended",
    "completed",
    "failed",
    "cancelled",
    "corrupt",
];

/// The operation's name in errors.
const OP: &str = "status_counts";

impl RedisBackend {
    /// Counts the namespace's executions by effective status: per partition, one `SCAN`
    /// page at a time, each page's records by one script at its clock (so the counts are
    /// not one atomic snapshot: an execution admitted or purged meanwhile may or may not
    /// count, an execution that moved counts once, in one status), summed.
    pub(crate) async fn count_statuses(&self) -> Result<StatusCounts> {
        let mut total = StatusCounts::default();
        for prefix in self.keys().partitions() {
            sum(&mut total, &self.count_partition(prefix).await?);
        }
        Ok(total)
    }

    /// One partition's counts: its `exec:*` keys by SCAN, each key counted once (SCAN may
    /// return one more than once).
    async fn count_partition(&self, prefix: &str) -> Result<StatusCounts> {
        let head = format!("{prefix}exec:");
        let pattern = format!("{head}*");
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        let mut counts = StatusCounts::default();
        let mut cursor = 0;
        loop {
            let (next, keys) = self
                .scan_slot_page(OP, Access::Read, prefix, &pattern, cursor)
                .await?;
            let ids: Vec<Vec<u8>> = keys
                .into_iter()
                .filter_map(|k| k.strip_prefix(head.as_bytes()).map(<[u8]>::to_vec))
                .filter(|id| seen.insert(id.clone()))
                .collect();
            if !ids.is_empty() {
                sum(&mut counts, &self.count_page(prefix, &ids).await?);
            }
            if next == 0 {
                return Ok(counts);
            }
            cursor = next;
        }
    }

    /// The records of `ids` (one SCAN page) by status, in one script.
    async fn count_page(&self, prefix: &str, ids: &[Vec<u8>]) -> Result<StatusCounts> {
        let args: Vec<&[u8]> = ids.iter().map(Vec::as_slice).collect();
        let v = self
            .eval(OP, Access::Read, prefix, &STATUS_COUNTS, &args)
            .await?;
        let reply = Reply::new(OP);
        let items = reply.array(v)?;
        if items.len() != ORDER.len() + 1 {
            return Err(reply.unexpected(&format!("{} elements", items.len())));
        }
        let mut counts = StatusCounts::default();
        for (name, n) in ORDER.iter().zip(items.into_iter().skip(1)) {
            counts.add_named(name, reply.number(n, name)?);
        }
        Ok(counts)
    }
}

/// Adds `part` to `total`, status by status.
fn sum(total: &mut StatusCounts, part: &StatusCounts) {
    total.admitted += part.admitted;
    total.running += part.running;
    total.suspended += part.suspended;
    total.completed += part.completed;
    total.failed += part.failed;
    total.cancelled += part.cancelled;
    total.corrupt += part.corrupt;
}

#[cfg(test)]
mod tests {
    /// Issue 25 item 7: no script of the backend walks the key space (`KEYS` in a script
    /// blocks the server for O(keys) and past the busy-script limit every client gets BUSY).
    #[test]
    fn no_script_calls_keys() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut seen = 0;
        // Every script sits in a directory of src/ (scripts/ or its module's).
        for sub in std::fs::read_dir(&dir).expect("the src directory") {
            let sub = sub.expect("a directory entry").path();
            if !sub.is_dir() {
                continue;
            }
            for entry in std::fs::read_dir(&sub).expect("a module directory") {
                let path = entry.expect("a directory entry").path();
                if path.extension().is_none_or(|e| e != "lua") {
                    continue;
                }
                let body = std::fs::read_to_string(&path).expect("a script");
                assert!(
                    !body.contains("'KEYS'") && !body.contains("\"KEYS\""),
                    "{} calls KEYS",
                    path.display()
                );
                seen += 1;
            }
        }
        assert!(seen > 30, "read only {seen} scripts from {}", dir.display());
    }
}
