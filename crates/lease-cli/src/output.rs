//! What a command prints: a table for people, or JSON (`--json`) for programs.

use std::time::{Duration, UNIX_EPOCH};

use lease::Timestamp;
use serde_json::Value;

/// A command's result in both forms; `main` prints the one asked for.
#[derive(Debug, Clone)]
pub struct Output {
    /// The readable form (tables), ending in a newline.
    pub text: String,
    /// The `--json` form.
    pub json: Value,
}

impl Output {
    /// The form to print.
    pub fn render(&self, json: bool) -> String {
        if json {
            format!("{}\n", self.json)
        } else {
            self.text.clone()
        }
    }
}

/// The latest instant shown as a date (the end of year 9999, humantime's range).
const LAST_DATE_MS: i64 = 253_402_300_799_999;

/// A backend-clock instant as an RFC 3339 UTC date with milliseconds, or its milliseconds
/// when it lies outside 1970..=9999; `-` for none.
pub fn instant(t: Option<Timestamp>) -> String {
    let Some(t) = t else {
        return "-".to_owned();
    };
    match u64::try_from(t.as_millis()) {
        Ok(ms) if t.as_millis() <= LAST_DATE_MS => {
            humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
        }
        _ => format!("{} ms", t.as_millis()),
    }
}

/// How long until `at` from `now`, in seconds (tenths below ten seconds); `0.0 s` once
/// past, `-` for none.
pub fn expires_in(at: Option<Timestamp>, now: Timestamp) -> String {
    match at {
        Some(at) => seconds(at.as_millis().saturating_sub(now.as_millis()).max(0)),
        None => "-".to_owned(),
    }
}

/// A span of `ms` milliseconds in seconds: whole ones from ten seconds up, else tenths.
pub fn seconds(ms: i64) -> String {
    if ms >= 10_000 {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// Any serializable value as JSON (lease's types serialize infallibly; a failure is shown
/// as its message rather than a panic).
pub fn to_json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_else(|e| Value::String(format!("unserializable: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants() {
        assert_eq!(instant(None), "-");
        assert_eq!(
            instant(Some(Timestamp::from_millis(1_500))),
            "1970-01-01T00:00:01.500Z"
        );
        assert_eq!(instant(Some(Timestamp::from_millis(-1))), "-1 ms");
        assert_eq!(instant(Some(Timestamp::MAX)), format!("{} ms", i64::MAX));
        assert!(instant(Some(Timestamp::from_millis(LAST_DATE_MS))).starts_with("9999-12-31"));
    }

    #[test]
    fn spans_until_an_expiry() {
        let now = Timestamp::from_millis(1_000);
        assert_eq!(
            expires_in(Some(Timestamp::from_millis(3_500)), now),
            "2.5 s"
        );
        assert_eq!(
            expires_in(Some(Timestamp::from_millis(61_000)), now),
            "60 s"
        );
        assert_eq!(expires_in(Some(Timestamp::from_millis(500)), now), "0.0 s");
        assert_eq!(expires_in(None, now), "-");
    }
}
