//! [`ExecutionClientExt`]: conveniences over [`ExecutionClient`] that every backend gets for
//! free and none implements (object_store's `ObjectStoreExt` pattern): derived in one place,
//! so no backend or wrapper repeats them.

use async_trait::async_trait;

use crate::client::ExecutionClient;
use crate::error::Result;
use crate::execution::{ClaimRequest, Claimed};
use crate::lease::ExecutionLease;

/// Conveniences over [`ExecutionClient`], implemented for every client (`dyn` ones too).
#[async_trait]
pub trait ExecutionClientExt: ExecutionClient {
    /// The leases of [`ExecutionClient::claim_due_with_horizon`] (RFC 002 `claimDue`).
    async fn claim_due(&self, request: ClaimRequest) -> Result<Vec<ExecutionLease>> {
        Ok(Claimed::leases(self.claim_due_with_records(request).await?))
    }

    /// The leases and records of [`ExecutionClient::claim_due_with_horizon`], without the
    /// horizon.
    async fn claim_due_with_records(&self, request: ClaimRequest) -> Result<Vec<Claimed>> {
        Ok(self.claim_due_with_horizon(request).await?.claimed)
    }
}

impl<T: ExecutionClient + ?Sized> ExecutionClientExt for T {}
