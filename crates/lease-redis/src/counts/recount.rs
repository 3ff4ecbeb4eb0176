//! The recount of one partition's status counters: `counts/recount_begin.lua`
//! names the generation, the partition's `exec:*` keys are walked with `SCAN` between
//! scripts, each page counted and marked by `counts/recount_page.lua`, and
//! `counts/recount_end.lua` marks the counters complete. The transition scripts keep
//! counting meanwhile (a record they change is counted then, and the page skips it), so the
//! recount is exact whatever runs beside it; SCAN returns every key present from its start
//! to its end at least once, and a record created meanwhile is counted by its admission.

use std::collections::HashSet;

use lease_core::Result;
use redis::Value;

use crate::backend::RedisBackend;
use crate::error::Access;
use crate::reply::Reply;

use super::{RECOUNT_BEGIN, RECOUNT_END, RECOUNT_PAGE};

/// The operation's name in errors.
const OP: &str = "status_counts";

impl RedisBackend {
    /// Recounts `prefix`'s counters unless they are complete. The scripts write only
    /// idempotent marks and counts of records not yet counted, so each runs as a read
    /// (retried once after a dropped connection).
    pub(super) async fn recount(&self, prefix: &str) -> Result<()> {
        let v = self
            .eval(OP, Access::Read, prefix, &RECOUNT_BEGIN, &[])
            .await?;
        let generation = Reply::new(OP).string(v)?;
        if generation.is_empty() {
            return Ok(());
        }
        tracing::info!(partition = %prefix, generation, "recounting the status counters");
        if !self.recount_pages(prefix, &generation).await? {
            return Ok(());
        }
        self.eval(
            OP,
            Access::Read,
            prefix,
            &RECOUNT_END,
            &[generation.as_bytes()],
        )
        .await?;
        Ok(())
    }

    /// Counts every `exec:*` key's record in `generation`, one SCAN page per script;
    /// `false` when the generation moved on meanwhile (the caller reads the counters again,
    /// which asks for the next recount).
    async fn recount_pages(&self, prefix: &str, generation: &str) -> Result<bool> {
        let head = format!("{prefix}exec:");
        let pattern = format!("{head}*");
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
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
            if !ids.is_empty() && !self.recount_page(prefix, generation, &ids).await? {
                return Ok(false);
            }
            if next == 0 {
                return Ok(true);
            }
            cursor = next;
        }
    }

    /// One page of ids counted in `generation`; `false` when the generation moved on.
    async fn recount_page(&self, prefix: &str, generation: &str, ids: &[Vec<u8>]) -> Result<bool> {
        let mut args: Vec<&[u8]> = vec![generation.as_bytes()];
        args.extend(ids.iter().map(Vec::as_slice));
        let v = self
            .eval(OP, Access::Read, prefix, &RECOUNT_PAGE, &args)
            .await?;
        match v {
            Value::Int(n) => Ok(n >= 0),
            other => Err(Reply::new(OP).unexpected(&format!("{other:?}"))),
        }
    }
}
