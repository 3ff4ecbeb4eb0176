//! A claim over SQLite's claim indexes: the engine's selection walks the candidates of
//! `crate::candidates` through the gates (pause, concurrency limits, ordered keys, rates),
//! quarantines a row it cannot decode, and leaves what it decoded for the claim's writes;
//! the horizon after the claim is one seek, or the walk past what the gates held back. The
//! token counter and the takeover count live in one counters row, read by the claim's
//! opening statement and written once at the end of the step.

use std::collections::BTreeSet;

use lease_core::selection::{Gates, Selection};
use lease_core::{
    AttemptLimit, AttemptLimits, ConcurrencyLimits, ExecutionId, ExecutionRecord, FencingToken,
    PauseScope, RedeliveryPolicies, RedeliveryPolicy, Timestamp, WorkflowName,
};
use rusqlite::{Connection, OptionalExtension, params};

use super::SqliteTx;
use super::claiming::{ADD_TAKEOVERS, ClaimGates, Counters, LAST_TOKEN, STORE_LAST_TOKEN, refuse};
use crate::candidates::{Candidates, Opening};
use crate::control::{self, KeyGate};
use crate::error::{OpError, OpResult};
use crate::group::earliest;
use crate::history::StoredHistory;
use crate::keyed_gate::KeyedGate;
use crate::scope::Scope;
use crate::{attempts, redelivery};

/// `$1 rowid, $2 problem`: takes a record out of the claim and horizon indexes.
const QUARANTINE: &str = include_str!("claim/quarantine.sql");

/// Candidates per index page when claiming.
const PAGE_MIN: usize = 16;

/// The earliest `claimable_at` of a namespace: one seek of `lease_executions_horizon`.
pub(crate) const HORIZON: &str = include_str!("claim/horizon.sql");

