//! Starting workflows (RFC 003 `WorkflowStartClient.start`, reduced): idempotent by receipt;
//! [`StartClient`] for [`SqliteBackend`].

use async_trait::async_trait;
use lease_core::{
    Admission, ExecutionId, ExecutionRecord, LeaseError, Result, StartClient, StartRequest, Started,
};
use rusqlite::{Connection, OptionalExtension, params};

use crate::backend::SqliteBackend;
use crate::conn::Weight;
use crate::error::{OpError, OpResult};
use crate::group::Woken;
use crate::rows;
use crate::scope::Scope;

/// `$1 namespace, $2 request id` -> the request's first target.
const KNOWN: &str = include_str!("start/known.sql");

/// `$1 namespace, $2 request id, $3 target`: records a start.
const RECORD: &str = include_str!("start/record.sql");

/// `start`: a known request id returns its first target; otherwise admits the target (with
/// workflow and input) and records the mapping in the same transaction. A target id that
/// already exists is rejected with `InvalidInput`, changing nothing.
///
/// Wakes dispatchers at the new target's claimable instant.
pub(crate) fn start_in(
    conn: &Connection,
    scope: &Scope,
    request: &StartRequest,
) -> OpResult<Woken<Started>> {
    let known: Option<String> = conn
        .prepare_cached(KNOWN)?
        .query_row(
            params![scope.namespace, request.request_id.as_str()],
            |row| row.get(0),
        )
        .optional()?;
    if let Some(target) = known {
        let target = ExecutionId::new(target)
            .map_err(|e| OpError::Corrupt(format!("stored start target is invalid: {e}")))?;
        return Ok(Woken::quiet(Started {
            target,
            created: false,
        }));
    }
    if rows::load(conn, &scope.namespace, &request.target)?.is_some() {
        return Err(LeaseError::invalid(
            "start target",
            format!("execution {} already exists", request.target),
        )
        .into());
    }
    let admission = Admission::new(request.target.clone())
        .workflow(request.workflow.clone())
        .input(request.input.clone());
    let record = ExecutionRecord::admitted(&admission, scope.now());
    if !rows::insert(conn, &scope.namespace, &record, &scope.policy)? {
        return Err(OpError::Corrupt(format!(
            "execution {} appeared inside its transaction",
            request.target
        )));
    }
    conn.prepare_cached(RECORD)?.execute(params![
        scope.namespace,
        request.request_id.as_str(),
        request.target.as_str()
    ])?;
    Ok(Woken::at(
        Started {
            target: request.target.clone(),
            created: true,
        },
        record.claimable_at(&scope.policy),
    ))
}

#[async_trait]
impl StartClient for SqliteBackend {
    #[tracing::instrument(level = "debug", name = "start", skip_all)]
    async fn start(&self, request: &StartRequest) -> Result<Started> {
        let request = request.clone();
        self.write_waking("start", Weight::Light, move |tx, s| {
            start_in(tx, s, &request)
        })
        .await
    }
}
