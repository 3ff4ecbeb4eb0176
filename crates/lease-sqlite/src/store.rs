//! Stores (RFC 005, reduced): idempotent by identity (`get_or_create`) and by receipt
//! (`update`), unfenced; store waiters, woken by an applied update; and [`StoreClient`] for
//! [`SqliteBackend`].

use std::collections::BTreeMap;

use async_trait::async_trait;
use lease_core::{
    ExecutionId, Json, LeaseError, Result, StoreClient, StoreId, StoreKey, StoreOp, StoreOutcome,
    StoreReceipt, StoreSnapshot, StoreUpdate,
};
use rusqlite::{Connection, OptionalExtension, params};

use crate::backend::SqliteBackend;
use crate::conn::Weight;
use crate::error::{OpError, OpResult};
use crate::group::{Woken, earliest};
use crate::scope::Scope;
use crate::transitions;

/// `$1 namespace, $2 store` -> a row when the store exists.
const EXISTS: &str = include_str!("store/exists.sql");
/// `$1 namespace, $2 store`: creates the store.
const CREATE: &str = include_str!("store/create.sql");
/// `$1 namespace, $2 store, $3 key` -> the entry's value.
const ENTRY: &str = include_str!("store/entry.sql");
/// `$1 namespace, $2 store` -> (key, value) of every entry.
const ENTRIES: &str = include_str!("store/entries.sql");
/// `$1 namespace, $2 store, $3 key, $4 value`: sets an entry.
const PUT: &str = include_str!("store/put.sql");
/// `$1 namespace, $2 store, $3 key`: removes an entry.
const REMOVE: &str = include_str!("store/remove.sql");
/// `$1 namespace, $2 store, $3 execution, $4 step` -> the receipt's recorded outcome.
const RECEIPT: &str = include_str!("store/receipt.sql");
/// `$1..$6`: records a receipt's outcome.
const RECORD_RECEIPT: &str = include_str!("store/record_receipt.sql");
/// `$1 namespace, $2 store, $3 key, $4 waiter`: registers a store waiter.
const WATCH: &str = include_str!("store/waiter_insert.sql");
/// `$1 namespace, $2 store, $3 key` -> the entry's waiters, deleting their registrations.
const TAKE_WAITERS: &str = include_str!("store/waiters_take.sql");

fn exists(conn: &Connection, scope: &Scope, store: &StoreId) -> OpResult<bool> {
    Ok(conn
        .prepare_cached(EXISTS)?
        .query_row(params![scope.namespace, store.as_str()], |_| Ok(()))
        .optional()?
        .is_some())
}

fn require(conn: &Connection, scope: &Scope, store: &StoreId) -> OpResult<()> {
    if exists(conn, scope, store)? {
        Ok(())
    } else {
        Err(LeaseError::UnknownStore(store.to_string()).into())
    }
}

fn entry(
    conn: &Connection,
    scope: &Scope,
    store: &StoreId,
    key: &StoreKey,
) -> OpResult<Option<Json>> {
    Ok(conn
        .prepare_cached(ENTRY)?
        .query_row(
            params![scope.namespace, store.as_str(), key.as_str()],
            |row| row.get::<_, String>(0),
        )
        .optional()?
        .map(Json::from_stored))
}

fn put(
    conn: &Connection,
    scope: &Scope,
    store: &StoreId,
    key: &StoreKey,
    value: &Json,
) -> OpResult<()> {
    conn.prepare_cached(PUT)?.execute(params![
        scope.namespace,
        store.as_str(),
        key.as_str(),
        value.as_str()
    ])?;
    Ok(())
}

