//! Claim candidates in (priority DESC, due, id) order, from two partial indexes merged (a
//! claim's cost must not grow with the leases running, nor with the executions stored).
//!
//! * **Waiting** rows (not running: admitted, suspended, released) come from
//!   `lease_executions_claim_waiting (namespace, priority, claim_due_at, id, claimable_at)`,
//!   one priority level at a time, highest first: a seek finds the next level in use, then
//!   the level is walked in (due, id) order over `claim_due_at <= now`, filtered on the
//!   index's own `claimable_at`. A level costs one seek whatever it holds.
//! * **Running** rows come from `lease_executions_claim_running (namespace, claimable_at,
//!   claim_due_at, id)` over `claimable_at <= now`: only leases that have expired (plus their
//!   redelivery delay) are read, sorted by (priority DESC, due, id). A live lease's
//!   `claimable_at` is in the future, so live leases are never walked; the one claim index
//!   used to hold them all under their old due time, and every claim walked past each of
//!   them (10,000 leases: 377 us a claim instead of 36 us).
//!
//! Both streams are paged (`page` rows at a time, the next page after the last key fetched)
//! and merged by (-priority, claim_due_at, id), which is the order `claim_due` promises
//! (lease_core::selection rule 2).

use std::collections::VecDeque;

use lease_core::{ExecutionRecord, Timestamp};
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{OpError, OpResult};
use crate::history::StoredHistory;
use crate::rows::read_raw;

/// `$1 namespace, $2 now, $3 page, $4 priority`: one level's waiting candidates, first page.
pub(crate) const WAITING_FIRST: &str = include_str!("candidates/waiting_first.sql");

/// The level's waiting candidates after the page ending at (`$5` due, `$6` id).
pub(crate) const WAITING_NEXT: &str = include_str!("candidates/waiting_next.sql");

/// `$1 namespace, $2 priority` -> the next lower priority level in use: one seek.
pub(crate) const LEVEL_NEXT: &str = include_str!("candidates/level_next.sql");

/// `$1 namespace, $2 now, $3 page`: running rows claimable at `now` (expired leases),
/// first page.
pub(crate) const RUNNING_FIRST: &str = include_str!("candidates/running_first.sql");

/// Running candidates after the page ending at (`$4` -priority, `$5` due, `$6` id).
pub(crate) const RUNNING_NEXT: &str = include_str!("candidates/running_next.sql");

/// `$1 namespace, $2 now` -> a row when some running row is claimable at `now`: one seek,
/// index only. Without one the running stream is skipped, which saves its sorted query
/// (about 12 us a claim measured, most of the claim's extra cost). The claim itself asks
/// this inside [`OPENING`]; the raw baseline issues it alone.
pub(crate) const ANY_RUNNING: &str = include_str!("candidates/any_running.sql");

/// `$1 namespace, $2 now` -> (last token or NULL, any paused scope, any limit, the highest
/// priority level of a waiting row with a `claimable_at` or NULL, [`ANY_RUNNING`], any rate
/// limit, any ordered key): what a claim reads before its first candidate, one seek each,
/// in ONE statement. Each statement
/// costs its own bind, step and reset, and these five used to be five statements (the
/// pause read and the level seek added 2 of them to every claim: claim_due x1 at 0.73x
/// raw).
pub(crate) const OPENING: &str = include_str!("candidates/opening.sql");

/// What a claim reads first ([`OPENING`]), inside its transaction: the token counter,
/// whether any control is stored (without one, the pause read and the limit read are
/// skipped: nothing can be held back), where the waiting walk starts and whether the
/// running stream has anything.
pub(crate) struct Opening {
    /// The namespace's last issued token (0: none issued yet).
    pub(crate) last_token: i64,
    /// Some scope of the namespace is paused.
    pub(crate) any_paused: bool,
    /// Some concurrency limit (default or key) is stored for the namespace.
    pub(crate) any_limit: bool,
    /// Some rate limit (default or key) is stored for the namespace.
    pub(crate) any_rate: bool,
    /// Some key (or the default) is marked ordered in the namespace.
    pub(crate) any_ordered: bool,
    /// The highest priority level of a waiting row with a `claimable_at`.
    top_level: Option<i64>,
    /// Some running row is claimable at `now` (an expired lease).
    any_running: bool,
}

