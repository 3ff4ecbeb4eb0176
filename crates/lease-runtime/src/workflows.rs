//! Typed workflow handlers by workflow name ([`Workflows`]): the dispatcher runs the
//! registry as its worker, so each handler receives its input decoded and returns its
//! output, and an execution whose workflow no handler knows fails with a typed outcome.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use futures::FutureExt;
use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::delivery::Delivery;
use crate::error::DeliveryError;
use crate::worker::{Reply, Worker};
use lease_core::error::LeaseError;
use lease_core::execution::WorkflowRunOutcome;
use lease_core::ids::WorkflowName;
use lease_core::json::Json;

/// A handler with its input and output types erased: decode, run, encode.
type Handler =
    Box<dyn Fn(Delivery) -> BoxFuture<'static, Result<Reply, DeliveryError>> + Send + Sync>;

/// Handlers by workflow name, each with a typed input and output (serde), run by a
/// [`crate::Dispatcher`] as its worker:
///
/// ```text
/// let mut workflows = Workflows::new();
/// workflows.register("signup", |d: Delivery, signup: Signup| async move {
///     let id: u64 = d.step("create-user", || async { create(&signup).await }).await?;
///     Ok(Welcome { user_id: id })
/// })?;
/// let dispatcher = Dispatcher::start(backend, workflows, DispatcherOptions::new())?;
/// ```
///
/// A delivery's input is decoded into the handler's input type (absent input as `null`),
/// and the handler's output is the execution's completed outcome. An input that does not
/// decode ([`DeliveryError::BadInput`]), a workflow with no handler here
/// ([`DeliveryError::UnknownWorkflow`], an execution admitted without a workflow name too)
/// and an output that cannot be stored ([`DeliveryError::BadOutput`]) fail the execution
/// with a typed outcome instead of a redelivery (see [`DeliveryError::failure_outcome`]); a
/// handler fails on purpose with [`DeliveryError::fail`] and sleeps with
/// [`Delivery::sleep`].
#[derive(Default)]
pub struct Workflows {
    handlers: BTreeMap<WorkflowName, Handler>,
}

impl std::fmt::Debug for Workflows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.handlers.keys()).finish()
    }
}

/// Why [`Workflows::register`] refused a handler; the registry is unchanged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegisterError {
    /// A handler for this workflow is registered already.
    #[error("a handler for workflow {0} is registered already")]
    Duplicate(WorkflowName),
    /// The name is not a valid workflow name (empty, too long, control characters).
    #[error(transparent)]
    InvalidName(#[from] LeaseError),
}

impl Workflows {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `handler` for workflow `name`: it receives the delivery and its input
    /// decoded into `I`, and its `Ok(O)` completes the execution with `O` as JSON.
    ///
    /// Errors, with the registry unchanged: [`RegisterError::InvalidName`] for a name
    /// [`WorkflowName::new`] refuses, [`RegisterError::Duplicate`] for a name registered
    /// already.
    pub fn register<I, O, F, Fut>(
        &mut self,
        name: &str,
        handler: F,
    ) -> Result<&mut Self, RegisterError>
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(Delivery, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, DeliveryError>> + Send + 'static,
    {
        let name = WorkflowName::new(name)?;
        if self.handlers.contains_key(&name) {
            return Err(RegisterError::Duplicate(name));
        }
        self.handlers.insert(name, erase(handler));
        Ok(self)
    }

    /// The workflow names with a handler, in order.
    pub fn names(&self) -> impl Iterator<Item = &WorkflowName> {
        self.handlers.keys()
    }

    /// The names as one comma-separated list, for messages.
    fn known(&self) -> String {
        let names: Vec<&str> = self.handlers.keys().map(WorkflowName::as_str).collect();
        names.join(", ")
    }
}

/// `handler` as a [`Handler`]: decodes the input, runs it, stores its output.
fn erase<I, O, F, Fut>(handler: F) -> Handler
where
    I: DeserializeOwned + Send + 'static,
    O: Serialize + Send + 'static,
    F: Fn(Delivery, I) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, DeliveryError>> + Send + 'static,
{
    let handler = Arc::new(handler);
    Box::new(move |delivery: Delivery| {
        let handler = handler.clone();
        async move {
            let input: I = delivery.input_as()?;
            let workflow = delivery.workflow().cloned();
            let output = handler(delivery, input).await?;
            let outcome = Json::to_json("workflow output", &output)
                .map_err(|source| DeliveryError::BadOutput { workflow, source })?;
            Ok(Reply::Acknowledge(WorkflowRunOutcome::Completed(outcome)))
        }
        .boxed()
    })
}

#[async_trait]
impl Worker for Workflows {
    async fn run(&self, delivery: Delivery) -> Result<Reply, DeliveryError> {
        let handler = delivery.workflow().and_then(|w| self.handlers.get(w));
        match handler {
            Some(handler) => handler(delivery).await,
            None => Err(DeliveryError::UnknownWorkflow {
                workflow: delivery.workflow().cloned(),
                known: self.known(),
            }),
        }
    }
}
