//! Issue 21's operator controls on Redis: cancel (`control/cancel.lua`), one script per
//! call on the execution's partition.

use lease_core::{
    CancelOutcome, CancelReason, ExecutionId, ExecutionOutcome, Json, LeaseError, Result,
};

use crate::backend::RedisBackend;
use crate::error::Access;
use crate::reply::Reply;
use crate::scripts::operation_script;

// The operation scripts this module runs, each compiled once per process.
operation_script!(CANCEL = record_script(include_str!("control/cancel.lua")));

impl RedisBackend {
    /// `ExecutionClient::cancel` (issue 21 item 1): `ExecutionRecord::cancel` on the
    /// effective record, in one script on the execution's partition.
    pub(crate) async fn cancel_execution(
        &self,
        id: &ExecutionId,
        reason: &CancelReason,
    ) -> Result<CancelOutcome> {
        const OP: &str = "cancel";
        let v = self
            .eval(
                OP,
                Access::Write,
                self.keys().of(id),
                &CANCEL,
                &[
                    id.as_str().as_bytes(),
                    reason.as_str().as_bytes(),
                    self.publish_word(),
                ],
            )
            .await?;
        let reply = Reply::new(OP);
        let (status, mut rest) = reply.status(v)?;
        match status.as_str() {
            "unknown" => Err(LeaseError::UnknownExecution(id.clone())),
            "cancelled" => {
                let ended = reply.string(reply.next(&mut rest, "ended")?)?;
                Ok(CancelOutcome::Cancelled {
                    ended_lease: ended == "1",
                })
            }
            "terminal" => {
                let kind = reply.string(reply.next(&mut rest, "outcome kind")?)?;
                let value = reply.string(reply.next(&mut rest, "outcome value")?)?;
                match kind.as_str() {
                    "cancelled" => Ok(CancelOutcome::AlreadyCancelled(CancelReason::from_stored(
                        value,
                    ))),
                    "completed" => Ok(CancelOutcome::AlreadyTerminal(ExecutionOutcome::Completed(
                        Json::from_stored(value),
                    ))),
                    "failed" => Ok(CancelOutcome::AlreadyTerminal(ExecutionOutcome::Failed(
                        Json::from_stored(value),
                    ))),
                    other => Err(reply.unexpected(other)),
                }
            }
            other => Err(reply.unexpected(other)),
        }
    }
}
