//! Stores (RFC 005, reduced) and start requests (RFC 003, reduced): idempotent writes.
//!
//! These are not fenced: a receipt or an identity makes each take effect once, whichever
//! holder commits it (RFC 002 fencing table).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ids::{ExecutionId, RequestId, StepKey, StoreId, StoreKey, WorkflowName};
use crate::json::Json;

/// The receipt of one store mutation: (store, execution, step key). The first commit under a
/// receipt applies the operation; every later one returns the recorded result.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoreReceipt {
    /// The store.
    pub store: StoreId,
    /// The execution making the mutation.
    pub execution_id: ExecutionId,
    /// The step the mutation belongs to.
    pub step_key: StepKey,
}

/// A store mutation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreOp {
    /// Sets `key` to `value`. Always applied.
    Put {
        /// Entry key.
        key: StoreKey,
        /// New value.
        value: Json,
    },
    /// Removes `key`. Applied when it existed.
    Delete {
        /// Entry key.
        key: StoreKey,
    },
    /// Sets `key` to `new` when its current value equals `expected` (`None`: absent).
    CompareAndSet {
        /// Entry key.
        key: StoreKey,
        /// Required current value.
        expected: Option<Json>,
        /// New value.
        new: Json,
    },
    /// Removes `key` when its current value equals `expected` (a matched take).
    TakeIfMatches {
        /// Entry key.
        key: StoreKey,
        /// Required current value.
        expected: Json,
    },
}

impl StoreOp {
    /// The entry key the operation touches.
    pub fn key(&self) -> &StoreKey {
        match self {
            StoreOp::Put { key, .. }
            | StoreOp::Delete { key }
            | StoreOp::CompareAndSet { key, .. }
            | StoreOp::TakeIfMatches { key, .. } => key,
        }
    }

    /// Applies the operation to an entry's current value: returns the new value (`None`:
    /// absent) and the result to record. Backends that run the op in their own language
    /// must match this exactly.
    pub fn apply(&self, current: Option<&Json>) -> (Option<Json>, StoreOutcome) {
        let previous = current.cloned();
        let unchanged = || current.cloned();
        match self {
            StoreOp::Put { value, .. } => (
                Some(value.clone()),
                StoreOutcome {
                    applied: true,
                    previous,
                },
            ),
            StoreOp::Delete { .. } => (
                None,
                StoreOutcome {
                    applied: previous.is_some(),
                    previous,
                },
            ),
            StoreOp::CompareAndSet { expected, new, .. } => {
                if current == expected.as_ref() {
                    (
                        Some(new.clone()),
                        StoreOutcome {
                            applied: true,
                            previous,
                        },
                    )
                } else {
                    (
                        unchanged(),
                        StoreOutcome {
                            applied: false,
                            previous,
                        },
                    )
                }
            }
            StoreOp::TakeIfMatches { expected, .. } => {
                if current == Some(expected) {
                    (
                        None,
                        StoreOutcome {
                            applied: true,
                            previous,
                        },
                    )
                } else {
                    (
                        unchanged(),
                        StoreOutcome {
                            applied: false,
                            previous,
                        },
                    )
                }
            }
        }
    }
}

/// The recorded result of a store mutation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreOutcome {
    /// Whether the operation changed the entry (put: always; delete: the key existed;
    /// compare-and-set and take: the expected value matched).
    pub applied: bool,
    /// The entry's value before the operation.
    pub previous: Option<Json>,
}

/// The reply to a store update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreUpdate {
    /// The result recorded under the receipt.
    pub outcome: StoreOutcome,
    /// True when the receipt already existed and nothing was applied now.
    pub replayed: bool,
}

/// A store's entries as observed by `get_or_create`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSnapshot {
    /// The store.
    pub store: StoreId,
    /// Its entries.
    pub entries: BTreeMap<StoreKey, Json>,
    /// True when this call created the store with the given initial entries.
    pub created: bool,
}

/// A start request (RFC 003 `WorkflowStartClient.start`, reduced).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartRequest {
    /// The request id: a repeat returns the first target and starts nothing.
    pub request_id: RequestId,
    /// The workflow to start.
    pub workflow: WorkflowName,
    /// Its input.
    pub input: Json,
    /// The id the new execution gets if this request is the first with its id.
    pub target: ExecutionId,
}

impl StartRequest {
    /// A request whose target is a fresh random execution id.
    pub fn new(request_id: RequestId, workflow: WorkflowName, input: Json) -> Self {
        let target = ExecutionId::trusted(format!("start-{}", uuid::Uuid::new_v4()));
        StartRequest {
            request_id,
            workflow,
            input,
            target,
        }
    }
}

/// The reply to a start request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// The execution the request id maps to.
    pub target: ExecutionId,
    /// True when this call admitted it.
    pub created: bool,
}
