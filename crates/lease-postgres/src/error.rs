//! How driver failures become [`LeaseError`]s, and which of them are retried.
//!
//! The rule (RFC 002 "the library never guesses"): a failure the server reported while the
//! statement ran (an `ERROR`, never `FATAL`) rolled the statement back, so nothing happened;
//! serialization failures and deadlocks among them are retried here. A failure of the
//! connection itself (I/O error, `FATAL` such as `pg_terminate_backend`, protocol breakage)
//! after a statement was sent leaves its commit outcome unknown: a write reports
//! [`LeaseError::OutcomeUnknown`] and is never retried (a claim retried there could issue two
//! tokens), a read is retried on a fresh connection.

use std::future::Future;
use std::time::Duration;

use lease_core::LeaseError;
use sqlx::Postgres;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgDatabaseError, PgSeverity};

/// The backend name used in every error.
pub(crate) const BACKEND: &str = "postgres";

/// How many times an operation runs at most when its failures are retryable.
pub(crate) const MAX_ATTEMPTS: u32 = 5;

/// What an operation does to the database, which decides how a lost connection is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Reads only: a failed attempt changed nothing and is retried.
    Read,
    /// Writes, and a repeat after an unknown outcome would reply differently (or issue a
    /// second token): an unknown outcome is reported, never retried.
    Write,
    /// Writes whose repeat replies exactly as the first attempt would have (`admit`,
    /// `request_wake`): an unknown outcome is resolved by retrying.
    IdempotentWrite,
}

/// One failed attempt: the driver error and whether the transaction is known to have been
/// rolled back (an explicit transaction that failed before its `COMMIT` was sent).
#[derive(Debug)]
pub(crate) struct Attempt {
    pub(crate) error: sqlx::Error,
    pub(crate) rolled_back: bool,
}

impl Attempt {
    /// A failure before `COMMIT` was sent: nothing of the transaction can have committed.
    pub(crate) fn before_commit(error: sqlx::Error) -> Self {
        Attempt {
            error,
            rolled_back: true,
        }
    }
}

impl From<sqlx::Error> for Attempt {
    fn from(error: sqlx::Error) -> Self {
        Attempt {
            error,
            rolled_back: false,
        }
    }
}

/// Runs one attempt that opens a transaction on its connection in a task of its own, so a
/// caller cancelled meanwhile cannot abandon its `BEGIN` half-way. sqlx 0.9.0 counts a
/// transaction only once the server's reply to `BEGIN` has arrived: a `begin` dropped
/// after sending it returns the connection to the pool inside a transaction nobody rolls
/// back (transact-rs/sqlx#4393), and the next borrower's single statements (a claim, say)
/// then run inside it, report success and are rolled back later. Detached, the attempt
/// runs to its end (commit, or its transaction dropped and rolled back) either way.
pub(crate) async fn detached<T: Send + 'static>(
    attempt: impl Future<Output = Result<T, Attempt>> + Send + 'static,
) -> Result<T, Attempt> {
    tokio::spawn(attempt).await.unwrap_or_else(|e| {
        Err(Attempt::from(sqlx::Error::Protocol(format!(
            "the attempt's task failed: {e}"
        ))))
    })
}

/// Hands a driver result back as an attempt's result. A connection that failed at the
/// connection level (I/O error, `FATAL`) is closed instead of returned to the pool: sqlx
/// would otherwise ping it on release and on the next acquire, and a server process that
/// has sent `FATAL` but not yet closed its socket leaves that ping hanging.
pub(crate) fn settle<T, E: Into<Attempt>>(
    result: Result<T, E>,
    conn: &mut PoolConnection<Postgres>,
) -> Result<T, Attempt> {
    result.map_err(|e| {
        let attempt = e.into();
        if connection_level(&attempt.error) == Some(true) {
            conn.close_on_drop();
        }
        attempt
    })
}

/// What to do after a failed attempt.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Run the operation again (after a short backoff); if attempts run out, report this.
    Retry(LeaseError),
    /// Report this now.
    Fail(LeaseError),
}

/// Backoff before retry `attempt` (1-based): 2, 4, 8, 16 ms plus a little per-process jitter
/// so that two deadlocked peers do not retry in lockstep.
pub(crate) fn backoff(attempt: u32) -> Duration {
    let base = 2u64 << attempt.min(6);
    let jitter = u64::from(std::process::id() % 3);
    Duration::from_millis(base + jitter)
}

/// Classifies a failure to obtain a connection: nothing was sent, so it is always
/// [`LeaseError::Unavailable`] (connection refused, pool exhausted or closed, server refusing
/// connections).
pub(crate) fn acquire_failed(operation: &'static str, error: sqlx::Error) -> LeaseError {
    LeaseError::Unavailable {
        backend: BACKEND,
        operation,
        source: Box::new(error),
    }
}

/// Classifies a failed attempt of `operation`.
pub(crate) fn classify(operation: &'static str, effect: Effect, attempt: Attempt) -> Verdict {
    let Attempt { error, rolled_back } = attempt;
    match connection_level(&error) {
        Some(true) => lost_connection(operation, effect, rolled_back, error),
        Some(false) => statement_failed(operation, error),
        None => Verdict::Fail(other(operation, error)),
    }
}

/// `Some(true)`: the connection failed; `Some(false)`: the server rejected the statement
/// and rolled it back; `None`: a client-side failure (decoding, configuration).
fn connection_level(error: &sqlx::Error) -> Option<bool> {
    match error {
        sqlx::Error::Database(db) => {
            let fatal = db
                .try_downcast_ref::<PgDatabaseError>()
                .is_some_and(|pg| matches!(pg.severity(), PgSeverity::Fatal | PgSeverity::Panic));
            let code = db.code();
            let connection_class = code.as_deref().is_some_and(|c| c.starts_with("08"));
            Some(fatal || connection_class)
        }
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::WorkerCrashed => Some(true),
        _ => None,
    }
}