impl Opening {
    /// Reads the opening of a claim of namespace `ns` at `now`: one statement.
    pub(crate) fn read(conn: &Connection, ns: &str, now: Timestamp) -> OpResult<Self> {
        Ok(conn
            .prepare_cached(OPENING)?
            .query_row(params![ns, now.as_millis()], |row| {
                Ok(Opening {
                    last_token: row.get::<_, Option<i64>>(0)?.unwrap_or(0),
                    any_paused: row.get(1)?,
                    any_limit: row.get(2)?,
                    top_level: row.get(3)?,
                    any_running: row.get(4)?,
                    any_rate: row.get(5)?,
                    any_ordered: row.get(6)?,
                })
            })?)
    }
}

/// The stored order key of a candidate: (-priority, claim_due_at, id).
type Key = (i64, i64, String);

/// A claim candidate: its rowid and its record, or what made it undecodable.
pub(crate) struct Candidate {
    /// The row, for quarantine.
    pub(crate) rowid: i64,
    /// The stored record, or the problem decoding it.
    pub(crate) record: Result<ExecutionRecord, String>,
    /// The stored delivery history, decoded only when the claim takes the row and only
    /// when an earlier delivery must be folded into it.
    pub(crate) history: StoredHistory,
    key: Key,
}

fn read_candidate(row: &rusqlite::Row<'_>) -> rusqlite::Result<Candidate> {
    let extra = crate::rows::EXECUTION_COLUMNS;
    let rowid: i64 = row.get(extra)?;
    let priority: i64 = row.get(12)?;
    let key = (-priority, row.get(extra + 1)?, row.get(extra + 2)?);
    let history = StoredHistory::new(row.get(extra + 3)?, row.get(extra + 4)?);
    let record = match read_raw(row) {
        Ok(raw) => raw.into_record().map_err(|e| match e {
            OpError::Corrupt(problem) => problem,
            other => format!("{other:?}"),
        }),
        Err(e) => Err(format!("stored row is unreadable: {e}")),
    };
    Ok(Candidate {
        rowid,
        record,
        history,
        key,
    })
}

/// Runs a candidate query.
fn fetch(
    conn: &Connection,
    sql: &str,
    params: &[&dyn rusqlite::ToSql],
) -> OpResult<Vec<Candidate>> {
    Ok(conn
        .prepare_cached(sql)?
        .query_map(params, read_candidate)?
        .collect::<rusqlite::Result<_>>()?)
}

/// A page's buffered candidates and where the next page starts.
#[derive(Default)]
struct Paged {
    buffer: VecDeque<Candidate>,
    after: Option<Key>,
    exhausted: bool,
}

impl Paged {
    /// Buffers a fetched page of at most `page` rows.
    fn take(&mut self, fetched: Vec<Candidate>, page: i64) {
        self.exhausted = i64::try_from(fetched.len()).unwrap_or(i64::MAX) < page;
        self.after = fetched.last().map(|c| c.key.clone());
        self.buffer.extend(fetched);
    }
}

/// The running stream: expired leases, sorted (they are few: leases expire one by one).
#[derive(Default)]
struct Running(Paged);

impl Running {
    fn peek(&mut self, conn: &Connection, ns: &str, now: i64, page: i64) -> OpResult<Option<&Key>> {
        let p = &mut self.0;
        if p.buffer.is_empty() && !p.exhausted {
            let fetched = match &p.after {
                None => fetch(conn, RUNNING_FIRST, params![ns, now, page])?,
                Some((prio, due, id)) => {
                    fetch(conn, RUNNING_NEXT, params![ns, now, page, prio, due, id])?
                }
            };
            p.take(fetched, page);
        }
        Ok(p.buffer.front().map(|c| &c.key))
    }
}

/// The waiting stream: one priority level at a time, highest first.
#[derive(Default)]
struct Waiting {
    /// The level being walked (the first from [`Opening`]); `None`: no level in use.
    level: Option<i64>,
    page: Paged,
    /// No level below the current one.
    done: bool,
}

impl Waiting {
    fn peek(&mut self, conn: &Connection, ns: &str, now: i64, page: i64) -> OpResult<Option<&Key>> {
        while self.page.buffer.is_empty() && !self.done {
            if self.level.is_none() || self.page.exhausted {
                let next: Option<i64> = match self.level {
                    None => None,
                    Some(l) => conn
                        .prepare_cached(LEVEL_NEXT)?
                        .query_row(params![ns, l], |r| r.get(0))
                        .optional()?,
                };
                let Some(level) = next else {
                    self.done = true;
                    break;
                };
                self.level = Some(level);
                self.page = Paged::default();
            }
            let level = self.level.unwrap_or_default();
            let fetched = match &self.page.after {
                None => fetch(conn, WAITING_FIRST, params![ns, now, page, level])?,
                Some((_, due, id)) => {
                    fetch(conn, WAITING_NEXT, params![ns, now, page, level, due, id])?
                }
            };
            self.page.take(fetched, page);
        }
        Ok(self.page.buffer.front().map(|c| &c.key))
    }
}

