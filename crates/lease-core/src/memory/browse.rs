//! The memory backend's browsing ([`crate::browse`]): a walk back through admission order
//! under the one lock. The cursor is `m` and the place in admission order of the last
//! execution a page returned.

use std::ops::Bound;

use crate::browse::{ExecutionFilter, ExecutionPage, ListCursor};
use crate::error::Result;
use crate::execution::ExecutionRecord;
use crate::limits::check_limit;

use super::MemoryBackend;

/// The cursor naming place `place`.
fn cursor_at(place: u64) -> Result<ListCursor> {
    ListCursor::new(format!("m{place}"))
}

/// The place a cursor of this backend names; any other text is `InvalidInput`.
fn place_of(cursor: &ListCursor) -> Result<u64> {
    cursor
        .as_str()
        .strip_prefix('m')
        .and_then(|digits| digits.parse::<u64>().ok())
        .filter(|place| cursor_at(*place).is_ok_and(|c| &c == cursor))
        .ok_or_else(|| cursor.unreadable())
}

/// True when the stored `record` matches every field `filter` sets.
fn matches(filter: &ExecutionFilter, record: &ExecutionRecord) -> bool {
    filter.status.is_none_or(|s| s == record.status)
        && filter
            .workflow
            .as_ref()
            .is_none_or(|w| record.workflow.as_ref() == Some(w))
        && filter
            .key
            .as_ref()
            .is_none_or(|k| record.concurrency_key.as_ref() == Some(k))
}

impl MemoryBackend {
    /// [`crate::ExecutionClient::list_executions`]: newest admitted first, strictly older
    /// than the cursor's place; each record effective at the backend clock.
    pub(super) fn browse(
        &self,
        filter: &ExecutionFilter,
        after: Option<&ListCursor>,
        limit: usize,
    ) -> Result<ExecutionPage> {
        check_limit("list limit", limit)?;
        let upper = match after {
            Some(cursor) => Bound::Excluded(place_of(cursor)?),
            None => Bound::Unbounded,
        };
        let now = self.clock.now();
        let s = self.lock();
        let mut page = ExecutionPage::default();
        let mut last = None;
        for (place, id) in s.by_admission.range((Bound::Unbounded, upper)).rev() {
            let Some(record) = s.executions.get(id).filter(|r| matches(filter, r)) else {
                continue;
            };
            if page.records.len() == limit {
                page.next = last.map(cursor_at).transpose()?;
                break;
            }
            page.records.push(record.effective(now));
            last = Some(*place);
        }
        Ok(page)
    }
}
