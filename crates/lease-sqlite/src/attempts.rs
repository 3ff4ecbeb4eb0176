//! Attempt limits and dead letters for SQLite (lease_core::attempts), each run inside the
//! caller's one write (or read) transaction: the limits per namespace in
//! `lease_attempt_limits` (workflow `''` is the default), read by a claim once it takes its
//! first lease and copied onto each record it claims; releases through lease-core's
//! `release_with` transition; `list_dead` and `retry_dead` over the rows.

use lease_core::attempts::check_retry_ids;
use lease_core::{
    AttemptLimit, AttemptLimits, AttemptScope, ExecutionId, ExecutionRecord, Json, WorkflowName,
};
use rusqlite::{Connection, params};

use crate::error::{OpError, OpResult};
use crate::group::Woken;
use crate::rows::{self, RawExecution, read_raw};
use crate::scope::Scope;

/// `$1 namespace` -> (workflow, value), the default (`''`) first.
const LIMITS: &str = include_str!("attempts/limits.sql");
/// `$1 namespace, $2 workflow, $3 value`: sets one limit.
const SET_LIMIT: &str = include_str!("attempts/set_limit.sql");
/// `$1 namespace, $2 workflow`: removes one limit.
const REMOVE_LIMIT: &str = include_str!("attempts/remove_limit.sql");
/// `$1 namespace, $2 after, $3 now, $4 limit` -> the dead rows by id.
pub(crate) const LIST_DEAD: &str = include_str!("attempts/list_dead.sql");

/// The stored key of a scope: `''` for the default (no workflow name is empty).
fn scope_key(scope: &AttemptScope) -> &str {
    match scope {
        AttemptScope::Default => "",
        AttemptScope::Workflow(w) => w.as_str(),
    }
}

/// `set_attempt_limit`: one row set or removed.
pub(crate) fn set_limit(
    conn: &Connection,
    scope: &Scope,
    which: &AttemptScope,
    limit: Option<AttemptLimit>,
) -> OpResult<()> {
    let key = scope_key(which);
    match limit {
        Some(limit) => conn.prepare_cached(SET_LIMIT)?.execute(params![
            scope.namespace,
            key,
            i64::from(limit.get())
        ])?,
        None => conn
            .prepare_cached(REMOVE_LIMIT)?
            .execute(params![scope.namespace, key])?,
    };
    Ok(())
}

/// `attempt_limits`: the namespace's limits (also what a claim applies).
pub(crate) fn limits(conn: &Connection, namespace: &str) -> OpResult<AttemptLimits> {
    let rows: Vec<(String, i64)> = conn
        .prepare_cached(LIMITS)?
        .query_map([namespace], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut limits = AttemptLimits::default();
    for (workflow, value) in rows {
        let limit = AttemptLimit::from_stored(value);
        if workflow.is_empty() {
            limits.default = Some(limit);
        } else {
            let name = WorkflowName::new(workflow).map_err(|e| {
                OpError::Corrupt(format!("stored attempt limit workflow is invalid: {e}"))
            })?;
            limits.workflows.push((name, limit));
        }
    }
    Ok(limits)
}

/// `list_dead`: the effective dead records after `after`, by id, at most `limit`.
pub(crate) fn list_dead(
    conn: &Connection,
    scope: &Scope,
    after: Option<&ExecutionId>,
    limit: usize,
) -> OpResult<Vec<ExecutionRecord>> {
    let now = scope.now();
    let after = after.map_or("", ExecutionId::as_str);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let raw: Vec<RawExecution> = conn
        .prepare_cached(LIST_DEAD)?
        .query_map(
            params![scope.namespace, after, now.as_millis(), limit],
            read_raw,
        )?
        .collect::<rusqlite::Result<_>>()?;
    raw.into_iter()
        .map(|r| Ok(r.into_record()?.effective(now)))
        .collect()
}

/// `retry_dead`: every id loaded and re-admitted on a copy first (a refusal writes
/// nothing), then all written; the wake-up path hears "now".
pub(crate) fn retry_dead(
    conn: &Connection,
    scope: &Scope,
    ids: &[ExecutionId],
    input: Option<&Json>,
) -> OpResult<Woken<Vec<ExecutionRecord>>> {
    check_retry_ids(ids)?;
    let now = scope.now();
    let mut retried = Vec::with_capacity(ids.len());
    for id in ids {
        let (stored, history) = rows::load_with_history(conn, &scope.namespace, id)?;
        // An expiry that made it dead ends its delivery: the history keeps that entry.
        let history = history.close_expired(&stored)?;
        let mut record = stored.effective(now);
        record.retry_dead(now, input)?;
        retried.push((record, history));
    }
    let mut records = Vec::with_capacity(retried.len());
    for (record, history) in retried {
        rows::save_with(conn, &scope.namespace, &record, &scope.policy, &history)?;
        if let Some(input) = input {
            rows::set_input(conn, &scope.namespace, &record.id, input)?;
        }
        records.push(record);
    }
    Ok(Woken::at(records, Some(now)))
}
