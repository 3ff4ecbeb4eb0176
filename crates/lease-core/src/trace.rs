//! The W3C trace context an admission carries, stored with its execution so a delivery in
//! another process, days later, continues the admitting request's trace
//! (docs/decisions/0041-traces-metrics-and-logs.md).
//!
//! [`TraceContext`] is plain data (a validated `traceparent` and optional `tracestate`
//! header value) and needs no tracing library. With feature `otel`, it converts to and from
//! OpenTelemetry contexts, `Admission::with_current_trace` captures the current
//! `tracing` span's context, and the dispatcher makes each delivery's span a child of it.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{LeaseError, Result};

#[cfg(feature = "otel")]
pub mod otel;

/// Longest `tracestate` accepted, in bytes (W3C Trace Context: a vendor must propagate at
/// least 512 bytes; longer values may be cut, so none longer is stored).
pub const MAX_TRACESTATE_BYTES: usize = 512;

/// Most `traceparent` bytes accepted (version 00 has exactly 55; later versions may append
/// fields, bounded here so a stored value stays small).
pub const MAX_TRACEPARENT_BYTES: usize = 256;

/// A W3C trace context: the `traceparent` header value (`00-<trace id>-<parent id>-<flags>`)
/// and the optional `tracestate`, validated on construction.
///
/// Stored by every backend as one text ([`TraceContext::to_stored`]): the `traceparent`,
/// then, when there is a `tracestate`, one space and the `tracestate`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TraceContext {
    traceparent: String,
    tracestate: Option<String>,
}

impl TraceContext {
    /// Validates a `traceparent` and optional `tracestate` (an empty `tracestate` is none).
    ///
    /// Errors: [`LeaseError::InvalidInput`] when `traceparent` is not a W3C traceparent
    /// (version `ff`, upper-case or non-hex digits, an all-zero trace or parent id, a wrong
    /// length) or `tracestate` is over [`MAX_TRACESTATE_BYTES`], holds a character outside
    /// printable ASCII, or a list member without `=`.
    pub fn new(traceparent: impl Into<String>, tracestate: Option<String>) -> Result<Self> {
        let traceparent = traceparent.into();
        check_traceparent(&traceparent)?;
        let tracestate = tracestate.filter(|s| !s.is_empty());
        if let Some(state) = &tracestate {
            check_tracestate(state)?;
        }
        Ok(TraceContext {
            traceparent,
            tracestate,
        })
    }

    /// The `traceparent` header value.
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The `tracestate` header value, if any.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The 32 hex digits of the trace id.
    pub fn trace_id(&self) -> &str {
        &self.traceparent[3..35]
    }

    /// The 16 hex digits of the parent (admitting) span's id.
    pub fn parent_id(&self) -> &str {
        &self.traceparent[36..52]
    }

    /// The trace flags (bit 0: sampled).
    pub fn flags(&self) -> u8 {
        u8::from_str_radix(&self.traceparent[53..55], 16).unwrap_or(0)
    }

    /// The stored text: `traceparent`, or `traceparent` + `' '` + `tracestate`.
    pub fn to_stored(&self) -> String {
        match &self.tracestate {
            Some(state) => format!("{} {state}", self.traceparent),
            None => self.traceparent.clone(),
        }
    }

    /// Parses [`TraceContext::to_stored`]'s text, with the same validation as
    /// [`TraceContext::new`].
    pub fn from_stored(stored: &str) -> Result<Self> {
        match stored.split_once(' ') {
            Some((parent, state)) => TraceContext::new(parent, Some(state.to_owned())),
            None => TraceContext::new(stored, None),
        }
    }

    /// A stored text read back by a backend: the context, or `None` (with a warning) when it
    /// does not validate. A trace context only links telemetry, so one damaged in storage
    /// never makes its execution undeliverable.
    pub fn from_stored_lenient(stored: Option<&str>) -> Option<Self> {
        let stored = stored?;
        TraceContext::from_stored(stored)
            .inspect_err(|e| tracing::warn!(error = %e, "stored trace context ignored"))
            .ok()
    }
}

impl fmt::Display for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_stored())
    }
}

impl TryFrom<String> for TraceContext {
    type Error = LeaseError;
    fn try_from(stored: String) -> Result<Self> {
        TraceContext::from_stored(&stored)
    }
}

