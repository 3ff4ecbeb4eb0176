//! One claim's gate for ordered keys and start rates (lease_core::keyed), inside the
//! claim's transaction: SQLite has one writer, so nothing else claims between the checks
//! and the writes here.
//!
//! * **Ordered keys**: the first time a claim meets a key that is ordered it reads the key's
//!   line (its executions that are not terminal in admission order: the key's `admitted`,
//!   `running` and `suspended` ranges of `lease_executions_by_key` merged, three seeks, then
//!   the first row is nearly always the head) and the key's live leases (its `running`
//!   range of the same index, filtered on the expiry it holds). Only the head may be taken, and
//!   only while no execution of the key holds a live lease; once taken, the key is closed for
//!   the rest of the claim.
//! * **Rates**: the first time a claim meets a rate-limited key it reads the key's claim
//!   instants inside the window (`lease_rate_starts`), then counts its own claims up; each
//!   claim of the key records its instant and prunes the key's instants that left the window.
//!
//! A held-back candidate is only skipped (no claim budget on SQLite counts it); the gate
//! remembers why, so the claim's horizon leaves it out or moves it to the instant the key
//! may start again ([`KeyedGate::hold`]).

use std::collections::{HashMap, HashSet};

use lease_core::{ExecutionRecord, KeyOrdering, RateLimit, RateLimits, Timestamp};
use rusqlite::{Connection, params};

use crate::error::OpResult;
use crate::keyed;
use crate::rows::read_raw;

/// `$1 namespace, $2 key` -> the key's executions that are not terminal, in admission order.
const KEY_LINE: &str = include_str!("keyed_gate/key_line.sql");
/// `$1 namespace, $2 key, $3 now` -> the latest expiry of the key's live leases (NULL: none).
const KEY_LIVE_UNTIL: &str = include_str!("keyed_gate/key_live_until.sql");
/// `$1 namespace, $2 key, $3 floor` -> (instant, count) of the key's claims after `floor`.
const STARTS: &str = include_str!("keyed_gate/starts.sql");
/// `$1 namespace, $2 key, $3 at`: counts one claim of the key at `at`.
const RECORD_START: &str = include_str!("keyed_gate/record_start.sql");
/// `$1 namespace, $2 key, $3 floor`: forgets the key's claims at or before `floor`.
const PRUNE_STARTS: &str = include_str!("keyed_gate/prune_starts.sql");

/// Where an ordered key's line stands for this claim.
enum Line {
    /// Only this execution (the head) may be taken.
    Open(String),
    /// Nothing of the key may be taken; `until`: the instant its blocking live leases end,
    /// when the head (held back by another execution's lease) may go.
    Closed { until: Option<Timestamp> },
}

/// A rate-limited key's claims inside the window, this claim's included.
struct Rate {
    limit: RateLimit,
    recent: Vec<Timestamp>,
}

/// The ordered-key and rate gate of one claim.
pub(crate) struct KeyedGate {
    ordering: Option<KeyOrdering>,
    rates: Option<RateLimits>,
    lines: HashMap<String, Line>,
    keyed_rates: HashMap<String, Option<Rate>>,
    /// Ids skipped because their ordered key's line is not theirs to take now.
    blocked: HashSet<String>,
    /// Keys skipped for their rate, with the instant each may start again.
    rate_held: HashMap<String, Timestamp>,
    /// The earliest instant a head held back by another execution's live lease may go.
    released_at: Option<Timestamp>,
}

impl KeyedGate {
    /// The gate of one claim; `any_ordered` and `any_rate` say whether the namespace stores
    /// any such setting (the claim's opening read). Without one nothing is ever read.
    pub(crate) fn new(any_ordered: bool, any_rate: bool) -> Self {
        KeyedGate {
            ordering: (!any_ordered).then(KeyOrdering::default),
            rates: (!any_rate).then(RateLimits::default),
            lines: HashMap::new(),
            keyed_rates: HashMap::new(),
            blocked: HashSet::new(),
            rate_held: HashMap::new(),
            released_at: None,
        }
    }

    /// True when nothing was held back: the claim's plain horizon is exact.
    pub(crate) fn held_nothing(&self) -> bool {
        self.blocked.is_empty() && self.rate_held.is_empty() && self.released_at.is_none()
    }

