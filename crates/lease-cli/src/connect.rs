//! Opening the backend a URL names, through the facade ([`lease::open()`]), within bounded
//! time; and running each backend call within bounded time.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use lease::{BackendUrl, LeaseBackend, OpenError, Target};

use crate::failure::Failure;

/// The time limits of one invocation.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// For opening the backend.
    pub connect: Duration,
    /// For each backend call after that.
    pub call: Duration,
}

impl Limits {
    /// Runs one backend call, `operation`, within [`Limits::call`].
    pub async fn call<T, E: Into<Failure>>(
        &self,
        operation: &str,
        call: impl Future<Output = Result<T, E>>,
    ) -> Result<T, Failure> {
        match tokio::time::timeout(self.call, call).await {
            Ok(result) => result.map_err(Into::into),
            Err(_) => Err(Failure::Failed(format!(
                "{operation} did not answer within {}",
                humantime::format_duration(self.call)
            ))),
        }
    }
}

/// Opens `url`. A URL the facade cannot parse is a usage error; a SQLite file that does not
/// exist is refused (an operator command must not create an empty store at a mistyped
/// path); a server that does not answer within `limits.connect` is a failure.
pub async fn open(url: &str, limits: &Limits) -> Result<Arc<dyn LeaseBackend>, Failure> {
    let parsed = BackendUrl::parse(url).map_err(|e| Failure::Usage(e.to_string()))?;
    if let Target::SqliteFile(path) = &parsed.target
        && !path.is_file()
    {
        return Err(Failure::Failed(format!(
            "no SQLite database file at {}",
            path.display()
        )));
    }
    match tokio::time::timeout(limits.connect, lease::open(url)).await {
        Ok(Ok(backend)) => Ok(backend),
        Ok(Err(OpenError::Backend(e))) => Err(Failure::Failed(e.to_string())),
        Ok(Err(e)) => Err(Failure::Usage(e.to_string())),
        Err(_) => Err(Failure::Failed(format!(
            "could not connect to the {} backend within {} (--connect-timeout)",
            parsed.backend_name(),
            humantime::format_duration(limits.connect)
        ))),
    }
}
