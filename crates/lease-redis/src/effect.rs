//! [`EffectClient`] and store waiter registration ([`lease_core::StoreClient::watch_entry`])
//! for [`RedisBackend`] (RFC 004 reduced, issue 16): one Lua script per call
//! (`scripts/effect_*.lua`, `effect/store_watch.lua`, helpers in `scripts/effect.lua`). The wakes on a
//! settle and on an applied store update run inside the writing script with request_wake's
//! transition (`scripts/wake.lua`, shared with `request_wake`). Keys: see `scripts/effect.lua`.
//!
//! The scripts decide and write; the client rebuilds the typed answer from the record as it
//! stood before the call with lease-core's rules ([`EffectRecord::settle`],
//! [`EffectRecord::check_owner`]) and refuses a script decision that disagrees with them
//! (`Protocol`), so the settle rule is written once.

use async_trait::async_trait;
use lease_core::{
    Begun, EffectClient, EffectId, EffectRecord, EffectState, EffectWait, ExecutionId, Json,
    LeaseError, Result, Settlement, StoreId, StoreKey, Timestamp,
};
use redis::{Script, Value};

use crate::backend::RedisBackend;
use crate::error::{Access, protocol};
use crate::reply::Reply;
use crate::scripts::operation_script;

// The operation scripts this module runs, each compiled once per process.
operation_script!(EFFECT_BEGIN = effect_script(include_str!("effect/effect_begin.lua")));
operation_script!(EFFECT_SETTLE = effect_wake_script(include_str!("effect/effect_settle.lua")));
operation_script!(EFFECT_READ = effect_script(include_str!("effect/effect_read.lua")));
operation_script!(EFFECT_WAIT = effect_script(include_str!("effect/effect_wait.lua")));
operation_script!(STORE_WATCH = effect_script(include_str!("effect/store_watch.lua")));

/// A script reply: its status word and the rest.
type Status = (String, std::vec::IntoIter<Value>);

impl RedisBackend {
    /// Runs one effect or store-waiter script (the one place their key prefix is chosen: the
    /// namespace's, which holds the executions, stores and effects alike) and splits the
    /// reply into its status word and the rest.
    async fn eval_effect(
        &self,
        op: &'static str,
        access: Access,
        script: &Script,
        args: &[&[u8]],
    ) -> Result<Status> {
        if self.keys().split() {
            return Err(LeaseError::invalid(
                "partitions",
                "effects and store waiters are not supported yet on a namespace split into \
                 partitions (issue 14)",
            ));
        }
        let v = self
            .eval(op, access, self.keys().prefix(), script, args)
            .await?;
        Reply::new(op).status(v)
    }

    /// `watch_entry` (store waiter registration, unfenced): `effect/store_watch.lua`.
    pub(crate) async fn watch_entry_script(
        &self,
        store: &StoreId,
        key: &StoreKey,
        waiter: &ExecutionId,
    ) -> Result<Option<Json>> {
        const OP: &str = "watch_entry";
        let args = [store.as_str(), key.as_str(), waiter.as_str()].map(str::as_bytes);
        let reply = Reply::new(OP);
        let (status, mut rest) = self
            .eval_effect(OP, Access::Write, &STORE_WATCH, &args)
            .await?;
        match status.as_str() {
            "noexec" => Err(LeaseError::UnknownExecution(waiter.clone())),
            "nostore" => Err(LeaseError::UnknownStore(store.to_string())),
            "ok" => rest
                .next()
                .map(|v| reply.string(v).map(Json::from_stored))
                .transpose(),
            other => Err(reply.unexpected(other)),
        }
    }
}

/// Decodes the effect record of a reply (`effect_reply` in `scripts/effect.lua`: owner, begun,
/// settled or `''`, result or `''`).
fn effect_record(
    reply: Reply,
    id: &EffectId,
    items: &mut impl Iterator<Item = Value>,
) -> Result<EffectRecord> {
    let execution_id = reply.execution_id(reply.next(items, "owner")?)?;
    let begun: i64 = reply.number(reply.next(items, "begun")?, "begun_at")?;
    let settled = reply.string(reply.next(items, "settled")?)?;
    let result = reply.string(reply.next(items, "result")?)?;
    let (state, settled_at) = match (settled.is_empty(), result.is_empty()) {
        (true, true) => (EffectState::Pending, None),
        (false, false) => {
            let at: i64 = settled
                .parse()
                .map_err(|_| protocol(reply.op, format!("effect {id}: settled_at {settled:?}")))?;
            let result = Json::from_stored(result);
            (
                EffectState::Settled(result),
                Some(Timestamp::from_millis(at)),
            )
        }
        _ => {
            return Err(protocol(
                reply.op,
                format!("effect {id}: a settled time without a result, or the reverse"),
            ));
        }
    };
    Ok(EffectRecord {
        id: id.clone(),
        execution_id,
        state,
        begun_at: Timestamp::from_millis(begun),
        settled_at,
    })
}