    /// The earliest instant a head held back by another execution's live lease may go.
    pub(crate) fn released_at(&self) -> Option<Timestamp> {
        self.released_at
    }

    /// How the claim's horizon counts a row claimable at `at`: `None` when it was held back
    /// for its ordered key, else the instant it may be claimed (`at`, or later when its key
    /// waits for its rate).
    pub(crate) fn hold(&self, id: &str, key: Option<&str>, at: Timestamp) -> Option<Timestamp> {
        if self.blocked.contains(id) {
            return None;
        }
        match key.and_then(|k| self.rate_held.get(k)) {
            Some(&again) => Some(at.max(again)),
            None => Some(at),
        }
    }

    /// True when the claim may take `record` (claimable, not paused) at `now` as far as its
    /// key's order and rate go. Reads nothing for a record without a key or when the
    /// namespace has no such setting; changes nothing (see [`KeyedGate::took`]).
    pub(crate) fn admits(
        &mut self,
        conn: &Connection,
        ns: &str,
        now: Timestamp,
        record: &ExecutionRecord,
    ) -> OpResult<bool> {
        let Some(key) = record.concurrency_key.as_ref() else {
            return Ok(true);
        };
        let ordering = match &self.ordering {
            Some(o) => o,
            None => self.ordering.insert(keyed::key_ordering(conn, ns)?),
        };
        if ordering.is_ordered(Some(key)) && !self.in_line(conn, ns, now, record)? {
            self.blocked.insert(record.id.as_str().to_owned());
            return Ok(false);
        }
        if let Some(rate) = self.rate(conn, ns, now, key.as_str())?
            && let Some(again) = rate.limit.next_start(&rate.recent, now)
        {
            self.rate_held.insert(key.as_str().to_owned(), again);
            return Ok(false);
        }
        Ok(true)
    }

    /// Counts a lease the claim took at `now`: closes an ordered key's line and records a
    /// rate-limited key's claim instant (pruning the ones that left its window).
    pub(crate) fn took(
        &mut self,
        conn: &Connection,
        ns: &str,
        now: Timestamp,
        record: &ExecutionRecord,
    ) -> OpResult<()> {
        let Some(key) = record.concurrency_key.as_ref().map(|k| k.as_str()) else {
            return Ok(());
        };
        if let Some(line) = self.lines.get_mut(key) {
            *line = Line::Closed { until: None };
        }
        if let Some(Some(rate)) = self.keyed_rates.get_mut(key) {
            rate.recent.push(now);
            let floor = now.as_millis().saturating_sub(rate.limit.period_ms());
            conn.prepare_cached(PRUNE_STARTS)?
                .execute(params![ns, key, floor])?;
            conn.prepare_cached(RECORD_START)?
                .execute(params![ns, key, now.as_millis()])?;
        }
        Ok(())
    }

    /// True when `record` is its ordered key's head and the line is open.
    fn in_line(
        &mut self,
        conn: &Connection,
        ns: &str,
        now: Timestamp,
        record: &ExecutionRecord,
    ) -> OpResult<bool> {
        let key = record.concurrency_key.as_ref().map_or("", |k| k.as_str());
        if !self.lines.contains_key(key) {
            let line = read_line(conn, ns, key, now)?;
            if let Line::Closed { until: Some(at) } = line {
                self.released_at = Some(self.released_at.map_or(at, |r| r.min(at)));
            }
            self.lines.insert(key.to_owned(), line);
        }
        Ok(matches!(self.lines.get(key), Some(Line::Open(head)) if head == record.id.as_str()))
    }

    /// The rate that applies to `key` with its claims inside the window, read once.
    fn rate(
        &mut self,
        conn: &Connection,
        ns: &str,
        now: Timestamp,
        key: &str,
    ) -> OpResult<Option<&Rate>> {
        if !self.keyed_rates.contains_key(key) {
            let rates = match &self.rates {
                Some(r) => r,
                None => self.rates.insert(keyed::rate_limits(conn, ns)?),
            };
            if rates.default.is_none() && rates.keys.is_empty() {
                return Ok(None);
            }
            let stored_key = lease_core::ConcurrencyKey::new(key).ok();
            let rate = match rates.of(stored_key.as_ref()) {
                Some(limit) => Some(Rate {
                    limit,
                    recent: read_starts(conn, ns, key, now, limit)?,
                }),
                None => None,
            };
            self.keyed_rates.insert(key.to_owned(), rate);
        }
        Ok(self.keyed_rates.get(key).and_then(Option::as_ref))
    }
}

