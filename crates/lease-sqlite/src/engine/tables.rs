//! The engine's rows other than the execution's own: steps, stores, receipts, waiters,
//! start requests and effects, each read or written by one statement of the backend's.

use std::collections::{BTreeMap, BTreeSet};

use lease_core::engine::ReceiptKey;
use lease_core::{
    EffectId, EffectRecord, ExecutionId, ExecutionRecord, Json, LeaseError, RequestId, StoreId,
    StoreKey, StoreOutcome,
};
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{OpError, OpResult};
use crate::scope::Scope;
use crate::{effect, retention, rows};

/// `$1 namespace, $2 store` -> a row when the store exists.
const STORE_EXISTS: &str = include_str!("tables/store_exists.sql");
/// `$1 namespace, $2 store`: creates a store.
const CREATE_STORE: &str = include_str!("tables/store_create.sql");
/// `$1 namespace, $2 store, $3 key` -> the entry's value.
const ENTRY: &str = include_str!("tables/store_entry.sql");
/// `$1 namespace, $2 store` -> (key, value) of every entry.
const ENTRIES: &str = include_str!("tables/store_entries.sql");
/// `$1 namespace, $2 store, $3 key, $4 value`: writes an entry.
const PUT_ENTRY: &str = include_str!("tables/store_put.sql");
/// `$1 namespace, $2 store, $3 key`: removes an entry.
const REMOVE_ENTRY: &str = include_str!("tables/store_remove.sql");
/// `$1 namespace, $2 store, $3 execution, $4 step` -> (applied, previous) of a receipt.
const RECEIPT: &str = include_str!("tables/store_receipt.sql");
/// `$1..$4` as [`RECEIPT`], `$5 applied, $6 previous`: records a receipt.
const RECORD_RECEIPT: &str = include_str!("tables/store_record_receipt.sql");
/// `$1 namespace, $2 store, $3 key, $4 execution`: registers a waiter.
const ADD_WAITER: &str = include_str!("tables/store_waiter_insert.sql");
/// `$1 namespace, $2 store, $3 key` -> the waiters, removed.
const TAKE_WAITERS: &str = include_str!("tables/store_waiters_take.sql");
/// `$1 namespace, $2 request` -> the execution a start request created.
const START_TARGET: &str = include_str!("tables/start_known.sql");
/// `$1 namespace, $2 request, $3 target`: records a start.
const RECORD_START: &str = include_str!("tables/start_record.sql");
/// `$1 namespace, $2 id`: deletes the execution's row.
const DELETE_EXECUTION: &str = include_str!("tables/delete_execution.sql");

/// `$1 namespace, $2 id, $3 execution id, $4 result, $5 begun_at, $6 settled_at`.
const PUT_EFFECT: &str = include_str!("tables/effect_put.sql");
/// `$1 namespace, $2 id, $3 waiting`.
const EFFECT_WAITING: &str = include_str!("tables/effect_waiting.sql");

fn corrupt(what: &str, e: impl std::fmt::Display) -> OpError {
    OpError::Corrupt(format!("stored {what} is invalid: {e}"))
}

/// Stores a new execution row, next in admission order.
pub(super) fn insert(conn: &Connection, scope: &Scope, record: &ExecutionRecord) -> OpResult<()> {
    if rows::insert(conn, &scope.namespace, record, &scope.policy)? {
        return Ok(());
    }
    Err(OpError::Corrupt(format!(
        "execution {} appeared inside its transaction",
        record.id
    )))
}

/// Removes `ids` and every row that names them.
pub(super) fn purge(conn: &Connection, namespace: &str, ids: &[ExecutionId]) -> OpResult<()> {
    for id in ids {
        for sql in retention::FORGET.iter().chain([&DELETE_EXECUTION]) {
            conn.prepare_cached(sql)?
                .execute(params![namespace, id.as_str()])?;
        }
    }
    Ok(())
}

