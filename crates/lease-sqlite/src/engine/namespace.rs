//! The engine's [`Namespace`] in SQLite's own tables: loaded whole at the first call that
//! reads it, and written back at the end of the step by what changed, through the
//! statements the backend's operator commands run.

use std::collections::{BTreeMap, HashMap};

use lease_core::engine::Namespace;
use lease_core::{AttemptScope, ConcurrencyKey, KeyOrdering, LimitScope, Timestamp};
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{OpError, OpResult};
use crate::scope::Scope;
use crate::{attempts, control, keyed, redelivery};

/// `$1 namespace` -> (last_token, takeovers).
const COUNTERS: &str = include_str!("namespace/counters.sql");
/// `$1 namespace` -> (key, at, n) of every recorded claim instant.
const STARTS: &str = include_str!("namespace/starts_all.sql");
/// `$1 namespace`: forgets every recorded claim instant.
const FORGET_STARTS: &str = include_str!("namespace/starts_forget.sql");
/// `$1 namespace, $2 key, $3 at`: records one claim instant.
const RECORD_START: &str = include_str!("../keyed_gate/record_start.sql");

fn count(raw: i64, what: &str) -> OpResult<u64> {
    u64::try_from(raw).map_err(|e| OpError::Corrupt(format!("stored {what}: {e}")))
}

/// The namespace's values as stored.
pub(super) fn load(conn: &Connection, ns: &str) -> OpResult<Namespace> {
    let (last_token, takeovers) = conn
        .prepare_cached(COUNTERS)?
        .query_row(params![ns], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
        })
        .optional()?
        .unwrap_or((0, 0));
    Ok(Namespace {
        last_token: count(last_token, "last token")?,
        takeovers: count(takeovers, "takeover count")?,
        paused: control::paused_set(conn, ns)?,
        limits: control::concurrency_limits(conn, ns)?,
        attempt_limits: attempts::limits(conn, ns)?,
        rates: keyed::rate_limits(conn, ns)?,
        rate_starts: starts(conn, ns)?,
        ordering: keyed::key_ordering(conn, ns)?,
        redelivery: redelivery::policies(conn, ns)?,
    })
}

