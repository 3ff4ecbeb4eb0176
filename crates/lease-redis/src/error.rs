//! Mapping redis-rs errors onto [`LeaseError`], saying whether an operation certainly did
//! not happen ([`LeaseError::Unavailable`]) or may have ([`LeaseError::OutcomeUnknown`]).

use lease_core::LeaseError;
use redis::{ErrorKind, RedisError, ServerErrorKind};

/// The backend name in errors.
pub(crate) const BACKEND: &str = "redis";

/// The code a script raises for a stored value this library never writes.
pub(crate) const CORRUPT_CODE: &str = "LEASECORRUPT";

/// The code the claim script raises, before any write, when the token counter cannot issue
/// a token above every candidate's stored token within 2^53 - 1 (the largest integer a
/// Lua double holds exactly).
pub(crate) const TOKEN_COUNTER_CODE: &str = "LEASETOKEN";

/// [`LeaseError::TokenCounter`] for a `LEASETOKEN` script error of the namespace at
/// `location`; `None` for any other error.
pub(crate) fn token_counter_error(location: &str, e: &RedisError) -> Option<LeaseError> {
    if e.code() != Some(TOKEN_COUNTER_CODE) {
        return None;
    }
    let reason = e
        .detail()
        .map(|d| d.split(" script: ").next().unwrap_or(d).trim().to_owned())
        .unwrap_or_else(|| e.to_string());
    Some(LeaseError::TokenCounter {
        location: location.to_owned(),
        reason,
    })
}

/// Whether an operation can change state: decides what a lost connection means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Reads only: a failure never leaves anything half done, so it is safe to retry.
    Read,
    /// May write: a failure after the command was sent may have committed.
    Write,
}

/// A [`LeaseError::Protocol`] for `operation`.
pub(crate) fn protocol(operation: &'static str, reason: impl Into<String>) -> LeaseError {
    LeaseError::Protocol {
        backend: BACKEND,
        operation,
        reason: reason.into(),
    }
}

/// Classifies a redis-rs error of `operation`.
///
/// - connection refused, or any failure of a read-only operation: `Unavailable`;
/// - an I/O error of a writing operation after a connection was established: the command
///   may have reached Redis and the script may have run: `OutcomeUnknown` (redis-rs does not
///   tell a request that never left the client from one whose reply was lost);
/// - server replies that refuse to run the command (`OOM`, `BUSY`, `LOADING`, `READONLY`,
///   `MASTERDOWN`, `MISCONF`, `NOREPLICAS`, `NOSCRIPT`, cluster redirections): `Unavailable`;
/// - `WRONGTYPE`: a foreign key occupies one of ours: `Schema`;
/// - a corrupt stored value reported by a script, or a reply redis-rs cannot parse on a
///   read: `Protocol`;
/// - any other script error: `OutcomeUnknown` for writes (a Lua error after a write does
///   not roll back), `Backend` for reads.
pub(crate) fn map_error(operation: &'static str, access: Access, e: RedisError) -> LeaseError {
    let code = e.code().map(str::to_owned);
    if code.as_deref() == Some(CORRUPT_CODE) || e.to_string().contains(CORRUPT_CODE) {
        return protocol(operation, format!("corrupt stored value: {e}"));
    }
    let unavailable = |e: RedisError| LeaseError::Unavailable {
        backend: BACKEND,
        operation,
        source: Box::new(e),
    };
    let unknown = |e: RedisError| LeaseError::OutcomeUnknown {
        backend: BACKEND,
        operation,
        source: Box::new(e),
    };
    let other = |e: RedisError| match access {
        Access::Write => unknown(e),
        Access::Read => LeaseError::Backend {
            backend: BACKEND,
            operation,
            source: Box::new(e),
        },
    };
    match e.kind() {
        ErrorKind::Io => {
            if e.is_connection_refusal() || access == Access::Read {
                unavailable(e)
            } else {
                unknown(e)
            }
        }
        ErrorKind::AuthenticationFailed
        | ErrorKind::InvalidClientConfig
        | ErrorKind::Client
        | ErrorKind::RESP3NotSupported => unavailable(e),
        ErrorKind::Server(kind) => match kind {
            ServerErrorKind::NoScript
            | ServerErrorKind::BusyLoading
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ReadOnly
            | ServerErrorKind::Moved
            | ServerErrorKind::Ask
            | ServerErrorKind::CrossSlot => unavailable(e),
            ServerErrorKind::NoPerm => LeaseError::Backend {
                backend: BACKEND,
                operation,
                source: Box::new(e),
            },
            _ => other(e),
        },
        ErrorKind::Extension => match code.as_deref() {
            Some("OOM" | "BUSY" | "MISCONF" | "NOREPLICAS" | "LOADING" | "NOAUTH") => {
                unavailable(e)
            }
            Some("WRONGTYPE") => LeaseError::Schema {
                location: "redis namespace".to_owned(),
                reason: format!("a key of the namespace holds a foreign value: {e}"),
            },
            _ => other(e),
        },
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => match access {
            Access::Read => protocol(operation, e.to_string()),
            Access::Write => unknown(e),
        },
        _ => other(e),
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use rstest::rstest;

    use super::*;

    fn io_error(kind: io::ErrorKind) -> RedisError {
        RedisError::from(io::Error::from(kind))
    }

    #[test]
    fn connection_refused_is_unavailable() {
        let e = map_error(
            "claim_due",
            Access::Write,
            io_error(io::ErrorKind::ConnectionRefused),
        );
        assert!(matches!(e, LeaseError::Unavailable { .. }), "{e:?}");
        assert!(e.is_retryable());
    }

    /// A write whose connection broke may have run: `OutcomeUnknown`; a read is retryable.
    #[rstest]
    fn lost_connection_on_a_write_is_outcome_unknown(
        #[values(
            io::ErrorKind::BrokenPipe,
            io::ErrorKind::ConnectionReset,
            io::ErrorKind::UnexpectedEof,
            io::ErrorKind::TimedOut
        )]
        kind: io::ErrorKind,
    ) {
        let e = map_error("acknowledge", Access::Write, io_error(kind));
        assert!(
            matches!(e, LeaseError::OutcomeUnknown { .. }),
            "{kind:?}: {e:?}"
        );
        let e = map_error("get", Access::Read, io_error(kind));
        assert!(
            matches!(e, LeaseError::Unavailable { .. }),
            "{kind:?}: {e:?}"
        );
    }

    #[rstest]
    fn refusals_by_the_server_are_unavailable(
        #[values("OOM", "BUSY", "MISCONF", "NOREPLICAS")] code: &str,
    ) {
        let e = redis::make_extension_error(code.to_owned(), Some("no".to_owned()));
        let e = map_error("admit", Access::Write, e);
        assert!(matches!(e, LeaseError::Unavailable { .. }), "{code}: {e:?}");
    }

    #[test]
    fn corrupt_values_are_protocol_and_wrongtype_is_schema() {
        let e = redis::make_extension_error(CORRUPT_CODE.to_owned(), Some("x".to_owned()));
        assert!(matches!(
            map_error("get", Access::Write, e),
            LeaseError::Protocol { .. }
        ));
        let e = redis::make_extension_error("WRONGTYPE".to_owned(), Some("x".to_owned()));
        assert!(matches!(
            map_error("get", Access::Write, e),
            LeaseError::Schema { .. }
        ));
    }
}
