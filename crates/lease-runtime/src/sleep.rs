//! Durable sleep: one line of workflow code that waits for an instant of the backend clock
//! across deliveries, processes and restarts (RFC 002's wake, and the replay rule).
//!
//! The target instant is recorded as a step the first time, so a replay reads the saved
//! instant instead of computing a new one. Until the backend clock reaches it, the delivery
//! requests a wake at it and ends with a suspended acknowledgement; the wake makes the
//! execution due again, and its next delivery replays every step up to the sleep and
//! continues past it.

use std::time::Duration;

use crate::delivery::Delivery;
use crate::error::DeliveryError;
use lease_core::ids::StepKey;
use lease_core::time::Timestamp;

impl Delivery {
    /// Sleeps for `duration` from the first time this step runs, durably: returns once the
    /// backend clock has passed that instant, or ends this delivery with
    /// [`DeliveryError::Sleeping`] (return it with `?`) after requesting a wake at it. The
    /// dispatcher acknowledges the delivery as suspended, and the execution is delivered
    /// again at the instant.
    ///
    /// `key` is a step key of its own: the instant is recorded under it (a fenced step
    /// write), so a replay sleeps until the same instant. A zero duration does not suspend.
    pub async fn sleep(&self, key: &str, duration: Duration) -> Result<(), DeliveryError> {
        let now = self.backend_now().await?;
        let until = self
            .step(key, || async move {
                Ok::<_, DeliveryError>(now.saturating_add(duration))
            })
            .await?;
        self.sleep_past(key, until, now).await
    }

    /// Sleeps until `at` on the backend clock, durably, as [`Delivery::sleep`] does; the
    /// instant is recorded under `key` the first time, so a replay keeps the first instant
    /// even if the workflow computes another one.
    pub async fn sleep_until(&self, key: &str, at: Timestamp) -> Result<(), DeliveryError> {
        let now = self.backend_now().await?;
        let until = self
            .step(key, || async move { Ok::<_, DeliveryError>(at) })
            .await?;
        self.sleep_past(key, until, now).await
    }

    /// `Ok` once `now` has reached `until`; otherwise requests the wake and returns
    /// [`DeliveryError::Sleeping`]. An instant no backend can schedule is refused as the
    /// step's value ([`DeliveryError::Refused`]: the execution fails, no redelivery could
    /// sleep any better).
    async fn sleep_past(
        &self,
        key: &str,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<(), DeliveryError> {
        if now >= until {
            return Ok(());
        }
        let step = StepKey::new(key)?;
        if let Err(source) = lease_core::limits::check_scheduled("sleep until", until) {
            return Err(DeliveryError::Refused { step, source });
        }
        self.request_wake(until).await?;
        Err(DeliveryError::Sleeping { step, until })
    }
}
