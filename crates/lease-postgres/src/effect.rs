//! [`EffectClient`] and store waiter registration for [`PostgresBackend`] (RFC 004,
//! reduced; issue 16): each call one statement, store waiter registration one short
//! transaction (see `sql/watch_lock.sql`).
//!
//! The rules are lease-core's ([`lease_core::effect`]): the settle statement records a result
//! exactly when [`EffectRecord::settle`] says `Recorded` for the row it locked, and the
//! caller applies that rule to the returned row to report the settlement. The wakes reuse
//! request_wake's SQL ([`crate::sql::wake_of`]).

use std::sync::Arc;

use async_trait::async_trait;
use lease_core::{
    Begun, EffectClient, EffectId, EffectRecord, EffectState, EffectWait, ExecutionId, Json,
    LeaseError, Result, Settlement, StoreId, StoreKey, Timestamp,
};
use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, Connection};

use crate::backend::PostgresBackend;
use crate::error::{Attempt, Effect, detached, protocol, settle};
use crate::rows::col;
use crate::sql::wake_of;

/// A statement with its parameters bound.
type PgQuery<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// The effect and store-waiter statements of one schema, rendered once.
#[derive(Debug)]
pub(crate) struct EffectStatements {
    begin: Arc<str>,
    settle: Arc<str>,
    wait: Arc<str>,
    read: Arc<str>,
    watch_lock: Arc<str>,
    watch_register: Arc<str>,
}

impl EffectStatements {
    /// Renders every statement with `render` (the schema's placeholders).
    pub(crate) fn new(render: &impl Fn(&str) -> Arc<str>) -> Self {
        let settle = wake_of(
            include_str!("sql/effect_settle.sql"),
            "SELECT $2::text FROM settled WHERE settled.waiting",
            "(SELECT now FROM clk)",
            "$5",
        );
        EffectStatements {
            begin: render(include_str!("sql/effect_begin.sql")),
            settle: render(&settle),
            wait: render(include_str!("sql/effect_wait.sql")),
            read: render(include_str!("sql/effect_read.sql")),
            watch_lock: render(include_str!("sql/watch_lock.sql")),
            watch_register: render(include_str!("sql/watch_register.sql")),
        }
    }
}

/// The effect in columns `from..from + 5` (id, execution, result, begun_at, settled_at). A
/// row this library never writes (an invalid id, a result without a settle time or back) is
/// [`LeaseError::Protocol`].
fn record(row: &PgRow, from: usize, operation: &'static str) -> Result<EffectRecord> {
    let id: String = col(row, from, operation)?;
    let corrupt = |what: String| protocol(operation, format!("effect {id:?}: {what}"));
    let effect = EffectId::new(id.clone()).map_err(|e| corrupt(format!("id: {e}")))?;
    let owner: String = col(row, from + 1, operation)?;
    let execution_id =
        ExecutionId::new(owner).map_err(|e| corrupt(format!("execution id: {e}")))?;
    let result: Option<String> = col(row, from + 2, operation)?;
    let begun_at: i64 = col(row, from + 3, operation)?;
    let settled_at: Option<i64> = col(row, from + 4, operation)?;
    let (state, settled_at) = match (result, settled_at) {
        (None, None) => (EffectState::Pending, None),
        (Some(result), Some(at)) => (
            EffectState::Settled(Json::from_stored(result)),
            Some(Timestamp::from_millis(at)),
        ),
        _ => return Err(corrupt("result and settled_at disagree".to_owned())),
    };
    Ok(EffectRecord {
        id: effect,
        execution_id,
        state,
        begun_at: Timestamp::from_millis(begun_at),
        settled_at,
    })
}

