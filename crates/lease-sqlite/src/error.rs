//! Mapping SQLite failures onto [`LeaseError`].
//!
//! Busy/locked after the bounded retry -> `Unavailable` (nothing happened, retry is safe);
//! a row this library cannot read -> `Protocol`; a failure while committing -> `OutcomeUnknown`;
//! anything else (I/O, full disk, ...) -> `Backend`.

use lease_core::LeaseError;
use rusqlite::ErrorCode;

/// The backend name used in every error.
pub(crate) const BACKEND: &str = "sqlite";

/// An error inside a blocking operation, before it is named with the operation.
#[derive(Debug)]
pub(crate) enum OpError {
    /// A driver error (maybe busy: then the transaction is retried).
    Sqlite(rusqlite::Error),
    /// A typed error to return as is (bad input, unknown execution, lost ...).
    Lease(LeaseError),
    /// A stored value this library cannot interpret.
    Corrupt(String),
}

impl From<rusqlite::Error> for OpError {
    fn from(e: rusqlite::Error) -> Self {
        OpError::Sqlite(e)
    }
}

impl From<LeaseError> for OpError {
    fn from(e: LeaseError) -> Self {
        OpError::Lease(e)
    }
}

/// Result of a blocking operation.
pub(crate) type OpResult<T> = Result<T, OpError>;

/// True for errors that mean "another connection holds a lock": retry the whole transaction.
pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// True for "this file is not a SQLite database".
pub(crate) fn is_not_a_database(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(ErrorCode::NotADatabase))
}

impl OpError {
    /// Names the error with its operation.
    pub(crate) fn into_lease(self, operation: &'static str) -> LeaseError {
        match self {
            OpError::Lease(e) => e,
            OpError::Corrupt(reason) => LeaseError::Protocol {
                backend: BACKEND,
                operation,
                reason,
            },
            OpError::Sqlite(e) => sqlite_error(operation, e),
        }
    }
}

/// Maps a driver error that was not retried (or whose retries ran out).
pub(crate) fn sqlite_error(operation: &'static str, e: rusqlite::Error) -> LeaseError {
    use rusqlite::Error as E;
    if is_busy(&e) {
        return LeaseError::Unavailable {
            backend: BACKEND,
            operation,
            source: Box::new(e),
        };
    }
    match e {
        E::FromSqlConversionFailure(..)
        | E::IntegralValueOutOfRange(..)
        | E::InvalidColumnType(..)
        | E::Utf8Error(..)
        | E::QueryReturnedNoRows
        | E::QueryReturnedMoreThanOneRow => LeaseError::Protocol {
            backend: BACKEND,
            operation,
            reason: e.to_string(),
        },
        other => LeaseError::Backend {
            backend: BACKEND,
            operation,
            source: Box::new(other),
        },
    }
}

/// The connection thread is gone (it could not start, or it stopped): nothing was done.
pub(crate) fn thread_gone(operation: &'static str) -> LeaseError {
    LeaseError::Unavailable {
        backend: BACKEND,
        operation,
        source: "the SQLite connection thread is not running".into(),
    }
}
