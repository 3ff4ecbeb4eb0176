//! The torture workflow's application steps: a step whose effect is one
//! application row ([`crate::app`]), written through the backend's fenced path together
//! with the step's record, and logged like a step write: an invoke line before the call
//! (so a process killed inside the transaction leaves an `Unknown` op behind), the result
//! after it. The row carries the op's process and sequence number.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::history::{Op, OpKind, OpResult};
use lease_core::StepKey;
use lease_runtime::{Delivery, DeliveryError, StepSlot};

use crate::app::{AppRow, AppStore, AppWrite};
use crate::history::error_result;
use crate::oplog::{OpLog, now_us};

/// What the application steps of one runtime process need.
pub struct AppSteps {
    store: AppStore,
    log: Arc<OpLog>,
    process: u32,
    mode: AppWrite,
}

/// JSON text of a step value.
fn json_text(value: &str) -> Result<String, DeliveryError> {
    Ok(lease_core::Json::to_json("step", &value)?
        .as_str()
        .to_owned())
}

/// How a fenced application step's result is logged: `Accepted` with the recorded value
/// when its body ran (so its row may have committed), `Failed` when it returned a record
/// without running its body (the replay rule: nothing was written), `Unknown` with the
/// value when the backend does not say which of the two happened (Redis).
fn logged(
    result: &Result<String, DeliveryError>,
    ran: bool,
    reports_body: bool,
) -> (OpResult, Option<String>) {
    match result {
        Ok(text) if ran => (OpResult::Accepted, Some(text.clone())),
        Ok(text) if !reports_body => (OpResult::Unknown, Some(text.clone())),
        Ok(_) => (OpResult::Failed, None),
        Err(DeliveryError::Lost) => (OpResult::Lost, None),
        Err(DeliveryError::Backend(e)) => (error_result(e), None),
        Err(DeliveryError::Cancelled | DeliveryError::Step { .. } | DeliveryError::Worker(_)) => {
            (OpResult::Failed, None)
        }
        Err(_) => (OpResult::Unknown, None),
    }
}

impl AppSteps {
    /// The application steps of runtime `process`, logging to `log`.
    pub fn new(store: AppStore, log: Arc<OpLog>, process: u32, mode: AppWrite) -> Self {
        AppSteps {
            store,
            log,
            process,
            mode,
        }
    }

    /// Runs step `key` of `d` under the replay rule: a recorded step returns its value and
    /// does nothing; otherwise `work` passes, then the row (holding `value`) and the step
    /// record are written, and the recorded value is returned.
    pub async fn step(
        &self,
        d: &Delivery,
        key: &str,
        value: String,
        work: Duration,
    ) -> Result<String, DeliveryError> {
        let attempt = match d.step_slot(&StepKey::new(key)?).await? {
            StepSlot::Recorded(record) => return Ok(record.response.decode()?),
            StepSlot::Free { attempt } => attempt,
        };
        tokio::time::sleep(work).await;
        let seq = self.log.next_seq();
        let text = json_text(&value)?;
        let row = AppRow {
            execution: d.execution_id().as_str().to_owned(),
            step: key.to_owned(),
            token: d.token().get(),
            process: self.process,
            seq,
            value: text.clone(),
        };
        let mut op = Op {
            process: self.process,
            execution: row.execution.clone(),
            token: row.token,
            start_us: now_us(),
            end_us: i64::MAX,
            kind: OpKind::WriteStep {
                step_key: key.to_owned(),
                step_attempt: attempt,
                written: text,
                recorded: None,
            },
            result: OpResult::Unknown,
        };
        self.log.invoke(seq, &op);
        let (result, logged) = match self.mode {
            AppWrite::Fenced => self.fenced(d, row, value).await,
            AppWrite::Unfenced => self.unfenced(d, row, value).await,
        };
        op.end_us = now_us();
        op.result = logged.0;
        if let OpKind::WriteStep { recorded, .. } = &mut op.kind {
            *recorded = logged.1;
        }
        self.log.record(seq, op);
        serde_json::from_str(&result?).map_err(DeliveryError::worker)
    }

    async fn fenced(
        &self,
        d: &Delivery,
        row: AppRow,
        value: String,
    ) -> (Result<String, DeliveryError>, (OpResult, Option<String>)) {
        let ran = Arc::new(AtomicBool::new(false));
        let result = self
            .store
            .step_fenced(d, row, value, ran.clone())
            .await
            .and_then(|v| json_text(&v));
        let logged = logged(
            &result,
            ran.load(Ordering::SeqCst),
            self.store.reports_body(),
        );
        (result, logged)
    }

    /// NEGATIVE CONTROL: the row in a plain write outside the fence, then the step record
    /// with `Delivery::step`; logged as the fenced path logs (the record write's result).
    async fn unfenced(
        &self,
        d: &Delivery,
        row: AppRow,
        value: String,
    ) -> (Result<String, DeliveryError>, (OpResult, Option<String>)) {
        if let Err(e) = self.store.write_unfenced(&row).await {
            return (Err(DeliveryError::worker(e)), (OpResult::Unknown, None));
        }
        let result = d
            .step(&row.step, || async move { Ok::<_, Infallible>(value) })
            .await
            .and_then(|v: String| json_text(&v));
        let logged = logged(&result, true, true);
        (result, logged)
    }
}
