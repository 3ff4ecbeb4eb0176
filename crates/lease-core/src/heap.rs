//! Heap step records (RFC 002 `HeapClient.writeStep`).

use serde::{Deserialize, Serialize};

use crate::error::{LeaseError, Result};
use crate::ids::{ExecutionId, StepKey};
use crate::json::Json;
use crate::lease::FencingToken;

/// A fenced step write: the record the replay rule reads back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepWrite {
    /// The step key.
    pub step_key: StepKey,
    /// The attempt number of this step.
    pub step_attempt: u32,
    /// Whether the step finished (a done record is replayed instead of re-running).
    pub done: bool,
    /// The step's response.
    pub response: Json,
}

/// A recorded step, keyed by (execution, step key, step attempt). Written once, never changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeapRecord {
    /// The execution.
    pub execution_id: ExecutionId,
    /// The step key.
    pub step_key: StepKey,
    /// The attempt number.
    pub step_attempt: u32,
    /// Whether the step finished.
    pub done: bool,
    /// The recorded response.
    pub response: Json,
    /// The token of the delivery that wrote it.
    pub token: FencingToken,
}

impl HeapRecord {
    /// The record a write would create.
    pub fn from_write(execution_id: &ExecutionId, token: FencingToken, write: &StepWrite) -> Self {
        HeapRecord {
            execution_id: execution_id.clone(),
            step_key: write.step_key.clone(),
            step_attempt: write.step_attempt,
            done: write.done,
            response: write.response.clone(),
            token,
        }
    }
}

/// Most step records one page of [`crate::HeapClient::list_steps_page`] holds, so an
/// inspection read is bounded however many steps an execution has.
pub const MAX_STEP_PAGE: u32 = 1000;

/// Where a page of step records continues: strictly after this (step key, attempt), in the
/// order of [`crate::HeapClient::list_steps`] (step key byte order, then attempt).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepCursor {
    /// The step key of the last record already read.
    pub step_key: StepKey,
    /// Its attempt.
    pub step_attempt: u32,
}

impl StepCursor {
    /// Whether `record` comes after this cursor.
    pub fn precedes(&self, record: &HeapRecord) -> bool {
        (&self.step_key, self.step_attempt) < (&record.step_key, record.step_attempt)
    }
}

/// One page of an execution's step records, by step key then attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepPage {
    /// At most the requested limit of records.
    pub records: Vec<HeapRecord>,
    /// Whether records remain after this page (ask again after [`StepPage::next`]).
    pub more: bool,
}

impl StepPage {
    /// Checks a page limit: 1 to [`MAX_STEP_PAGE`]; anything else is
    /// [`LeaseError::InvalidInput`] (bad input changes nothing).
    pub fn check_limit(limit: u32) -> Result<()> {
        if limit == 0 || limit > MAX_STEP_PAGE {
            return Err(LeaseError::invalid(
                "step page limit",
                format!("{limit} is not between 1 and {MAX_STEP_PAGE}"),
            ));
        }
        Ok(())
    }

    /// The page from `rows` read in order with a limit of `limit + 1`: the extra row, if
    /// any, only says that more remain.
    pub fn from_rows(mut rows: Vec<HeapRecord>, limit: u32) -> Self {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let more = rows.len() > limit;
        rows.truncate(limit);
        StepPage {
            records: rows,
            more,
        }
    }

    /// The cursor the next page starts after; `None` when no records remain.
    pub fn next(&self) -> Option<StepCursor> {
        let last = self.records.last().filter(|_| self.more)?;
        Some(StepCursor {
            step_key: last.step_key.clone(),
            step_attempt: last.step_attempt,
        })
    }
}
