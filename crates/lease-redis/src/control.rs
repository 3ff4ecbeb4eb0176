//! The operator controls on Redis: cancel (`control/cancel.lua`, one script on the
//! execution's partition) and pause/resume (`control/pause.lua`): the paused scopes are a
//! set `paused` in every partition (each claim script reads its own partition's), written
//! partition by partition (each write atomic; a split namespace's partitions see a pause
//! one script apart). Concurrency limits (`control/limits.lua`): the hash `limits` of the
//! namespace's one partition (a split namespace refuses keys, so it refuses limits too).

use lease_core::{
    CancelOutcome, CancelReason, ConcurrencyKey, ConcurrencyLimit, ConcurrencyLimits, ExecutionId,
    ExecutionOutcome, Json, LeaseError, LimitScope, PauseScope, Result, WorkflowName,
};

use crate::backend::RedisBackend;
use crate::error::Access;
use crate::reply::Reply;
use crate::scripts::operation_script;
use redis::Value;

// The operation scripts this module runs, each compiled once per process.
operation_script!(CANCEL = record_script(include_str!("control/cancel.lua")));
operation_script!(PAUSE = script(include_str!("control/pause.lua")));
operation_script!(LIMITS = script(include_str!("control/limits.lua")));

/// The field of `limits` that holds the namespace default: a control character first, which
/// no concurrency key holds (`DEFAULT_LIMIT` in `scripts/claim.lua`).
const DEFAULT_LIMIT: &str = "\u{1f}default";

/// The member of `paused` that stands for [`PauseScope::Namespace`]: a control character
/// first, which no workflow name holds (`NS_SCOPE` in `scripts/claim.lua`).
const NS_SCOPE: &str = "\u{1f}namespace";

/// The member of `paused` for `scope`.
fn scope_member(scope: &PauseScope) -> &str {
    match scope {
        PauseScope::Namespace => NS_SCOPE,
        PauseScope::Workflow(w) => w.as_str(),
    }
}

impl RedisBackend {
    /// `ExecutionClient::cancel`: `ExecutionRecord::cancel` on the
    /// effective record, in one script on the execution's partition.
    pub(crate) async fn cancel_execution(
        &self,
        id: &ExecutionId,
        reason: &CancelReason,
    ) -> Result<CancelOutcome> {
        const OP: &str = "cancel";
        let v = self
            .eval(
                OP,
                Access::Write,
                self.keys().of(id),
                &CANCEL,
                &[
                    id.as_str().as_bytes(),
                    reason.as_str().as_bytes(),
                    self.publish_word(),
                ],
            )
            .await?;
        let reply = Reply::new(OP);
        let (status, mut rest) = reply.status(v)?;
        match status.as_str() {
            "unknown" => Err(LeaseError::UnknownExecution(id.clone())),
            "cancelled" => {
                let ended = reply.string(reply.next(&mut rest, "ended")?)?;
                Ok(CancelOutcome::Cancelled {
                    ended_lease: ended == "1",
                })
            }
            "terminal" => {
                let kind = reply.string(reply.next(&mut rest, "outcome kind")?)?;
                let value = reply.string(reply.next(&mut rest, "outcome value")?)?;
                match kind.as_str() {
                    "cancelled" => Ok(CancelOutcome::AlreadyCancelled(CancelReason::from_stored(
                        value,
                    ))),
                    "completed" => Ok(CancelOutcome::AlreadyTerminal(ExecutionOutcome::Completed(
                        Json::from_stored(value),
                    ))),
                    "failed" => Ok(CancelOutcome::AlreadyTerminal(ExecutionOutcome::Failed(
                        Json::from_stored(value),
                    ))),
                    other => Err(reply.unexpected(other)),
                }
            }
            other => Err(reply.unexpected(other)),
        }
    }

    /// Runs `control/pause.lua` (`verb` pause / resume / list) on every partition and
    /// returns the first partition's reply.
    async fn pause_op(&self, op: &'static str, verb: &str, scope: &PauseScope) -> Result<Value> {
        let mut first = None;
        for prefix in self.keys().partitions() {
            let v = self
                .eval(
                    op,
                    if verb == "list" {
                        Access::Read
                    } else {
                        Access::Write
                    },
                    prefix,
                    &PAUSE,
                    &[
                        verb.as_bytes(),
                        scope_member(scope).as_bytes(),
                        self.publish_word(),
                    ],
                )
                .await?;
            first.get_or_insert(v);
            if verb == "list" {
                break;
            }
        }
        first.ok_or_else(|| Reply::new(op).unexpected("no partition"))
    }

