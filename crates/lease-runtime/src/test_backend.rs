//! What the dispatcher's test wrappers (fault_tests' `Faulty`, probe_tests' `Probe`) share:
//! both wrap the memory backend through the `Forward*` twins ([`lease_core::forward`]).

use lease_core::execution::{AckAndClaim, Acknowledgement, ClaimRequest};
use lease_core::{ExecutionClient, Result};

/// `acknowledge_and_claim` as two calls through the wrapper itself, so a wrapper that
/// counts, gates or fails `acknowledge` sees the acknowledgements the dispatcher sends
/// combined with a claim (the forwarded default would reach the memory backend directly).
pub(super) async fn ack_then_claim<W: ExecutionClient>(
    wrapper: &W,
    ack: &Acknowledgement,
    next: ClaimRequest,
) -> Result<AckAndClaim> {
    next.validate()?;
    let acknowledged = wrapper.acknowledge(&ack.lease, &ack.outcome).await?;
    let next = wrapper.claim_due_with_horizon(next).await?;
    Ok(AckAndClaim { acknowledged, next })
}

/// Forwards a test wrapper's steps, stores and starts to its `inner` memory backend.
macro_rules! forward_rest {
    ($wrapper:ty) => {
        impl lease_core::ForwardHeap for $wrapper {
            fn inner_heap(&self) -> &dyn lease_core::HeapClient {
                &self.inner
            }
        }
        impl lease_core::ForwardStore for $wrapper {
            fn inner_store(&self) -> &dyn lease_core::StoreClient {
                &self.inner
            }
        }
        impl lease_core::ForwardStart for $wrapper {
            fn inner_start(&self) -> &dyn lease_core::StartClient {
                &self.inner
            }
        }
    };
}
pub(super) use forward_rest;
