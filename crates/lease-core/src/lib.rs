//! Execution leases with fencing tokens (RFC 002).
//!
//! Each delivery of an execution gets a lease: an expiry and a fencing token that rises on
//! every claim. The holder renews while alive; every write that could conflict is checked
//! against the token in the same atomic step as the write, so a worker that froze, fell
//! behind or lost its process can do no harm: its writes return [`Fenced::Lost`].
//!
//! This crate holds the types and traits every backend implements, the redelivery policy,
//! the clock abstraction and, with feature `memory`, the in-memory reference backend.
//!
//! # Cargo features
//!
#![doc = document_features::document_features!()]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod attempts;
pub mod browse;
pub mod capabilities;
pub mod client;
pub mod control;
pub mod counts;
pub mod effect;
#[cfg(feature = "engine")]
pub mod engine;
pub mod error;
pub mod execution;
pub mod ext;
pub mod forward;
pub mod heap;
pub mod history;
pub mod ids;
pub mod json;
pub mod key_rules;
pub mod keyed;
pub mod lease;
pub mod limits;
#[cfg(feature = "memory")]
pub mod memory;
mod named;
pub mod redact;
pub mod redelivery;
pub mod selection;
pub mod store;
pub mod time;
pub mod trace;
pub mod wakeup;

pub use attempts::{AttemptLimit, AttemptLimits, AttemptScope, ErrorNote, LastError, Release};
pub use browse::{ExecutionFilter, ExecutionPage, ListCursor};
pub use capabilities::Capabilities;
pub use client::{
    EffectClient, ExecutionClient, HeapClient, LeaseBackend, SharedBackend, StartClient,
    StoreClient,
};
pub use control::{
    CancelReason, ConcurrencyLimit, ConcurrencyLimits, LimitScope, PauseScope, Priority,
};
pub use counts::StatusCounts;
pub use effect::{Begun, EffectRecord, EffectState, EffectWait, Settlement};
pub use error::{BoxError, LeaseError, Result};
pub use execution::{
    AckAndClaim, Acknowledged, Acknowledgement, Admission, CancelOutcome, ClaimBatch, ClaimRequest,
    Claimed, CorruptRecord, ExecutionOutcome, ExecutionRecord, ExecutionStatus, Purged,
    WorkflowRunOutcome,
};
pub use ext::ExecutionClientExt;
pub use forward::{ForwardEffect, ForwardExecution, ForwardHeap, ForwardStart, ForwardStore};
pub use heap::{HeapRecord, MAX_STEP_PAGE, StepCursor, StepPage, StepWrite};
pub use history::{DeliveryEnd, DeliveryEntry, DeliveryHistory, MAX_DELIVERY_HISTORY};
pub use ids::{
    ConcurrencyKey, EffectId, ExecutionId, RequestId, StepKey, StoreId, StoreKey, WorkflowName,
};
pub use json::Json;
pub use keyed::{KeyOrdering, RateLimit, RateLimits};
pub use lease::{ExecutionLease, Fenced, FencingToken};
#[cfg(feature = "memory")]
pub use memory::MemoryBackend;
pub use redact::redact_url;
pub use redelivery::{RedeliveryPolicies, RedeliveryPolicy};
pub use store::{
    StartRequest, Started, StoreOp, StoreOutcome, StoreReceipt, StoreSnapshot, StoreUpdate,
};
pub use time::{Clock, ManualClock, SharedClock, SystemClock, Timestamp};
pub use trace::TraceContext;
pub use wakeup::{FirstListen, WakeHub, WakeReceiver};
