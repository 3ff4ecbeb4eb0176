//! Time: millisecond timestamps and the clock abstraction.
//!
//! Clocks decide only *when* an execution becomes claimable; tokens decide whose writes count.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{LeaseError, Result};
use crate::limits::{MAX_LEASE, MIN_LEASE};

mod timestamp;

pub use timestamp::Timestamp;

/// Validates a lease or renewal duration ([`MIN_LEASE`]..=[`MAX_LEASE`]) and returns it in
/// whole milliseconds. Sub-millisecond parts are rounded up so a positive duration never
/// becomes zero.
pub fn lease_millis(field: &'static str, d: Duration) -> Result<i64> {
    if d < MIN_LEASE {
        return Err(LeaseError::invalid(
            field,
            format!("{d:?} is shorter than {MIN_LEASE:?}"),
        ));
    }
    if d > MAX_LEASE {
        return Err(LeaseError::invalid(
            field,
            format!("{d:?} is longer than {MAX_LEASE:?}"),
        ));
    }
    let ms = d.as_millis() + u128::from(!d.subsec_nanos().is_multiple_of(1_000_000));
    Ok(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// A source of the current time.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The operating system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        Timestamp::from_millis(ms)
    }
}

/// A clock that moves only when told to. Clones share one time, so a test can hand the
/// same clock to a backend and its peers and advance them all at once.
#[derive(Debug, Clone)]
pub struct ManualClock {
    millis: Arc<AtomicI64>,
}

impl ManualClock {
    /// A manual clock starting at `start`.
    pub fn new(start: Timestamp) -> Self {
        ManualClock {
            millis: Arc::new(AtomicI64::new(start.as_millis())),
        }
    }

    /// A manual clock starting at a fixed, realistic instant (2026-01-01T00:00:00Z).
    pub fn starting_now() -> Self {
        Self::new(Timestamp::from_millis(1_767_225_600_000))
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        self.millis.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the clock to `t` (may move backwards: tests of clock skew do that).
    pub fn set(&self, t: Timestamp) {
        self.millis.store(t.as_millis(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(self.millis.load(Ordering::SeqCst))
    }
}

/// A shared, dynamically chosen clock.
pub type SharedClock = Arc<dyn Clock>;
