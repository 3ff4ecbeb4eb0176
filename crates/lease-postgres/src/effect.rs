//! [`EffectClient`] for [`PostgresBackend`] (RFC 004, reduced): each call one statement
//! (`effect/*.sql`).
//!
//! The rules are lease-core's ([`lease_core::effect`]): the settle statement records a result
//! exactly when [`EffectRecord::settle`] says `Recorded` for the row it locked, and the
//! caller applies that rule to the returned row to report the settlement. The wakes reuse
//! request_wake's transition (`statements/wake.sql`).

use async_trait::async_trait;
use lease_core::{
    Begun, EffectClient, EffectId, EffectRecord, EffectState, EffectWait, ExecutionId, Json,
    LeaseError, Result, Settlement, Timestamp,
};
use sqlx::postgres::PgRow;

use crate::backend::PostgresBackend;
use crate::error::{Effect, protocol};
use crate::rows::col;
use crate::statements::{EffectSql, Renderer};

const BEGIN: &str = include_str!("effect/begin.sql");
const SETTLE: &str = include_str!("effect/settle.sql");
const WAIT: &str = include_str!("effect/wait.sql");
const READ: &str = include_str!("effect/read.sql");

/// This module's statements, rendered for one schema.
pub(crate) fn statements(r: &Renderer) -> EffectSql {
    EffectSql {
        begin: r.render(BEGIN),
        settle: r.render(SETTLE),
        wait: r.render(WAIT),
        read: r.render(READ),
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
    /// This module's statements.
    fn effect_sql(&self) -> &EffectSql {
        let sql = &self.inner.sql;
        sql.effect.get(&sql.renderer, statements)
    }
}

#[async_trait]
impl EffectClient for PostgresBackend {
    #[tracing::instrument(level = "debug", name = "begin_effect", skip_all)]
    async fn begin_effect(&self, id: &EffectId, execution: &ExecutionId) -> Result<Begun> {
        const OP: &str = "begin_effect";
        let clock = self.clock_param();
        let row = self
            .run_statement::<Option<PgRow>>(OP, Effect::Write, &self.effect_sql().begin, |q| {
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
            .run_statement::<Option<PgRow>>(OP, Effect::Write, &self.effect_sql().settle, |q| {
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
        self.run_statement::<Option<PgRow>>(OP, Effect::Read, &self.effect_sql().read, |q| {
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
            .run_statement::<Option<PgRow>>(
                OP,
                Effect::IdempotentWrite,
                &self.effect_sql().wait,
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
