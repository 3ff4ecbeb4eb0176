//! [`StoreClient`] for [`PostgresBackend`]: the unfenced store writes, idempotent by
//! identity or by receipt (RFC 002 fencing table; RFC 003 reduced), and the store waiter
//! registration.

use std::collections::BTreeMap;

use async_trait::async_trait;
use lease_core::{
    ExecutionId, Json, LeaseError, Result, StoreClient, StoreId, StoreKey, StoreOp, StoreOutcome,
    StoreReceipt, StoreSnapshot, StoreUpdate,
};
use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, Connection, PgConnection, Postgres, Row, Transaction};

use crate::backend::{PostgresBackend, query};
use crate::error::{Attempt, Effect, detached, protocol, settle};
use crate::rows::{col, stored_name};
use crate::statements::{Renderer, StoreSql};

const GET_OR_CREATE: &str = include_str!("store/get_or_create.sql");
const READ_ENTRY: &str = include_str!("store/read_entry.sql");
const LOCK_STORE: &str = include_str!("store/lock_store.sql");
const READ_RECEIPT: &str = include_str!("store/read_receipt.sql");
const APPLY_UPDATE: &str = include_str!("store/apply_update.sql");
const WATCH_LOCK: &str = include_str!("store/watch_lock.sql");
const WATCH_REGISTER: &str = include_str!("store/watch_register.sql");

/// This module's statements, rendered for one schema.
pub(crate) fn statements(r: &Renderer) -> StoreSql {
    StoreSql {
        get_or_create: r.render(GET_OR_CREATE),
        read_entry: r.render(READ_ENTRY),
        lock_store: r.render(LOCK_STORE),
        read_receipt: r.render(READ_RECEIPT),
        apply_update: r.render(APPLY_UPDATE),
        watch_lock: r.render(WATCH_LOCK),
        watch_register: r.render(WATCH_REGISTER),
    }
}

/// How often a statement runs again when a concurrent transaction committed the row it
/// conflicts with after the statement's snapshot (the next run always sees it).
const SNAPSHOT_RETRIES: usize = 3;

/// What one run of the store-update transaction found.
enum UpdateReply {
    UnknownStore,
    Replayed(StoreOutcome),
    Applied(StoreOutcome),
}

/// One store update as its transaction binds it (owned: the attempt runs detached).
struct UpdateParams {
    store: String,
    execution: String,
    step: String,
    entry: String,
    op: StoreOp,
    clock: Option<i64>,
}

/// The transaction's step that failed, as an attempt: nothing was committed.
fn before_commit(error: sqlx::Error) -> Attempt {
    Attempt::before_commit(error)
}

impl PostgresBackend {
    /// This module's statements.
    fn store_sql(&self) -> &StoreSql {
        let sql = &self.inner.sql;
        sql.store.get(&sql.renderer, statements)
    }

    /// The store update's transaction: lock the store row, then read receipt and entry in
    /// a fresh snapshot (taken after the lock, so they are current), apply the op exactly as
    /// lease-core defines it, write entry and receipt, commit. Only a failed COMMIT leaves
    /// the outcome unknown.
    async fn update_once(
        &self,
        conn: &mut PgConnection,
        p: &UpdateParams,
    ) -> std::result::Result<UpdateReply, Attempt> {
        let sql = self.store_sql();
        let mut tx = conn.begin().await.map_err(before_commit)?;
        let locked = query(&sql.lock_store)
            .bind(&p.store)
            .fetch_optional(&mut *tx)
            .await
            .map_err(before_commit)?;
        if locked.is_none() {
            return Ok(UpdateReply::UnknownStore);
        }
        let row = query(&sql.read_receipt)
            .bind(&p.store)
            .bind(&p.execution)
            .bind(&p.step)
            .bind(&p.entry)
            .fetch_one(&mut *tx)
            .await
            .map_err(before_commit)?;
        let exists: bool = row.try_get(0).map_err(before_commit)?;
        if exists {
            return replayed(&row).map(UpdateReply::Replayed);
        }
        let current: Option<String> = row.try_get(3).map_err(before_commit)?;
        let (next, outcome) = p.op.apply(current.map(Json::from_stored).as_ref());
        self.apply_update(&mut tx, p, next.as_ref(), &outcome)
            .await
            .map_err(before_commit)?;
        tx.commit().await?;
        Ok(UpdateReply::Applied(outcome))
    }

