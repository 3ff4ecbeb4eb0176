//! [`ExecutionClient`] for [`RedisBackend`]: one Lua script per operation.

use std::time::Duration;

use async_trait::async_trait;
use lease_core::limits::check_limit;
use lease_core::time::lease_millis;
use lease_core::{
    Acknowledged, Admission, ClaimRequest, ExecutionClient, ExecutionId, ExecutionLease,
    ExecutionOutcome, ExecutionRecord, Fenced, FencingToken, LeaseError, Result, Timestamp,
    WorkflowRunOutcome,
};
use redis::Value;

use crate::backend::RedisBackend;
use crate::errors::Access;
use crate::reply::Reply;
use crate::scripts::SCRIPTS;
use crate::wire::{MAX_EXACT_MS, exact_time};

/// Interprets the status words every fenced script shares: `Ok(true)` for `lost`,
/// `Ok(false)` for the words the caller handles (`ok`, `new`, `existing`), or the typed error
/// for `unknown` (no such execution), `zero` (token 0) and `foreign` (a token above the
/// execution's own).
pub(crate) fn is_lost(reply: Reply, status: &str, lease: &ExecutionLease) -> Result<bool> {
    match status {
        "lost" => Ok(true),
        "unknown" => Err(LeaseError::UnknownExecution(lease.execution_id.clone())),
        "zero" => Err(LeaseError::invalid("lease token", "0 is never issued")),
        "foreign" => Err(LeaseError::ForeignToken {
            execution: lease.execution_id.clone(),
            token: lease.token,
        }),
        "ok" | "new" | "existing" => Ok(false),
        other => Err(reply.unexpected(other)),
    }
}

impl RedisBackend {
    /// Decodes `{now, HGETALL}` into the effective record.
    fn effective_reply(
        &self,
        reply: Reply,
        id: &ExecutionId,
        v: Value,
    ) -> Result<Option<ExecutionRecord>> {
        let mut items = reply.array(v)?.into_iter();
        let now: i64 = reply.number(reply.next(&mut items, "now")?, "now")?;
        let record = reply.record(id.clone(), reply.next(&mut items, "record")?)?;
        Ok(record.map(|r| r.effective(Timestamp::from_millis(now))))
    }
}

#[async_trait]
impl ExecutionClient for RedisBackend {
    async fn admit(&self, admission: &Admission) -> Result<ExecutionRecord> {
        const OP: &str = "admit";
        let workflow = admission.workflow.as_ref().map_or("", |w| w.as_str());
        let input = admission.input.as_ref().map_or("", |j| j.as_str());
        let v = self
            .eval(
                OP,
                Access::Write,
                &SCRIPTS.admit,
                &[
                    admission.id.as_str().as_bytes(),
                    workflow.as_bytes(),
                    input.as_bytes(),
                ],
            )
            .await?;
        let reply = Reply::new(OP);
        let mut items = reply.array(v)?.into_iter();
        let now: i64 = reply.number(reply.next(&mut items, "now")?, "now")?;
        let now = Timestamp::from_millis(now);
        match items.next() {
            // Created now: the record is exactly what the admission describes.
            None => Ok(ExecutionRecord::admitted(admission, now)),
            Some(fields) => reply
                .record(admission.id.clone(), fields)?
                .map(|r| r.effective(now))
                .ok_or_else(|| reply.unexpected("an empty record")),
        }
    }

    async fn get(&self, id: &ExecutionId) -> Result<Option<ExecutionRecord>> {
        const OP: &str = "get";
        let v = self
            .eval(OP, Access::Read, &SCRIPTS.get, &[id.as_str().as_bytes()])
            .await?;
        self.effective_reply(Reply::new(OP), id, v)
    }

    async fn list_failing(&self, min: u32, limit: usize) -> Result<Vec<ExecutionRecord>> {
        const OP: &str = "list_failing";
        check_limit("list limit", limit)?;
        let min = min.max(1);
        let v = self
            .eval(
                OP,
                Access::Read,
                &SCRIPTS.list_failing,
                &[min.to_string().as_bytes(), limit.to_string().as_bytes()],
            )
            .await?;
        let reply = Reply::new(OP);
        let mut items = reply.array(v)?.into_iter();
        let now: i64 = reply.number(reply.next(&mut items, "now")?, "now")?;
        let now = Timestamp::from_millis(now);
        let mut out = Vec::new();
        while let Some(id) = items.next() {
            let id = reply.execution_id(id)?;
            let record = reply
                .record(id, reply.next(&mut items, "record")?)?
                .ok_or_else(|| reply.unexpected("empty record"))?;
            let effective = record.effective(now);
            // The script lists each candidate once.
            if effective.unacknowledged_deliveries >= min {
                out.push(effective);
            }
        }
        out.sort_by(|a, b| {
            b.unacknowledged_deliveries
                .cmp(&a.unacknowledged_deliveries)
                .then_with(|| a.id.cmp(&b.id))
        });
        out.truncate(limit);
        Ok(out)
    }

