//! [`StartClient`] for [`PostgresBackend`]: an idempotent start by request id (RFC 005
//! reduced), one statement (`start/start.sql`).

use async_trait::async_trait;
use lease_core::{ExecutionId, LeaseError, Result, StartClient, StartRequest, Started};
use sqlx::postgres::PgRow;

use crate::backend::{Fetch, PostgresBackend, query};
use crate::error::{Attempt, Effect, protocol, settle};
use crate::rows::{col, stored_name};
use crate::statements::Renderer;

const START: &str = include_str!("start/start.sql");

/// The unique constraint a start target collides with when the execution already exists.
const EXECUTIONS_PKEY: &str = "executions_pkey";

/// How often the start runs again when a concurrent start of the same request committed
/// after its snapshot (the next run always sees it).
const SNAPSHOT_RETRIES: usize = 3;

/// This module's statement, rendered for one schema.
pub(crate) fn statements(r: &Renderer) -> std::sync::Arc<str> {
    r.render(START)
}

/// What one run of the start statement found.
enum StartReply {
    Created,
    Existing(String),
    Invisible,
    TargetExists,
}

impl PostgresBackend {
    /// One run of the start statement: the row, or `TargetExists` when the target id
    /// collides with an existing execution (the statement then recorded nothing).
    async fn start_once(&self, request: &StartRequest) -> Result<StartReply> {
        let sql = self
            .inner
            .sql
            .start
            .get(&self.inner.sql.renderer, statements);
        let clock = self.clock_param();
        let row = self
            .run("start", Effect::Write, |mut conn| async move {
                let q = query(sql)
                    .bind(request.request_id.as_str())
                    .bind(request.target.as_str())
                    .bind(request.workflow.as_str())
                    .bind(request.input.as_str())
                    .bind(clock);
                match PgRow::fetch(q, &mut conn).await {
                    Err(sqlx::Error::Database(db)) if db.constraint() == Some(EXECUTIONS_PKEY) => {
                        Ok::<_, Attempt>(None)
                    }
                    r => settle(r, &mut conn).map(Some),
                }
            })
            .await?;
        let Some(row) = row else {
            return Ok(StartReply::TargetExists);
        };
        let created: bool = col(&row, 0, "start")?;
        let existing: Option<String> = col(&row, 1, "start")?;
        Ok(match (created, existing) {
            (true, _) => StartReply::Created,
            (false, Some(t)) => StartReply::Existing(t),
            (false, None) => StartReply::Invisible,
        })
    }
}

#[async_trait]
impl StartClient for PostgresBackend {
    #[tracing::instrument(level = "debug", name = "start", skip_all)]
    async fn start(&self, request: &StartRequest) -> Result<Started> {
        for _ in 0..SNAPSHOT_RETRIES {
            match self.start_once(request).await? {
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
