//! Opening the backend a URL names, through the facade ([`lease::open()`]), within bounded
//! time; and running each backend call within bounded time.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use lease::{BackendUrl, LeaseBackend, LeaseError, OpenError, OpenOptions, Target};

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

    /// [`Limits::call`] for a capability a backend may lack: its `Unsupported` answer becomes
    /// a failure naming the backend (`backend`, its name) and the capability (`what`), rather
    /// than the trait default's generic "adapter".
    pub async fn call_optional<T>(
        &self,
        backend: &str,
        what: &str,
        operation: &str,
        call: impl Future<Output = Result<T, LeaseError>>,
    ) -> Result<T, Failure> {
        let answered = self
            .call(operation, async { Ok::<_, Failure>(call.await) })
            .await?;
        answered.map_err(|e| match e {
            LeaseError::Unsupported { .. } => Failure::unsupported(backend, what),
            e => e.into(),
        })
    }
}

/// The command that creates or upgrades a store's schema; every other command only
/// verifies it.
pub const MIGRATE_COMMAND: &str = "lease migrate";

/// Opens `url`, creating or upgrading its schema only when `migrate` names a lock timeout
/// (`lease migrate`): any other command refuses a schema at another version (or none) with
/// the command that migrates it, so it never alters tables under live traffic nor creates a
/// mistyped namespace. A URL the facade cannot parse is a usage error; a SQLite file that
/// does not exist is refused (an operator command must not create an empty store at a
/// mistyped path); a server that does not answer within `limits.connect` is a failure. A
/// migrating open is not bounded so (an index build on a large table takes as long as it
/// takes; each of its lock waits is bounded by the lock timeout, the connection itself by
/// the backend's own connect and acquire timeouts).
pub async fn open(
    url: &str,
    limits: &Limits,
    migrate: Option<Duration>,
) -> Result<Arc<dyn LeaseBackend>, Failure> {
    let parsed = BackendUrl::parse(url).map_err(|e| Failure::Usage(e.to_string()))?;
    if let Target::SqliteFile(path) = &parsed.target
        && !path.is_file()
    {
        return Err(Failure::Failed(format!(
            "no SQLite database file at {}",
            path.display()
        )));
    }
    let mut options = OpenOptions::new().migrate(migrate.is_some());
    if let Some(lock_timeout) = migrate {
        options = options.lock_timeout(lock_timeout);
    }
    let bound = match migrate {
        Some(_) => Duration::MAX,
        None => limits.connect,
    };
    let opening = lease::open_with(url, &options);
    match tokio::time::timeout(bound, opening).await {
        Ok(Ok(opened)) => Ok(opened.shared),
        Ok(Err(OpenError::Backend(e @ LeaseError::SchemaMismatch { .. }))) => Err(Failure::Failed(
            format!("{e}: run `{MIGRATE_COMMAND}` to create or upgrade it"),
        )),
        Ok(Err(OpenError::Backend(e))) => Err(Failure::Failed(e.to_string())),
        Ok(Err(e)) => Err(Failure::Usage(e.to_string())),
        Err(_) => Err(Failure::Failed(format!(
            "could not connect to the {} backend within {} (--connect-timeout)",
            parsed.backend_name(),
            humantime::format_duration(limits.connect)
        ))),
    }
}