    /// `ExecutionClient::pause` / `resume`: `true` when the scope was
    /// newly paused / was paused (as the first partition saw it).
    pub(crate) async fn set_paused(&self, scope: &PauseScope, pause: bool) -> Result<bool> {
        let (op, verb) = if pause {
            ("pause", "pause")
        } else {
            ("resume", "resume")
        };
        let v = self.pause_op(op, verb, scope).await?;
        let reply = Reply::new(op);
        let mut items = reply.array(v)?.into_iter();
        let n: i64 = reply.number(reply.next(&mut items, "count")?, "count")?;
        Ok(n == 1)
    }

    /// `ExecutionClient::list_paused`: the namespace first, then workflows by name.
    pub(crate) async fn paused_scopes(&self) -> Result<Vec<PauseScope>> {
        const OP: &str = "list_paused";
        let v = self.pause_op(OP, "list", &PauseScope::Namespace).await?;
        let reply = Reply::new(OP);
        let mut out = Vec::new();
        for m in reply.array(v)? {
            let m = reply.string(m)?;
            if m == NS_SCOPE {
                out.push(PauseScope::Namespace);
            } else {
                let w = WorkflowName::new(m).map_err(|e| reply.unexpected(&e.to_string()))?;
                out.push(PauseScope::Workflow(w));
            }
        }
        out.sort();
        Ok(out)
    }
}

impl RedisBackend {
    /// How a per-key setting's script (`verb` set / remove / list) runs: a list reads; a
    /// change writes, and is `Unsupported` naming `what` on a split namespace, which cannot
    /// count a key's leases or claims across partitions and so refuses concurrency keys
    /// (its capabilities declare none).
    pub(crate) fn key_setting_access(&self, what: &'static str, verb: &str) -> Result<Access> {
        if verb == "list" {
            Ok(Access::Read)
        } else if self.keys().split() {
            Err(LeaseError::Unsupported {
                backend: crate::error::BACKEND,
                operation: what,
            })
        } else {
            Ok(Access::Write)
        }
    }

    /// Runs `control/limits.lua` (`verb` set / remove / list) on the namespace's partition;
    /// a split namespace is `Unsupported` for set and remove (it refuses keys) and has no
    /// limits to list.
    async fn limits_op(
        &self,
        op: &'static str,
        verb: &str,
        field: &str,
        value: &str,
    ) -> Result<Value> {
        let access = self.key_setting_access("concurrency limit", verb)?;
        let args = [
            verb.as_bytes(),
            field.as_bytes(),
            value.as_bytes(),
            self.publish_word(),
        ];
        self.eval(op, access, &self.keys().partitions()[0], &LIMITS, &args)
            .await
    }

    /// `ExecutionClient::set_concurrency_limit`: sets or removes one field
    /// of `limits`; a raised or removed limit publishes "now".
    pub(crate) async fn set_limit(
        &self,
        scope: &LimitScope,
        limit: Option<ConcurrencyLimit>,
    ) -> Result<()> {
        const OP: &str = "set_concurrency_limit";
        let field = match scope {
            LimitScope::Default => DEFAULT_LIMIT,
            LimitScope::Key(k) => k.as_str(),
        };
        let v = match limit {
            Some(l) => {
                self.limits_op(OP, "set", field, &l.get().to_string())
                    .await?
            }
            None => self.limits_op(OP, "remove", field, "").await?,
        };
        Reply::new(OP).array(v).map(drop)
    }

    /// `ExecutionClient::concurrency_limits`: the default and the keys' limits, by key.
    pub(crate) async fn read_limits(&self) -> Result<ConcurrencyLimits> {
        const OP: &str = "concurrency_limits";
        let reply = Reply::new(OP);
        let v = self.limits_op(OP, "list", "", "").await?;
        let mut out = ConcurrencyLimits::default();
        for (field, value) in reply.pairs(v)? {
            let limit = value
                .parse()
                .ok()
                .and_then(|n| ConcurrencyLimit::new(n).ok())
                .ok_or_else(|| reply.unexpected(&format!("limit {value:?}")))?;
            if field == DEFAULT_LIMIT {
                out.default = Some(limit);
            } else {
                let key =
                    ConcurrencyKey::new(field).map_err(|e| reply.unexpected(&e.to_string()))?;
                out.keys.push((key, limit));
            }
        }
        out.keys.sort();
        Ok(out)
    }
}
