//! [`StoreClient`] and [`StartClient`] for [`PostgresBackend`]: the unfenced writes that are
//! idempotent by identity or by receipt (RFC 002 fencing table; RFC 003 and 005 reduced).

use std::collections::BTreeMap;

use async_trait::async_trait;
use lease_core::{
    ExecutionId, Json, LeaseError, Result, StartClient, StartRequest, Started, StoreClient,
    StoreId, StoreKey, StoreOp, StoreOutcome, StoreReceipt, StoreSnapshot, StoreUpdate,
};
use sqlx::{AssertSqlSafe, Connection, Row};

use crate::backend::PostgresBackend;
use crate::error::{Attempt, Effect, detached, protocol, settle};
use crate::rows::col;
use crate::sql::EXECUTIONS_PKEY;

/// How often a statement runs again when a concurrent transaction committed the row it
/// conflicts with after the statement's snapshot (the next run always sees it).
const SNAPSHOT_RETRIES: usize = 3;

/// What one run of the store-update transaction found.
enum UpdateReply {
    UnknownStore,
    Replayed(StoreOutcome),
    Applied(StoreOutcome),
}

/// What one run of the start statement found.
enum StartReply {
    Created,
    Existing(String),
    Invisible,
    TargetExists,
}

fn stored_name<T>(
    value: String,
    operation: &'static str,
    parse: fn(String) -> Result<T>,
) -> Result<T> {
    parse(value).map_err(|e| protocol(operation, format!("stored name is invalid: {e}")))
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
        let sql = &self.inner.sql.get_or_create;
        let id = store.as_str();
        let (keys, values) = (&keys, &values);
        for _ in 0..SNAPSHOT_RETRIES {
            let found = self
                .run("get_or_create", Effect::Write, |mut conn| async move {
                    let r = sqlx::query(AssertSqlSafe(sql.clone()))
                        .bind(id)
                        .bind(keys)
                        .bind(values)
                        .fetch_all(&mut *conn)
                        .await;
                    settle(r, &mut conn)
                })
                .await?;
            let mut created = None;
            let mut entries = BTreeMap::new();
            for row in &found {
                let kind: String = col(row, 0, "get_or_create")?;
                match kind.as_str() {
                    "created" => created = Some(true),
                    "existing" => created = Some(false),
                    "entry" => {
                        let key: String = col(row, 1, "get_or_create")?;
                        let value: String = col(row, 2, "get_or_create")?;
                        entries.insert(
                            stored_name(key, "get_or_create", StoreKey::new)?,
                            Json::from_stored(value),
                        );
                    }
                    other => return Err(protocol("get_or_create", format!("row kind {other}"))),
                }
            }
            if let Some(created) = created {
                return Ok(StoreSnapshot {
                    store: store.clone(),
                    entries,
                    created,
                });
            }
        }
        Err(protocol(
            "get_or_create",
            "the created store stayed invisible",
        ))
    }

    #[tracing::instrument(level = "debug", name = "read_entry", skip_all)]
    async fn read_entry(&self, store: &StoreId, key: &StoreKey) -> Result<Option<Json>> {
        let sql = &self.inner.sql.read_entry;
        let (id, entry) = (store.as_str(), key.as_str());
        let row = self
            .run("read_entry", Effect::Read, |mut conn| async move {
                let r = sqlx::query(AssertSqlSafe(sql.clone()))
                    .bind(id)
                    .bind(entry)
                    .fetch_one(&mut *conn)
                    .await;
                settle(r, &mut conn)
            })
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
        let store = receipt.store.as_str();
        let execution = receipt.execution_id.as_str();
        let step = receipt.step_key.as_str();
        let entry = op.key().as_str();
        let clock = self.clock_param();
        // One transaction: lock the store row, then read receipt and entry in a fresh
        // snapshot (taken after the lock, so they are current), apply the op exactly as
        // lease-core defines it, write entry and receipt, commit. Only a failed COMMIT
        // leaves the outcome unknown.
        let reply = self
            .run("update", Effect::Write, |mut conn| {
                let this = self.clone();
                let (store, execution) = (store.to_owned(), execution.to_owned());
                let (step, entry, op) = (step.to_owned(), entry.to_owned(), op.clone());
                detached(async move {
                    let sql = &this.inner.sql;
                    let delays = &this.inner.delays;
                    let (store, execution) = (store.as_str(), execution.as_str());
                    let (step, entry) = (step.as_str(), entry.as_str());
                    let r: std::result::Result<UpdateReply, Attempt> = async {
                        let mut tx = conn.begin().await.map_err(Attempt::before_commit)?;
                        let locked = sqlx::query(AssertSqlSafe(sql.lock_store.clone()))
                            .bind(store)
                            .fetch_optional(&mut *tx)
                            .await
                            .map_err(Attempt::before_commit)?;
                        if locked.is_none() {
                            return Ok(UpdateReply::UnknownStore);
                        }
                        let row = sqlx::query(AssertSqlSafe(sql.read_receipt.clone()))
                            .bind(store)
                            .bind(execution)
                            .bind(step)
                            .bind(entry)
                            .fetch_one(&mut *tx)
                            .await
                            .map_err(Attempt::before_commit)?;
                        let decode = |e| Attempt::before_commit(e);
                        let exists: bool = row.try_get(0).map_err(decode)?;
                        if exists {
                            let applied: bool = row.try_get(1).map_err(decode)?;
                            let previous: Option<String> = row.try_get(2).map_err(decode)?;
                            return Ok(UpdateReply::Replayed(StoreOutcome {
                                applied,
                                previous: previous.map(Json::from_stored),
                            }));
                        }
                        let current: Option<String> = row.try_get(3).map_err(decode)?;
                        let current = current.map(Json::from_stored);
                        let (next, outcome) = op.apply(current.as_ref());
                        sqlx::query(AssertSqlSafe(sql.apply_update.clone()))
                            .bind(store)
                            .bind(entry)
                            .bind(next.as_ref().map(Json::as_str))
                            .bind(outcome.applied)
                            .bind(execution)
                            .bind(step)
                            .bind(outcome.previous.as_ref().map(Json::as_str))
                            .bind(clock)
                            .bind(delays)
                            .execute(&mut *tx)
                            .await
                            .map_err(Attempt::before_commit)?;
                        tx.commit().await?;
                        Ok(UpdateReply::Applied(outcome))
                    }
                    .await;
                    settle(r, &mut conn)
                })
            })
            .await?;
        match reply {
            UpdateReply::UnknownStore => Err(LeaseError::UnknownStore(receipt.store.to_string())),
            UpdateReply::Replayed(outcome) => Ok(StoreUpdate {
                outcome,
                replayed: true,
            }),
            UpdateReply::Applied(outcome) => Ok(StoreUpdate {
                outcome,
                replayed: false,
            }),
        }
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

#[async_trait]
impl StartClient for PostgresBackend {
    #[tracing::instrument(level = "debug", name = "start", skip_all)]
    async fn start(&self, request: &StartRequest) -> Result<Started> {
        let sql = &self.inner.sql.start;
        let request_id = request.request_id.as_str();
        let target = request.target.as_str();
        let workflow = request.workflow.as_str();
        let input = request.input.as_str();
        for _ in 0..SNAPSHOT_RETRIES {
            let clock = self.clock_param();
            let reply = self
                .run("start", Effect::Write, |mut conn| async move {
                    let result = sqlx::query(AssertSqlSafe(sql.clone()))
                        .bind(request_id)
                        .bind(target)
                        .bind(workflow)
                        .bind(input)
                        .bind(clock)
                        .fetch_one(&mut *conn)
                        .await;
                    let row = match result {
                        Ok(row) => row,
                        Err(sqlx::Error::Database(db))
                            if db.constraint() == Some(EXECUTIONS_PKEY) =>
                        {
                            return Ok(StartReply::TargetExists);
                        }
                        Err(e) => return settle(Err(e), &mut conn),
                    };
                    let created: bool = row.try_get(0)?;
                    let existing: Option<String> = row.try_get(1)?;
                    Ok(match (created, existing) {
                        (true, _) => StartReply::Created,
                        (false, Some(t)) => StartReply::Existing(t),
                        (false, None) => StartReply::Invisible,
                    })
                })
                .await?;
            match reply {
                StartReply::Created => {
                    return Ok(Started {
                        target: request.target.clone(),
                        created: true,
                    });
                }
                StartReply::Existing(t) => {
                    return Ok(Started {
                        target: stored_name(t, "start", ExecutionId::new)?,
                        created: false,
                    });
                }
                StartReply::TargetExists => {
                    return Err(LeaseError::invalid(
                        "start target",
                        format!("execution {} already exists", request.target),
                    ));
                }
                StartReply::Invisible => continue,
            }
        }
        Err(protocol(
            "start",
            "the recorded start request stayed invisible",
        ))
    }
}
