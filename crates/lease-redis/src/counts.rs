//! `status_counts` (issue 15): executions by effective status in one script
//! (`lua/status_counts.lua`).

use lease_core::{Result, StatusCounts};

use crate::backend::RedisBackend;
use crate::errors::Access;
use crate::reply::Reply;
use crate::scripts::SCRIPTS;

/// The counts in the script's reply order, after its clock.
const ORDER: [&str; 6] = [
    "admitted",
    "running",
    "suspended",
    "completed",
    "failed",
    "corrupt",
];

impl RedisBackend {
    /// Counts the namespace's executions by effective status at the script's clock: one
    /// script per partition (atomic within each; a namespace of one partition is counted
    /// in one atomic step), summed.
    pub(crate) async fn count_statuses(&self) -> Result<StatusCounts> {
        let mut total = StatusCounts::default();
        for prefix in self.keys().partitions() {
            let p = self.count_partition(prefix).await?;
            total.admitted += p.admitted;
            total.running += p.running;
            total.suspended += p.suspended;
            total.completed += p.completed;
            total.failed += p.failed;
            total.corrupt += p.corrupt;
        }
        Ok(total)
    }

    /// One partition's counts, in one script.
    async fn count_partition(&self, prefix: &str) -> Result<StatusCounts> {
        const OP: &str = "status_counts";
        let v = self
            .eval(OP, Access::Read, prefix, &SCRIPTS.status_counts, &[])
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