/// Every recorded claim instant, by key.
fn starts(conn: &Connection, ns: &str) -> OpResult<HashMap<ConcurrencyKey, Vec<Timestamp>>> {
    let rows: Vec<(String, i64, i64)> = conn
        .prepare_cached(STARTS)?
        .query_map(params![ns], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut out: HashMap<ConcurrencyKey, Vec<Timestamp>> = HashMap::new();
    for (key, at, n) in rows {
        let key = ConcurrencyKey::new(key)
            .map_err(|e| OpError::Corrupt(format!("stored rate key: {e}")))?;
        let at = Timestamp::from_millis(at);
        out.entry(key).or_default().extend((0..n).map(|_| at));
    }
    for instants in out.values_mut() {
        instants.sort();
    }
    Ok(out)
}

/// Writes what changed between `before` (as loaded) and `after`.
pub(super) fn save(
    conn: &Connection,
    scope: &Scope,
    before: &Namespace,
    after: &Namespace,
) -> OpResult<()> {
    save_counters(conn, scope, before, after)?;
    save_controls(conn, scope, before, after)?;
    if before.rate_starts != after.rate_starts {
        conn.prepare_cached(FORGET_STARTS)?
            .execute(params![scope.namespace])?;
        for (key, instants) in &after.rate_starts {
            for at in instants {
                conn.prepare_cached(RECORD_START)?.execute(params![
                    scope.namespace,
                    key.as_str(),
                    at.as_millis()
                ])?;
            }
        }
    }
    Ok(())
}

/// The token counter and the takeover count.
fn save_counters(
    conn: &Connection,
    scope: &Scope,
    before: &Namespace,
    after: &Namespace,
) -> OpResult<()> {
    let ns = scope.namespace.as_str();
    if after.last_token != before.last_token {
        let token = i64::try_from(after.last_token)
            .map_err(|e| OpError::Corrupt(format!("token counter: {e}")))?;
        conn.prepare_cached(super::claiming::STORE_LAST_TOKEN)?
            .execute(params![ns, token])?;
    }
    if after.takeovers != before.takeovers {
        let added =
            i64::try_from(after.takeovers.saturating_sub(before.takeovers)).unwrap_or(i64::MAX);
        conn.prepare_cached(super::claiming::ADD_TAKEOVERS)?
            .execute(params![ns, added])?;
    }
    Ok(())
}

/// Pauses, limits, ordering and policies: each scope that changed, set as the operator
/// command sets it.
fn save_controls(
    conn: &Connection,
    scope: &Scope,
    before: &Namespace,
    after: &Namespace,
) -> OpResult<()> {
    for gone in before.paused.difference(&after.paused) {
        control::resume(conn, scope, gone)?;
    }
    for new in after.paused.difference(&before.paused) {
        control::pause(conn, scope, new)?;
    }
    let (b, a) = (&before.limits, &after.limits);
    for (key, limit) in changed(entries(b.default, &b.keys), entries(a.default, &a.keys)) {
        control::set_concurrency_limit(conn, scope, &limit_scope(key), limit)?;
    }
    let (b, a) = (&before.attempt_limits, &after.attempt_limits);
    for (key, limit) in changed(
        entries(b.default, &b.workflows),
        entries(a.default, &a.workflows),
    ) {
        let which = key.map_or(AttemptScope::Default, AttemptScope::Workflow);
        attempts::set_limit(conn, scope, &which, limit)?;
    }
    let (b, a) = (&before.rates, &after.rates);
    for (key, rate) in changed(entries(b.default, &b.keys), entries(a.default, &a.keys)) {
        keyed::set_rate_limit(conn, scope, &limit_scope(key), rate)?;
    }
    let (b, a) = (&before.ordering, &after.ordering);
    for (key, ordered) in changed(ordered(b), ordered(a)) {
        keyed::set_key_ordering(conn, scope, &limit_scope(key), ordered.is_some())?;
    }
    let (b, a) = (&before.redelivery, &after.redelivery);
    for (key, policy) in changed(entries(None, &b.workflows), entries(None, &a.workflows)) {
        if let Some(workflow) = key {
            redelivery::set_policy(conn, scope, &workflow, policy)?;
        }
    }
    Ok(())
}

/// A control's values by scope: `None` for the default, then each named one.
fn entries<K: Ord + Clone, V: Clone>(
    default: Option<V>,
    named: &[(K, V)],
) -> BTreeMap<Option<K>, V> {
    let named = named.iter().map(|(k, v)| (Some(k.clone()), v.clone()));
    default
        .map(|v| (None, v))
        .into_iter()
        .chain(named)
        .collect()
}

/// The ordered keys as a control's values (the default when every key is ordered).
fn ordered(ordering: &KeyOrdering) -> BTreeMap<Option<ConcurrencyKey>, ()> {
    let named = ordering.keys.iter().map(|k| (Some(k.clone()), ()));
    ordering
        .default
        .then_some((None, ()))
        .into_iter()
        .chain(named)
        .collect()
}

/// Every scope whose value differs between `before` and `after`, with its new value.
fn changed<K: Ord, V: PartialEq>(
    mut before: BTreeMap<Option<K>, V>,
    after: BTreeMap<Option<K>, V>,
) -> Vec<(Option<K>, Option<V>)> {
    let mut out = Vec::new();
    for (key, value) in after {
        if before.remove(&key).as_ref() != Some(&value) {
            out.push((key, Some(value)));
        }
    }
    out.extend(before.into_keys().map(|key| (key, None)));
    out
}

/// The limit scope a control's key names.
fn limit_scope(key: Option<ConcurrencyKey>) -> LimitScope {
    key.map_or(LimitScope::Default, LimitScope::Key)
}
