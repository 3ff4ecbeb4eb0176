//! Attempt limits and dead letters on Redis (lease-core's `attempts`): the limits are the
//! hash `attempts` of every partition (each claim copies the limit that applies onto the
//! record it claims, `scripts/record.lua` `attempt_limit_for`), written partition by
//! partition like pauses; `list_dead` reads each partition's `dead` index and its expired
//! last attempts (`running_last`), merged by id; `retry_dead` is one script per partition,
//! every id checked before the first write (a split namespace checks every partition
//! first). The release that uses the last attempt is `execution/release.lua`.

use lease_core::attempts::check_retry_ids;
use lease_core::limits::check_limit;
use lease_core::{
    AttemptLimit, AttemptLimits, AttemptScope, ExecutionId, ExecutionRecord, ExecutionStatus, Json,
    LeaseError, Result, WorkflowName,
};
use redis::Value;

use crate::backend::RedisBackend;
use crate::error::Access;
use crate::reply::Reply;
use crate::scripts::operation_script;

// The operation scripts this module runs, each compiled once per process.
operation_script!(LIMITS = script(include_str!("attempts/limits.lua")));
operation_script!(LIST_DEAD = script(include_str!("attempts/list_dead.lua")));
operation_script!(RETRY_DEAD = record_script(include_str!("attempts/retry_dead.lua")));

/// The field of `attempts` that holds the namespace default: a control character first,
/// which no workflow name holds (`ATTEMPTS_DEFAULT` in `scripts/record.lua`).
const DEFAULT_FIELD: &str = "\u{1f}default";

impl RedisBackend {
    /// `ExecutionClient::set_attempt_limit`: sets or removes one field of every partition's
    /// `attempts` (each write atomic; a split namespace's partitions see it one script
    /// apart, and a repeated call repairs a write interrupted between them).
    pub(crate) async fn set_attempts(
        &self,
        scope: &AttemptScope,
        limit: Option<AttemptLimit>,
    ) -> Result<()> {
        const OP: &str = "set_attempt_limit";
        let field = match scope {
            AttemptScope::Default => DEFAULT_FIELD,
            AttemptScope::Workflow(w) => w.as_str(),
        };
        let (verb, value) = match limit {
            Some(l) => ("set", l.get().to_string()),
            None => ("remove", String::new()),
        };
        for prefix in self.keys().partitions() {
            let args = [verb.as_bytes(), field.as_bytes(), value.as_bytes()];
            let v = self.eval(OP, Access::Write, prefix, &LIMITS, &args).await?;
            Reply::new(OP).array(v)?;
        }
        Ok(())
    }

    /// `ExecutionClient::attempt_limits`, as the first partition holds them.
    pub(crate) async fn read_attempts(&self) -> Result<AttemptLimits> {
        const OP: &str = "attempt_limits";
        let reply = Reply::new(OP);
        let prefix = &self.keys().partitions()[0];
        let args: [&[u8]; 3] = [b"list", b"", b""];
        let v = self.eval(OP, Access::Read, prefix, &LIMITS, &args).await?;
        let mut out = AttemptLimits::default();
        for (field, value) in reply.pairs(v)? {
            let limit = value
                .parse()
                .ok()
                .and_then(|n| AttemptLimit::new(n).ok())
                .ok_or_else(|| reply.unexpected(&format!("attempt limit {value:?}")))?;
            if field == DEFAULT_FIELD {
                out.default = Some(limit);
            } else {
                let name =
                    WorkflowName::new(field).map_err(|e| reply.unexpected(&e.to_string()))?;
                out.workflows.push((name, limit));
            }
        }
        out.workflows.sort();
        Ok(out)
    }

