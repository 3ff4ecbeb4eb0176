//! Browsing executions on Redis (lease-core's `browse`): every record carries its admission
//! sequence `sq` and is listed, scored by it, in the browse sets of its stored status
//! (alone, with its workflow, with its key, with both: `scripts/ops.lua`), kept by every
//! script that creates a record or changes its status. A page is one script per partition
//! (`browse/list_executions.lua`): a reverse range of the filter's set below the cursor, or
//! a merge of the seven statuses' sets when no status is given; a split namespace's pages
//! are merged by sequence here. The cursor is `s<sequence>`: the last one listed.

use lease_core::limits::check_limit;
use lease_core::{ExecutionFilter, ExecutionPage, ExecutionRecord, ListCursor, Result, Timestamp};

use crate::backend::RedisBackend;
use crate::error::Access;
use crate::reply::Reply;
use crate::scripts::operation_script;

// The operation scripts this module runs, each compiled once per process.
operation_script!(LIST_EXECUTIONS = script(include_str!("browse/list_executions.lua")));
operation_script!(RESERVE = script(include_str!("browse/reserve.lua")));

/// The largest sequence a cursor may name: what Lua's doubles hold exactly.
const MAX_SEQUENCE: u64 = (1 << 53) - 1;

/// The sequence a cursor this backend wrote names, or `InvalidInput`.
fn cursor_sequence(cursor: &ListCursor) -> Result<u64> {
    let digits = cursor
        .as_str()
        .strip_prefix('s')
        .filter(|d| !d.is_empty() && d.len() <= 16 && d.bytes().all(|b| b.is_ascii_digit()))
        .filter(|d| !d.starts_with('0'))
        .ok_or_else(|| cursor.unreadable())?;
    digits
        .parse::<u64>()
        .ok()
        .filter(|&n| n <= MAX_SEQUENCE)
        .ok_or_else(|| cursor.unreadable())
}

/// The cursor after the record of sequence `seq`.
fn cursor_after(seq: u64) -> Result<ListCursor> {
    ListCursor::new(format!("s{seq}"))
}

/// One partition's page: its records with their sequences, newest first, and, when more
/// may follow, the last sequence it examined.
struct PartPage {
    records: Vec<(u64, ExecutionRecord)>,
    more: Option<u64>,
}

impl RedisBackend {
    /// The admission sequences of `n` admissions, as the admitting scripts take them (comma
    /// separated): on a split namespace the next `n` of the namespace's counter (one script
    /// on the home prefix), so every partition's records share one admission order; with
    /// one partition `""`, each script taking its own.
    pub(crate) async fn reserve_sequences(&self, n: usize) -> Result<String> {
        const OP: &str = "reserve_sequences";
        if !self.keys().split() || n == 0 {
            return Ok(String::new());
        }
        let count = n.to_string();
        let v = self
            .eval(
                OP,
                Access::Write,
                self.keys().prefix(),
                &RESERVE,
                &[count.as_bytes()],
            )
            .await?;
        let last: u64 = Reply::new(OP).number(v, "sequence")?;
        let first = (last + 1).saturating_sub(n as u64);
        Ok((first..=last)
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(","))
    }

    /// `ExecutionClient::list_executions`.
    pub(crate) async fn browse(
        &self,
        filter: &ExecutionFilter,
        after: Option<&ListCursor>,
        limit: usize,
    ) -> Result<ExecutionPage> {
        check_limit("list limit", limit)?;
        let after = after.map(cursor_sequence).transpose()?;
        let mut all: Vec<(u64, ExecutionRecord)> = Vec::new();
        let mut more = false;
        for prefix in self.keys().partitions() {
            let page = self.browse_in(prefix, filter, after, limit).await?;
            more |= page.more.is_some();
            all.extend(page.records);
        }
        all.sort_by_key(|(seq, _)| std::cmp::Reverse(*seq));
        more |= all.len() > limit;
        all.truncate(limit);
        let next = match (more, all.last()) {
            (true, Some((seq, _))) => Some(cursor_after(*seq)?),
            _ => None,
        };
        Ok(ExecutionPage {
            records: all.into_iter().map(|(_, r)| r).collect(),
            next,
        })
    }

    /// One partition's page (`browse/list_executions.lua`), each record as `get` would
    /// return it at the script's clock.
    async fn browse_in(
        &self,
        prefix: &str,
        filter: &ExecutionFilter,
        after: Option<u64>,
        limit: usize,
    ) -> Result<PartPage> {
        const OP: &str = "list_executions";
        let status = filter.status.map(|s| s.as_str()).unwrap_or("");
        let workflow = filter.workflow.as_ref().map(|w| w.as_str()).unwrap_or("");
        let key = filter.key.as_ref().map(|k| k.as_str()).unwrap_or("");
        let after = after.map(|n| n.to_string()).unwrap_or_default();
        let limit_arg = limit.to_string();
        let args = [
            status.as_bytes(),
            workflow.as_bytes(),
            key.as_bytes(),
            after.as_bytes(),
            limit_arg.as_bytes(),
        ];
        let v = self
            .eval(OP, Access::Read, prefix, &LIST_EXECUTIONS, &args)
            .await?;
        let reply = Reply::new(OP);
        let mut items = reply.array(v)?.into_iter();
        let now: i64 = reply.number(reply.next(&mut items, "now")?, "now")?;
        let now = Timestamp::from_millis(now);
        let more = reply.string(reply.next(&mut items, "more")?)? == "1";
        let last = reply.string(reply.next(&mut items, "last")?)?;
        let mut records = Vec::new();
        while let Some(seq) = items.next() {
            let seq: u64 = reply.number(seq, "sequence")?;
            let id = reply.execution_id(reply.next(&mut items, "id")?)?;
            let record = reply
                .record(id, reply.next(&mut items, "record")?)?
                .ok_or_else(|| reply.unexpected("empty record"))?;
            records.push((seq, record.effective(now)));
        }
        if records.len() > limit {
            return Err(reply.unexpected(&format!("{} records", records.len())));
        }
        let more = match more {
            true => Some(
                last.parse()
                    .map_err(|_| reply.unexpected("last sequence"))?,
            ),
            false => None,
        };
        Ok(PartPage { records, more })
    }
}

#[cfg(test)]
mod tests {
    use lease_core::LeaseError;

    use super::*;

    #[test]
    fn only_cursors_this_backend_writes_are_read() {
        let seq = |s: &str| cursor_sequence(&ListCursor::new(s).expect("text"));
        assert_eq!(seq("s1").expect("ok"), 1);
        assert_eq!(seq("s9007199254740991").expect("ok"), MAX_SEQUENCE);
        for bad in ["1", "s", "s01", "s-1", "x12", "s9007199254740992", "s1a"] {
            assert!(
                matches!(seq(bad), Err(LeaseError::InvalidInput { .. })),
                "{bad}"
            );
        }
        assert_eq!(cursor_after(42).expect("cursor").as_str(), "s42");
    }
}
