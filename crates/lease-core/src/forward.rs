//! Wrappers that forward every method (object_store's pattern, checked by construction):
//! a type that wraps another backend (a recorder, a fault injector, a mutant) implements the
//! `Forward*` twin of each client trait instead of the trait itself. Every twin method has a
//! default that forwards to the wrapped backend, and a blanket impl turns each twin into
//! its client trait, so a wrapper overrides only what it changes and a method added to a
//! client trait is forwarded by every wrapper without touching it (the `tidy` test checks
//! the twins list every method of their traits).

use std::time::Duration;

use async_trait::async_trait;

use crate::attempts::{AttemptLimit, AttemptLimits, AttemptScope, Release};
use crate::browse::{ExecutionFilter, ExecutionPage, ListCursor};
use crate::capabilities::Capabilities;
use crate::client::{EffectClient, ExecutionClient, HeapClient, StartClient, StoreClient};
use crate::control::{CancelReason, ConcurrencyLimit, ConcurrencyLimits, LimitScope, PauseScope};
use crate::counts::StatusCounts;
use crate::effect::{Begun, EffectRecord, EffectWait, Settlement};
use crate::error::Result;
use crate::execution::{
    AckAndClaim, Acknowledged, Acknowledgement, Admission, CancelOutcome, ClaimBatch, ClaimRequest,
    CorruptRecord, ExecutionRecord, Purged, WorkflowRunOutcome,
};
use crate::heap::{HeapRecord, StepCursor, StepPage, StepWrite};
use crate::history::DeliveryHistory;
use crate::ids::{EffectId, ExecutionId, StepKey, StoreId, StoreKey, WorkflowName};
use crate::json::Json;
use crate::keyed::{KeyOrdering, RateLimit, RateLimits};
use crate::lease::{ExecutionLease, Fenced};
use crate::redelivery::{RedeliveryPolicies, RedeliveryPolicy};
use crate::store::{StartRequest, Started, StoreOp, StoreReceipt, StoreSnapshot, StoreUpdate};
use crate::time::Timestamp;
use crate::wakeup::WakeReceiver;

/// Declares the forwarding twin `$forward` of client trait `$client` and the blanket impl
/// of `$client` for every `$forward`: one list of the trait's methods, async and plain.
macro_rules! forward {
    (
        $(#[$meta:meta])*
        $client:ident => $forward:ident $(: $super:ident)?, $inner:ident;
        async { $( fn $am:ident(&self $(, $aa:ident: $at:ty)* ) -> $ar:ty; )* }
        sync { $( fn $sm:ident(&self) -> $sr:ty; )* }
    ) => {
        $(#[$meta])*
        #[async_trait]
        pub trait $forward: $($super +)? Send + Sync {
            /// The backend every method not overridden forwards to.
            fn $inner(&self) -> &dyn $client;
            $(
                #[doc = concat!("[`", stringify!($client), "::", stringify!($am),
                    "`]; forwards by default.")]
                async fn $am(&self $(, $aa: $at)*) -> $ar {
                    self.$inner().$am($($aa),*).await
                }
            )*
            $(
                #[doc = concat!("[`", stringify!($client), "::", stringify!($sm),
                    "`]; forwards by default.")]
                fn $sm(&self) -> $sr {
                    self.$inner().$sm()
                }
            )*
        }

        #[async_trait]
        #[deny(clippy::missing_trait_methods)]
        impl<W: $forward> $client for W {
            $(
                async fn $am(&self $(, $aa: $at)*) -> $ar {
                    $forward::$am(self $(, $aa)*).await
                }
            )*
            $(
                fn $sm(&self) -> $sr {
                    $forward::$sm(self)
                }
            )*
        }
    };
}

