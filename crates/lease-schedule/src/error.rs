//! Typed errors of recurring admissions (docs/decisions/0035-schedules.md: bad input is a typed error
//! and changes nothing).

use lease_core::LeaseError;

/// Everything that can go wrong with a schedule. The input variants are returned before
/// anything is written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// The schedule name is empty, too long for the derived execution id
    /// ([`crate::MAX_NAME_BYTES`]) or holds a control character.
    #[error("invalid schedule name {name:?}: {reason}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// Why it was refused.
        reason: String,
    },
    /// The cron expression does not parse.
    #[error("invalid cron expression {expression:?}: {reason}")]
    InvalidCron {
        /// The expression as given.
        expression: String,
        /// The parser's message.
        reason: String,
    },
    /// The cron expression parses but has no occurrence (after the Unix epoch at
    /// construction, after the backend clock at registration): `0 0 30 2 *`, or a year
    /// field that lies in the past.
    #[error("cron expression {expression:?} never fires")]
    NeverFires {
        /// The expression as given.
        expression: String,
    },
    /// The time zone is not an IANA zone name known to `chrono-tz`.
    #[error("unknown time zone {zone:?} (an IANA name such as Europe/Berlin or UTC)")]
    UnknownZone {
        /// The zone as given.
        zone: String,
    },
    /// Another option is out of its documented range (grace window, catch-up bound, the
    /// workflow name or input).
    #[error("invalid {field}: {reason}")]
    InvalidOption {
        /// Which option.
        field: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// A schedule of this name is registered with a different definition; nothing changed.
    /// [`crate::Scheduler::replace`] replaces it explicitly.
    #[error("schedule {name:?} is registered with a different definition (replace it explicitly)")]
    Conflict {
        /// The schedule name.
        name: String,
    },
    /// A stored schedule entry cannot be decoded.
    #[error("stored schedule {name:?} cannot be decoded: {reason}")]
    CorruptState {
        /// The schedule name (the entry key).
        name: String,
        /// The decoder's message.
        reason: String,
    },
    /// A backend call failed.
    #[error(transparent)]
    Backend(#[from] LeaseError),
}

/// Result alias of this crate.
pub type Result<T, E = ScheduleError> = std::result::Result<T, E>;
