//! Every backend call the dispatcher makes goes through [`guarded`]: bounded by the call
//! timeout, and a panicking adapter becomes an error instead of killing a dispatcher task
//! (a hung connection must not stall a delivery forever, a panic must not wedge the
//! dispatcher). Its fenced writes retry through [`with_retries`].

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::FutureExt;

use crate::shared::Shared;
use lease_core::error::{LeaseError, Result};

/// Runs `call` with the dispatcher's call timeout. A timeout or a panic is
/// [`LeaseError::OutcomeUnknown`]: the call may have been applied, so it is never retried
/// as if it had not been. With the feature `metrics` its latency is recorded under
/// `operation` (timeouts and panics as errors).
pub(crate) async fn guarded<T>(
    shared: &Shared,
    operation: &'static str,
    call: impl Future<Output = Result<T>>,
) -> Result<T> {
    let export = shared.metrics.export();
    export
        .timed(operation, bounded(shared, operation, call))
        .await
}

async fn bounded<T>(
    shared: &Shared,
    operation: &'static str,
    call: impl Future<Output = Result<T>>,
) -> Result<T> {
    let limit = shared.options.get_call_timeout();
    match tokio::time::timeout(limit, AssertUnwindSafe(call).catch_unwind()).await {
        Ok(Ok(result)) => result,
        Ok(Err(panic)) => Err(LeaseError::OutcomeUnknown {
            backend: "dispatcher",
            operation,
            source: format!("the backend panicked: {}", panic_message(&*panic)).into(),
        }),
        Err(_) => Err(LeaseError::OutcomeUnknown {
            backend: "dispatcher",
            operation,
            source: format!("no reply within the call timeout of {limit:?}").into(),
        }),
    }
}

/// The text of a panic payload.
pub(crate) fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// Attempts for an acknowledgement or release that fails with a retryable error.
const WRITE_ATTEMPTS: u32 = 3;
/// Pause between such attempts.
const WRITE_BACKOFF: Duration = Duration::from_millis(50);

/// Runs a fenced dispatcher write, retrying errors that certainly changed nothing. `None`
/// when it failed: the lease is then left to expire and the execution is delivered again.
pub(crate) async fn with_retries<'a, T, F, Fut>(
    shared: &Shared,
    operation: &str,
    mut call: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, LeaseError>> + 'a,
{
    let mut attempt = 1;
    loop {
        if shared.killed.load(Ordering::SeqCst) {
            return None;
        }
        match call().await {
            Ok(v) => return Some(v),
            Err(e) => {
                shared.metrics.backend_error();
                if e.is_retryable() && attempt < WRITE_ATTEMPTS {
                    tracing::warn!(error = %e, operation, attempt, "retrying");
                    attempt += 1;
                    tokio::time::sleep(WRITE_BACKOFF).await;
                    continue;
                }
                tracing::error!(
                    error = %e,
                    operation,
                    "failed; the lease will expire and the execution be delivered again"
                );
                return None;
            }
        }
    }
}
