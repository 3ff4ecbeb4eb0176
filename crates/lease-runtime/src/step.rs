//! The step driver: the replay rule (RFC 002 video transcript).
//!
//! "A step with a saved result is skipped, and a step without one runs again." The saved
//! result is written with a fenced write, and whatever record the backend holds after that
//! write is what the workflow continues with.

use std::future::Future;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::Instrument;

use crate::delivery::Delivery;
use crate::error::DeliveryError;
use lease_core::error::BoxError;
use lease_core::heap::{HeapRecord, StepWrite};
use lease_core::ids::StepKey;
use lease_core::json::Json;

/// The first step attempt the driver reads and writes. Failed closures are not recorded
/// (a failing closure releases the delivery), so a step normally has exactly this one
/// attempt; an attempt recorded as not done (by [`Delivery::write_step`] with
/// `done: false`) is passed over and the step continues at the next attempt.
pub const STEP_ATTEMPT: u32 = 1;

/// Most attempts the driver walks for one step before giving up with an error.
pub const MAX_STEP_ATTEMPTS: u32 = 1000;

impl Delivery {
    /// Runs one step under the replay rule.
    ///
    /// - A done record for `key` exists: its value is returned and `f` does not run.
    /// - Otherwise `f` runs and its result is recorded with a fenced write at the first
    ///   attempt with no record (attempts recorded as not done are passed over: a not-done
    ///   value is never returned, or the step could never complete). If a done record
    ///   appeared meanwhile, the *recorded* value is returned, not `f`'s.
    /// - A `Lost` write cancels the delivery and returns [`DeliveryError::Lost`]; the worker
    ///   should propagate it with `?`. A failing `f` returns [`DeliveryError::Step`] and
    ///   records nothing.
    ///
    /// Runs in a `step` span (fields `step`, `replayed`): `f`'s own spans and events, and a
    /// refused write's `lost` event, are inside it.
    pub async fn step<T, F, Fut, E>(&self, key: &str, f: F) -> Result<T, DeliveryError>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Into<BoxError>,
    {
        let span = tracing::info_span!("step", step = key, replayed = tracing::field::Empty);
        self.run_step(key, f, &span).instrument(span.clone()).await
    }

    async fn run_step<T, F, Fut, E>(
        &self,
        key: &str,
        f: F,
        span: &tracing::Span,
    ) -> Result<T, DeliveryError>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Into<BoxError>,
    {
        let step_key = StepKey::new(key)?;
        let slot = self.step_slot(&step_key).await?;
        span.record("replayed", matches!(slot, StepSlot::Recorded(_)));
        let attempt = match slot {
            StepSlot::Recorded(record) => return Ok(record.response.decode()?),
            StepSlot::Free { attempt } => attempt,
        };
        let value = f().await.map_err(|e| DeliveryError::Step {
            step: step_key.clone(),
            source: e.into(),
        })?;
        let refused = |e| DeliveryError::refusing(&step_key, e);
        let response = Json::to_json("step response", &value)
            .map_err(|e| refused(DeliveryError::Backend(e)))?;
        let record = self
            .record_step(&step_key, attempt, &response)
            .await
            .map_err(refused)?;
        Ok(record.response.decode()?)
    }

    /// Records `response` as the done value of `step_key` with a fenced write at `attempt`,
    /// passing over attempts recorded as not done; returns the done record the backend holds
    /// (another holder's, if it recorded first).
    pub(crate) async fn record_step(
        &self,
        step_key: &StepKey,
        mut attempt: u32,
        response: &Json,
    ) -> Result<HeapRecord, DeliveryError> {
        loop {
            // write_step checks the cancellation signal before the fenced write.
            let record = self
                .write_step(&StepWrite {
                    step_key: step_key.clone(),
                    step_attempt: attempt,
                    done: true,
                    response: response.clone(),
                })
                .await?;
            if record.done {
                return Ok(record);
            }
            attempt = next_step_attempt(step_key, attempt)?;
        }
    }
}

/// Where a step stands for this delivery (see [`Delivery::step_slot`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepSlot {
    /// A done record exists: replay its value, do not run the step.
    Recorded(HeapRecord),
    /// No done record: run the step and record it at this attempt.
    Free {
        /// The first attempt with no record (attempts recorded as not done are passed over).
        attempt: u32,
    },
}

impl Delivery {
    /// The replay rule's first half, for backends that record a step inside their own
    /// transaction together with the application's writes (`step_in_tx`): the
    /// done record of `step_key` if one exists, else the attempt to write. Reads exactly as
    /// [`Delivery::step`] does (nothing on a first delivery, each record once). Refused once
    /// the delivery is lost or cancelled.
    pub async fn step_slot(&self, step_key: &StepKey) -> Result<StepSlot, DeliveryError> {
        self.ensure_live()?;
        let mut attempt = STEP_ATTEMPT;
        while let Some(record) = self.known_step(step_key, attempt).await? {
            if record.done {
                tracing::debug!(step = %step_key, attempt, "step replayed");
                return Ok(StepSlot::Recorded(record));
            }
            attempt = next_step_attempt(step_key, attempt)?;
        }
        Ok(StepSlot::Free { attempt })
    }

    /// Remembers a step record a backend wrote for this delivery in its own fenced
    /// transaction, so later steps of the delivery neither read it again nor
    /// miss it. A record of another execution is ignored.
    pub fn note_step_written(&self, record: &HeapRecord) {
        if record.execution_id == *self.execution_id() {
            self.remember(record);
        }
    }
}

/// The attempt after `attempt` (an attempt recorded as not done is passed over), or an
/// error past [`MAX_STEP_ATTEMPTS`]: for backends' transactional steps that meet a not-done
/// record at the attempt [`Delivery::step_slot`] gave them.
pub fn next_step_attempt(step_key: &StepKey, attempt: u32) -> Result<u32, DeliveryError> {
    if attempt >= MAX_STEP_ATTEMPTS {
        return Err(DeliveryError::Backend(lease_core::LeaseError::invalid(
            "step attempt",
            format!("step {step_key} has {MAX_STEP_ATTEMPTS} attempts recorded as not done"),
        )));
    }
    Ok(attempt + 1)
}
