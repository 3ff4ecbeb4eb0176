//! Samples, and sizing the work queue of a measurement from a short probe so that it
//! neither runs dry early nor takes long to set up.

use std::time::Duration;

use serde::Serialize;

use crate::args::Kind;

/// What one measurement counted, over how long.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sample {
    /// Items completed (leases claimed, operations, executions).
    pub count: u64,
    /// Wall-clock time they took.
    pub secs: f64,
}

impl Sample {
    /// Items per second.
    pub fn rate(&self) -> f64 {
        if self.secs > 0.0 {
            self.count as f64 / self.secs
        } else {
            0.0
        }
    }
}

/// How long a probe runs.
pub const PROBE: Duration = Duration::from_millis(400);

/// The most executions one measurement admits (a queue that lasts the whole measurement
/// at the probed rate, with a margin, up to this).
pub fn cap(kind: Kind) -> u64 {
    match kind {
        // The reference backend scans every execution on each claim: keep its queue short.
        Kind::Memory => 3_000,
        _ => 400_000,
    }
}

/// How many more executions to admit so that a measurement of `duration` at the probed
/// `rate` does not run dry, given `waiting` still due from the probe.
pub fn plan(kind: Kind, rate: f64, duration: Duration, waiting: u64) -> u64 {
    let wanted = (rate * duration.as_secs_f64() * 1.3).ceil();
    let wanted = if wanted.is_finite() && wanted > 0.0 {
        wanted as u64
    } else {
        0
    };
    wanted.min(cap(kind)).saturating_sub(waiting)
}
