//! Workflows' own redelivery policies for SQLite (lease_core::redelivery): one row per
//! workflow in `lease_redelivery_policies`, read by a claim once it takes its first lease
//! and kept on each record it claims (`redelivery_policy`), like attempt limits.

use lease_core::{RedeliveryPolicies, RedeliveryPolicy, WorkflowName};
use rusqlite::{Connection, params};

use crate::error::{OpError, OpResult};
use crate::group::Woken;
use crate::scope::Scope;

/// `$1 namespace` -> (workflow, base_ms, factor, cap_ms) by workflow.
const POLICIES: &str = include_str!("redelivery/policies.sql");
/// `$1 namespace, $2 workflow, $3 base_ms, $4 factor, $5 cap_ms`: sets one policy.
const SET_POLICY: &str = include_str!("redelivery/set_policy.sql");
/// `$1 namespace, $2 workflow`: removes one policy.
const REMOVE_POLICY: &str = include_str!("redelivery/remove_policy.sql");

fn corrupt(e: impl std::fmt::Display) -> OpError {
    OpError::Corrupt(format!("stored redelivery policy is invalid: {e}"))
}

fn to_sql(v: u64) -> OpResult<i64> {
    i64::try_from(v).map_err(corrupt)
}

/// `set_redelivery_policy`: one row set or removed. Only the records a claim stamps later
/// follow it, so the wake-up path hears "now" when the change could shorten a delay
/// (removed, or set lower than before): a sleeping dispatcher re-reads its horizon.
pub(crate) fn set_policy(
    conn: &Connection,
    scope: &Scope,
    workflow: &WorkflowName,
    policy: Option<RedeliveryPolicy>,
) -> OpResult<Woken<()>> {
    let before = policies(conn, &scope.namespace)?.of(Some(workflow));
    match policy {
        Some(p) => conn.prepare_cached(SET_POLICY)?.execute(params![
            scope.namespace,
            workflow.as_str(),
            to_sql(p.base_ms())?,
            i64::from(p.factor()),
            to_sql(p.cap_ms())?
        ])?,
        None => conn
            .prepare_cached(REMOVE_POLICY)?
            .execute(params![scope.namespace, workflow.as_str()])?,
    };
    let shorter = match (before, policy) {
        (Some(_), None) => true,
        (Some(old), Some(new)) => (1..=64).any(|n| new.delay_ms(n) < old.delay_ms(n)),
        (None, _) => false,
    };
    Ok(Woken::at((), shorter.then(|| scope.now())))
}

/// `redelivery_policies`: the namespace's policies (also what a claim applies).
pub(crate) fn policies(conn: &Connection, namespace: &str) -> OpResult<RedeliveryPolicies> {
    let rows: Vec<(String, i64, i64, i64)> = conn
        .prepare_cached(POLICIES)?
        .query_map([namespace], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut out = RedeliveryPolicies::default();
    for (workflow, base, factor, cap) in rows {
        let name = WorkflowName::new(workflow).map_err(corrupt)?;
        let policy = RedeliveryPolicy::from_parts(
            u64::try_from(base).map_err(corrupt)?,
            u32::try_from(factor).map_err(corrupt)?,
            u64::try_from(cap).map_err(corrupt)?,
        )
        .map_err(corrupt)?;
        out.workflows.push((name, policy));
    }
    Ok(out)
}