forward! {
    /// The forwarding twin of [`ExecutionClient`].
    ExecutionClient => ForwardExecution, inner_execution;
    async {
        fn admit(&self, admission: &Admission) -> Result<ExecutionRecord>;
        fn admit_batch(&self, admissions: &[Admission]) -> Result<Vec<ExecutionRecord>>;
        fn get(&self, id: &ExecutionId) -> Result<Option<ExecutionRecord>>;
        fn list_failing(&self, min: u32, limit: usize) -> Result<Vec<ExecutionRecord>>;
        fn list_live_leases(&self, limit: usize) -> Result<Vec<ExecutionRecord>>;
        fn list_corrupt(&self, limit: usize) -> Result<Vec<CorruptRecord>>;
        fn status_counts(&self) -> Result<StatusCounts>;
        fn purge_terminal(&self, before: Timestamp, limit: usize) -> Result<Purged>;
        fn cancel(&self, id: &ExecutionId, reason: &CancelReason) -> Result<CancelOutcome>;
        fn pause(&self, scope: &PauseScope) -> Result<bool>;
        fn resume(&self, scope: &PauseScope) -> Result<bool>;
        fn list_paused(&self) -> Result<Vec<PauseScope>>;
        fn set_concurrency_limit(&self, scope: &LimitScope, limit: Option<ConcurrencyLimit>)
            -> Result<()>;
        fn concurrency_limits(&self) -> Result<ConcurrencyLimits>;
        fn set_attempt_limit(&self, scope: &AttemptScope, limit: Option<AttemptLimit>)
            -> Result<()>;
        fn attempt_limits(&self) -> Result<AttemptLimits>;
        fn list_dead(&self, after: Option<&ExecutionId>, limit: usize)
            -> Result<Vec<ExecutionRecord>>;
        fn retry_dead(&self, ids: &[ExecutionId], input: Option<&Json>)
            -> Result<Vec<ExecutionRecord>>;
        fn set_rate_limit(&self, scope: &LimitScope, limit: Option<RateLimit>) -> Result<()>;
        fn rate_limits(&self) -> Result<RateLimits>;
        fn set_key_ordering(&self, scope: &LimitScope, ordered: bool) -> Result<()>;
        fn key_ordering(&self) -> Result<KeyOrdering>;
        fn list_executions(&self, filter: &ExecutionFilter, after: Option<&ListCursor>,
            limit: usize) -> Result<ExecutionPage>;
        fn set_redelivery_policy(&self, workflow: &WorkflowName,
            policy: Option<RedeliveryPolicy>) -> Result<()>;
        fn redelivery_policies(&self) -> Result<RedeliveryPolicies>;
        fn deliveries(&self, id: &ExecutionId) -> Result<DeliveryHistory>;
        fn request_wake(&self, id: &ExecutionId, at: Timestamp) -> Result<()>;
        fn claim_due_with_horizon(&self, request: ClaimRequest) -> Result<ClaimBatch>;
        fn renew(&self, lease: &ExecutionLease, duration: Duration)
            -> Result<Fenced<ExecutionLease>>;
        fn release(&self, lease: &ExecutionLease) -> Result<Fenced<()>>;
        fn release_with(&self, lease: &ExecutionLease, release: &Release) -> Result<Fenced<()>>;
        fn acknowledge(&self, lease: &ExecutionLease, outcome: &WorkflowRunOutcome)
            -> Result<Fenced<Acknowledged>>;
        fn acknowledge_and_claim(&self, ack: &Acknowledgement, next: ClaimRequest)
            -> Result<AckAndClaim>;
        fn acknowledge_batch(&self, acks: &[Acknowledgement])
            -> Result<Vec<Fenced<Acknowledged>>>;
        fn now(&self) -> Result<Timestamp>;
    }
    sync {
        fn wakeups(&self) -> Option<WakeReceiver>;
        fn effects(&self) -> Option<&dyn EffectClient>;
        fn capabilities(&self) -> Capabilities;
        fn backend_name(&self) -> &'static str;
        fn namespace_name(&self) -> Option<String>;
    }
}

forward! {
    /// The forwarding twin of [`HeapClient`].
    HeapClient => ForwardHeap, inner_heap;
    async {
        fn write_step(&self, lease: &ExecutionLease, write: &StepWrite)
            -> Result<Fenced<HeapRecord>>;
        fn read_step(&self, id: &ExecutionId, step_key: &StepKey, step_attempt: u32)
            -> Result<Option<HeapRecord>>;
        fn list_steps(&self, id: &ExecutionId) -> Result<Vec<HeapRecord>>;
        fn list_steps_page(&self, id: &ExecutionId, after: Option<&StepCursor>, limit: u32)
            -> Result<StepPage>;
    }
    sync {}
}

forward! {
    /// The forwarding twin of [`StoreClient`].
    StoreClient => ForwardStore: ExecutionClient, inner_store;
    async {
        fn get_or_create(&self, store: &StoreId, initial: &[(StoreKey, Json)])
            -> Result<StoreSnapshot>;
        fn read_entry(&self, store: &StoreId, key: &StoreKey) -> Result<Option<Json>>;
        fn update(&self, receipt: &StoreReceipt, op: &StoreOp) -> Result<StoreUpdate>;
        fn watch_entry(&self, store: &StoreId, key: &StoreKey, waiter: &ExecutionId)
            -> Result<Option<Json>>;
    }
    sync {}
}

forward! {
    /// The forwarding twin of [`EffectClient`].
    EffectClient => ForwardEffect, inner_effect;
    async {
        fn begin_effect(&self, id: &EffectId, execution: &ExecutionId) -> Result<Begun>;
        fn settle_effect(&self, id: &EffectId, execution: &ExecutionId, result: &Json)
            -> Result<Settlement>;
        fn read_effect(&self, id: &EffectId) -> Result<Option<EffectRecord>>;
        fn wait_effect(&self, id: &EffectId, execution: &ExecutionId) -> Result<EffectWait>;
    }
    sync {}
}

forward! {
    /// The forwarding twin of [`StartClient`].
    StartClient => ForwardStart, inner_start;
    async {
        fn start(&self, request: &StartRequest) -> Result<Started>;
    }
    sync {}
}

/// The effect client of a backend without effects (RFC 004 is optional): every call is
/// [`crate::LeaseError::Unsupported`], as lease-runtime's `Delivery::effect` reports. For a wrapper
/// whose wrapped backend may have no effect client to forward to.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoEffects;

impl NoEffects {
    fn unsupported<T>(operation: &'static str) -> Result<T> {
        Err(crate::LeaseError::Unsupported {
            backend: "adapter",
            operation,
        })
    }
}

#[async_trait]
impl EffectClient for NoEffects {
    async fn begin_effect(&self, _: &EffectId, _: &ExecutionId) -> Result<Begun> {
        Self::unsupported("begin_effect")
    }
    async fn settle_effect(&self, _: &EffectId, _: &ExecutionId, _: &Json) -> Result<Settlement> {
        Self::unsupported("settle_effect")
    }
    async fn read_effect(&self, _: &EffectId) -> Result<Option<EffectRecord>> {
        Self::unsupported("read_effect")
    }
    async fn wait_effect(&self, _: &EffectId, _: &ExecutionId) -> Result<EffectWait> {
        Self::unsupported("wait_effect")
    }
}
