//! Heap step records (RFC 002 `HeapClient.writeStep`).

use serde::{Deserialize, Serialize};

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
