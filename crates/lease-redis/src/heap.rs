//! [`HeapClient`] for [`RedisBackend`]: step records in one hash per execution.

use async_trait::async_trait;
use lease_core::{
    ExecutionId, ExecutionLease, Fenced, HeapClient, HeapRecord, Result, StepCursor, StepKey,
    StepPage, StepWrite,
};

use crate::backend::RedisBackend;
use crate::error::Access;
use crate::refusal::is_lost;
use crate::reply::Reply;
use crate::scripts::operation_script;
use crate::wire::{parse_step_field, parse_step_value, step_field, step_value, token_arg};

// The operation scripts this module runs, each compiled once per process.
operation_script!(WRITE_STEP = step_script(include_str!("heap/write_step.lua")));

#[async_trait]
impl HeapClient for RedisBackend {
    #[tracing::instrument(level = "debug", name = "write_step", skip_all)]
    async fn write_step(
        &self,
        lease: &ExecutionLease,
        write: &StepWrite,
    ) -> Result<Fenced<HeapRecord>> {
        const OP: &str = "write_step";
        let field = step_field(&write.step_key, write.step_attempt);
        let value = step_value(lease.token, write.done, &write.response);
        let v = self
            .eval(
                OP,
                Access::Write,
                self.keys().of(&lease.execution_id),
                &WRITE_STEP,
                &[
                    lease.execution_id.as_str().as_bytes(),
                    token_arg(lease.token)?.as_bytes(),
                    field.as_bytes(),
                    value.as_bytes(),
                ],
            )
            .await?;
        let reply = Reply::new(OP);
        let (status, mut rest) = reply.status(v)?;
        if is_lost(reply, &status, lease)? {
            return Ok(Fenced::Lost);
        }
        match status.as_str() {
            "new" => Ok(Fenced::Accepted(HeapRecord::from_write(
                &lease.execution_id,
                lease.token,
                write,
            ))),
            "existing" => {
                let stored = reply.string(reply.next(&mut rest, "step record")?)?;
                let (token, done, response) = parse_step_value(OP, &stored)?;
                Ok(Fenced::Accepted(HeapRecord {
                    execution_id: lease.execution_id.clone(),
                    step_key: write.step_key.clone(),
                    step_attempt: write.step_attempt,
                    done,
                    response,
                    token,
                }))
            }
            other => Err(reply.unexpected(other)),
        }
    }

    #[tracing::instrument(level = "debug", name = "read_step", skip_all)]
    async fn read_step(
        &self,
        id: &ExecutionId,
        step_key: &StepKey,
        step_attempt: u32,
    ) -> Result<Option<HeapRecord>> {
        const OP: &str = "read_step";
        let mut cmd = redis::cmd("HGET");
        cmd.arg(self.keys().steps(id))
            .arg(step_field(step_key, step_attempt));
        let reply = Reply::new(OP);
        let Some(stored) = reply.opt_string(self.query(OP, &cmd).await?)? else {
            return Ok(None);
        };
        let (token, done, response) = parse_step_value(OP, &stored)?;
        Ok(Some(HeapRecord {
            execution_id: id.clone(),
            step_key: step_key.clone(),
            step_attempt,
            done,
            response,
            token,
        }))
    }

    #[tracing::instrument(level = "debug", name = "list_steps", skip_all)]
    async fn list_steps(&self, id: &ExecutionId) -> Result<Vec<HeapRecord>> {
        const OP: &str = "list_steps";
        let mut cmd = redis::cmd("HGETALL");
        cmd.arg(self.keys().steps(id));
        let reply = Reply::new(OP);
        let mut out = Vec::new();
        for (field, stored) in reply.pairs(self.query(OP, &cmd).await?)? {
            let (step_key, step_attempt) = parse_step_field(OP, &field)?;
            let (token, done, response) = parse_step_value(OP, &stored)?;
            out.push(HeapRecord {
                execution_id: id.clone(),
                step_key,
                step_attempt,
                done,
                response,
                token,
            });
        }
        out.sort_by(|a, b| {
            a.step_key
                .cmp(&b.step_key)
                .then(a.step_attempt.cmp(&b.step_attempt))
        });
        Ok(out)
    }

    /// `HKEYS` (the fields only), then `HMGET` of the page's `limit + 1` fields: the values,
    /// which are what grows, are read for one page only. A hash keeps no
    /// order, so the fields are sorted here. A record purged between the two commands is
    /// left out.
    #[tracing::instrument(level = "debug", name = "list_steps_page", skip_all)]
    async fn list_steps_page(
        &self,
        id: &ExecutionId,
        after: Option<&StepCursor>,
        limit: u32,
    ) -> Result<StepPage> {
        const OP: &str = "list_steps_page";
        StepPage::check_limit(limit)?;
        let steps = self.keys().steps(id);
        let reply = Reply::new(OP);
        let mut cmd = redis::cmd("HKEYS");
        cmd.arg(&steps);
        let mut fields = Vec::new();
        for field in reply.array(self.query(OP, &cmd).await?)? {
            let (step_key, step_attempt) = parse_step_field(OP, &reply.string(field)?)?;
            let cursor = StepCursor {
                step_key,
                step_attempt,
            };
            if after
                .is_none_or(|a| (&a.step_key, a.step_attempt) < (&cursor.step_key, step_attempt))
            {
                fields.push(cursor);
            }
        }
        fields.sort_by(|a, b| (&a.step_key, a.step_attempt).cmp(&(&b.step_key, b.step_attempt)));
        fields.truncate(
            usize::try_from(limit)
                .unwrap_or(usize::MAX)
                .saturating_add(1),
        );
        if fields.is_empty() {
            return Ok(StepPage::from_rows(Vec::new(), limit));
        }
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(&steps);
        for f in &fields {
            cmd.arg(step_field(&f.step_key, f.step_attempt));
        }
        let values = reply.array(self.query(OP, &cmd).await?)?;
        let mut rows = Vec::with_capacity(fields.len());
        for (f, value) in fields.into_iter().zip(values) {
            let Some(stored) = reply.opt_string(value)? else {
                continue;
            };
            let (token, done, response) = parse_step_value(OP, &stored)?;
            rows.push(HeapRecord {
                execution_id: id.clone(),
                step_key: f.step_key,
                step_attempt: f.step_attempt,
                done,
                response,
                token,
            });
        }
        Ok(StepPage::from_rows(rows, limit))
    }
}
