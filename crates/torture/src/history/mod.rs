//! The history checker: reads a log of every claim, renewal, fenced
//! write, acknowledgement and release, and reports every violation of the lease invariants.
//!
//! [`op`] holds the log's record, [`violation`] what the checker reports, [`check`](mod@check) the
//! driver; each numbered rule has its own module ([`tokens`] 1, [`live`] 2, [`stale`] 3,
//! [`steps`] 4, [`outcomes`] 5, [`cancel`] 6, [`keys`] 7, [`pause`] 8, [`priority`] 9,
//! [`schedule`] 10, [`attempts`] 11, [`rate`] 12, [`ordering`] 13); [`scoped`] reads the
//! settings rules 11 to 13 depend on.

mod attempts;
mod cancel;
mod check;
mod keys;
mod live;
mod op;
mod options;
mod ordering;
mod outcomes;
mod pause;
mod priority;
mod rate;
mod schedule;
mod scoped;
mod stale;
mod steps;
mod tokens;
mod violation;

#[cfg(test)]
mod attempts_tests;
#[cfg(test)]
mod controls_tests;
#[cfg(test)]
mod keyed_tests;
#[cfg(test)]
mod keys_tests;
#[cfg(test)]
mod tests;

pub use attempts::peak_attempts;
pub use cancel::{ALREADY_CANCELLED, ALREADY_TERMINAL, CANCELLED};
pub use check::check;
pub use keys::peak_live_leases;
pub use op::{Op, OpKind, OpResult, Rate, error_result};
pub use options::CheckOptions;
pub use ordering::ordered_backlog;
pub use rate::peak_rate_window;
pub use violation::Violation;
