//! The machine's true clock, which libfaketime cannot fake.
//!
//! Under `--clock-skew` every runtime process runs with libfaketime preloaded, which
//! intercepts libc's `clock_gettime` and so fakes Rust's `SystemTime` and `Instant` (and
//! tokio's timers): the library under test sees the faked clock. The op log, the effect log
//! and everything else the checkers compare across processes must instead be stamped with
//! one clock shared by every process, so they read the clock through rustix, which calls
//! the kernel's vDSO (or the system call) directly, past any `LD_PRELOAD` interposer. Every
//! process, the controller too, stamps its logs with these functions.

use rustix::time::{ClockId, Timespec, clock_gettime};

fn micros(t: Timespec) -> i64 {
    t.tv_sec
        .saturating_mul(1_000_000)
        .saturating_add(t.tv_nsec / 1_000)
}

/// Microseconds since the Unix epoch on the machine's true realtime clock.
pub fn realtime_us() -> i64 {
    micros(clock_gettime(ClockId::Realtime))
}

/// Microseconds on the machine's true monotonic clock (since an arbitrary start).
pub fn monotonic_us() -> i64 {
    micros(clock_gettime(ClockId::Monotonic))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Instant, SystemTime, UNIX_EPOCH};

    /// Without libfaketime (the test process has none) the true clock and std agree.
    #[test]
    fn agrees_with_std_when_nothing_fakes_the_clock() {
        let std_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        assert!((realtime_us() - std_us).abs() < 1_000_000);
        let (m0, i0) = (monotonic_us(), Instant::now());
        while monotonic_us() - m0 < 20_000 {
            std::hint::spin_loop();
        }
        let std_us = i64::try_from(i0.elapsed().as_micros()).unwrap_or(i64::MAX);
        let true_us = monotonic_us() - m0;
        assert!((true_us - std_us).abs() < 5_000, "{true_us} vs {std_us}");
    }
}
