//! The values a store's transactions hand the engine and take from it: a step's answer,
//! the namespace's values, a scan's view, a receipt's key, a history event.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::attempts::{AttemptLimits, ErrorNote};
use crate::control::{ConcurrencyLimits, PauseScope};
use crate::execution::ExecutionRecord;
use crate::history::{DeliveryEnd, DeliveryHistory};
use crate::ids::{ConcurrencyKey, ExecutionId, StepKey, StoreId};
use crate::keyed::{KeyOrdering, RateLimits};
use crate::lease::FencingToken;
use crate::redelivery::RedeliveryPolicies;
use crate::time::Timestamp;

/// What one engine transaction produced: the call's answer, and the instants at which what
/// it wrote becomes claimable (the engine signals its wake-up hub with them after the
/// commit).
#[derive(Debug)]
pub struct Written<T> {
    /// The call's answer.
    pub value: T,
    /// When something the transaction wrote becomes claimable (may repeat, any order).
    pub wakes: Vec<Timestamp>,
}

/// The namespace-wide values: the fencing-token counter, the takeover counter, the
/// operator's controls, and the claim instants the start rates count. Small, read by every
/// claim.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Namespace {
    /// The last fencing token issued; the next claim issues the one above (RFC: tokens rise).
    pub last_token: u64,
    /// Claims that took over an expired lease ([`crate::StatusCounts::takeovers`]), raised
    /// in the transaction of each such claim. Absent from a row stored before it existed
    /// (read as 0).
    #[serde(default)]
    pub takeovers: u64,
    /// Paused scopes: no claim takes an execution one of them covers.
    pub paused: BTreeSet<PauseScope>,
    /// The most live leases one concurrency key may hold at once.
    pub limits: ConcurrencyLimits,
    /// Attempt limits ([`crate::attempts`]).
    pub attempt_limits: AttemptLimits,
    /// Start rates per key ([`crate::keyed`]).
    pub rates: RateLimits,
    /// The claim instants of each rate-limited key, pruned to its window at every claim.
    pub rate_starts: HashMap<ConcurrencyKey, Vec<Timestamp>>,
    /// Ordered keys ([`crate::keyed`]).
    pub ordering: KeyOrdering,
    /// Workflows' own redelivery policies ([`crate::RedeliveryPolicies`]).
    pub redelivery: RedeliveryPolicies,
}

/// What a claim reads of every execution at once: the records (in any order; selection
/// sorts) and each one's place in admission order.
pub struct Scan<'a> {
    /// Every stored execution record.
    pub records: Box<dyn Iterator<Item = &'a ExecutionRecord> + 'a>,
    /// Each execution's place in admission order (smaller: admitted earlier).
    pub admitted: &'a HashMap<ExecutionId, u64>,
    /// The namespace's values.
    pub namespace: &'a Namespace,
}

/// A store receipt's key: the store, the execution and the step that updated it.
pub type ReceiptKey = (StoreId, ExecutionId, StepKey);

/// One change to a delivery history ([`crate::history`]), written in the transaction of
/// the transition it records.
#[derive(Debug, Clone, Copy)]
pub enum DeliveryEvent<'a> {
    /// A claim at `at` opened a delivery with `token`.
    Claimed {
        /// The claim's fencing token.
        token: FencingToken,
        /// The claim instant.
        at: Timestamp,
    },
    /// The open delivery ended at `at` as `end` says, with the worker's error if any.
    Ended {
        /// How it ended.
        end: DeliveryEnd,
        /// When.
        at: Timestamp,
        /// The error the worker reported, if it reported one.
        error: Option<&'a ErrorNote>,
    },
    /// The open delivery of `stored` (a running record whose lease ran out by `at`) ended
    /// by expiry: what a reader at `at` already sees, written down.
    Expired {
        /// The stored record, as it was before the transition.
        stored: &'a ExecutionRecord,
        /// The instant of the transition.
        at: Timestamp,
    },
}

impl DeliveryEvent<'_> {
    /// Applies the event to a loaded `history`.
    pub fn apply(self, history: &mut DeliveryHistory) {
        match self {
            DeliveryEvent::Claimed { token, at } => history.claim(token, at, None),
            DeliveryEvent::Ended { end, at, error } => history.end(end, at, error.cloned()),
            DeliveryEvent::Expired { stored, at } => {
                *history = std::mem::take(history).effective(stored, at);
            }
        }
    }
}