/// The record of an effect reply, checked to belong to `caller`: the script's `other`
/// becomes `EffectOfAnotherExecution`, and any other status must name the caller's own
/// effect.
fn owned_record(
    reply: Reply,
    id: &EffectId,
    caller: &ExecutionId,
    status: &str,
    items: &mut impl Iterator<Item = Value>,
) -> Result<EffectRecord> {
    let record = effect_record(reply, id, items)?;
    record.check_owner(caller)?;
    if status == "other" {
        return Err(reply.unexpected("other, for the effect's owner"));
    }
    Ok(record)
}

/// The Settlement `EffectRecord::settle` gives for `prior`, checked against the script's
/// decision `status`.
fn settlement(
    reply: Reply,
    status: &str,
    prior: &EffectRecord,
    result: &Json,
    now: i64,
) -> Result<Settlement> {
    let settled = prior.settle(result, Timestamp::from_millis(now));
    match (status, &settled) {
        ("recorded", Settlement::Recorded(_))
        | ("already", Settlement::AlreadySettled(_))
        | ("conflict", Settlement::Conflict { .. }) => Ok(settled),
        _ => Err(reply.unexpected(&format!("{status} where the settle rule gives {settled:?}"))),
    }
}

#[async_trait]
impl EffectClient for RedisBackend {
    #[tracing::instrument(level = "debug", name = "begin_effect", skip_all)]
    async fn begin_effect(&self, id: &EffectId, execution: &ExecutionId) -> Result<Begun> {
        const OP: &str = "begin_effect";
        let reply = Reply::new(OP);
        let args = [id.as_str(), execution.as_str()].map(str::as_bytes);
        let (status, mut rest) = self
            .eval_effect(OP, Access::Write, &EFFECT_BEGIN, &args)
            .await?;
        match status.as_str() {
            "noexec" => Err(LeaseError::UnknownExecution(execution.clone())),
            "created" => {
                let now: i64 = reply.number(reply.next(&mut rest, "now")?, "now")?;
                let record = EffectRecord::pending(
                    id.clone(),
                    execution.clone(),
                    Timestamp::from_millis(now),
                );
                Ok(Begun {
                    record,
                    created: true,
                })
            }
            "existing" | "other" => Ok(Begun {
                record: owned_record(reply, id, execution, &status, &mut rest)?,
                created: false,
            }),
            other => Err(reply.unexpected(other)),
        }
    }

    #[tracing::instrument(level = "debug", name = "settle_effect", skip_all)]
    async fn settle_effect(
        &self,
        id: &EffectId,
        execution: &ExecutionId,
        result: &Json,
    ) -> Result<Settlement> {
        const OP: &str = "settle_effect";
        let reply = Reply::new(OP);
        let args = [
            id.as_str().as_bytes(),
            execution.as_str().as_bytes(),
            result.as_str().as_bytes(),
            self.publish_word(),
        ];
        let (status, mut rest) = self
            .eval_effect(OP, Access::Write, &EFFECT_SETTLE, &args)
            .await?;
        if status == "unknown" {
            return Err(LeaseError::UnknownEffect(id.clone()));
        }
        let prior = owned_record(reply, id, execution, &status, &mut rest)?;
        let now: i64 = reply.number(reply.next(&mut rest, "now")?, "now")?;
        settlement(reply, &status, &prior, result, now)
    }

    #[tracing::instrument(level = "debug", name = "read_effect", skip_all)]
    async fn read_effect(&self, id: &EffectId) -> Result<Option<EffectRecord>> {
        const OP: &str = "read_effect";
        let reply = Reply::new(OP);
        let (status, mut rest) = self
            .eval_effect(OP, Access::Read, &EFFECT_READ, &[id.as_str().as_bytes()])
            .await?;
        match status.as_str() {
            "none" => Ok(None),
            "found" => effect_record(reply, id, &mut rest).map(Some),
            other => Err(reply.unexpected(other)),
        }
    }

    #[tracing::instrument(level = "debug", name = "wait_effect", skip_all)]
    async fn wait_effect(&self, id: &EffectId, execution: &ExecutionId) -> Result<EffectWait> {
        const OP: &str = "wait_effect";
        let reply = Reply::new(OP);
        let args = [id.as_str(), execution.as_str()].map(str::as_bytes);
        let (status, mut rest) = self
            .eval_effect(OP, Access::Write, &EFFECT_WAIT, &args)
            .await?;
        if status == "unknown" {
            return Err(LeaseError::UnknownEffect(id.clone()));
        }
        let record = owned_record(reply, id, execution, &status, &mut rest)?;
        match (status.as_str(), record.result()) {
            ("settled", Some(_)) => Ok(EffectWait::Settled(record)),
            ("registered", None) => Ok(EffectWait::Registered),
            (other, _) => Err(reply.unexpected(other)),
        }
    }
}
