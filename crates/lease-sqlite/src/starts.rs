//! Starting workflows (RFC 003 `WorkflowStartClient.start`, reduced): idempotent by receipt.

use lease_core::{Admission, ExecutionId, ExecutionRecord, LeaseError, StartRequest, Started};
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{OpError, OpResult};
use crate::group::Woken;
use crate::rows;
use crate::scope::Scope;

/// `start`: a known request id returns its first target; otherwise admits the target (with
/// workflow and input) and records the mapping in the same transaction. A target id that
/// already exists is rejected with `InvalidInput`, changing nothing.
///
/// Wakes (issue 10) at the new target's claimable instant.
pub(crate) fn start(
    conn: &Connection,
    scope: &Scope,
    request: &StartRequest,
) -> OpResult<Woken<Started>> {
    let known: Option<String> = conn
        .prepare_cached("SELECT target FROM lease_starts WHERE namespace = ?1 AND request_id = ?2")?
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
    conn.prepare_cached(
        "INSERT INTO lease_starts (namespace, request_id, target) VALUES (?1, ?2, ?3)",
    )?
    .execute(params![
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
