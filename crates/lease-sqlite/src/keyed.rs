//! Start rates and ordered keys for SQLite (lease_core::keyed): the settings, one row per
//! scope of a namespace in `lease_rate_limits` and `lease_ordered_keys` (kind `default`
//! with key `''`, or kind `key`), each read and written inside the caller's one
//! transaction. A claim reads them only when its opening read found a row
//! ([`crate::candidates::Opening`]); [`crate::keyed_gate`] applies them.

use lease_core::{ConcurrencyKey, KeyOrdering, LimitScope, RateLimit, RateLimits};
use rusqlite::{Connection, params};

use crate::error::{OpError, OpResult};
use crate::group::Woken;
use crate::scope::Scope;

/// `$1 namespace` -> (kind, key, starts, period_ms): the default first, then keys by name.
const RATE_LIMITS: &str = include_str!("keyed/rate_limits.sql");
/// `$1 namespace, $2 kind, $3 key, $4 starts, $5 period_ms`: sets a rate (no change when
/// it is already this one).
const SET_RATE: &str = include_str!("keyed/set_rate.sql");
/// `$1 namespace, $2 kind, $3 key`: removes a rate.
const REMOVE_RATE: &str = include_str!("keyed/remove_rate.sql");
/// `$1 namespace, $2 key`: forgets a key's recorded claim instants.
const FORGET_KEY_STARTS: &str = include_str!("keyed/forget_key_starts.sql");
/// `$1 namespace`: forgets the recorded claim instants of every key without its own rate.
const FORGET_DEFAULT_STARTS: &str = include_str!("keyed/forget_default_starts.sql");
/// `$1 namespace` -> (kind, key) of the ordered scopes: the default first, then keys.
const ORDERED: &str = include_str!("keyed/ordered.sql");
/// `$1 namespace, $2 kind, $3 key`: marks a scope ordered (no change when it is).
const MARK_ORDERED: &str = include_str!("keyed/mark_ordered.sql");
/// `$1 namespace, $2 kind, $3 key`: unmarks a scope.
const UNMARK_ORDERED: &str = include_str!("keyed/unmark_ordered.sql");

/// A scope's stored form: (kind, key; `''` for the default).
fn scope_row(scope: &LimitScope) -> (&'static str, &str) {
    match scope {
        LimitScope::Default => ("default", ""),
        LimitScope::Key(k) => ("key", k.as_str()),
    }
}

/// A stored key name, checked as an admission's key is.
fn stored_key(key: String) -> OpResult<ConcurrencyKey> {
    ConcurrencyKey::new(key).map_err(|e| OpError::Corrupt(format!("stored key is invalid: {e}")))
}

/// `set_rate_limit`: upserts (`Some`) or deletes (`None`) the scope's row. Removing a limit
/// forgets the claim instants of the keys it leaves unlimited (instants are recorded only
/// while a rate applies, so a limit set later counts from then). Any change signals the
/// wake-up path "now" (a raised or removed rate may let a held-back key start).
pub(crate) fn set_rate_limit(
    conn: &Connection,
    scope: &Scope,
    which: &LimitScope,
    limit: Option<RateLimit>,
) -> OpResult<Woken<()>> {
    let ns = scope.namespace.as_str();
    let (kind, key) = scope_row(which);
    let changed = match limit {
        Some(limit) => conn.prepare_cached(SET_RATE)?.execute(params![
            ns,
            kind,
            key,
            i64::from(limit.starts()),
            limit.period_ms()
        ])?,
        None => {
            let removed = conn
                .prepare_cached(REMOVE_RATE)?
                .execute(params![ns, kind, key])?;
            if removed > 0 {
                forget_unlimited_starts(conn, ns, which)?;
            }
            removed
        }
    };
    Ok(Woken::at((), (changed > 0).then(|| scope.now())))
}

/// Forgets the instants of the keys a removed limit leaves without any rate.
fn forget_unlimited_starts(conn: &Connection, ns: &str, removed: &LimitScope) -> OpResult<()> {
    let limits = rate_limits(conn, ns)?;
    match removed {
        LimitScope::Default => {
            conn.prepare_cached(FORGET_DEFAULT_STARTS)?
                .execute(params![ns])?;
        }
        LimitScope::Key(key) if limits.of(Some(key)).is_none() => {
            conn.prepare_cached(FORGET_KEY_STARTS)?
                .execute(params![ns, key.as_str()])?;
        }
        LimitScope::Key(_) => {}
    }
    Ok(())
}

/// `rate_limits`: the stored default and keys, by key.
pub(crate) fn rate_limits(conn: &Connection, namespace: &str) -> OpResult<RateLimits> {
    let rows: Vec<(String, String, i64, i64)> = conn
        .prepare_cached(RATE_LIMITS)?
        .query_map([namespace], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut limits = RateLimits::default();
    for (kind, key, starts, period_ms) in rows {
        let limit = RateLimit::from_stored(starts, period_ms);
        match kind.as_str() {
            "default" => limits.default = Some(limit),
            "key" => limits.keys.push((stored_key(key)?, limit)),
            other => return Err(OpError::Corrupt(format!("stored rate kind {other:?}"))),
        }
    }
    Ok(limits)
}

/// `set_key_ordering`: inserts (`true`) or deletes (`false`) the scope's row. Any change
/// signals the wake-up path "now" (unmarking may let a key's later executions start).
pub(crate) fn set_key_ordering(
    conn: &Connection,
    scope: &Scope,
    which: &LimitScope,
    ordered: bool,
) -> OpResult<Woken<()>> {
    let (kind, key) = scope_row(which);
    let sql = if ordered {
        MARK_ORDERED
    } else {
        UNMARK_ORDERED
    };
    let changed = conn
        .prepare_cached(sql)?
        .execute(params![scope.namespace, kind, key])?;
    Ok(Woken::at((), (changed > 0).then(|| scope.now())))
}

/// `key_ordering`: the default and the keys marked one by one, sorted.
pub(crate) fn key_ordering(conn: &Connection, namespace: &str) -> OpResult<KeyOrdering> {
    let rows: Vec<(String, String)> = conn
        .prepare_cached(ORDERED)?
        .query_map([namespace], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut ordering = KeyOrdering::default();
    for (kind, key) in rows {
        match kind.as_str() {
            "default" => ordering.default = true,
            "key" => ordering.keys.push(stored_key(key)?),
            other => return Err(OpError::Corrupt(format!("stored ordering kind {other:?}"))),
        }
    }
    Ok(ordering)
}
