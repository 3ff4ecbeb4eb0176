//! Stores (RFC 005, reduced): idempotent by identity (`get_or_create`) and by receipt
//! (`update`), unfenced.

use std::collections::BTreeMap;

use lease_core::{
    Json, LeaseError, StoreId, StoreKey, StoreOp, StoreOutcome, StoreReceipt, StoreSnapshot,
    StoreUpdate,
};
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{OpError, OpResult};
use crate::scope::Scope;

fn exists(conn: &Connection, scope: &Scope, store: &StoreId) -> OpResult<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM lease_stores WHERE namespace = ?1 AND store = ?2")?
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
        .prepare_cached(
            "SELECT value FROM lease_store_entries
             WHERE namespace = ?1 AND store = ?2 AND key = ?3",
        )?
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
    conn.prepare_cached(
        "INSERT INTO lease_store_entries (namespace, store, key, value) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (namespace, store, key) DO UPDATE SET value = excluded.value",
    )?
    .execute(params![
        scope.namespace,
        store.as_str(),
        key.as_str(),
        value.as_str()
    ])?;
    Ok(())
}

/// `get_or_create`: creates the store with `initial` (a repeated key: the last wins) unless
/// it exists; returns its entries either way.
pub(crate) fn get_or_create(
    conn: &Connection,
    scope: &Scope,
    store: &StoreId,
    initial: &[(StoreKey, Json)],
) -> OpResult<StoreSnapshot> {
    let created = !exists(conn, scope, store)?;
    if created {
        conn.prepare_cached("INSERT INTO lease_stores (namespace, store) VALUES (?1, ?2)")?
            .execute(params![scope.namespace, store.as_str()])?;
        for (key, value) in initial {
            put(conn, scope, store, key, value)?;
        }
    }
    let rows: Vec<(String, String)> = conn
        .prepare_cached(
            "SELECT key, value FROM lease_store_entries WHERE namespace = ?1 AND store = ?2",
        )?
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
pub(crate) fn read_entry(
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
pub(crate) fn update(
    conn: &Connection,
    scope: &Scope,
    receipt: &StoreReceipt,
    op: &StoreOp,
) -> OpResult<StoreUpdate> {
    require(conn, scope, &receipt.store)?;
    let recorded: Option<(bool, Option<String>)> = conn
        .prepare_cached(
            "SELECT applied, previous FROM lease_store_receipts
             WHERE namespace = ?1 AND store = ?2 AND execution_id = ?3 AND step_key = ?4",
        )?
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
                conn.prepare_cached(
                    "DELETE FROM lease_store_entries
                     WHERE namespace = ?1 AND store = ?2 AND key = ?3",
                )?
                .execute(params![
                    scope.namespace,
                    receipt.store.as_str(),
                    op.key().as_str()
                ])?;
            }
        }
    }
    conn.prepare_cached(
        "INSERT INTO lease_store_receipts
             (namespace, store, execution_id, step_key, applied, previous)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
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