impl PostgresBackend {
    /// Runs `sql` with its parameters bound by `bind` (each attempt), returning at most one
    /// row.
    async fn effect_row<'q, B>(
        &self,
        operation: &'static str,
        effect: Effect,
        sql: &Arc<str>,
        bind: B,
    ) -> Result<Option<PgRow>>
    where
        B: Fn(PgQuery<'q>) -> PgQuery<'q> + Send + Sync,
    {
        let bind = &bind;
        self.run(operation, effect, |mut conn| async move {
            let r = bind(sqlx::query(AssertSqlSafe(sql.clone())))
                .fetch_optional(&mut *conn)
                .await;
            settle(r, &mut conn)
        })
        .await
    }

    /// Store waiter registration (issue 16): see [`lease_core::StoreClient::watch_entry`].
    pub(crate) async fn watch(
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
                    let sql = &this.inner.sql.effects;
                    let (store_id, entry, id) = (store_id.as_str(), entry.as_str(), id.as_str());
                    let r: std::result::Result<_, Attempt> = async {
                        let mut tx = conn.begin().await.map_err(Attempt::before_commit)?;
                        let known: (bool, bool) =
                            sqlx::query_as(AssertSqlSafe(sql.watch_lock.clone()))
                                .bind(store_id)
                                .bind(id)
                                .fetch_one(&mut *tx)
                                .await
                                .map_err(Attempt::before_commit)?;
                        if known != (true, true) {
                            return Ok(Err(known));
                        }
                        let value: Option<String> =
                            sqlx::query_scalar(AssertSqlSafe(sql.watch_register.clone()))
                                .bind(store_id)
                                .bind(entry)
                                .bind(id)
                                .fetch_one(&mut *tx)
                                .await
                                .map_err(Attempt::before_commit)?;
                        tx.commit().await?;
                        Ok(Ok(value))
                    }
                    .await;
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
}

#[async_trait]
impl EffectClient for PostgresBackend {
    #[tracing::instrument(level = "debug", name = "begin_effect", skip_all)]
    async fn begin_effect(&self, id: &EffectId, execution: &ExecutionId) -> Result<Begun> {
        const OP: &str = "begin_effect";
        let clock = self.clock_param();
        let row = self
            .effect_row(OP, Effect::Write, &self.inner.sql.effects.begin, |q| {
                q.bind(id.as_str()).bind(execution.as_str()).bind(clock)
            })
            .await?
            .ok_or_else(|| protocol(OP, "no row"))?;
        let known: bool = col(&row, 0, OP)?;
        if !known {
            return Err(LeaseError::UnknownExecution(execution.clone()));
        }
        let record = record(&row, 1, OP)?;
        record.check_owner(execution)?;
        let created: bool = col(&row, 6, OP)?;
        Ok(Begun { record, created })
    }

    #[tracing::instrument(level = "debug", name = "settle_effect", skip_all)]
    async fn settle_effect(
        &self,
        id: &EffectId,
        execution: &ExecutionId,
        result: &Json,
    ) -> Result<Settlement> {
        const OP: &str = "settle_effect";
        let clock = self.clock_param();
        let delays = &self.inner.delays;
        let row = self
            .effect_row(OP, Effect::Write, &self.inner.sql.effects.settle, |q| {
                q.bind(id.as_str())
                    .bind(execution.as_str())
                    .bind(result.as_str())
                    .bind(clock)
                    .bind(delays)
            })
            .await?
            .ok_or_else(|| LeaseError::UnknownEffect(id.clone()))?;
        let before = record(&row, 0, OP)?;
        before.check_owner(execution)?;
        let now: i64 = col(&row, 5, OP)?;
        Ok(before.settle(result, Timestamp::from_millis(now)))
    }

    #[tracing::instrument(level = "debug", name = "read_effect", skip_all)]
    async fn read_effect(&self, id: &EffectId) -> Result<Option<EffectRecord>> {
        const OP: &str = "read_effect";
        self.effect_row(OP, Effect::Read, &self.inner.sql.effects.read, |q| {
            q.bind(id.as_str())
        })
        .await?
        .map(|row| record(&row, 0, OP))
        .transpose()
    }

    #[tracing::instrument(level = "debug", name = "wait_effect", skip_all)]
    async fn wait_effect(&self, id: &EffectId, execution: &ExecutionId) -> Result<EffectWait> {
        const OP: &str = "wait_effect";
        let row = self
            .effect_row(
                OP,
                Effect::IdempotentWrite,
                &self.inner.sql.effects.wait,
                |q| q.bind(id.as_str()).bind(execution.as_str()),
            )
            .await?
            .ok_or_else(|| LeaseError::UnknownEffect(id.clone()))?;
        let record = record(&row, 0, OP)?;
        record.check_owner(execution)?;
        Ok(match record.state {
            EffectState::Settled(_) => EffectWait::Settled(record),
            EffectState::Pending => EffectWait::Registered,
        })
    }
}