    async fn request_wake(&self, id: &ExecutionId, at: Timestamp) -> Result<()> {
        const OP: &str = "request_wake";
        let at = exact_time("wake time", at)?;
        let v = self
            .eval(
                OP,
                Access::Write,
                &SCRIPTS.request_wake,
                &[id.as_str().as_bytes(), at.to_string().as_bytes()],
            )
            .await?;
        let reply = Reply::new(OP);
        let (status, _) = reply.status(v)?;
        match status.as_str() {
            "ok" => Ok(()),
            "unknown" => Err(LeaseError::UnknownExecution(id.clone())),
            other => Err(reply.unexpected(other)),
        }
    }

    async fn claim_due(&self, request: ClaimRequest) -> Result<Vec<ExecutionLease>> {
        const OP: &str = "claim_due";
        let lease_ms = request.validate()?;
        let requested = request.now.as_millis();
        // A caller's now beyond the exact range is later than any clock: min() ignores it.
        let requested = if requested > MAX_EXACT_MS {
            String::new()
        } else {
            exact_time("claim now", request.now)?.to_string()
        };
        let v = self
            .eval(
                OP,
                Access::Write,
                &SCRIPTS.claim_due,
                &[
                    requested.as_bytes(),
                    request.limit.to_string().as_bytes(),
                    lease_ms.to_string().as_bytes(),
                ],
            )
            .await?;
        let reply = Reply::new(OP);
        let items = reply.array(v)?;
        if items.len() % 3 != 0 || items.len() / 3 > request.limit {
            return Err(reply.unexpected(&format!("{} elements", items.len())));
        }
        let mut leases = Vec::with_capacity(items.len() / 3);
        let mut items = items.into_iter();
        while let Some(id) = items.next() {
            let execution_id = reply.execution_id(id)?;
            let token: u64 = reply.number(reply.next(&mut items, "token")?, "token")?;
            let expires: i64 = reply.number(reply.next(&mut items, "expiry")?, "expiry")?;
            if token == 0 {
                return Err(reply.unexpected("token 0"));
            }
            leases.push(ExecutionLease {
                execution_id,
                token: FencingToken::new(token),
                expires_at: Timestamp::from_millis(expires),
            });
        }
        Ok(leases)
    }

    async fn renew(
        &self,
        lease: &ExecutionLease,
        duration: Duration,
    ) -> Result<Fenced<ExecutionLease>> {
        const OP: &str = "renew";
        let lease_ms = lease_millis("renewal duration", duration)?;
        let v = self
            .eval(
                OP,
                Access::Write,
                &SCRIPTS.renew,
                &[
                    lease.execution_id.as_str().as_bytes(),
                    lease.token.get().to_string().as_bytes(),
                    lease_ms.to_string().as_bytes(),
                ],
            )
            .await?;
        let reply = Reply::new(OP);
        let (status, mut rest) = reply.status(v)?;
        if is_lost(reply, &status, lease)? {
            return Ok(Fenced::Lost);
        }
        if status != "ok" {
            return Err(reply.unexpected(&status));
        }
        let expires: i64 = reply.number(reply.next(&mut rest, "expiry")?, "expiry")?;
        Ok(Fenced::Accepted(ExecutionLease {
            execution_id: lease.execution_id.clone(),
            token: lease.token,
            expires_at: Timestamp::from_millis(expires),
        }))
    }

    async fn release(&self, lease: &ExecutionLease) -> Result<Fenced<()>> {
        const OP: &str = "release";
        let v = self
            .eval(
                OP,
                Access::Write,
                &SCRIPTS.release,
                &[
                    lease.execution_id.as_str().as_bytes(),
                    lease.token.get().to_string().as_bytes(),
                ],
            )
            .await?;
        let reply = Reply::new(OP);
        let (status, _) = reply.status(v)?;
        match (is_lost(reply, &status, lease)?, status.as_str()) {
            (true, _) => Ok(Fenced::Lost),
            (false, "ok") => Ok(Fenced::Accepted(())),
            (false, other) => Err(reply.unexpected(other)),
        }
    }

    async fn acknowledge(
        &self,
        lease: &ExecutionLease,
        outcome: &WorkflowRunOutcome,
    ) -> Result<Fenced<Acknowledged>> {
        const OP: &str = "acknowledge";
        let (kind, value, acknowledged) = match outcome {
            WorkflowRunOutcome::Suspended => ("suspended", "", Acknowledged::Suspended),
            WorkflowRunOutcome::Completed(v) => (
                "completed",
                v.as_str(),
                Acknowledged::Terminal(ExecutionOutcome::Completed(v.clone())),
            ),
            WorkflowRunOutcome::Failed(v) => (
                "failed",
                v.as_str(),
                Acknowledged::Terminal(ExecutionOutcome::Failed(v.clone())),
            ),
        };
        let v = self
            .eval(
                OP,
                Access::Write,
                &SCRIPTS.acknowledge,
                &[
                    lease.execution_id.as_str().as_bytes(),
                    lease.token.get().to_string().as_bytes(),
                    kind.as_bytes(),
                    value.as_bytes(),
                ],
            )
            .await?;
        let reply = Reply::new(OP);
        let (status, _) = reply.status(v)?;
        match (is_lost(reply, &status, lease)?, status.as_str()) {
            (true, _) => Ok(Fenced::Lost),
            (false, "ok") => Ok(Fenced::Accepted(acknowledged)),
            (false, other) => Err(reply.unexpected(other)),
        }
    }

    async fn now(&self) -> Result<Timestamp> {
        self.clock_now().await
    }
}
