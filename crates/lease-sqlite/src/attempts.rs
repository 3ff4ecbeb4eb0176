//! Attempt limits for SQLite (lease_core::attempts): the limits per namespace in
//! `lease_attempt_limits` (workflow `''` is the default), read by a claim once it takes its
//! first lease and copied onto each record it claims.

use lease_core::{AttemptLimit, AttemptLimits, AttemptScope, WorkflowName};
use rusqlite::{Connection, params};

use crate::error::{OpError, OpResult};
use crate::scope::Scope;

/// `$1 namespace` -> (workflow, value), the default (`''`) first.
const LIMITS: &str = include_str!("attempts/limits.sql");
/// `$1 namespace, $2 workflow, $3 value`: sets one limit.
const SET_LIMIT: &str = include_str!("attempts/set_limit.sql");
/// `$1 namespace, $2 workflow`: removes one limit.
const REMOVE_LIMIT: &str = include_str!("attempts/remove_limit.sql");

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