    /// Writes the entry (when applied) and the receipt, waking the entry's waiters.
    async fn apply_update(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        p: &UpdateParams,
        next: Option<&Json>,
        outcome: &StoreOutcome,
    ) -> std::result::Result<(), sqlx::Error> {
        query(&self.store_sql().apply_update)
            .bind(&p.store)
            .bind(&p.entry)
            .bind(next.map(Json::as_str))
            .bind(outcome.applied)
            .bind(&p.execution)
            .bind(&p.step)
            .bind(outcome.previous.as_ref().map(Json::as_str))
            .bind(p.clock)
            .bind(&self.inner.delays)
            .execute(&mut **tx)
            .await
            .map(|_| ())
    }

    /// Store waiter registration: see [`lease_core::StoreClient::watch_entry`]. One short
    /// transaction: the store row locked `FOR SHARE`, then the registration.
    async fn watch(
        &self,
        store: &StoreId,
        key: &StoreKey,
        waiter: &ExecutionId,
    ) -> Result<Option<Json>> {
        let (store_id, entry, id) = (store.as_str(), key.as_str(), waiter.as_str());
        let found = self
            .run("watch_entry", Effect::IdempotentWrite, |mut conn| {
                let this = self.clone();
                let (store_id, entry, id) = (store_id.to_owned(), entry.to_owned(), id.to_owned());
                detached(async move {
                    let r = this.watch_once(&mut conn, &store_id, &entry, &id).await;
                    settle(r, &mut conn)
                })
            })
            .await?;
        match found {
            Ok(value) => Ok(value.map(Json::from_stored)),
            Err((false, _)) => Err(LeaseError::UnknownExecution(waiter.clone())),
            Err(_) => Err(LeaseError::UnknownStore(store.to_string())),
        }
    }

    /// One run of the registration's transaction: the entry's value, or which of (waiter,
    /// store) exist when one does not.
    async fn watch_once(
        &self,
        conn: &mut PgConnection,
        store_id: &str,
        entry: &str,
        id: &str,
    ) -> std::result::Result<std::result::Result<Option<String>, (bool, bool)>, Attempt> {
        let sql = self.store_sql();
        let mut tx = conn.begin().await.map_err(before_commit)?;
        let known: (bool, bool) = sqlx::query_as(AssertSqlSafe(sql.watch_lock.clone()))
            .bind(store_id)
            .bind(id)
            .fetch_one(&mut *tx)
            .await
            .map_err(before_commit)?;
        if known != (true, true) {
            return Ok(Err(known));
        }
        let value: Option<String> = sqlx::query_scalar(AssertSqlSafe(sql.watch_register.clone()))
            .bind(store_id)
            .bind(entry)
            .bind(id)
            .fetch_one(&mut *tx)
            .await
            .map_err(before_commit)?;
        tx.commit().await?;
        Ok(Ok(value))
    }
}

/// The outcome a receipt recorded (`read_receipt.sql`'s columns 1 and 2).
fn replayed(row: &PgRow) -> std::result::Result<StoreOutcome, Attempt> {
    let applied: bool = row.try_get(1).map_err(before_commit)?;
    let previous: Option<String> = row.try_get(2).map_err(before_commit)?;
    Ok(StoreOutcome {
        applied,
        previous: previous.map(Json::from_stored),
    })
}

