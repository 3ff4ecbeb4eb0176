//! `status_counts` (the operator command's `status` and the console): executions by
//! effective status, read from each partition's counters (`counts/status_counts.lua`, O(1)
//! per partition rather than a walk of every record; the transition
//! scripts keep them, `scripts/ops.lua` `count_move`). A partition whose counters are not
//! complete (written before them, or after a claim set aside a record whose counted status
//! it could not read back) is recounted first (`counts/recount.rs`: SCAN pages between
//! scripts; no script walks the key space, which would block every other client). Each
//! partition's takeover counter (the key `takeovers`, kept by the claims that take over an
//! expired lease) is read by the same script and summed like the counts; a recount never
//! touches it (it cannot be recounted from the records).

mod recount;

use lease_core::{LeaseError, Result, StatusCounts};
use redis::Value;

use crate::backend::RedisBackend;
use crate::error::{Access, BACKEND};
use crate::reply::Reply;
use crate::scripts::operation_script;

// The operation scripts this module runs, each compiled once per process.
operation_script!(STATUS_COUNTS = script(include_str!("counts/status_counts.lua")));
// The recount's (`counts/recount.rs`).
operation_script!(RECOUNT_BEGIN = script(include_str!("counts/recount_begin.lua")));
operation_script!(RECOUNT_PAGE = script(include_str!("counts/recount_page.lua")));
operation_script!(RECOUNT_END = script(include_str!("counts/recount_end.lua")));

/// The counts in the script's reply order, after its clock.
const ORDER: [&str; 8] = [
    "admitted",
    "running",
    "suspended",
    "completed",
    "failed",
    "cancelled",
    "dead",
    "corrupt",
];

/// The operation's name in errors.
const OP: &str = "status_counts";

/// Recounts a partition may need in one call: another starts only when a claim ordered one
/// while the last ran (a record set aside whose counted status was unknown).
const RECOUNTS: usize = 3;

impl RedisBackend {
    /// Counts the namespace's executions by effective status: per partition, its counters
    /// at its script's clock (one atomic step per partition), summed.
    pub(crate) async fn count_statuses(&self) -> Result<StatusCounts> {
        let mut total = StatusCounts::default();
        for prefix in self.keys().partitions() {
            sum(&mut total, &self.count_partition(prefix).await?);
        }
        Ok(total)
    }

    /// One partition's counts, recounting its counters first when they are not complete.
    async fn count_partition(&self, prefix: &str) -> Result<StatusCounts> {
        for _ in 0..RECOUNTS {
            if let Some(counts) = self.read_counts(prefix).await? {
                return Ok(counts);
            }
            self.recount(prefix).await?;
        }
        Err(LeaseError::Unavailable {
            backend: BACKEND,
            operation: OP,
            source: format!(
                "the status counters of {prefix} were invalidated during {RECOUNTS} recounts in a row"
            )
            .into(),
        })
    }

    /// The partition's counts (`counts/status_counts.lua`), or `None` when its counters are
    /// not complete.
    async fn read_counts(&self, prefix: &str) -> Result<Option<StatusCounts>> {
        let v = self
            .eval(OP, Access::Read, prefix, &STATUS_COUNTS, &[])
            .await?;
        let reply = Reply::new(OP);
        let items = reply.array(v)?;
        if let [Value::BulkString(word)] = items.as_slice()
            && word.as_slice() == b"recount"
        {
            return Ok(None);
        }
        if items.len() != ORDER.len() + 2 {
            return Err(reply.unexpected(&format!("{} elements", items.len())));
        }
        let mut items = items.into_iter().skip(1);
        let mut counts = StatusCounts::default();
        for (name, n) in ORDER.iter().zip(items.by_ref()) {
            counts.add_named(name, reply.number(n, name)?);
        }
        if let Some(n) = items.next() {
            counts.takeovers = reply.number(n, "takeovers")?;
        }
        Ok(Some(counts))
    }
}

/// Adds `part` to `total`, status by status, and its takeovers.
fn sum(total: &mut StatusCounts, part: &StatusCounts) {
    total.admitted += part.admitted;
    total.running += part.running;
    total.suspended += part.suspended;
    total.completed += part.completed;
    total.failed += part.failed;
    total.cancelled += part.cancelled;
    total.dead += part.dead;
    total.corrupt += part.corrupt;
    total.takeovers += part.takeovers;
}

#[cfg(test)]
mod tests {
    /// No script of the backend walks the key space (`KEYS` in a script
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
