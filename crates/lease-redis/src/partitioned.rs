//! The operations that read or sweep every partition of a namespace: listing
//! failing and corrupt records, retention, and the grouping of batches by partition. With
//! one partition each runs exactly one script, as before partitions.

use lease_core::{CorruptRecord, ExecutionId, ExecutionRecord, LeaseError, Result, Timestamp};
use redis::Value;

use crate::backend::RedisBackend;
use crate::claim::lossy;
use crate::error::{Access, BACKEND};
use crate::reply::Reply;
use crate::scripts::operation_script;
use crate::wire::MAX_EXACT_MS;

// The operation scripts this module runs, each compiled once per process.
operation_script!(LIST_FAILING = script(include_str!("partitioned/list_failing.lua")));
operation_script!(LIST_CORRUPT = script(include_str!("partitioned/list_corrupt.lua")));
operation_script!(FORGET_AT_HOME = purge_script(include_str!("partitioned/forget_at_home.lua")));
operation_script!(PURGE_TERMINAL = purge_script(include_str!("partitioned/purge_terminal.lua")));
operation_script!(FORGOTTEN = script(include_str!("partitioned/forgotten.lua")));

/// The items of a batch grouped by partition: each partition's prefix with the indexes of
/// its items, partitions in the order of their first item.
pub(crate) fn by_partition<'a, T>(
    backend: &'a RedisBackend,
    items: &[T],
    id_of: impl Fn(&T) -> &ExecutionId,
) -> Vec<(&'a str, Vec<usize>)> {
    let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let prefix = backend.keys().of(id_of(item));
        match groups.iter_mut().find(|(p, _)| *p == prefix) {
            Some((_, members)) => members.push(i),
            None => groups.push((prefix, vec![i])),
        }
    }
    groups
}

/// The `(member, score)` pairs of a `ZRANGEBYSCORE ... WITHSCORES` reply: flat in RESP2,
/// pairs in RESP3; scores are whole milliseconds.
fn scored_members(v: Value) -> Result<Vec<(String, i64)>> {
    let reply = Reply::new("purge_terminal");
    let mut flat = Vec::new();
    for item in reply.array(v)? {
        match item {
            Value::Array(pair) => flat.extend(pair),
            other => flat.push(other),
        }
    }
    let mut out = Vec::with_capacity(flat.len() / 2);
    let mut it = flat.into_iter();
    while let (Some(member), Some(score)) = (it.next(), it.next()) {
        let score = match score {
            Value::Double(d) => d,
            other => {
                let text = reply.string(other)?;
                text.parse::<f64>()
                    .map_err(|_| reply.unexpected(&format!("score {text:?}")))?
            }
        };
        out.push((reply.string(member)?, score as i64));
    }
    Ok(out)
}

/// The `OutcomeUnknown` of a split purge that failed (`e`) after purging `ids`.
fn purge_half_way(ids: &[ExecutionId], e: &LeaseError) -> LeaseError {
    let ids: Vec<&str> = ids.iter().map(ExecutionId::as_str).collect();
    LeaseError::OutcomeUnknown {
        backend: BACKEND,
        operation: "purge_terminal",
        source: format!(
            "a partition's purge failed ({e}) after this call purged {ids:?}; the next \
             purge_terminal finishes what is left of theirs"
        )
        .into(),
    }
}

impl RedisBackend {
    /// One partition's `list_failing` candidates, effective at its script's clock and
    /// filtered by `min` (the caller merges, sorts and truncates).
    pub(crate) async fn list_failing_in(
        &self,
        prefix: &str,
        min: u32,
        limit: usize,
    ) -> Result<Vec<ExecutionRecord>> {
        const OP: &str = "list_failing";
        let v = self
            .eval(
                OP,
                Access::Read,
                prefix,
                &LIST_FAILING,
                &[min.to_string().as_bytes(), limit.to_string().as_bytes()],
            )
            .await?;
        let (now, records) = Reply::new(OP).clocked_records(v)?;
        // The script lists each candidate once.
        let out = records
            .into_iter()
            .map(|r| r.effective(now))
            .filter(|r| r.unacknowledged_deliveries >= min)
            .collect();
        Ok(out)
    }

