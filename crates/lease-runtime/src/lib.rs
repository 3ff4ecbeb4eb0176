//! The runtime of execution leases (RFC 002 "Delivery concurrency", "Leases" and the
//! replay rule): the dispatcher that claims, renews and acknowledges, its workers' delivery
//! context, and the step driver.
//!
//! It is built only on the client traits of [`lease_core`], so it runs on every backend and
//! on an adapter written outside this repository; a backend's fenced application
//! transactions take a [`Delivery`] so their steps follow the same replay rule.
//!
//! ```text
//! let dispatcher = Dispatcher::start(backend, |d: Delivery| async move {
//!     let order: Json = d.step("load", || async { load().await }).await?;
//!     let receipt: Json = d.step("charge", || async { charge(&order).await }).await?;
//!     Ok(Reply::Acknowledge(WorkflowRunOutcome::Completed(receipt)))
//! }, DispatcherOptions::new().concurrency(8))?;
//! ```
//!
//! Or typed handlers by workflow name ([`Workflows`]; input decoded, output stored):
//!
//! ```text
//! let mut workflows = Workflows::new();
//! workflows.register("checkout", |d: Delivery, order: Order| async move {
//!     let receipt: Receipt = d.step("charge", || async { charge(&order).await }).await?;
//!     d.sleep("cool-off", Duration::from_secs(3600)).await?; // durable: suspends
//!     Ok(receipt)
//! })?;
//! let dispatcher = Dispatcher::start(backend, workflows, DispatcherOptions::new())?;
//! backend.admit(&Admission::typed(id, "checkout", &order)?).await?;
//! dispatcher.idle().await;
//! ```
//!
//! # Cargo features
//!
#![doc = document_features::document_features!()]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod ack_queue;
mod acks;
mod call;
pub mod delivery;
mod effect;
pub mod error;
mod export;
mod growth;
mod horizon;
mod idle;
pub mod metrics;
pub mod options;
mod outcome;
mod prefetch;
mod retention;
mod run;
pub mod runtime;
mod shared;
mod sleep;
pub mod step;
pub mod typed;
pub mod worker;
pub mod workflows;

pub use self::metrics::{DispatcherMetrics, MetricsSnapshot};
pub use delivery::{Delivery, SharedBackend};
pub use error::DeliveryError;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub use export::names as metric_names;
pub use options::DispatcherOptions;
pub use runtime::{Dispatcher, ShutdownReport};
pub use step::{MAX_STEP_ATTEMPTS, STEP_ATTEMPT, StepSlot, next_step_attempt};
pub use typed::TypedAdmission;
pub use worker::{Reply, Worker};
pub use workflows::{RegisterError, Workflows};

#[cfg(test)]
mod effect_tests;
#[cfg(all(test, feature = "metrics"))]
mod export_tests;
#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod prefetch_tests;
#[cfg(test)]
mod probe_tests;
#[cfg(test)]
mod sleep_tests;
#[cfg(test)]
mod test_backend;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod typed_tests;