fn lost_connection(
    operation: &'static str,
    effect: Effect,
    rolled_back: bool,
    error: sqlx::Error,
) -> Verdict {
    let source = Box::new(error);
    if rolled_back || effect == Effect::Read {
        return Verdict::Retry(LeaseError::Unavailable {
            backend: BACKEND,
            operation,
            source,
        });
    }
    let unknown = LeaseError::OutcomeUnknown {
        backend: BACKEND,
        operation,
        source,
    };
    match effect {
        Effect::IdempotentWrite => Verdict::Retry(unknown),
        Effect::Read | Effect::Write => Verdict::Fail(unknown),
    }
}

fn statement_failed(operation: &'static str, error: sqlx::Error) -> Verdict {
    let code = match &error {
        sqlx::Error::Database(db) => db.code().map(|c| c.into_owned()).unwrap_or_default(),
        _ => String::new(),
    };
    let unavailable = |error| LeaseError::Unavailable {
        backend: BACKEND,
        operation,
        source: Box::new(error),
    };
    match code.as_str() {
        // serialization_failure, deadlock_detected: rolled back, safe to run again.
        "40001" | "40P01" => Verdict::Retry(unavailable(error)),
        // query_canceled (statement_timeout), lock_not_available (lock_timeout),
        // idle_in_transaction timeout, insufficient resources: rolled back; the caller may
        // retry, but repeating a timed-out statement here would only multiply the wait.
        "57014" | "55P03" | "25P03" => Verdict::Fail(unavailable(error)),
        c if c.starts_with("53") => Verdict::Fail(unavailable(error)),
        // The claim met a token not above a stored one (LT001, raised by the schema's
        // `token_counter_behind`), or the sequence is used up (sequence_generator_limit_
        // exceeded, from nextval): rolled back, and no retry can help. The caller names the
        // schema.
        TOKEN_COUNTER_BEHIND | SEQUENCE_EXHAUSTED => Verdict::Fail(LeaseError::TokenCounter {
            location: String::from("postgres schema"),
            reason: database_message(&error),
        }),
        // invalid_schema_name, undefined_table, undefined_function: the schema is gone or
        // damaged (dropped under a running backend).
        "3F000" | "42P01" | "42883" => Verdict::Fail(LeaseError::Schema {
            location: String::from("postgres schema"),
            reason: error.to_string(),
        }),
        _ => Verdict::Fail(LeaseError::Backend {
            backend: BACKEND,
            operation,
            source: Box::new(error),
        }),
    }
}

/// SQLSTATE of the claim's refusal to issue a token not above a stored one (migration v4).
const TOKEN_COUNTER_BEHIND: &str = "LT001";
/// SQLSTATE sequence_generator_limit_exceeded: `nextval` reached the sequence's maximum.
const SEQUENCE_EXHAUSTED: &str = "2200H";

/// The server's message of a database error (the driver's text otherwise).
fn database_message(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Database(db) => db.message().to_owned(),
        other => other.to_string(),
    }
}

/// `error` with the schema named where the classification could not know it.
pub(crate) fn in_schema(error: LeaseError, schema: &str) -> LeaseError {
    match error {
        LeaseError::TokenCounter { reason, .. } => LeaseError::TokenCounter {
            location: format!("postgres schema {schema:?}"),
            reason,
        },
        other => other,
    }
}

fn other(operation: &'static str, error: sqlx::Error) -> LeaseError {
    match error {
        // Only `acquire` reports these, before anything was sent.
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed => acquire_failed(operation, error),
        sqlx::Error::ColumnDecode { .. }
        | sqlx::Error::Decode(_)
        | sqlx::Error::ColumnNotFound(_)
        | sqlx::Error::ColumnIndexOutOfBounds { .. }
        | sqlx::Error::RowNotFound
        | sqlx::Error::TypeNotFound { .. } => LeaseError::Protocol {
            backend: BACKEND,
            operation,
            reason: error.to_string(),
        },
        other => LeaseError::Backend {
            backend: BACKEND,
            operation,
            source: Box::new(other),
        },
    }
}

/// A reply that does not fit the statement that produced it.
pub(crate) fn protocol(operation: &'static str, reason: impl Into<String>) -> LeaseError {
    LeaseError::Protocol {
        backend: BACKEND,
        operation,
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io() -> sqlx::Error {
        sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "reset",
        ))
    }

    #[test]
    fn lost_connection_is_unknown_for_writes_and_retried_for_reads() {
        assert!(matches!(
            classify("claim_due", Effect::Write, io().into()),
            Verdict::Fail(LeaseError::OutcomeUnknown { .. })
        ));
        assert!(matches!(
            classify("get", Effect::Read, io().into()),
            Verdict::Retry(LeaseError::Unavailable { .. })
        ));
        assert!(matches!(
            classify("admit", Effect::IdempotentWrite, io().into()),
            Verdict::Retry(LeaseError::OutcomeUnknown { .. })
        ));
        assert!(matches!(
            classify("update", Effect::Write, Attempt::before_commit(io())),
            Verdict::Retry(LeaseError::Unavailable { .. })
        ));
    }

    #[test]
    fn decoding_failures_are_protocol_errors() {
        assert!(matches!(
            classify("get", Effect::Read, sqlx::Error::RowNotFound.into()),
            Verdict::Fail(LeaseError::Protocol { .. })
        ));
    }

    #[test]
    fn backoff_grows() {
        assert!(backoff(1) < backoff(2) && backoff(2) < backoff(3));
    }
}