    /// One partition's first `limit` corrupt records, by id.
    pub(crate) async fn list_corrupt_in(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<CorruptRecord>> {
        const OP: &str = "list_corrupt";
        let v = self
            .eval(
                OP,
                Access::Read,
                prefix,
                &LIST_CORRUPT,
                &[limit.to_string().as_bytes()],
            )
            .await?;
        let reply = Reply::new(OP);
        let items = reply.array(v)?;
        if items.len() % 2 != 0 || items.len() / 2 > limit {
            return Err(reply.unexpected(&format!("{} elements", items.len())));
        }
        let mut items = items.into_iter().map(lossy);
        let mut out = Vec::with_capacity(limit.min(16));
        while let (Some(id), Some(problem)) = (items.next(), items.next()) {
            out.push(CorruptRecord { id, problem });
        }
        Ok(out)
    }

    /// How many executions each partition's purge takes: with one partition, `limit`; with
    /// more, the first `limit` of every partition's `done` index (scored by the end of the
    /// last delivery, before `before`) in (end, id) order, so the earliest ended go first
    /// over the whole namespace.
    pub(crate) async fn purge_plan(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<(&str, usize)>> {
        const OP: &str = "purge_terminal";
        let partitions = self.keys().partitions();
        if partitions.len() == 1 {
            return Ok(vec![(partitions[0].as_str(), limit)]);
        }
        let before = before.as_millis().clamp(-MAX_EXACT_MS, MAX_EXACT_MS);
        let mut all: Vec<(i64, String, usize)> = Vec::new();
        for (p, prefix) in partitions.iter().enumerate() {
            let mut cmd = redis::cmd("ZRANGEBYSCORE");
            cmd.arg(format!("{prefix}done"))
                .arg("-inf")
                .arg(format!("({before}"))
                .arg("WITHSCORES")
                .arg("LIMIT")
                .arg(0)
                .arg(limit);
            for (id, score) in scored_members(self.query(OP, &cmd).await?)? {
                all.push((score, id, p));
            }
        }
        all.sort();
        all.truncate(limit);
        Ok(partitions
            .iter()
            .enumerate()
            .filter_map(|(p, prefix)| {
                let n = all.iter().filter(|(_, _, q)| *q == p).count();
                (n > 0).then_some((prefix.as_str(), n))
            })
            .collect())
    }

    /// Purges up to `limit` terminal executions of one partition (`partitioned/purge_terminal.lua`)
    /// and returns their ids.
    pub(crate) async fn purge_in(
        &self,
        prefix: &str,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<ExecutionId>> {
        const OP: &str = "purge_terminal";
        // An instant past the exact range is after every stored end (and one before it,
        // before every one).
        let before = before.as_millis().clamp(-MAX_EXACT_MS, MAX_EXACT_MS);
        let v = self
            .eval(
                OP,
                Access::Write,
                prefix,
                &PURGE_TERMINAL,
                &[
                    before.to_string().as_bytes(),
                    limit.to_string().as_bytes(),
                    self.split_word(),
                ],
            )
            .await?;
        let reply = Reply::new(OP);
        let ids = reply
            .array(v)?
            .into_iter()
            .map(|id| reply.execution_id(id))
            .collect::<Result<Vec<_>>>()?;
        if ids.len() > limit {
            return Err(reply.unexpected(&format!("{} ids", ids.len())));
        }
        Ok(ids)
    }

    /// With partitions, removes what the home prefix holds about executions partition
    /// `prefix` purged: their store receipts, start records, effects and store-waiter
    /// registrations (`forget_at_home.lua`, as `purge_terminal` does inside one partition),
    /// then takes them out of the partition's `purged` set (`forgotten.lua`). Nothing to do
    /// with one partition, whose purge did it already.
    pub(crate) async fn forget_at_home(&self, prefix: &str, ids: &[ExecutionId]) -> Result<()> {
        const OP: &str = "purge_terminal";
        if !self.keys().split() || ids.is_empty() {
            return Ok(());
        }
        let args: Vec<&[u8]> = ids.iter().map(|id| id.as_str().as_bytes()).collect();
        let home = self.keys().prefix();
        self.eval(OP, Access::Write, home, &FORGET_AT_HOME, &args)
            .await?;
        self.eval(OP, Access::Write, prefix, &FORGOTTEN, &args)
            .await?;
        Ok(())
    }

    /// With partitions, first finishes the purges an earlier call left half-way (a
    /// partition's `purged` set still names them: `forget_at_home` did not complete), then
    /// purges per plan, partition by partition (each atomic, then its home step). A failure
    /// after a partition's purge is `OutcomeUnknown` naming the ids this call purged; the
    /// next call finishes their home step. The ids purged, unsorted.
    pub(crate) async fn purge_partitions(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<ExecutionId>> {
        const OP: &str = "purge_terminal";
        if self.keys().split() {
            for prefix in self.keys().partitions() {
                let mut cmd = redis::cmd("SMEMBERS");
                cmd.arg(format!("{prefix}purged"));
                let reply = Reply::new(OP);
                let left = reply
                    .array(self.query(OP, &cmd).await?)?
                    .into_iter()
                    .map(|id| reply.execution_id(id))
                    .collect::<Result<Vec<_>>>()?;
                self.forget_at_home(prefix, &left).await?;
            }
        }
        let mut ids = Vec::new();
        for (prefix, count) in self.purge_plan(before, limit).await? {
            let gone = match self.purge_in(prefix, before, count).await {
                Ok(gone) => gone,
                Err(e) if ids.is_empty() => return Err(e),
                Err(e) => return Err(purge_half_way(&ids, &e)),
            };
            ids.extend(gone.iter().cloned());
            if let Err(e) = self.forget_at_home(prefix, &gone).await {
                return Err(purge_half_way(&ids, &e));
            }
        }
        Ok(ids)
    }
}
