//! The step driver: the replay rule (RFC 002 video transcript; design.md section 4).
//!
//! "A step with a saved result is skipped, and a step without one runs again." The saved
//! result is written with a fenced write, and whatever record the backend holds after that
//! write is what the workflow continues with.

use std::future::Future;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::dispatcher::delivery::Delivery;
use crate::dispatcher::error::DeliveryError;
use crate::error::BoxError;
use crate::heap::StepWrite;
use crate::ids::StepKey;
use crate::json::Json;

/// The step attempt the driver reads and writes. Failed attempts are not recorded (a
/// failing closure releases the delivery), so every step has exactly one attempt.
pub const STEP_ATTEMPT: u32 = 1;

impl Delivery {
    /// Runs one step under the replay rule.
    ///
    /// - A done record for `key` exists: its value is returned and `f` does not run.
    /// - Otherwise `f` runs and its result is recorded with a fenced write. If a record
    ///   appeared meanwhile (a stale holder got there first), the *recorded* value is
    ///   returned, not `f`'s.
    /// - A `Lost` write cancels the delivery and returns [`DeliveryError::Lost`]; the worker
    ///   should propagate it with `?`. A failing `f` returns [`DeliveryError::Step`] and
    ///   records nothing.
    pub async fn step<T, F, Fut, E>(&self, key: &str, f: F) -> Result<T, DeliveryError>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Into<BoxError>,
    {
        let step_key = StepKey::new(key)?;
        self.ensure_live()?;
        if let Some(record) = self.known_step(&step_key, STEP_ATTEMPT).await?
            && record.done
        {
            tracing::debug!(step = %step_key, "step replayed");
            return Ok(record.response.decode()?);
        }
        let value = f().await.map_err(|e| DeliveryError::Step {
            step: step_key.clone(),
            source: e.into(),
        })?;
        let response = Json::to_json("step response", &value)?;
        // write_step checks the cancellation signal before the fenced write.
        let record = self
            .write_step(&StepWrite {
                step_key,
                step_attempt: STEP_ATTEMPT,
                done: true,
                response,
            })
            .await?;
        Ok(record.response.decode()?)
    }
}