/// Claim candidates at `now` in (priority DESC, due, id) order: the waiting and running
/// streams merged. Rows the caller writes meanwhile (claims, quarantines) leave the ranges
/// still to be read, so no row is returned twice.
pub(crate) struct Candidates<'a> {
    ns: &'a str,
    now: i64,
    page: i64,
    waiting: Waiting,
    running: Running,
}

impl<'a> Candidates<'a> {
    /// Candidates of namespace `ns` at `now` (the instant `opening` was read at), read
    /// `page` rows at a time per index.
    pub(crate) fn new(ns: &'a str, now: Timestamp, page: usize, opening: &Opening) -> Self {
        let mut running = Running::default();
        running.0.exhausted = !opening.any_running;
        let waiting = Waiting {
            level: opening.top_level,
            done: opening.top_level.is_none(),
            ..Waiting::default()
        };
        Candidates {
            ns,
            now: now.as_millis(),
            page: i64::try_from(page).unwrap_or(i64::MAX),
            waiting,
            running,
        }
    }

    /// The next candidate, or `None` when both indexes are done.
    pub(crate) fn next(&mut self, conn: &Connection) -> OpResult<Option<Candidate>> {
        let (ns, now, page) = (self.ns, self.now, self.page);
        let waiting = self.waiting.peek(conn, ns, now, page)?.cloned();
        let running = self.running.peek(conn, ns, now, page)?;
        let from_running = match (&waiting, running) {
            (Some(w), Some(r)) => r < w,
            (None, Some(_)) => true,
            (_, None) => false,
        };
        Ok(if from_running {
            self.running.0.buffer.pop_front()
        } else {
            self.waiting.page.buffer.pop_front()
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::migrate::plan;

    #[test]
    fn waiting_candidates_walk_their_index_without_sorting() {
        for (sql, params) in [(super::WAITING_FIRST, 4), (super::WAITING_NEXT, 6)] {
            let plan = plan(sql, params);
            assert!(plan.contains("lease_executions_claim_waiting"), "{plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        }
    }

    #[test]
    fn priority_levels_are_one_seek_each() {
        for (sql, params, search) in [
            (super::OPENING, 2, "(namespace=?)"),
            (super::LEVEL_NEXT, 2, "(namespace=? AND priority<?)"),
        ] {
            let plan = plan(sql, params);
            let seek = format!("INDEX lease_executions_claim_waiting {search}");
            assert!(plan.contains(&seek), "{plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        }
        for (sql, params) in [(super::WAITING_FIRST, 4), (super::WAITING_NEXT, 6)] {
            let plan = plan(sql, params);
            assert!(
                plan.contains("claim_waiting (namespace=? AND priority=? AND "),
                "{plan}"
            );
        }
    }

    #[test]
    fn the_opening_reads_are_seeks() {
        let plan = plan(super::OPENING, 2);
        for seek in [
            "SEARCH lease_counters USING PRIMARY KEY (namespace=?)",
            "SEARCH lease_paused USING PRIMARY KEY (namespace=?)",
            "SEARCH lease_limits USING PRIMARY KEY (namespace=?)",
            "SEARCH lease_rate_limits USING PRIMARY KEY (namespace=?)",
            "SEARCH lease_ordered_keys USING PRIMARY KEY (namespace=?)",
        ] {
            assert!(plan.contains(seek), "{plan}");
        }
        assert!(!plan.contains("SCAN lease_"), "{plan}");
    }

    #[test]
    fn key_live_leases_are_one_range() {
        let plan = plan(crate::control::KEY_LIVE, 3);
        assert!(
            plan.contains(
                "COVERING INDEX lease_executions_by_key (namespace=? AND concurrency_key=? AND status=?)"
            ),
            "{plan}"
        );
    }

    #[test]
    fn running_candidates_seek_expired_leases_only() {
        for (sql, params) in [(super::ANY_RUNNING, 2), (super::OPENING, 2)] {
            let probe = plan(sql, params);
            assert!(
                probe.contains(
                    "COVERING INDEX lease_executions_claim_running (namespace=? AND claimable_at<?)"
                ),
                "{probe}"
            );
        }
        for (sql, params) in [(super::RUNNING_FIRST, 3), (super::RUNNING_NEXT, 6)] {
            let plan = plan(sql, params);
            assert!(
                plan.contains("lease_executions_claim_running (namespace=? AND claimable_at<?)"),
                "{plan}"
            );
        }
    }
}
