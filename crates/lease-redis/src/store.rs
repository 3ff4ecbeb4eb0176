//! [`StoreClient`] for [`RedisBackend`]: idempotent by identity and by receipt, unfenced
//! (RFC 002 fencing table).

use std::collections::BTreeMap;

use async_trait::async_trait;
use lease_core::{
    ExecutionId, Json, LeaseError, Result, StoreClient, StoreId, StoreKey, StoreOp, StoreReceipt,
    StoreSnapshot, StoreUpdate,
};

use crate::backend::RedisBackend;
use crate::error::{Access, protocol};
use crate::keys::SEP;
use crate::reply::Reply;
use crate::scripts::operation_script;
use crate::wire::parse_outcome;

// The operation scripts this module runs, each compiled once per process.
operation_script!(GET_OR_CREATE = script(include_str!("store/get_or_create.lua")));
operation_script!(STORE_UPDATE = effect_wake_script(include_str!("store/store_update.lua")));

#[async_trait]
impl StoreClient for RedisBackend {
    #[tracing::instrument(level = "debug", name = "get_or_create", skip_all)]
    async fn get_or_create(
        &self,
        store: &StoreId,
        initial: &[(StoreKey, Json)],
    ) -> Result<StoreSnapshot> {
        const OP: &str = "get_or_create";
        let mut args: Vec<&[u8]> = Vec::with_capacity(1 + 2 * initial.len());
        args.push(store.as_str().as_bytes());
        for (k, v) in initial {
            args.push(k.as_str().as_bytes());
            args.push(v.as_str().as_bytes());
        }
        let v = self
            .eval(
                OP,
                Access::Write,
                self.keys().prefix(),
                &GET_OR_CREATE,
                &args,
            )
            .await?;
        let reply = Reply::new(OP);
        let mut items = reply.array(v)?.into_iter();
        let created = match reply
            .string(reply.next(&mut items, "created flag")?)?
            .as_str()
        {
            "1" => true,
            "0" => false,
            other => return Err(reply.unexpected(other)),
        };
        let mut entries = BTreeMap::new();
        for (k, v) in reply.pairs(reply.next(&mut items, "entries")?)? {
            if k.is_empty() {
                continue; // the existence marker
            }
            let key = StoreKey::new(k).map_err(|e| protocol(OP, format!("store key: {e}")))?;
            entries.insert(key, Json::from_stored(v));
        }
        Ok(StoreSnapshot {
            store: store.clone(),
            entries,
            created,
        })
    }

    #[tracing::instrument(level = "debug", name = "read_entry", skip_all)]
    async fn read_entry(&self, store: &StoreId, key: &StoreKey) -> Result<Option<Json>> {
        const OP: &str = "read_entry";
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(self.keys().store(store)).arg("").arg(key.as_str());
        let reply = Reply::new(OP);
        let mut items = reply.array(self.query(OP, &cmd).await?)?.into_iter();
        if reply
            .opt_string(reply.next(&mut items, "store marker")?)?
            .is_none()
        {
            return Err(LeaseError::UnknownStore(store.to_string()));
        }
        Ok(reply
            .opt_string(reply.next(&mut items, "entry")?)?
            .map(Json::from_stored))
    }

    #[tracing::instrument(level = "debug", name = "update", skip_all)]
    async fn update(&self, receipt: &StoreReceipt, op: &StoreOp) -> Result<StoreUpdate> {
        const OP: &str = "update";
        let field = format!(
            "{}{SEP}{}",
            receipt.execution_id.as_str(),
            receipt.step_key.as_str()
        );
        let (kind, expected, new): (&str, Option<&Json>, Option<&Json>) = match op {
            StoreOp::Put { value, .. } => ("put", None, Some(value)),
            StoreOp::Delete { .. } => ("delete", None, None),
            StoreOp::CompareAndSet { expected, new, .. } => ("cas", expected.as_ref(), Some(new)),
            StoreOp::TakeIfMatches { expected, .. } => ("take", Some(expected), None),
        };
        let has_expected = if expected.is_some() { "1" } else { "0" };
        let v = self
            .eval(
                OP,
                Access::Write,
                self.keys().prefix(),
                &STORE_UPDATE,
                &[
                    receipt.store.as_str().as_bytes(),
                    field.as_bytes(),
                    kind.as_bytes(),
                    op.key().as_str().as_bytes(),
                    has_expected.as_bytes(),
                    expected.map_or("", |j| j.as_str()).as_bytes(),
                    new.map_or("", |j| j.as_str()).as_bytes(),
                    self.publish_word(),
                    self.split_word(),
                ],
            )
            .await?;
        let reply = Reply::new(OP);
        let (status, mut rest) = reply.status(v)?;
        let replayed = match status.as_str() {
            "nostore" => return Err(LeaseError::UnknownStore(receipt.store.to_string())),
            "replayed" => true,
            "applied" => false,
            other => return Err(reply.unexpected(other)),
        };
        let outcome = parse_outcome(OP, &reply.string(reply.next(&mut rest, "outcome")?)?)?;
        self.deliver_wakes(OP, rest).await?;
        Ok(StoreUpdate { outcome, replayed })
    }

    #[tracing::instrument(level = "debug", name = "watch_entry", skip_all)]
    async fn watch_entry(
        &self,
        store: &StoreId,
        key: &StoreKey,
        waiter: &ExecutionId,
    ) -> Result<Option<Json>> {
        self.watch_entry_script(store, key, waiter).await
    }
}