/// `get_or_create`'s rows as the snapshot they describe; `None` without a header (the
/// store was created by a transaction this snapshot cannot see).
fn snapshot(store: &StoreId, found: &[PgRow]) -> Result<Option<StoreSnapshot>> {
    const OP: &str = "get_or_create";
    let mut created = None;
    let mut entries = BTreeMap::new();
    for row in found {
        let kind: String = col(row, 0, OP)?;
        match kind.as_str() {
            "created" => created = Some(true),
            "existing" => created = Some(false),
            "entry" => {
                let key: String = col(row, 1, OP)?;
                let value: String = col(row, 2, OP)?;
                entries.insert(
                    stored_name(key, OP, StoreKey::new)?,
                    Json::from_stored(value),
                );
            }
            other => return Err(protocol(OP, format!("row kind {other}"))),
        }
    }
    Ok(created.map(|created| StoreSnapshot {
        store: store.clone(),
        entries,
        created,
    }))
}

#[async_trait]
impl StoreClient for PostgresBackend {
    #[tracing::instrument(level = "debug", name = "get_or_create", skip_all)]
    async fn get_or_create(
        &self,
        store: &StoreId,
        initial: &[(StoreKey, Json)],
    ) -> Result<StoreSnapshot> {
        // Later duplicates win, as when the entries are collected into a map.
        let initial: BTreeMap<&str, &str> = initial
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let keys: Vec<&str> = initial.keys().copied().collect();
        let values: Vec<&str> = initial.values().copied().collect();
        let sql = &self.store_sql().get_or_create;
        let id = store.as_str();
        let (keys, values) = (&keys, &values);
        for _ in 0..SNAPSHOT_RETRIES {
            let found: Vec<PgRow> = self
                .run_statement("get_or_create", Effect::Write, sql, |q| {
                    q.bind(id).bind(keys).bind(values)
                })
                .await?;
            if let Some(snapshot) = snapshot(store, &found)? {
                return Ok(snapshot);
            }
        }
        Err(protocol(
            "get_or_create",
            "the created store stayed invisible",
        ))
    }

    #[tracing::instrument(level = "debug", name = "read_entry", skip_all)]
    async fn read_entry(&self, store: &StoreId, key: &StoreKey) -> Result<Option<Json>> {
        let sql = &self.store_sql().read_entry;
        let (id, entry) = (store.as_str(), key.as_str());
        let row: PgRow = self
            .run_statement("read_entry", Effect::Read, sql, |q| q.bind(id).bind(entry))
            .await?;
        let known: bool = col(&row, 0, "read_entry")?;
        if !known {
            return Err(LeaseError::UnknownStore(store.to_string()));
        }
        let value: Option<String> = col(&row, 1, "read_entry")?;
        Ok(value.map(Json::from_stored))
    }

    #[tracing::instrument(level = "debug", name = "update", skip_all)]
    async fn update(&self, receipt: &StoreReceipt, op: &StoreOp) -> Result<StoreUpdate> {
        let params = UpdateParams {
            store: receipt.store.as_str().to_owned(),
            execution: receipt.execution_id.as_str().to_owned(),
            step: receipt.step_key.as_str().to_owned(),
            entry: op.key().as_str().to_owned(),
            op: op.clone(),
            clock: self.clock_param(),
        };
        let params = std::sync::Arc::new(params);
        let reply = self
            .run("update", Effect::Write, |mut conn| {
                let (this, params) = (self.clone(), params.clone());
                detached(async move {
                    let r = this.update_once(&mut conn, &params).await;
                    settle(r, &mut conn)
                })
            })
            .await?;
        let (outcome, replayed) = match reply {
            UpdateReply::UnknownStore => {
                return Err(LeaseError::UnknownStore(receipt.store.to_string()));
            }
            UpdateReply::Replayed(outcome) => (outcome, true),
            UpdateReply::Applied(outcome) => (outcome, false),
        };
        Ok(StoreUpdate { outcome, replayed })
    }

    #[tracing::instrument(level = "debug", name = "watch_entry", skip_all)]
    async fn watch_entry(
        &self,
        store: &StoreId,
        key: &StoreKey,
        waiter: &ExecutionId,
    ) -> Result<Option<Json>> {
        self.watch(store, key, waiter).await
    }
}
