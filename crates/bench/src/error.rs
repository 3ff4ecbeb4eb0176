//! The bench's one error type: a failed setup, library call or raw statement stops the run
//! with a message naming what failed (a benchmark must never report numbers for work that
//! did not happen).

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A library call failed.
    #[error("{context}: {source}")]
    Lease {
        /// What the bench was doing.
        context: String,
        /// The library's error.
        source: lease_core::LeaseError,
    },
    /// A raw statement or script failed, or answered something other than success.
    #[error("raw {backend} {operation}: {reason}")]
    Raw {
        /// Which backend.
        backend: &'static str,
        /// Which operation.
        operation: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// The command line, environment or output directory is unusable.
    #[error("{0}")]
    Setup(String),
}

/// Result alias of the bench.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// Adds context to a library error.
pub trait Context<T> {
    /// Wraps the error with what the bench was doing.
    fn context(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> Context<T> for lease_core::Result<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| BenchError::Lease {
            context: what(),
            source,
        })
    }
}

/// A raw-baseline failure.
pub fn raw(backend: &'static str, operation: &'static str, reason: impl ToString) -> BenchError {
    BenchError::Raw {
        backend,
        operation,
        reason: reason.to_string(),
    }
}
