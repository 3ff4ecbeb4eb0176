//! RFC 002 "Runtime-adapter tests" table.

use std::sync::Arc;

use lease_core::{ExecutionClient, ExecutionStatus};

use crate::context::Ctx;
use crate::harness::Harness;

/// Row "claimDue claims a due execution": the status is running.
pub async fn claim_sets_status_running<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let lease = ctx.claim_one("order-42").await;
    let record = ctx.get("order-42").await;
    assert_eq!(record.status, ExecutionStatus::Running);
    assert_eq!(record.token, lease.token);
    assert!(lease.expires_at > ctx.backend().now().await.expect("now"));
}

/// Row "A lease expires without renewal": the execution is claimable with a higher token.
pub async fn expired_lease_claimable_with_higher_token<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let first = ctx.claim_one("order-42").await;
    let peer = ctx.peer().await;
    assert!(ctx.claim(&peer, 10).await.is_empty(), "a live lease is not claimable");
    ctx.advance(crate::context::LEASE);
    // Expiry is an unacknowledged delivery: wait out the redelivery delay for one.
    ctx.advance(ctx.policy.delay(1));
    let again = ctx.claim(&peer, 10).await;
    assert_eq!(again.len(), 1);
    assert!(again[0].token > first.token);
}
