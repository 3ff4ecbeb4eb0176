//! Effects (RFC 004, reduced) and store waiters, each call one transaction.
//!
//! The rules are lease-core's ([`lease_core::effect`]): the settle rule is
//! [`EffectRecord::settle`], applied here to the row loaded under the transaction's write
//! lock. A wake (the settle of an effect its owner waits for, an applied store update of a
//! watched entry) is [`transitions::request_wake`] at the backend's now, in the same
//! transaction, signalled after its commit like every other wake.

use async_trait::async_trait;
use lease_core::{
    Begun, EffectClient, EffectId, EffectRecord, EffectState, EffectWait, ExecutionId, Json,
    LeaseError, Result, Settlement, Timestamp,
};
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::backend::SqliteBackend;
use crate::conn::Weight;
use crate::error::{OpError, OpResult};
use crate::group::Woken;
use crate::scope::Scope;
use crate::transitions;

const LOAD: &str = include_str!("effect/load.sql");
const INSERT: &str = include_str!("effect/insert.sql");
const SETTLE: &str = include_str!("effect/settle.sql");
const WAIT: &str = include_str!("effect/wait.sql");

/// An effect row as stored, before decoding.
struct RawEffect {
    id: String,
    execution_id: String,
    result: Option<String>,
    begun_at: i64,
    settled_at: Option<i64>,
    waiting: bool,
}

fn read_raw(row: &Row<'_>) -> rusqlite::Result<RawEffect> {
    Ok(RawEffect {
        id: row.get(0)?,
        execution_id: row.get(1)?,
        result: row.get(2)?,
        begun_at: row.get(3)?,
        settled_at: row.get(4)?,
        waiting: row.get(5)?,
    })
}

impl RawEffect {
    /// The record, or `Corrupt` (a `Protocol` error naming the effect) for a row this
    /// library never writes: an invalid id, or a result without a settle time (or back).
    fn into_record(self) -> OpResult<EffectRecord> {
        let corrupt = |what: String| OpError::Corrupt(format!("effect {:?}: {what}", self.id));
        let id = EffectId::new(self.id.clone()).map_err(|e| corrupt(format!("id: {e}")))?;
        let execution_id = ExecutionId::new(self.execution_id.clone())
            .map_err(|e| corrupt(format!("execution id: {e}")))?;
        let (state, settled_at) = match (self.result, self.settled_at) {
            (None, None) => (EffectState::Pending, None),
            (Some(result), Some(at)) => (
                EffectState::Settled(Json::from_stored(result)),
                Some(Timestamp::from_millis(at)),
            ),
            _ => return Err(corrupt("result and settled_at disagree".to_owned())),
        };
        Ok(EffectRecord {
            id,
            execution_id,
            state,
            begun_at: Timestamp::from_millis(self.begun_at),
            settled_at,
        })
    }
}

/// The stored effect and whether its owner waits for it.
fn load(conn: &Connection, scope: &Scope, id: &EffectId) -> OpResult<Option<(EffectRecord, bool)>> {
    let raw = conn
        .prepare_cached(LOAD)?
        .query_row(params![scope.namespace, id.as_str()], read_raw)
        .optional()?;
    raw.map(|r| {
        let waiting = r.waiting;
        r.into_record().map(|record| (record, waiting))
    })
    .transpose()
}

/// The effect `id`, checked to belong to `caller`: `UnknownEffect`, `EffectOfAnotherExecution`.
fn owned(
    conn: &Connection,
    scope: &Scope,
    id: &EffectId,
    caller: &ExecutionId,
) -> OpResult<(EffectRecord, bool)> {
    let (record, waiting) =
        load(conn, scope, id)?.ok_or_else(|| LeaseError::UnknownEffect(id.clone()))?;
    record.check_owner(caller)?;
    Ok((record, waiting))
}

/// `begin`: creates the effect, pending, unless it exists (then returns it).
fn begin(
    conn: &Connection,
    scope: &Scope,
    id: &EffectId,
    execution: &ExecutionId,
) -> OpResult<Begun> {
    transitions::require_execution(conn, scope, execution)?;
    if let Some((record, _)) = load(conn, scope, id)? {
        record.check_owner(execution)?;
        return Ok(Begun {
            record,
            created: false,
        });
    }
    let record = EffectRecord::pending(id.clone(), execution.clone(), scope.now());
    conn.prepare_cached(INSERT)?.execute(params![
        scope.namespace,
        id.as_str(),
        execution.as_str(),
        record.begun_at.as_millis()
    ])?;
    Ok(Begun {
        record,
        created: true,
    })
}

/// `settle`: [`EffectRecord::settle`]; a recorded first result wakes a waiting owner.
fn settle(
    conn: &Connection,
    scope: &Scope,
    id: &EffectId,
    execution: &ExecutionId,
    result: &Json,
) -> OpResult<Woken<Settlement>> {
    let (record, waiting) = owned(conn, scope, id, execution)?;
    let now = scope.now();
    let settlement = record.settle(result, now);
    if !matches!(settlement, Settlement::Recorded(_)) {
        return Ok(Woken::quiet(settlement));
    }
    conn.prepare_cached(SETTLE)?.execute(params![
        scope.namespace,
        id.as_str(),
        result.as_str(),
        now.as_millis()
    ])?;
    let wake = if waiting {
        transitions::wake_waiter(conn, scope, execution, now)?
    } else {
        None
    };
    Ok(Woken::at(settlement, wake))
}

/// `wait`: a settled effect is returned; a pending one registers its owner.
fn wait(
    conn: &Connection,
    scope: &Scope,
    id: &EffectId,
    execution: &ExecutionId,
) -> OpResult<EffectWait> {
    let (record, _) = owned(conn, scope, id, execution)?;
    if record.result().is_some() {
        return Ok(EffectWait::Settled(record));
    }
    conn.prepare_cached(WAIT)?
        .execute(params![scope.namespace, id.as_str()])?;
    Ok(EffectWait::Registered)
}

/// `read_effect`.
fn read(conn: &Connection, scope: &Scope, id: &EffectId) -> OpResult<Option<EffectRecord>> {
    Ok(load(conn, scope, id)?.map(|(record, _)| record))
}

#[async_trait]
impl EffectClient for SqliteBackend {
    #[tracing::instrument(level = "debug", name = "begin_effect", skip_all)]
    async fn begin_effect(&self, id: &EffectId, execution: &ExecutionId) -> Result<Begun> {
        let (id, execution) = (id.clone(), execution.clone());
        self.write("begin_effect", Weight::Light, move |tx, s| {
            begin(tx, s, &id, &execution)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "settle_effect", skip_all)]
    async fn settle_effect(
        &self,
        id: &EffectId,
        execution: &ExecutionId,
        result: &Json,
    ) -> Result<Settlement> {
        let (id, execution, result) = (id.clone(), execution.clone(), result.clone());
        self.write_waking("settle_effect", Weight::Light, move |tx, s| {
            settle(tx, s, &id, &execution, &result)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "read_effect", skip_all)]
    async fn read_effect(&self, id: &EffectId) -> Result<Option<EffectRecord>> {
        let id = id.clone();
        self.read("read_effect", move |tx, s| read(tx, s, &id))
            .await
    }

    #[tracing::instrument(level = "debug", name = "wait_effect", skip_all)]
    async fn wait_effect(&self, id: &EffectId, execution: &ExecutionId) -> Result<EffectWait> {
        let (id, execution) = (id.clone(), execution.clone());
        self.write("wait_effect", Weight::Light, move |tx, s| {
            wait(tx, s, &id, &execution)
        })
        .await
    }
}