impl From<TraceContext> for String {
    fn from(context: TraceContext) -> String {
        context.to_stored()
    }
}

fn invalid_parent(reason: &str) -> LeaseError {
    LeaseError::invalid("traceparent", reason.to_owned())
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// W3C Trace Context level 1, section 3.2: `version-traceid-parentid-flags`, lower-case
/// hex; version `ff` invalid; a version after 00 may append `-`-separated fields.
fn check_traceparent(value: &str) -> Result<()> {
    if value.len() < 55 || value.len() > MAX_TRACEPARENT_BYTES || !value.is_ascii() {
        return Err(invalid_parent("not 55 ASCII characters (version 00)"));
    }
    let version = &value[0..2];
    if !is_lower_hex(version) || version == "ff" {
        return Err(invalid_parent(
            "version is not two lower-case hex digits below ff",
        ));
    }
    let dashes = [2, 35, 52].iter().all(|&i| value.as_bytes()[i] == b'-');
    let fields = [&value[3..35], &value[36..52], &value[53..55]];
    if !dashes || !fields.iter().all(|f| is_lower_hex(f)) {
        return Err(invalid_parent(
            "not version-traceid-parentid-flags in lower-case hex",
        ));
    }
    if fields[0].bytes().all(|b| b == b'0') || fields[1].bytes().all(|b| b == b'0') {
        return Err(invalid_parent("an all-zero trace id or parent id"));
    }
    let longer_ok = version != "00" && value.as_bytes().get(55).is_none_or(|&b| b == b'-');
    if value.len() > 55 && !longer_ok {
        return Err(invalid_parent("version 00 has exactly 55 characters"));
    }
    Ok(())
}

/// W3C Trace Context section 3.3, loosely: printable ASCII, bounded, each non-empty
/// list member a `key=value`.
fn check_tracestate(value: &str) -> Result<()> {
    let invalid = |reason: String| LeaseError::invalid("tracestate", reason);
    if value.len() > MAX_TRACESTATE_BYTES {
        return Err(invalid(format!(
            "{} bytes, over the limit of {MAX_TRACESTATE_BYTES}",
            value.len()
        )));
    }
    if !value.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return Err(invalid("a character outside printable ASCII".to_owned()));
    }
    let members = value.split(',').map(str::trim).filter(|m| !m.is_empty());
    if let Some(bad) = members.clone().find(|m| !m.contains('=')) {
        return Err(invalid(format!("list member {bad:?} has no '='")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn accepts_the_spec_example_and_round_trips_its_stored_text() {
        let c = TraceContext::new(
            PARENT,
            Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE".into()),
        )
        .expect("valid");
        assert_eq!(c.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(c.parent_id(), "00f067aa0ba902b7");
        assert_eq!(c.flags(), 1);
        assert_eq!(
            TraceContext::from_stored(&c.to_stored()).expect("stored"),
            c
        );
        let bare = TraceContext::new(PARENT, Some(String::new())).expect("valid");
        assert_eq!(bare.tracestate(), None);
        assert_eq!(bare.to_stored(), PARENT);
        let json = serde_json::to_string(&c).expect("json");
        assert_eq!(
            serde_json::from_str::<TraceContext>(&json).expect("back"),
            c
        );
    }

    #[test]
    fn refuses_what_is_not_a_traceparent() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473é-00f067aa0ba902b7-01",
        ] {
            let err = TraceContext::new(bad, None).expect_err(bad);
            assert!(matches!(
                err,
                LeaseError::InvalidInput {
                    field: "traceparent",
                    ..
                }
            ));
        }
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra";
        assert!(TraceContext::new(later, None).is_ok());
    }

    #[test]
    fn refuses_a_bad_tracestate() {
        for bad in ["novalue", "a=1,\u{7}b=2", &"k=v,".repeat(200)] {
            let err = TraceContext::new(PARENT, Some(bad.to_owned())).expect_err(bad);
            assert!(matches!(
                err,
                LeaseError::InvalidInput {
                    field: "tracestate",
                    ..
                }
            ));
        }
        assert_eq!(TraceContext::from_stored_lenient(Some("garbage")), None);
    }
}
