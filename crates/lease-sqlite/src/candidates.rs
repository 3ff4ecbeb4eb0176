//! Claim candidates in (due, id) order, from two partial indexes merged (issue 12 item 2:
//! a claim's cost must not grow with the leases running).
//!
//! * **Waiting** rows (not running: admitted, suspended, released) come from
//!   `lease_executions_claim_waiting (namespace, claim_due_at, id, claimable_at)`, walked in
//!   (due, id) order over `claim_due_at <= now`, filtered on the index's own `claimable_at`.
//! * **Running** rows come from `lease_executions_claim_running (namespace, claimable_at,
//!   claim_due_at, id)` over `claimable_at <= now`: only leases that have expired (plus their
//!   redelivery delay) are read, sorted by (due, id). A live lease's `claimable_at` is in the
//!   future, so live leases are never walked; the one claim index used to hold them all under
//!   their old due time, and every claim walked past each of them (10,000 leases: 377 us a
//!   claim instead of 36 us).
//!
//! Both streams are paged (`page` rows at a time, the next page after the last key fetched)
//! and merged by (claim_due_at, id), which is the order `claim_due` promises.

use std::collections::VecDeque;

use lease_core::{ExecutionRecord, Timestamp};
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{OpError, OpResult};
use crate::rows::read_raw;

/// `$1 namespace, $2 now, $3 page`: waiting candidates, first page.
pub(crate) const WAITING_FIRST: &str = include_str!("candidates/waiting_first.sql");

/// Waiting candidates after the page ending at (`$4` due, `$5` id).
pub(crate) const WAITING_NEXT: &str = include_str!("candidates/waiting_next.sql");

/// `$1 namespace, $2 now, $3 page`: running rows claimable at `now` (expired leases),
/// first page.
pub(crate) const RUNNING_FIRST: &str = include_str!("candidates/running_first.sql");

/// Running candidates after the page ending at (`$4` due, `$5` id).
pub(crate) const RUNNING_NEXT: &str = include_str!("candidates/running_next.sql");

/// `$1 namespace, $2 now` -> a row when some running row is claimable at `now`: one seek,
/// index only. Without one the running stream is skipped, which saves its sorted query
/// (about 12 us a claim measured, most of the claim's extra cost).
pub(crate) const ANY_RUNNING: &str = include_str!("candidates/any_running.sql");

/// The stored order key of a candidate: (claim_due_at, id).
type Key = (i64, String);

/// A claim candidate: its rowid and its record, or what made it undecodable.
pub(crate) struct Candidate {
    /// The row, for quarantine.
    pub(crate) rowid: i64,
    /// The stored record, or the problem decoding it.
    pub(crate) record: Result<ExecutionRecord, String>,
    key: Key,
}

fn read_candidate(row: &rusqlite::Row<'_>) -> rusqlite::Result<Candidate> {
    let rowid: i64 = row.get(14)?;
    let key = (row.get(15)?, row.get(16)?);
    let record = match read_raw(row) {
        Ok(raw) => raw.into_record().map_err(|e| match e {
            OpError::Corrupt(problem) => problem,
            other => format!("{other:?}"),
        }),
        Err(e) => Err(format!("stored row is unreadable: {e}")),
    };
    Ok(Candidate { rowid, record, key })
}

/// One index's candidates, a page at a time.
struct Stream {
    first: &'static str,
    next: &'static str,
    buffer: VecDeque<Candidate>,
    after: Option<Key>,
    exhausted: bool,
}

impl Stream {
    fn new(first: &'static str, next: &'static str) -> Self {
        Stream {
            first,
            next,
            buffer: VecDeque::new(),
            after: None,
            exhausted: false,
        }
    }

    /// The next candidate's key, fetching the next page when the buffer is empty.
    fn peek(&mut self, conn: &Connection, ns: &str, now: i64, page: i64) -> OpResult<Option<&Key>> {
        if self.buffer.is_empty() && !self.exhausted {
            let fetched: Vec<Candidate> = match &self.after {
                None => conn
                    .prepare_cached(self.first)?
                    .query_map(params![ns, now, page], read_candidate)?
                    .collect::<rusqlite::Result<_>>()?,
                Some((due, id)) => conn
                    .prepare_cached(self.next)?
                    .query_map(params![ns, now, page, due, id], read_candidate)?
                    .collect::<rusqlite::Result<_>>()?,
            };
            self.exhausted = i64::try_from(fetched.len()).unwrap_or(i64::MAX) < page;
            self.after = fetched.last().map(|c| c.key.clone());
            self.buffer.extend(fetched);
        }
        Ok(self.buffer.front().map(|c| &c.key))
    }
}

/// Claim candidates at `now` in (due, id) order: the waiting and running streams merged.
/// Rows the caller writes meanwhile (claims, quarantines) leave the ranges still to be read,
/// so no row is returned twice.
pub(crate) struct Candidates<'a> {
    ns: &'a str,
    now: i64,
    page: i64,
    waiting: Stream,
    running: Stream,
}

impl<'a> Candidates<'a> {
    /// Candidates of namespace `ns` at `now`, read `page` rows at a time per index.
    pub(crate) fn new(
        conn: &Connection,
        ns: &'a str,
        now: Timestamp,
        page: usize,
    ) -> OpResult<Self> {
        let now = now.as_millis();
        let mut running = Stream::new(RUNNING_FIRST, RUNNING_NEXT);
        running.exhausted = conn
            .prepare_cached(ANY_RUNNING)?
            .query_row(params![ns, now], |_| Ok(()))
            .optional()?
            .is_none();
        Ok(Candidates {
            ns,
            now,
            page: i64::try_from(page).unwrap_or(i64::MAX),
            waiting: Stream::new(WAITING_FIRST, WAITING_NEXT),
            running,
        })
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
        let stream = if from_running {
            &mut self.running
        } else {
            &mut self.waiting
        };
        Ok(stream.buffer.pop_front())
    }
}

#[cfg(test)]
mod tests {
    use crate::transitions::tests::plan;

    #[test]
    fn waiting_candidates_walk_their_index_without_sorting() {
        for (sql, params) in [(super::WAITING_FIRST, 3), (super::WAITING_NEXT, 5)] {
            let plan = plan(sql, params);
            assert!(plan.contains("lease_executions_claim_waiting"), "{plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        }
    }

    #[test]
    fn running_candidates_seek_expired_leases_only() {
        let probe = plan(super::ANY_RUNNING, 2);
        assert!(
            probe.contains("COVERING INDEX lease_executions_claim_running"),
            "{probe}"
        );
        for (sql, params) in [(super::RUNNING_FIRST, 3), (super::RUNNING_NEXT, 5)] {
            let plan = plan(sql, params);
            assert!(
                plan.contains("lease_executions_claim_running (namespace=? AND claimable_at<?)"),
                "{plan}"
            );
        }
    }
}
