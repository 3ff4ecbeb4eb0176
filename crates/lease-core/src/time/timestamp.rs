//! The millisecond timestamp every record and clock uses, on its own: it names nothing else
//! of the crate, so the limits and the errors can use it without a circle through
//! [`crate::time`]'s lease-duration checks.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The end of time. As a [`crate::ClaimRequest::now`] it means "claim at the backend's
    /// own clock" (backends use `min(now, backend clock)`), which saves the `now()` round
    /// trip before a claim.
    pub const MAX: Timestamp = Timestamp(i64::MAX);

    /// The beginning of time: as a wake-up signal it means "claimable now".
    pub const MIN: Timestamp = Timestamp(i64::MIN);

    /// Wraps milliseconds since the Unix epoch.
    pub const fn from_millis(millis: i64) -> Self {
        Timestamp(millis)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// This instant plus `d`, saturating at the end of time.
    pub fn saturating_add(self, d: Duration) -> Self {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_add(ms))
    }

    /// Time from `earlier` to `self`, zero when `earlier` is later.
    pub fn saturating_since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}
