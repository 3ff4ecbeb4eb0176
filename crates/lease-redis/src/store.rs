//! [`StoreClient`] and [`StartClient`] for [`RedisBackend`]: idempotent by identity and by
//! receipt, unfenced (RFC 002 fencing table).

use std::collections::BTreeMap;

use async_trait::async_trait;
use lease_core::{
    ExecutionId, Json, LeaseError, Result, StartClient, StartRequest, Started, StoreClient,
    StoreId, StoreKey, StoreOp, StoreReceipt, StoreSnapshot, StoreUpdate,
};

use crate::backend::RedisBackend;
use crate::errors::{Access, protocol};
use crate::keys::SEP;
use crate::reply::Reply;
use crate::scripts::SCRIPTS;
use crate::wire::parse_outcome;

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
                &SCRIPTS.get_or_create,
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
                &SCRIPTS.store_update,
                &[
                    receipt.store.as_str().as_bytes(),
                    field.as_bytes(),
                    kind.as_bytes(),
                    op.key().as_str().as_bytes(),
                    has_expected.as_bytes(),
                    expected.map_or("", |j| j.as_str()).as_bytes(),
                    new.map_or("", |j| j.as_str()).as_bytes(),
                    self.publish_word(),
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

#[async_trait]
impl StartClient for RedisBackend {
    #[tracing::instrument(level = "debug", name = "start", skip_all)]
    async fn start(&self, request: &StartRequest) -> Result<Started> {
        if self.keys().split() {
            return self.start_split(request).await;
        }
        const OP: &str = "start";
        let v = self
            .eval(
                OP,
                Access::Write,
                self.keys().prefix(),
                &SCRIPTS.start,
                &[
                    request.request_id.as_str().as_bytes(),
                    request.target.as_str().as_bytes(),
                    request.workflow.as_str().as_bytes(),
                    request.input.as_str().as_bytes(),
                    self.publish_word(),
                ],
            )
            .await?;
        let reply = Reply::new(OP);
        let (status, mut rest) = reply.status(v)?;
        let created = match status.as_str() {
            "existing" => false,
            "created" => true,
            "taken" => return Err(taken(&request.target)),
            other => return Err(reply.unexpected(other)),
        };
        let target = reply.execution_id(reply.next(&mut rest, "target")?)?;
        Ok(Started { target, created })
    }
}

/// The error of a start whose target id is an execution the request did not create.
fn taken(target: &ExecutionId) -> LeaseError {
    LeaseError::invalid("start target", format!("execution {target} already exists"))
}

impl RedisBackend {
    /// `start` with partitions (issue 14), where the request record (home prefix) and the
    /// target (its partition) lie in different slots: three idempotent steps instead of
    /// one script. 1. Record request id -> target unless the request id is known
    /// (`lua/start_home.lua`). 2. Admit the recorded target unless it exists, marked as the
    /// request's (`lua/start_target.lua`), which also completes a start interrupted between
    /// the steps. 3. When this call recorded the target but it exists and is not the
    /// request's, remove the record again: `InvalidInput`, as with one partition.
    async fn start_split(&self, request: &StartRequest) -> Result<Started> {
        const OP: &str = "start";
        let reply = Reply::new(OP);
        let (req, target) = (request.request_id.as_str(), request.target.as_str());
        let home = |mode: &'static str| async move {
            let args: [&[u8]; 3] = [mode.as_bytes(), req.as_bytes(), target.as_bytes()];
            self.eval(
                OP,
                Access::Write,
                self.keys().prefix(),
                &SCRIPTS.start_home,
                &args,
            )
            .await
        };
        let (status, mut rest) = reply.status(home("record").await?)?;
        let recorded = reply.execution_id(reply.next(&mut rest, "target")?)?;
        let v = self
            .eval(
                OP,
                Access::Write,
                self.keys().of(&recorded),
                &SCRIPTS.start_target,
                &[
                    req.as_bytes(),
                    recorded.as_str().as_bytes(),
                    request.workflow.as_str().as_bytes(),
                    request.input.as_str().as_bytes(),
                    self.publish_word(),
                ],
            )
            .await?;
        let (made, _) = reply.status(v)?;
        match (status.as_str(), made.as_str()) {
            (_, "created") => Ok(Started {
                target: recorded,
                created: true,
            }),
            ("recorded", "taken") => {
                home("undo").await?;
                Err(taken(&request.target))
            }
            // A known request id: its first target, whoever admitted it.
            ("existing", "existing" | "taken") | ("recorded", "existing") => Ok(Started {
                target: recorded,
                created: false,
            }),
            (first, second) => Err(reply.unexpected(&format!("{first}/{second}"))),
        }
    }
}
