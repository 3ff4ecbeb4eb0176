//! The operator controls for SQLite, each run inside the caller's one write transaction
//! (one writer at a time, so every check and write here is atomic): cancel through
//! lease-core's [`ExecutionRecord::cancel`] transition; pause and resume of scopes stored
//! per namespace in `lease_paused`, which every claim reads in its own transaction (when
//! its opening read found any row there); concurrency limits per namespace in
//! `lease_limits`, which a claim reads (with each gated key's live-lease count) only once
//! it meets a keyed candidate and only when the opening read found any limit row.

use std::collections::{BTreeSet, HashMap, HashSet};

use lease_core::{
    ConcurrencyKey, ConcurrencyLimit, ConcurrencyLimits, ExecutionRecord, LimitScope, PauseScope,
    Timestamp, WorkflowName,
};
use rusqlite::{Connection, params};

use crate::error::{OpError, OpResult};
use crate::group::Woken;
use crate::scope::Scope;

/// `$1 namespace, $2 kind, $3 workflow`: records a paused scope (no change when it is).
const PAUSE: &str = include_str!("control/pause.sql");

/// `$1 namespace, $2 kind, $3 workflow`: forgets a paused scope.
const RESUME: &str = include_str!("control/resume.sql");

/// `$1 namespace` -> (kind, workflow) of the paused scopes, namespace first, then by name.
const PAUSED: &str = include_str!("control/paused.sql");

/// `$1 namespace` -> (claimable_at, workflow, id) in `claimable_at` order: the horizon
/// walk when gates hold some rows back.
const HORIZON_WALK: &str = include_str!("control/horizon_walk.sql");

/// A scope's stored form in `lease_paused`: (kind, workflow; `''` for the namespace).
fn scope_row(scope: &PauseScope) -> (&'static str, &str) {
    match scope {
        PauseScope::Namespace => ("namespace", ""),
        PauseScope::Workflow(w) => ("workflow", w.as_str()),
    }
}

/// `pause`: `true` when this call paused the scope.
pub(crate) fn pause(conn: &Connection, scope: &Scope, paused: &PauseScope) -> OpResult<bool> {
    let (kind, workflow) = scope_row(paused);
    let changed = conn
        .prepare_cached(PAUSE)?
        .execute(params![scope.namespace, kind, workflow])?;
    Ok(changed == 1)
}

/// `resume`: `true` when the scope was paused; then the wake-up path hears "now" (what it
/// held back may be claimable).
pub(crate) fn resume(
    conn: &Connection,
    scope: &Scope,
    paused: &PauseScope,
) -> OpResult<Woken<bool>> {
    let (kind, workflow) = scope_row(paused);
    let changed = conn
        .prepare_cached(RESUME)?
        .execute(params![scope.namespace, kind, workflow])?;
    let resumed = changed == 1;
    Ok(Woken::at(resumed, resumed.then(|| scope.now())))
}

