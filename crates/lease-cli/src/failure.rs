//! Why a command stopped: a one-line message and the exit status it maps to.

use std::fmt;
use std::process::ExitCode;

/// A command that did not complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The operation failed: unreachable server, unknown id, backend error (exit 1).
    Failed(String),
    /// Bad usage: a URL, id or option the command cannot use (exit 2, as clap's own).
    Usage(String),
    /// `cancel` of an execution that had completed or failed: nothing changed (exit 3).
    AlreadyEnded(String),
}

impl Failure {
    /// The process exit status.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Failure::Failed(_) => ExitCode::from(1),
            Failure::Usage(_) => ExitCode::from(2),
            Failure::AlreadyEnded(_) => ExitCode::from(3),
        }
    }

    /// A capability the `backend` (its name) does not have: exit status 1 (nothing was changed).
    pub fn unsupported(backend: &str, what: &str) -> Self {
        Failure::Failed(format!("the {backend} backend does not support {what}"))
    }
}

impl fmt::Display for Failure {
    /// The message on one line: line breaks and other control characters become spaces.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (Failure::Failed(m) | Failure::Usage(m) | Failure::AlreadyEnded(m)) = self;
        let line: String = m
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        f.write_str(line.trim())
    }
}

impl From<lease::LeaseError> for Failure {
    fn from(e: lease::LeaseError) -> Self {
        Failure::Failed(e.to_string())
    }
}

impl From<lease::schedule::ScheduleError> for Failure {
    fn from(e: lease::schedule::ScheduleError) -> Self {
        Failure::Failed(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line() {
        let f = Failure::Failed("connection refused\n  at host\r\n".into());
        assert_eq!(f.to_string(), "connection refused   at host");
        assert_eq!(Failure::Usage("x".into()).exit_code(), ExitCode::from(2));
    }

    #[test]
    fn an_unsupported_capability_names_the_backend() {
        let f = Failure::unsupported("redis", "rate limits");
        assert_eq!(
            f.to_string(),
            "the redis backend does not support rate limits"
        );
        assert_eq!(f.exit_code(), ExitCode::from(1));
    }
}
