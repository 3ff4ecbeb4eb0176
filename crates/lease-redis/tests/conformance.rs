//! The conformance suite against real Redis: every case on its own random namespace,
//! removed afterwards with SCAN + UNLINK.

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use lease_core::{ManualClock, RedeliveryPolicy, Result};
use lease_redis::RedisBackend;

/// Harness: a random namespace per case over `LEASE_REDIS_URL`; peers are separate
/// connection managers (each with its own wake-up listener); teardown deletes the namespace.
/// `kill_listeners` kills the namespace's subscriber connections by their name.
pub struct RedisHarness(RedisBackend);

#[async_trait]
impl lease_conformance::Harness for RedisHarness {
    type Backend = RedisBackend;

    const KILLABLE_LISTENER: bool = true;

    async fn kill_listeners(&self) -> Result<bool> {
        common::kill_connections_named(&self.0.listener_name())
            .await
            .map_err(|e| lease_core::LeaseError::Backend {
                backend: "redis",
                operation: "kill_listeners",
                source: Box::new(e),
            })
    }

    async fn token_base(&self) -> Result<u64> {
        Ok(common::token_base(&self.0).await)
    }

    async fn setup(clock: ManualClock, policy: RedeliveryPolicy) -> Result<Self> {
        let config = common::config(&common::random_namespace())
            .clock(Arc::new(clock))
            .policy(policy);
        Ok(RedisHarness(RedisBackend::connect(config).await?))
    }

    fn backend(&self) -> RedisBackend {
        self.0.clone()
    }

    async fn peer(&self) -> Result<RedisBackend> {
        self.0.peer().await
    }

    async fn teardown(self) -> Result<()> {
        self.0.delete_namespace().await
    }
}

lease_conformance::conformance_tests!(RedisHarness);