/// Whether `store` exists.
fn store_exists(conn: &Connection, namespace: &str, store: &StoreId) -> OpResult<bool> {
    Ok(conn
        .prepare_cached(STORE_EXISTS)?
        .query_row(params![namespace, store.as_str()], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Every entry of `store`, `None` when it does not exist.
pub(super) fn store_entries(
    conn: &Connection,
    namespace: &str,
    store: &StoreId,
) -> OpResult<Option<BTreeMap<StoreKey, Json>>> {
    if !store_exists(conn, namespace, store)? {
        return Ok(None);
    }
    let rows: Vec<(String, String)> = conn
        .prepare_cached(ENTRIES)?
        .query_map(params![namespace, store.as_str()], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut entries = BTreeMap::new();
    for (key, value) in rows {
        let key = StoreKey::new(key).map_err(|e| corrupt("store key", e))?;
        entries.insert(key, Json::from_stored(value));
    }
    Ok(Some(entries))
}

/// Creates `store` with `entries`.
pub(super) fn create_store(
    conn: &Connection,
    namespace: &str,
    store: &StoreId,
    entries: &BTreeMap<StoreKey, Json>,
) -> OpResult<()> {
    conn.prepare_cached(CREATE_STORE)?
        .execute(params![namespace, store.as_str()])?;
    for (key, value) in entries {
        set_entry(conn, namespace, store, key, Some(value))?;
    }
    Ok(())
}

/// One entry: `None` when the store does not exist, `Some(None)` when the key is absent.
pub(super) fn entry(
    conn: &Connection,
    namespace: &str,
    store: &StoreId,
    key: &StoreKey,
) -> OpResult<Option<Option<Json>>> {
    if !store_exists(conn, namespace, store)? {
        return Ok(None);
    }
    let value: Option<String> = conn
        .prepare_cached(ENTRY)?
        .query_row(params![namespace, store.as_str(), key.as_str()], |r| {
            r.get(0)
        })
        .optional()?;
    Ok(Some(value.map(Json::from_stored)))
}

/// Writes or removes one entry of an existing store.
pub(super) fn set_entry(
    conn: &Connection,
    namespace: &str,
    store: &StoreId,
    key: &StoreKey,
    value: Option<&Json>,
) -> OpResult<()> {
    match value {
        Some(value) => conn.prepare_cached(PUT_ENTRY)?.execute(params![
            namespace,
            store.as_str(),
            key.as_str(),
            value.as_str()
        ])?,
        None => conn.prepare_cached(REMOVE_ENTRY)?.execute(params![
            namespace,
            store.as_str(),
            key.as_str()
        ])?,
    };
    Ok(())
}

/// The outcome recorded under a receipt.
pub(super) fn receipt(
    conn: &Connection,
    namespace: &str,
    (store, id, step): &ReceiptKey,
) -> OpResult<Option<StoreOutcome>> {
    let found: Option<(bool, Option<String>)> = conn
        .prepare_cached(RECEIPT)?
        .query_row(
            params![namespace, store.as_str(), id.as_str(), step.as_str()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    Ok(found.map(|(applied, previous)| StoreOutcome {
        applied,
        previous: previous.map(Json::from_stored),
    }))
}

/// Records a receipt's outcome.
pub(super) fn put_receipt(
    conn: &Connection,
    namespace: &str,
    (store, id, step): &ReceiptKey,
    outcome: &StoreOutcome,
) -> OpResult<()> {
    conn.prepare_cached(RECORD_RECEIPT)?.execute(params![
        namespace,
        store.as_str(),
        id.as_str(),
        step.as_str(),
        outcome.applied,
        outcome.previous.as_ref().map(Json::as_str),
    ])?;
    Ok(())
}

/// Registers `waiter` for the next change of (`store`, `key`).
pub(super) fn add_waiter(
    conn: &Connection,
    namespace: &str,
    store: &StoreId,
    key: &StoreKey,
    waiter: &ExecutionId,
) -> OpResult<()> {
    conn.prepare_cached(ADD_WAITER)?.execute(params![
        namespace,
        store.as_str(),
        key.as_str(),
        waiter.as_str()
    ])?;
    Ok(())
}

/// Removes and returns the waiters of (`store`, `key`).
pub(super) fn take_waiters(
    conn: &Connection,
    namespace: &str,
    store: &StoreId,
    key: &StoreKey,
) -> OpResult<BTreeSet<ExecutionId>> {
    let ids: Vec<String> = conn
        .prepare_cached(TAKE_WAITERS)?
        .query_map(params![namespace, store.as_str(), key.as_str()], |r| {
            r.get(0)
        })?
        .collect::<rusqlite::Result<_>>()?;
    ids.into_iter()
        .map(|id| ExecutionId::new(id).map_err(|e| corrupt("waiter id", e)))
        .collect()
}

/// The execution a start request created.
pub(super) fn start_target(
    conn: &Connection,
    namespace: &str,
    request: &RequestId,
) -> OpResult<Option<ExecutionId>> {
    let target: Option<String> = conn
        .prepare_cached(START_TARGET)?
        .query_row(params![namespace, request.as_str()], |r| r.get(0))
        .optional()?;
    target
        .map(|t| ExecutionId::new(t).map_err(|e| corrupt("start target", e)))
        .transpose()
}

/// Records the execution a start request created.
pub(super) fn put_start(
    conn: &Connection,
    namespace: &str,
    request: &RequestId,
    target: &ExecutionId,
) -> OpResult<()> {
    conn.prepare_cached(RECORD_START)?.execute(params![
        namespace,
        request.as_str(),
        target.as_str()
    ])?;
    Ok(())
}

/// The effect `id` and whether its owner waits for it.
pub(super) fn effect(
    conn: &Connection,
    namespace: &str,
    id: &EffectId,
) -> OpResult<Option<(EffectRecord, bool)>> {
    effect::load(conn, namespace, id)
}

/// Stores an effect record (its owner's wait mark is left as it is).
pub(super) fn put_effect(
    conn: &Connection,
    namespace: &str,
    record: &EffectRecord,
) -> OpResult<()> {
    conn.prepare_cached(PUT_EFFECT)?.execute(params![
        namespace,
        record.id.as_str(),
        record.execution_id.as_str(),
        record.result().map(Json::as_str),
        record.begun_at.as_millis(),
        record.settled_at.map(|t| t.as_millis()),
    ])?;
    Ok(())
}

/// Marks or unmarks the owner's wait; whether it was marked before.
pub(super) fn set_effect_wait(
    conn: &Connection,
    namespace: &str,
    id: &EffectId,
    waiting: bool,
) -> OpResult<bool> {
    let before = effect(conn, namespace, id)?
        .ok_or_else(|| LeaseError::UnknownEffect(id.clone()))?
        .1;
    conn.prepare_cached(EFFECT_WAITING)?
        .execute(params![namespace, id.as_str(), waiting])?;
    Ok(before)
}
