//! The machine's load average (other engineers compile on the same 2 cores): recorded with
//! every measurement, and optionally waited for before a run starts.

use std::time::{Duration, Instant};

/// The 1, 5 and 15 minute load averages from `/proc/loadavg` (`None` where unavailable).
pub fn now() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// The 1-minute load average, or NaN where unavailable.
pub fn one_minute() -> f64 {
    now().map_or(f64::NAN, |l| l[0])
}

/// Waits until the 1-minute load average is below `below` or `max` has passed; returns
/// whether it got there and how long it waited.
pub fn wait_below(below: f64, max: Duration) -> (bool, Duration) {
    let started = Instant::now();
    loop {
        let load = one_minute();
        if load.is_nan() || load < below {
            return (true, started.elapsed());
        }
        if started.elapsed() >= max {
            return (false, started.elapsed());
        }
        eprintln!(
            "lease-bench: load average {load:.2} >= {below}; waiting ({:.0}s so far)",
            started.elapsed().as_secs_f64()
        );
        std::thread::sleep(Duration::from_secs(15).min(max.saturating_sub(started.elapsed())));
    }
}
