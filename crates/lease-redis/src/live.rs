//! The live leases of a namespace (the console lists them): one range read
//! of each partition's `running` index, which holds every running execution scored by its
//! lease expiry, so the list never scans the key space.

use lease_core::{ExecutionRecord, Result};

use crate::backend::RedisBackend;
use crate::error::Access;
use crate::reply::Reply;
use crate::scripts::operation_script;

// The operation script this module runs, compiled once per process.
operation_script!(LIST_LIVE_LEASES = script(include_str!("live/list_live_leases.lua")));

impl RedisBackend {
    /// The first `limit` live leases of every partition, merged by (expiry, id) and cut to
    /// `limit`. Each partition is read at its own script's clock (one partition: one
    /// atomic read, as every other backend's).
    pub(crate) async fn list_live(&self, limit: usize) -> Result<Vec<ExecutionRecord>> {
        let mut out = Vec::new();
        for prefix in self.keys().partitions() {
            out.extend(self.list_live_in(prefix, limit).await?);
        }
        out.sort_by(|a, b| a.live_lease_order().cmp(&b.live_lease_order()));
        out.truncate(limit);
        Ok(out)
    }

    /// One partition's first `limit` live leases (`live/list_live_leases.lua`), each as
    /// `get` would return it at the script's clock.
    async fn list_live_in(&self, prefix: &str, limit: usize) -> Result<Vec<ExecutionRecord>> {
        const OP: &str = "list_live_leases";
        let v = self
            .eval(
                OP,
                Access::Read,
                prefix,
                &LIST_LIVE_LEASES,
                &[limit.to_string().as_bytes()],
            )
            .await?;
        let reply = Reply::new(OP);
        let (now, records) = reply.clocked_records(v)?;
        // The index and the record are written together; a record that disagrees is not
        // listed as live.
        let out: Vec<ExecutionRecord> = records.into_iter().filter(|r| r.lease_live(now)).collect();
        if out.len() > limit {
            return Err(reply.unexpected(&format!("{} records", out.len())));
        }
        Ok(out)
    }
}
