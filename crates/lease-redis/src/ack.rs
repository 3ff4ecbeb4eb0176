//! `acknowledge_batch`: every item checked, then applied, in one script (RFC 002
//! `acknowledge`, fenced per item), and the outcome encoding it shares
//! with `acknowledge`.

use lease_core::execution::check_ack_batch;
use lease_core::{
    Acknowledged, Acknowledgement, ExecutionClient, ExecutionLease, ExecutionOutcome, Fenced,
    LeaseError, Result, WorkflowRunOutcome,
};

use crate::backend::RedisBackend;
use crate::error::{Access, BACKEND};
use crate::partitioned::by_partition;
use crate::refusal::refusal;
use crate::reply::Reply;
use crate::scripts::operation_script;
use crate::wire::token_arg;

// The operation scripts this module runs, each compiled once per process.
operation_script!(ACKNOWLEDGE_BATCH = ack_script(include_str!("ack/acknowledge_batch.lua")));

const OP: &str = "acknowledge_batch";

/// An outcome as the acknowledging scripts take it: kind word and value JSON (`""` for
/// suspended).
pub(crate) fn outcome_args(outcome: &WorkflowRunOutcome) -> (&'static str, &str) {
    match outcome {
        WorkflowRunOutcome::Suspended => ("suspended", ""),
        WorkflowRunOutcome::Completed(v) => ("completed", v.as_str()),
        WorkflowRunOutcome::Failed(v) => ("failed", v.as_str()),
    }
}

/// The reply to an accepted acknowledgement of `outcome`.
pub(crate) fn acknowledged(outcome: &WorkflowRunOutcome) -> Acknowledged {
    match outcome {
        WorkflowRunOutcome::Suspended => Acknowledged::Suspended,
        WorkflowRunOutcome::Completed(v) => {
            Acknowledged::Terminal(ExecutionOutcome::Completed(v.clone()))
        }
        WorkflowRunOutcome::Failed(v) => {
            Acknowledged::Terminal(ExecutionOutcome::Failed(v.clone()))
        }
    }
}

impl RedisBackend {
    /// Acknowledges `acks` in one script: validated here first (`check_ack_batch`), then
    /// the script checks every item before its first write, so an unknown execution, token
    /// 0 or a foreign token in any item is reported (for the first such item) with nothing
    /// applied; otherwise each held item is acknowledged exactly as `acknowledge` does and
    /// each stale one is `Lost`, results in order.
    ///
    /// With partitions, a batch spanning several is checked item by item with `get` first
    /// (as the trait's default does), then each partition's items are one script; a failure
    /// after an earlier partition's script ran is `OutcomeUnknown`.
    pub(crate) async fn ack_batch(
        &self,
        acks: &[Acknowledgement],
    ) -> Result<Vec<Fenced<Acknowledged>>> {
        check_ack_batch(acks)?;
        let groups = by_partition(self, acks, |a| &a.lease.execution_id);
        if let [(prefix, _)] = groups.as_slice() {
            let all: Vec<&Acknowledgement> = acks.iter().collect();
            return self.ack_group(prefix, &all).await;
        }
        for ack in acks {
            let id = &ack.lease.execution_id;
            let record = self
                .get(id)
                .await?
                .ok_or_else(|| LeaseError::UnknownExecution(id.clone()))?;
            // Tokens only rise, so a token above the latest one read is foreign now.
            record.holds(&ack.lease)?;
        }
        let mut results: Vec<Option<Fenced<Acknowledged>>> = acks.iter().map(|_| None).collect();
        for (n, (prefix, members)) in groups.into_iter().enumerate() {
            let group: Vec<&Acknowledgement> = members.iter().map(|&i| &acks[i]).collect();
            match self.ack_group(prefix, &group).await {
                Ok(done) => {
                    for (i, result) in members.into_iter().zip(done) {
                        results[i] = Some(result);
                    }
                }
                Err(e) if n == 0 => return Err(e),
                Err(e) => {
                    return Err(LeaseError::OutcomeUnknown {
                        backend: BACKEND,
                        operation: OP,
                        source: format!("a later partition's items failed: {e}").into(),
                    });
                }
            }
        }
        Ok(results.into_iter().flatten().collect())
    }

    /// Acknowledges one partition's `acks` in one script.
    async fn ack_group(
        &self,
        prefix: &str,
        acks: &[&Acknowledgement],
    ) -> Result<Vec<Fenced<Acknowledged>>> {
        if acks.is_empty() {
            return Ok(Vec::new());
        }
        let tokens: Vec<String> = acks
            .iter()
            .map(|a| token_arg(a.lease.token))
            .collect::<Result<_>>()?;
        let mut args: Vec<&[u8]> = Vec::with_capacity(1 + acks.len() * 4);
        args.push(self.publish_word());
        for (ack, token) in acks.iter().zip(&tokens) {
            let (kind, value) = outcome_args(&ack.outcome);
            args.extend([
                ack.lease.execution_id.as_str().as_bytes(),
                token.as_bytes(),
                kind.as_bytes(),
                value.as_bytes(),
            ]);
        }
        let v = self
            .eval(OP, Access::Write, prefix, &ACKNOWLEDGE_BATCH, &args)
            .await?;
        let reply = Reply::new(OP);
        let (status, mut rest) = reply.status(v)?;
        if status != "ok" {
            // A refused item: {word, 1-based index}; nothing was written.
            let i: usize = reply.number(reply.next(&mut rest, "item")?, "item")?;
            let lease: &ExecutionLease = i
                .checked_sub(1)
                .and_then(|i| acks.get(i))
                .map(|a| &a.lease)
                .ok_or_else(|| reply.unexpected(&format!("{status} for item {i}")))?;
            let e: LeaseError =
                refusal(&status, lease).unwrap_or_else(|| reply.unexpected(&status));
            return Err(e);
        }
        if rest.len() != acks.len() {
            return Err(reply.unexpected(&format!("{} results", rest.len())));
        }
        acks.iter()
            .zip(rest)
            .map(|(ack, v)| match reply.string(v)?.as_str() {
                "ok" => Ok(Fenced::Accepted(acknowledged(&ack.outcome))),
                "lost" => Ok(Fenced::Lost),
                other => Err(reply.unexpected(other)),
            })
            .collect()
    }
}
