//! [`EffectClient`] and store waiter registration ([`lease_core::StoreClient::watch_entry`])
//! for [`RedisBackend`] (RFC 004 reduced): one Lua script per call
//! (`scripts/effect_*.lua`, `effect/store_watch.lua`, helpers in `scripts/effect.lua`). The wakes on a
//! settle and on an applied store update run inside the writing script with request_wake's
//! transition (`scripts/wake.lua`, shared with `request_wake`). Keys: see `scripts/effect.lua`.
//!
//! On a namespace split into partitions the effects and registrations live under
//! the home prefix, beside the stores, and the executions in their partitions: `begin` and
//! `watch_entry` first check the execution exists (`EXISTS` on its record), and a settle or
//! store update queues its wakes at home, which this module then delivers partition by
//! partition ([`RedisBackend::deliver_wakes`]).
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
use crate::partitioned::by_partition;
use crate::reply::Reply;
use crate::scripts::operation_script;

// The operation scripts this module runs, each compiled once per process.
operation_script!(EFFECT_BEGIN = effect_script(include_str!("effect/effect_begin.lua")));
operation_script!(EFFECT_SETTLE = effect_wake_script(include_str!("effect/effect_settle.lua")));
operation_script!(EFFECT_READ = effect_script(include_str!("effect/effect_read.lua")));
operation_script!(EFFECT_WAIT = effect_script(include_str!("effect/effect_wait.lua")));
operation_script!(STORE_WATCH = effect_script(include_str!("effect/store_watch.lua")));
operation_script!(WAKE_WAITERS = wake_script(include_str!("effect/wake_waiters.lua")));
operation_script!(WAKES_DONE = script(include_str!("effect/wakes_done.lua")));

/// A script reply: its status word and the rest.
type Status = (String, std::vec::IntoIter<Value>);

impl RedisBackend {
    /// Runs one effect or store-waiter script (the one place their key prefix is chosen: the
    /// namespace's home prefix, which holds the stores and effects, and with one partition
    /// the executions too) with `args` and the split flag last (`1` with partitions: see
    /// `scripts/effect.lua`), and splits the reply into its status word and the rest.
    pub(crate) async fn eval_effect(
        &self,
        op: &'static str,
        access: Access,
        script: &Script,
        args: &[&[u8]],
    ) -> Result<Status> {
        let mut all = args.to_vec();
        all.push(self.split_word());
        let v = self
            .eval(op, access, self.keys().prefix(), script, &all)
            .await?;
        Reply::new(op).status(v)
    }

    /// The split flag of the effect and store scripts: `1` on a namespace split into
    /// partitions, else `0`.
    pub(crate) fn split_word(&self) -> &'static [u8] {
        if self.keys().split() { b"1" } else { b"0" }
    }

    /// On a split namespace, refuses an execution that does not exist
    /// (`UnknownExecution`), read with `EXISTS` in its partition before a script at home
    /// names it (with one partition the script checks it itself).
    async fn check_execution(&self, op: &'static str, id: &ExecutionId) -> Result<()> {
        if !self.keys().split() {
            return Ok(());
        }
        let mut cmd = redis::cmd("EXISTS");
        cmd.arg(self.keys().exec(id));
        let reply = Reply::new(op);
        match reply.number::<i64>(self.query(op, &cmd).await?, "exists")? {
            0 => Err(LeaseError::UnknownExecution(id.clone())),
            _ => Ok(()),
        }
    }

    /// Delivers the wakes a script at home queued (the `id, sequence` pairs that end its
    /// reply on a split namespace, `with_queued_wakes` in `scripts/effect.lua`): one
    /// `effect/wake_waiters.lua` per partition named, then `effect/wakes_done.lua` at home
    /// removes what was delivered. A failure leaves the rest queued for the next settle or
    /// store update (a wake is delivered at least once; an extra one is harmless, RFC 002
    /// "request_wake").
    pub(crate) async fn deliver_wakes(
        &self,
        op: &'static str,
        mut queued: impl Iterator<Item = Value>,
    ) -> Result<()> {
        let reply = Reply::new(op);
        let mut pending: Vec<(ExecutionId, String)> = Vec::new();
        while let Some(id) = queued.next() {
            let seq = reply.string(reply.next(&mut queued, "queued wake number")?)?;
            pending.push((reply.execution_id(id)?, seq));
        }
        if pending.is_empty() {
            return Ok(());
        }
        for (prefix, members) in by_partition(self, &pending, |(id, _)| id) {
            let mut args: Vec<&[u8]> = vec![self.publish_word()];
            args.extend(members.iter().map(|&i| pending[i].0.as_str().as_bytes()));
            self.eval(op, Access::Write, prefix, &WAKE_WAITERS, &args)
                .await?;
        }
        let done: Vec<&[u8]> = pending
            .iter()
            .flat_map(|(id, seq)| [id.as_str().as_bytes(), seq.as_bytes()])
            .collect();
        self.eval(op, Access::Write, self.keys().prefix(), &WAKES_DONE, &done)
            .await?;
        Ok(())
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
        self.check_execution(OP, waiter).await?;
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
        self.check_execution(OP, execution).await?;
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
        self.deliver_wakes(OP, rest).await?;
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