    /// `ExecutionClient::list_dead`: each partition's first `limit` dead executions after
    /// `after`, merged by id.
    pub(crate) async fn dead_page(
        &self,
        after: Option<&ExecutionId>,
        limit: usize,
    ) -> Result<Vec<ExecutionRecord>> {
        const OP: &str = "list_dead";
        check_limit("list limit", limit)?;
        let after = after.map_or("", |a| a.as_str());
        let limit_arg = limit.to_string();
        let args = [after.as_bytes(), limit_arg.as_bytes()];
        let mut out = Vec::new();
        for prefix in self.keys().partitions() {
            let v = self
                .eval(OP, Access::Read, prefix, &LIST_DEAD, &args)
                .await?;
            let (now, records) = Reply::new(OP).clocked_records(v)?;
            out.extend(
                records
                    .into_iter()
                    .map(|r| r.effective(now))
                    .filter(|r| r.status == ExecutionStatus::Dead),
            );
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out.truncate(limit);
        Ok(out)
    }

    /// `ExecutionClient::retry_dead`: one script per partition holding some of `ids`; with
    /// more than one, every partition is checked before any is written.
    pub(crate) async fn retry(
        &self,
        ids: &[ExecutionId],
        input: Option<&Json>,
    ) -> Result<Vec<ExecutionRecord>> {
        check_retry_ids(ids)?;
        let mut groups: Vec<(&str, Vec<&ExecutionId>)> = Vec::new();
        for id in ids {
            let prefix = self.keys().of(id);
            match groups.iter_mut().find(|(p, _)| *p == prefix) {
                Some((_, group)) => group.push(id),
                None => groups.push((prefix, vec![id])),
            }
        }
        if groups.len() > 1 {
            for (prefix, group) in &groups {
                self.retry_in(prefix, group, input, "check").await?;
            }
        }
        let mut retried = Vec::with_capacity(ids.len());
        for (prefix, group) in &groups {
            retried.extend(self.retry_in(prefix, group, input, "write").await?);
        }
        // Back in the order of `ids`.
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let at = retried.iter().position(|r| &r.id == id);
            let record = at.map(|i| retried.swap_remove(i));
            out.push(
                record.ok_or_else(|| Reply::new("retry_dead").unexpected("a missing record"))?,
            );
        }
        Ok(out)
    }

    /// `attempts/retry_dead.lua` on one partition (`mode` check / write).
    async fn retry_in(
        &self,
        prefix: &str,
        ids: &[&ExecutionId],
        input: Option<&Json>,
        mode: &str,
    ) -> Result<Vec<ExecutionRecord>> {
        const OP: &str = "retry_dead";
        let mut args: Vec<&[u8]> = vec![
            self.publish_word(),
            mode.as_bytes(),
            if input.is_some() { b"1" } else { b"0" },
            input.map_or(&b""[..], |j| j.as_str().as_bytes()),
        ];
        args.extend(ids.iter().map(|id| id.as_str().as_bytes()));
        let v = self
            .eval(OP, Access::Write, prefix, &RETRY_DEAD, &args)
            .await?;
        let reply = Reply::new(OP);
        let (status, mut rest) = reply.status(v)?;
        let named = |rest: &mut std::vec::IntoIter<Value>| -> Result<&ExecutionId> {
            let i: usize = reply.number(reply.next(rest, "index")?, "index")?;
            i.checked_sub(1)
                .and_then(|i| ids.get(i).copied())
                .ok_or_else(|| reply.unexpected(&format!("index {i}")))
        };
        match status.as_str() {
            "ok" => reply
                .clocked_records(Value::Array(rest.collect()))
                .map(|(_, records)| records),
            "unknown" => Err(LeaseError::UnknownExecution(named(&mut rest)?.clone())),
            "not_dead" => {
                let id = named(&mut rest)?;
                let st = reply.string(reply.next(&mut rest, "status")?)?;
                Err(LeaseError::invalid(
                    "retry_dead",
                    format!("execution {id} is {st}, not dead"),
                ))
            }
            other => Err(reply.unexpected(other)),
        }
    }
}