impl SqliteTx<'_> {
    /// [`lease_core::engine::Tx::select_claimable`]: the candidates in claim order, each
    /// re-checked as effective and claimable at `now`, through the gates; each one taken is
    /// kept decoded for the claim's writes and counted by the gates (an ordered key's line
    /// closes, a rate's start is recorded).
    pub(super) fn select(
        &mut self,
        now: Timestamp,
        policy: &RedeliveryPolicy,
        limit: usize,
    ) -> OpResult<Selection> {
        self.flush()?;
        let (conn, scope) = (self.conn, self.scope);
        let ns = scope.namespace.as_str();
        let opening = Opening::read(conn, ns, now)?;
        if self.counters.get().is_none() && !self.namespace_loaded() {
            self.counters.set(Some(Counters::at(opening.last_token)?));
        }
        let paused = if opening.any_paused {
            control::paused_set(conn, ns)?
        } else {
            BTreeSet::new()
        };
        let gates = Gates {
            paused: &paused,
            limits: &ConcurrencyLimits::default(),
        };
        let mut keys = KeyGate::new(opening.any_limit);
        let mut keyed = KeyedGate::new(opening.any_ordered, opening.any_rate);
        let mut candidates = Candidates::new(ns, now, limit.max(PAGE_MIN), &opening);
        let mut take = Vec::with_capacity(limit);
        let everything_paused = paused.contains(&PauseScope::Namespace);
        while take.len() < limit && !everything_paused {
            let Some(candidate) = candidates.next(conn)? else {
                break;
            };
            // A quarantined row leaves both claim indexes, so no later page returns it.
            let stored = match candidate.record {
                Ok(stored) => stored,
                Err(problem) => {
                    quarantine(conn, scope, candidate.rowid, &problem)?;
                    continue;
                }
            };
            let record = stored.effective(now);
            if !record.claimable(now, policy)
                || gates.paused(&record)
                || !keyed.admits(conn, ns, now, &record)?
                || !keys.admits(conn, ns, now, &record)?
            {
                continue;
            }
            if let Some(problem) = undecodable(&candidate.history, &stored, now)? {
                quarantine(conn, scope, candidate.rowid, &problem)?;
                continue;
            }
            keyed.took(conn, ns, now, &record)?;
            take.push(stored.id.clone());
            self.keep_row(stored, candidate.history);
        }
        let blocked = keys
            .blocked
            .iter()
            .filter_map(|id| ExecutionId::new(id.clone()).ok())
            .collect();
        self.claim = Some(ClaimGates {
            paused,
            keys,
            keyed,
        });
        Ok(Selection { take, blocked })
    }

    /// [`lease_core::engine::Tx::claim_horizon`] after this step's claim: one seek when
    /// nothing was held back; otherwise the walk past what the gates held back
    /// (lease_core::selection rule 4), no later than the instant a head held back by
    /// another execution's live lease may go.
    pub(super) fn horizon(&mut self) -> OpResult<Option<Timestamp>> {
        self.flush()?;
        let (conn, ns) = (self.conn, self.scope.namespace.as_str());
        let Some(ClaimGates {
            paused,
            keys,
            keyed,
        }) = self.claim.take()
        else {
            return seek_horizon(conn, ns);
        };
        if paused.is_empty() && keys.blocked.is_empty() && keyed.held_nothing() {
            return seek_horizon(conn, ns);
        }
        if paused.contains(&PauseScope::Namespace) {
            return Ok(None);
        }
        let walked = control::gated_horizon(conn, ns, &paused, |id, key, at| {
            if keys.blocked.contains(id) {
                None
            } else {
                keyed.hold(id, key, at)
            }
        })?;
        Ok(earliest(walked, keyed.released_at()))
    }

    /// True while this step's claim selected (its gates recorded each start it took).
    pub(super) fn claiming(&self) -> bool {
        self.claim.is_some()
    }

    /// The counters, read at the first call.
    fn counters(&self) -> OpResult<Counters> {
        if let Some(counters) = self.counters.get() {
            return Ok(counters);
        }
        let last: Option<i64> = self
            .conn
            .prepare_cached(LAST_TOKEN)?
            .query_row(params![self.ns()], |r| r.get(0))
            .optional()?;
        let counters = Counters::at(last.unwrap_or(0))?;
        self.counters.set(Some(counters));
        Ok(counters)
    }

    /// The next fencing token (RFC: tokens rise on every claim); a counter that is used up
    /// (or past what the column holds) refuses.
    pub(super) fn issue_token(&self) -> OpResult<FencingToken> {
        let mut counters = self.counters()?;
        let next = counters
            .last
            .checked_add(1)
            .filter(|n| i64::try_from(*n).is_ok())
            .ok_or_else(|| {
                refuse(
                    self.scope,
                    format!("last token {} leaves no token to issue", counters.last),
                )
            })?;
        counters.last = next;
        self.counters.set(Some(counters));
        Ok(FencingToken::new(next))
    }

    /// Counts one takeover.
    pub(super) fn count_takeover(&self) -> OpResult<()> {
        let mut counters = self.counters()?;
        counters.takeovers += 1;
        self.counters.set(Some(counters));
        Ok(())
    }

    /// Writes what the step changed of the counters.
    pub(super) fn write_counters(&self) -> OpResult<()> {
        let Some(counters) = self.counters.take() else {
            return Ok(());
        };
        let ns = self.ns();
        if counters.last != counters.loaded || counters.takeovers > 0 {
            let last = i64::try_from(counters.last)
                .map_err(|e| OpError::Corrupt(format!("token counter: {e}")))?;
            self.conn
                .prepare_cached(STORE_LAST_TOKEN)?
                .execute(params![ns, last])?;
        }
        if counters.takeovers > 0 {
            let n = i64::try_from(counters.takeovers).unwrap_or(i64::MAX);
            self.conn
                .prepare_cached(ADD_TAKEOVERS)?
                .execute(params![ns, n])?;
        }
        Ok(())
    }

    /// The attempt limit and redelivery policy a claim stamps on a record of `workflow`,
    /// the two tables read once per step.
    pub(super) fn settings_of(
        &self,
        workflow: Option<&WorkflowName>,
    ) -> OpResult<(Option<AttemptLimit>, Option<RedeliveryPolicy>)> {
        let (limits, policies) = match self.settings.get() {
            Some(settings) => settings,
            None => {
                let read: (AttemptLimits, RedeliveryPolicies) = (
                    attempts::limits(self.conn, self.ns())?,
                    redelivery::policies(self.conn, self.ns())?,
                );
                self.settings.get_or_init(|| read)
            }
        };
        Ok((limits.of(workflow), policies.of(workflow)))
    }
}

/// The earliest instant anything in the namespace becomes claimable.
fn seek_horizon(conn: &Connection, namespace: &str) -> OpResult<Option<Timestamp>> {
    let at: Option<i64> = conn
        .prepare_cached(HORIZON)?
        .query_row([namespace], |row| row.get(0))
        .optional()?;
    Ok(at.map(Timestamp::from_millis))
}

/// Why the history of a candidate (`stored` its record) cannot take a claim at `now`, if
/// it cannot: such a row is quarantined like any corrupt row.
fn undecodable(
    history: &StoredHistory,
    stored: &ExecutionRecord,
    now: Timestamp,
) -> OpResult<Option<String>> {
    match history.claim(stored, now) {
        Ok(_) => Ok(None),
        Err(OpError::Corrupt(problem)) => Ok(Some(problem)),
        Err(other) => Err(other),
    }
}

/// Quarantines a record the claim cannot decode, in the claim's transaction, so one bad
/// record never stops every claim: later claims do not walk it again and `list_corrupt`
/// names it. Logged once, here.
fn quarantine(conn: &Connection, scope: &Scope, rowid: i64, problem: &str) -> OpResult<()> {
    tracing::warn!(
        namespace = %scope.namespace,
        rowid,
        problem,
        "skipping a corrupt execution record; quarantined (see list_corrupt)"
    );
    conn.prepare_cached(QUARANTINE)?
        .execute(params![rowid, problem])?;
    Ok(())
}