/// The key's recorded claims inside the window of `limit` ending at `now`, one entry per
/// claim.
fn read_starts(
    conn: &Connection,
    ns: &str,
    key: &str,
    now: Timestamp,
    limit: RateLimit,
) -> OpResult<Vec<Timestamp>> {
    let floor = now.as_millis().saturating_sub(limit.period_ms());
    let rows: Vec<(i64, i64)> = conn
        .prepare_cached(STARTS)?
        .query_map(params![ns, key, floor], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let cap = usize::try_from(limit.starts()).unwrap_or(usize::MAX);
    let mut recent = Vec::new();
    for (at, n) in rows {
        let n = usize::try_from(n).unwrap_or(0).min(cap);
        recent.extend(std::iter::repeat_n(Timestamp::from_millis(at), n));
    }
    Ok(recent)
}

/// Where an ordered key's line stands at `now`: its head is the first execution in
/// admission order that is not terminal (nor dead by an expired last attempt, nor
/// unreadable); the line is open for it while no execution of the key holds a live lease.
fn read_line(conn: &Connection, ns: &str, key: &str, now: Timestamp) -> OpResult<Line> {
    let live_until: Option<i64> = conn
        .prepare_cached(KEY_LIVE_UNTIL)?
        .query_row(params![ns, key, now.as_millis()], |row| row.get(0))?;
    let mut stmt = conn.prepare_cached(KEY_LINE)?;
    let mut rows = stmt.query(params![ns, key])?;
    while let Some(row) = rows.next()? {
        let Ok(record) = read_raw(row)
            .map_err(crate::error::OpError::from)
            .and_then(|r| r.into_record())
        else {
            continue;
        };
        let effective = record.effective(now);
        if effective.status.is_terminal() {
            continue;
        }
        return Ok(match live_until {
            None => Line::Open(record.id.as_str().to_owned()),
            Some(_) if effective.lease_live(now) => Line::Closed {
                until: head_leaves_at(&effective),
            },
            Some(until) => Line::Closed {
                until: Some(Timestamp::from_millis(until)),
            },
        });
    }
    Ok(Line::Closed { until: None })
}

/// When a head holding a live lease leaves the line by itself: at its expiry when that
/// expiry uses its last attempt (it ends dead and the next execution leads; no write
/// signals that instant). Otherwise its redelivery instant is in the horizon index already.
fn head_leaves_at(head: &ExecutionRecord) -> Option<Timestamp> {
    let expiry = head.lease_expires_at?;
    head.expired_into_dead(expiry).then_some(expiry)
}

#[cfg(test)]
mod tests {
    use crate::migrate::plan;

    #[test]
    fn the_gate_reads_are_seeks_of_their_indexes() {
        for (sql, params, search) in [
            (
                super::KEY_LINE,
                2,
                "INDEX lease_executions_by_key (namespace=? AND concurrency_key=? AND status=?)",
            ),
            (
                super::KEY_LIVE_UNTIL,
                3,
                "COVERING INDEX lease_executions_by_key (namespace=? AND concurrency_key=? AND status=?)",
            ),
            (
                super::STARTS,
                3,
                "PRIMARY KEY (namespace=? AND key=? AND at>?)",
            ),
            (
                super::PRUNE_STARTS,
                3,
                "PRIMARY KEY (namespace=? AND key=? AND at<?)",
            ),
        ] {
            let plan = plan(sql, params);
            assert!(plan.contains(search), "{plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        }
    }

    #[test]
    fn an_insert_finds_the_next_admission_place_with_one_seek() {
        let plan = plan(crate::rows::INSERT, 20);
        assert!(
            plan.contains("COVERING INDEX lease_executions_admitted (namespace=?)"),
            "{plan}"
        );
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    }
}