/// `get_or_create`: creates the store with `initial` (a repeated key: the last wins) unless
/// it exists; returns its entries either way.
fn get_or_create(
    conn: &Connection,
    scope: &Scope,
    store: &StoreId,
    initial: &[(StoreKey, Json)],
) -> OpResult<StoreSnapshot> {
    let created = !exists(conn, scope, store)?;
    if created {
        conn.prepare_cached(CREATE)?
            .execute(params![scope.namespace, store.as_str()])?;
        for (key, value) in initial {
            put(conn, scope, store, key, value)?;
        }
    }
    let rows: Vec<(String, String)> = conn
        .prepare_cached(ENTRIES)?
        .query_map(params![scope.namespace, store.as_str()], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut entries = BTreeMap::new();
    for (key, value) in rows {
        let key = StoreKey::new(key)
            .map_err(|e| OpError::Corrupt(format!("stored store key is invalid: {e}")))?;
        entries.insert(key, Json::from_stored(value));
    }
    Ok(StoreSnapshot {
        store: store.clone(),
        entries,
        created,
    })
}

/// `read_entry`: `UnknownStore` when the store does not exist.
fn read_entry(
    conn: &Connection,
    scope: &Scope,
    store: &StoreId,
    key: &StoreKey,
) -> OpResult<Option<Json>> {
    require(conn, scope, store)?;
    entry(conn, scope, store, key)
}

/// `update`: the first commit under a receipt applies `op` and records its outcome in the
/// same transaction; later calls return the recorded outcome with `replayed: true`.
fn update(
    conn: &Connection,
    scope: &Scope,
    receipt: &StoreReceipt,
    op: &StoreOp,
) -> OpResult<StoreUpdate> {
    require(conn, scope, &receipt.store)?;
    let recorded: Option<(bool, Option<String>)> = conn
        .prepare_cached(RECEIPT)?
        .query_row(
            params![
                scope.namespace,
                receipt.store.as_str(),
                receipt.execution_id.as_str(),
                receipt.step_key.as_str()
            ],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?;
    if let Some((applied, previous)) = recorded {
        return Ok(StoreUpdate {
            outcome: StoreOutcome {
                applied,
                previous: previous.map(Json::from_stored),
            },
            replayed: true,
        });
    }
    let current = entry(conn, scope, &receipt.store, op.key())?;
    let (next, outcome) = op.apply(current.as_ref());
    if next != current {
        match &next {
            Some(value) => put(conn, scope, &receipt.store, op.key(), value)?,
            None => {
                conn.prepare_cached(REMOVE)?.execute(params![
                    scope.namespace,
                    receipt.store.as_str(),
                    op.key().as_str()
                ])?;
            }
        }
    }
    conn.prepare_cached(RECORD_RECEIPT)?.execute(params![
        scope.namespace,
        receipt.store.as_str(),
        receipt.execution_id.as_str(),
        receipt.step_key.as_str(),
        outcome.applied,
        outcome.previous.as_ref().map(Json::as_str),
    ])?;
    Ok(StoreUpdate {
        outcome,
        replayed: false,
    })
}

/// `watch_entry`: registers `waiter` for the next applied update of (`store`, `key`) and
/// returns the entry's value, read in the same transaction.
fn watch_entry(
    conn: &Connection,
    scope: &Scope,
    store: &StoreId,
    key: &StoreKey,
    waiter: &ExecutionId,
) -> OpResult<Option<Json>> {
    transitions::require_execution(conn, scope, waiter)?;
    let current = read_entry(conn, scope, store, key)?;
    conn.prepare_cached(WATCH)?.execute(params![
        scope.namespace,
        store.as_str(),
        key.as_str(),
        waiter.as_str()
    ])?;
    Ok(current)
}

/// `update` with its store waiters: an applied op (not a replay) takes the entry's
/// registrations and wakes each waiter, in the update's transaction.
fn update_waking(
    conn: &Connection,
    scope: &Scope,
    receipt: &StoreReceipt,
    op: &StoreOp,
) -> OpResult<Woken<StoreUpdate>> {
    let update = update(conn, scope, receipt, op)?;
    if update.replayed || !update.outcome.applied {
        return Ok(Woken::quiet(update));
    }
    let waiters: Vec<String> = conn
        .prepare_cached(TAKE_WAITERS)?
        .query_map(
            params![scope.namespace, receipt.store.as_str(), op.key().as_str()],
            |row| row.get(0),
        )?
        .collect::<rusqlite::Result<_>>()?;
    let now = scope.now();
    let mut at = None;
    for waiter in waiters {
        let waiter = ExecutionId::new(waiter)
            .map_err(|e| OpError::Corrupt(format!("stored store waiter is invalid: {e}")))?;
        at = earliest(at, transitions::wake_waiter(conn, scope, &waiter, now)?);
    }
    Ok(Woken::at(update, at))
}

#[async_trait]
impl StoreClient for SqliteBackend {
    #[tracing::instrument(level = "debug", name = "get_or_create", skip_all)]
    async fn get_or_create(
        &self,
        store: &StoreId,
        initial: &[(StoreKey, Json)],
    ) -> Result<StoreSnapshot> {
        let store = store.clone();
        let initial = initial.to_vec();
        self.write("get_or_create", Weight::of(initial.len()), move |tx, s| {
            get_or_create(tx, s, &store, &initial)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "read_entry", skip_all)]
    async fn read_entry(&self, store: &StoreId, key: &StoreKey) -> Result<Option<Json>> {
        let store = store.clone();
        let key = key.clone();
        self.read("read_entry", move |tx, s| read_entry(tx, s, &store, &key))
            .await
    }

    #[tracing::instrument(level = "debug", name = "update", skip_all)]
    async fn update(&self, receipt: &StoreReceipt, op: &StoreOp) -> Result<StoreUpdate> {
        let receipt = receipt.clone();
        let op = op.clone();
        self.write_waking("update", Weight::Light, move |tx, s| {
            update_waking(tx, s, &receipt, &op)
        })
        .await
    }

    /// Store waiter registration, one transaction: see `watch_entry`.
    #[tracing::instrument(level = "debug", name = "watch_entry", skip_all)]
    async fn watch_entry(
        &self,
        store: &StoreId,
        key: &StoreKey,
        waiter: &ExecutionId,
    ) -> Result<Option<Json>> {
        let (store, key, waiter) = (store.clone(), key.clone(), waiter.clone());
        self.write("watch_entry", Weight::Light, move |tx, s| {
            watch_entry(tx, s, &store, &key, &waiter)
        })
        .await
    }
}