/// The namespace's paused scopes, in `list_paused` order (namespace first, then by name).
pub(crate) fn list_paused(conn: &Connection, namespace: &str) -> OpResult<Vec<PauseScope>> {
    let rows: Vec<(String, String)> = conn
        .prepare_cached(PAUSED)?
        .query_map([namespace], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    rows.into_iter()
        .map(|(kind, workflow)| match kind.as_str() {
            "namespace" => Ok(PauseScope::Namespace),
            "workflow" => WorkflowName::new(workflow)
                .map(PauseScope::Workflow)
                .map_err(|e| OpError::Corrupt(format!("stored paused workflow is invalid: {e}"))),
            other => Err(OpError::Corrupt(format!("stored pause kind {other:?}"))),
        })
        .collect()
}

/// The paused scopes as lease-core's selection reads them.
pub(crate) fn paused_set(conn: &Connection, namespace: &str) -> OpResult<BTreeSet<PauseScope>> {
    Ok(list_paused(conn, namespace)?.into_iter().collect())
}

/// The claim's horizon when gates hold rows back (lease_core::selection rule 4): walks the
/// horizon index in `claimable_at` order, past rows a paused workflow covers, and counts
/// each other row at the instant `hold(id, key, claimable_at)` says (`None`: held back, not
/// counted; a later instant: a key waiting for its rate). Stops once no later row can be
/// earlier than the best found. The caller handles a paused namespace.
pub(crate) fn gated_horizon(
    conn: &Connection,
    namespace: &str,
    paused: &BTreeSet<PauseScope>,
    hold: impl Fn(&str, Option<&str>, Timestamp) -> Option<Timestamp>,
) -> OpResult<Option<Timestamp>> {
    let mut stmt = conn.prepare_cached(HORIZON_WALK)?;
    let mut rows = stmt.query([namespace])?;
    let mut best: Option<Timestamp> = None;
    while let Some(row) = rows.next()? {
        let at = Timestamp::from_millis(row.get(0)?);
        if best.is_some_and(|b| at >= b) {
            break;
        }
        let workflow: Option<String> = row.get(1)?;
        let id: String = row.get(2)?;
        let key: Option<String> = row.get(3)?;
        let held = workflow.as_deref().is_some_and(|w| {
            paused
                .iter()
                .any(|s| matches!(s, PauseScope::Workflow(p) if p.as_str() == w))
        });
        if held {
            continue;
        }
        if let Some(counted) = hold(&id, key.as_deref(), at) {
            best = Some(best.map_or(counted, |b| b.min(counted)));
        }
    }
    Ok(best)
}

/// `$1 namespace` -> (kind, key, value) of the stored limits: the default first, then keys
/// by name.
const LIMITS: &str = include_str!("control/limits.sql");

/// `$1 namespace, $2 kind, $3 key, $4 value`: sets a limit.
const SET_LIMIT: &str = include_str!("control/set_limit.sql");

/// `$1 namespace, $2 kind, $3 key`: removes a limit.
const REMOVE_LIMIT: &str = include_str!("control/remove_limit.sql");

/// `$1 namespace, $2 key, $3 now` -> the key's live leases (running, expiring after now):
/// the key's `running` range of `lease_executions_by_key`, the expiry tested in the index.
pub(crate) const KEY_LIVE: &str = include_str!("control/key_live.sql");

/// A limit scope's stored form in `lease_limits`: (kind, key; `''` for the default).
fn limit_row(scope: &LimitScope) -> (&'static str, &str) {
    match scope {
        LimitScope::Default => ("default", ""),
        LimitScope::Key(k) => ("key", k.as_str()),
    }
}

/// `set_concurrency_limit`: upserts (`Some`) or deletes (`None`) the scope's row. Any
/// change may free places, so the wake-up path hears "now" (a lowered limit wakes a
/// dispatcher that then claims nothing more, which is harmless).
pub(crate) fn set_concurrency_limit(
    conn: &Connection,
    scope: &Scope,
    limit_scope: &LimitScope,
    limit: Option<ConcurrencyLimit>,
) -> OpResult<Woken<()>> {
    let (kind, key) = limit_row(limit_scope);
    let changed = match limit {
        Some(limit) => conn.prepare_cached(SET_LIMIT)?.execute(params![
            scope.namespace,
            kind,
            key,
            i64::from(limit.get())
        ])?,
        None => conn
            .prepare_cached(REMOVE_LIMIT)?
            .execute(params![scope.namespace, kind, key])?,
    };
    Ok(Woken::at((), (changed > 0).then(|| scope.now())))
}

/// `concurrency_limits`: the stored default and keys, by key.
pub(crate) fn concurrency_limits(
    conn: &Connection,
    namespace: &str,
) -> OpResult<ConcurrencyLimits> {
    let rows: Vec<(String, String, i64)> = conn
        .prepare_cached(LIMITS)?
        .query_map([namespace], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut limits = ConcurrencyLimits::default();
    for (kind, key, value) in rows {
        let value = ConcurrencyLimit::from_stored(value);
        match kind.as_str() {
            "default" => limits.default = Some(value),
            "key" => {
                let key = ConcurrencyKey::new(key).map_err(|e| {
                    OpError::Corrupt(format!("stored concurrency key is invalid: {e}"))
                })?;
                limits.keys.push((key, value));
            }
            other => return Err(OpError::Corrupt(format!("stored limit kind {other:?}"))),
        }
    }
    Ok(limits)
}

/// One claim's key gate (lease_core::selection rule 3), inside the claim's transaction
/// (SQLite has one writer, so no other claim counts meanwhile): the limits are read when
/// the first keyed candidate appears, a limited key's live leases are counted once (one
/// indexed range) and then incremented as this claim takes its leases. A candidate whose
/// key is at its limit is recorded in `blocked` (by id) for the horizon.
#[derive(Default)]
pub(crate) struct KeyGate {
    limits: Option<ConcurrencyLimits>,
    held: HashMap<String, u32>,
    /// The ids of candidates skipped for their key.
    pub(crate) blocked: HashSet<String>,
}

impl KeyGate {
    /// The gate of one claim; `limits_stored` says whether the namespace has any limit row
    /// (read in the claim's transaction, [`crate::candidates::Opening`]). Without one every
    /// key is unlimited and the limits are never read.
    pub(crate) fn new(limits_stored: bool) -> Self {
        KeyGate {
            limits: (!limits_stored).then(ConcurrencyLimits::default),
            ..KeyGate::default()
        }
    }

    /// True when the claim may take `record` (claimable, not paused) at `now`; counts the
    /// lease it is about to take. `false` records it as blocked.
    pub(crate) fn admits(
        &mut self,
        conn: &Connection,
        namespace: &str,
        now: Timestamp,
        record: &ExecutionRecord,
    ) -> OpResult<bool> {
        let Some(key) = &record.concurrency_key else {
            return Ok(true);
        };
        let limits = match &self.limits {
            Some(limits) => limits,
            None => self.limits.insert(concurrency_limits(conn, namespace)?),
        };
        let Some(limit) = limits.of(Some(key)) else {
            return Ok(true);
        };
        let held = match self.held.get_mut(key.as_str()) {
            Some(held) => held,
            None => {
                let live: i64 = conn
                    .prepare_cached(KEY_LIVE)?
                    .query_row(params![namespace, key.as_str(), now.as_millis()], |row| {
                        row.get(0)
                    })?;
                let live = u32::try_from(live).unwrap_or(u32::MAX);
                self.held.entry(key.as_str().to_owned()).or_insert(live)
            }
        };
        if *held >= limit.get() {
            self.blocked.insert(record.id.as_str().to_owned());
            return Ok(false);
        }
        *held += 1;
        Ok(true)
    }
}
