//! The value parsers of the command line's durations, lease and switches (clap's
//! `value_parser`s of `run`, `runtime` and the failover options), and the default seed.

use std::time::Duration;

use crate::oplog::now_us;

/// The longest `--duration`, `--liveness` and `--fault-every` (a day: far past any run, and
/// far from the overflow of an `Instant` plus it).
const MAX_SPAN: Duration = Duration::from_secs(24 * 60 * 60);

/// The shortest lease a run accepts, ms (renewals every third of it must still fit).
const MIN_LEASE_MS: u64 = 30;

/// The default `--seed`: from the clock (the run prints it, so it can be replayed).
pub fn clock_seed() -> u64 {
    (now_us() as u64) % 1_000_000
}

/// A span written as humantime writes them (`90s`, `1m 30s`, `500ms`) or as a bare number
/// in `unit` (`60` seconds, `1.5`); more than 0 and at most a day.
fn span(text: &str, unit: Duration) -> Result<Duration, String> {
    let t = text.trim();
    let d = match t.parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 => {
            Duration::try_from_secs_f64(unit.as_secs_f64() * n).ok()
        }
        Ok(_) => None,
        Err(_) => humantime::parse_duration(t).ok(),
    };
    match d {
        Some(d) if !d.is_zero() && d <= MAX_SPAN => Ok(d),
        _ => Err(format!(
            "not a duration above 0 and up to 24h (a bare number is in {}, or write e.g. \
             90s, 1m 30s, 500ms)",
            if unit == Duration::from_secs(1) {
                "seconds"
            } else {
                "milliseconds"
            }
        )),
    }
}

/// clap's value parser of a duration whose bare number is in seconds (`--duration 60`).
pub fn secs(text: &str) -> Result<Duration, String> {
    span(text, Duration::from_secs(1))
}

/// clap's value parser of a duration whose bare number is in milliseconds
/// (`--fault-every 2000`).
pub fn millis(text: &str) -> Result<Duration, String> {
    span(text, Duration::from_millis(1))
}

/// clap's value parser of `--lease-ms`: a duration whose bare number is in milliseconds,
/// at least 30 ms and at most the dispatcher's longest lease, as whole milliseconds.
pub fn lease_ms(text: &str) -> Result<u64, String> {
    let d = millis(text)?;
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if ms < MIN_LEASE_MS || d > lease_core::limits::MAX_LEASE {
        return Err(format!(
            "the lease must be at least {MIN_LEASE_MS} ms and at most {}",
            humantime::format_duration(lease_core::limits::MAX_LEASE)
        ));
    }
    Ok(ms)
}

/// clap's value parser of `--failover-lag`: `on` or `off`.
pub fn on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err("on or off".to_owned()),
    }
}
