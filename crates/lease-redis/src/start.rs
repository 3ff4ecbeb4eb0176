//! [`StartClient`] for [`RedisBackend`] (RFC 003 `start`, reduced): one script with one
//! partition, three idempotent steps when the request and its target lie in different
//! slots.

use async_trait::async_trait;
use lease_core::{ExecutionId, LeaseError, Result, StartClient, StartRequest, Started};

use crate::backend::RedisBackend;
use crate::error::Access;
use crate::reply::Reply;
use crate::scripts::operation_script;

// The operation scripts this module runs, each compiled once per process.
operation_script!(START = script(include_str!("start/start.lua")));
operation_script!(START_HOME = script(include_str!("start/start_home.lua")));
operation_script!(START_TARGET = script(include_str!("start/start_target.lua")));

#[async_trait]
impl StartClient for RedisBackend {
    #[tracing::instrument(level = "debug", name = "start", skip_all)]
    async fn start(&self, request: &StartRequest) -> Result<Started> {
        if self.keys().split() {
            return self.start_split(request).await;
        }
        const OP: &str = "start";
        let v = self
            .eval(
                OP,
                Access::Write,
                self.keys().prefix(),
                &START,
                &[
                    request.request_id.as_str().as_bytes(),
                    request.target.as_str().as_bytes(),
                    request.workflow.as_str().as_bytes(),
                    request.input.as_str().as_bytes(),
                    self.publish_word(),
                ],
            )
            .await?;
        let reply = Reply::new(OP);
        let (status, mut rest) = reply.status(v)?;
        let created = match status.as_str() {
            "existing" => false,
            "created" => true,
            "taken" => return Err(taken(&request.target)),
            other => return Err(reply.unexpected(other)),
        };
        let target = reply.execution_id(reply.next(&mut rest, "target")?)?;
        Ok(Started { target, created })
    }
}

/// The error of a start whose target id is an execution the request did not create.
fn taken(target: &ExecutionId) -> LeaseError {
    LeaseError::invalid("start target", format!("execution {target} already exists"))
}

impl RedisBackend {
    /// `start` with partitions, where the request record (home prefix) and the
    /// target (its partition) lie in different slots: three idempotent steps instead of
    /// one script. 1. Record request id -> target unless the request id is known
    /// (`start/start_home.lua`). 2. Admit the recorded target unless it exists, marked as the
    /// request's (`start/start_target.lua`), which also completes a start interrupted between
    /// the steps. 3. When this call recorded the target but it exists and is not the
    /// request's, remove the record again: `InvalidInput`, as with one partition.
    async fn start_split(&self, request: &StartRequest) -> Result<Started> {
        const OP: &str = "start";
        let reply = Reply::new(OP);
        let (req, target) = (request.request_id.as_str(), request.target.as_str());
        let home = |mode: &'static str| async move {
            let args: [&[u8]; 3] = [mode.as_bytes(), req.as_bytes(), target.as_bytes()];
            self.eval(OP, Access::Write, self.keys().prefix(), &START_HOME, &args)
                .await
        };
        let (status, mut rest) = reply.status(home("record").await?)?;
        let recorded = reply.execution_id(reply.next(&mut rest, "target")?)?;
        let seq = self.reserve_sequences(1).await?;
        let v = self
            .eval(
                OP,
                Access::Write,
                self.keys().of(&recorded),
                &START_TARGET,
                &[
                    req.as_bytes(),
                    recorded.as_str().as_bytes(),
                    request.workflow.as_str().as_bytes(),
                    request.input.as_str().as_bytes(),
                    self.publish_word(),
                    seq.as_bytes(),
                ],
            )
            .await?;
        let (made, _) = reply.status(v)?;
        match (status.as_str(), made.as_str()) {
            (_, "created") => Ok(Started {
                target: recorded,
                created: true,
            }),
            ("recorded", "taken") => {
                home("undo").await?;
                Err(taken(&request.target))
            }
            // A known request id: its first target, whoever admitted it.
            ("existing", "existing" | "taken") | ("recorded", "existing") => Ok(Started {
                target: recorded,
                created: false,
            }),
            (first, second) => Err(reply.unexpected(&format!("{first}/{second}"))),
        }
    }
}
