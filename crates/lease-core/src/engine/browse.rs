//! The engine's browsing ([`crate::browse`]): a walk back through admission order in one
//! transaction. The cursor is `m` and the place in admission order of the last execution a
//! page returned.

use crate::browse::{ExecutionFilter, ExecutionPage, ListCursor};
use crate::error::Result;
use crate::execution::ExecutionRecord;
use crate::limits::check_limit;

use super::{Engine, Tx, TxStore};

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

impl<S: TxStore> Engine<S> {
    /// [`crate::ExecutionClient::list_executions`]: newest admitted first, strictly older
    /// than the cursor's place; each record effective at the backend clock.
    pub(super) async fn browse(
        &self,
        filter: &ExecutionFilter,
        after: Option<&ListCursor>,
        limit: usize,
    ) -> Result<ExecutionPage> {
        check_limit("list limit", limit)?;
        let before = after.map(place_of).transpose()?;
        let now = self.clock.now();
        let filter = filter.clone();
        let (mut page, last, more) = self
            .read("list_executions", move |tx| {
                let mut page = ExecutionPage::default();
                let mut last = None;
                let mut more = false;
                tx.newest_admitted(before, &mut |place, record| {
                    if !matches(&filter, record) {
                        return true;
                    }
                    if page.records.len() == limit {
                        more = true;
                        return false;
                    }
                    page.records.push(record.effective(now));
                    last = Some(place);
                    true
                })?;
                Ok((page, last, more))
            })
            .await?;
        if more {
            page.next = last.map(cursor_at).transpose()?;
        }
        Ok(page)
    }
}
