//! How values travel to the scripts and how stored strings are encoded.
//!
//! Lua numbers are doubles, exact for integers up to 2^53. Timestamps passed to a script are
//! therefore kept within ±[`MAX_EXACT_MS`] (2^52 ms, about 142,000 years either side of 1970)
//! so that a timestamp plus a lease or a redelivery delay (each clamped to the same bound)
//! still stays below 2^53. Fencing tokens come from one `INCR` counter and would need 2^53
//! claims to lose exactness.

use lease_core::{
    FencingToken, Json, LeaseError, RedeliveryPolicy, Result, StepKey, StoreOutcome, Timestamp,
};

use crate::error::protocol;
use crate::keys::SEP;

/// Largest magnitude of a timestamp a script accepts, in milliseconds (2^52).
pub(crate) const MAX_EXACT_MS: i64 = 1 << 52;

/// Checks that `t` is within ±[`MAX_EXACT_MS`]; a typed error otherwise.
pub(crate) fn exact_time(field: &'static str, t: Timestamp) -> Result<i64> {
    let ms = t.as_millis();
    if ms.unsigned_abs() > MAX_EXACT_MS.unsigned_abs() {
        return Err(LeaseError::invalid(
            field,
            format!("{ms} ms is outside the ±2^52 ms this backend stores exactly"),
        ));
    }
    Ok(ms)
}

/// The largest fencing token this backend issues: 2^53 - 1, the largest integer a Lua
/// number (a double) holds exactly. The claim script refuses to pass it
/// (`LeaseError::TokenCounter`), so no token is ever issued twice by rounding.
pub const MAX_TOKEN: u64 = (1 << 53) - 1;

/// A lease's token as the fenced scripts take it (decimal). A token above [`MAX_TOKEN`] was
/// never issued by this backend and would be rounded by Lua onto another one, so it is
/// `InvalidInput` before any script runs.
pub(crate) fn token_arg(token: FencingToken) -> Result<String> {
    if token.get() > MAX_TOKEN {
        return Err(LeaseError::invalid(
            "lease token",
            format!("{token} is above 2^53 - 1, which this backend never issues"),
        ));
    }
    Ok(token.get().to_string())
}

/// The redelivery table for `ARGV[2]`: `RedeliveryPolicy::table_ms()`, comma separated,
/// each entry clamped to [`MAX_EXACT_MS`] (a longer delay is never reached either way).
pub(crate) fn policy_arg(policy: &RedeliveryPolicy) -> String {
    let cap = MAX_EXACT_MS.unsigned_abs();
    policy
        .table_ms()
        .iter()
        .map(|d| (*d).min(cap).to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The hash field of a step record: `<step key>\x1f<attempt>`.
pub(crate) fn step_field(step_key: &StepKey, attempt: u32) -> String {
    format!("{}{SEP}{attempt}", step_key.as_str())
}

/// The stored value of a step record: `<token>|<0|1>|<response JSON>`.
pub(crate) fn step_value(token: FencingToken, done: bool, response: &Json) -> String {
    step_value_prefix(token, done) + response.as_str()
}

/// A step record's stored value up to its response, `<token>|<0|1>|` (a fenced step script
/// appends the response its body returned).
pub(crate) fn step_value_prefix(token: FencingToken, done: bool) -> String {
    format!("{}|{}|", token.get(), u8::from(done))
}

/// Parses a step field back into its key and attempt.
pub(crate) fn parse_step_field(op: &'static str, field: &str) -> Result<(StepKey, u32)> {
    let (key, attempt) = field
        .rsplit_once(SEP)
        .ok_or_else(|| protocol(op, format!("step field {field:?} has no separator")))?;
    let key = StepKey::new(key).map_err(|e| protocol(op, format!("step key: {e}")))?;
    let attempt = attempt
        .parse()
        .map_err(|_| protocol(op, format!("step attempt {attempt:?}")))?;
    Ok((key, attempt))
}

/// Parses a stored step value into (token, done, response).
pub(crate) fn parse_step_value(
    op: &'static str,
    value: &str,
) -> Result<(FencingToken, bool, Json)> {
    let mut parts = value.splitn(3, '|');
    let (Some(token), Some(done), Some(response)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(protocol(op, "step record is not token|done|response"));
    };
    let token = token
        .parse::<u64>()
        .map_err(|_| protocol(op, format!("step token {token:?}")))?;
    let done = match done {
        "0" => false,
        "1" => true,
        other => return Err(protocol(op, format!("step done flag {other:?}"))),
    };
    if response.is_empty() {
        return Err(protocol(op, "empty step response"));
    }
    Ok((
        FencingToken::new(token),
        done,
        Json::from_stored(response.to_owned()),
    ))
}

/// Parses a recorded store outcome: `<applied 0|1><has previous 0|1><previous JSON>`.
pub(crate) fn parse_outcome(op: &'static str, value: &str) -> Result<StoreOutcome> {
    let bytes = value.as_bytes();
    let flag = |i: usize| match bytes.get(i) {
        Some(b'0') => Ok(false),
        Some(b'1') => Ok(true),
        _ => Err(protocol(op, format!("store outcome {value:?}"))),
    };
    let applied = flag(0)?;
    let has_previous = flag(1)?;
    let rest = value.get(2..).unwrap_or_default();
    let previous = match (has_previous, rest.is_empty()) {
        (true, false) => Some(Json::from_stored(rest.to_owned())),
        (false, true) => None,
        _ => return Err(protocol(op, format!("store outcome {value:?}"))),
    };
    Ok(StoreOutcome { applied, previous })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rstest::rstest;

    use super::*;

    #[test]
    fn step_encoding_round_trips() {
        let key = StepKey::new("charge:card|x").expect("valid");
        let field = step_field(&key, 7);
        assert_eq!(parse_step_field("t", &field).expect("parse"), (key, 7));
        let json = Json::parse("t", r#"{"a":"x|y"}"#).expect("json");
        let value = step_value(FencingToken::new(42), true, &json);
        let (token, done, response) = parse_step_value("t", &value).expect("parse");
        assert_eq!((token.get(), done, response), (42, true, json));
    }

    #[rstest]
    #[case::empty("")]
    #[case::token_only("1")]
    #[case::no_response("1|2")]
    #[case::token_not_a_number("x|1|{}")]
    #[case::done_not_a_flag("1|2|{}")]
    #[case::empty_response("1|1|")]
    fn malformed_step_values_are_protocol_errors(#[case] bad: &str) {
        let r = parse_step_value("t", bad);
        assert!(matches!(r, Err(LeaseError::Protocol { .. })), "{bad:?}");
    }

    #[rstest]
    #[case::no_separator("nosep")]
    #[case::empty_key("\u{1f}1")]
    #[case::attempt_not_a_number("k\u{1f}x")]
    #[case::negative_attempt("k\u{1f}-1")]
    fn malformed_step_fields_are_errors(#[case] bad: &str) {
        assert!(parse_step_field("t", bad).is_err(), "{bad:?}");
    }

    #[rstest]
    #[case::empty("")]
    #[case::one_flag("1")]
    #[case::applied_not_a_flag("21")]
    #[case::previous_without_its_flag("10{}")]
    #[case::previous_flag_without_a_value("11")]
    #[case::not_flags("x0")]
    fn malformed_store_outcomes_are_errors(#[case] bad: &str) {
        assert!(parse_outcome("t", bad).is_err(), "{bad:?}");
    }

    #[test]
    fn store_outcomes_parse() {
        let ok = parse_outcome("t", "11{\"a\":1}").expect("ok");
        assert!(ok.applied && ok.previous.is_some());
        let ok = parse_outcome("t", "00").expect("ok");
        assert!(!ok.applied && ok.previous.is_none());
    }

    #[test]
    fn times_outside_the_exact_range_are_rejected() {
        assert!(exact_time("t", Timestamp::from_millis(MAX_EXACT_MS)).is_ok());
        assert!(exact_time("t", Timestamp::from_millis(-MAX_EXACT_MS)).is_ok());
        assert!(exact_time("t", Timestamp::from_millis(MAX_EXACT_MS + 1)).is_err());
        assert!(exact_time("t", Timestamp::from_millis(i64::MIN)).is_err());
    }

    #[test]
    fn tokens_beyond_the_exact_range_are_rejected() {
        assert_eq!(token_arg(FencingToken::new(7)).expect("ok"), "7");
        assert!(token_arg(FencingToken::new(MAX_TOKEN)).is_ok());
        for bad in [MAX_TOKEN + 1, u64::MAX] {
            assert!(matches!(
                token_arg(FencingToken::new(bad)),
                Err(LeaseError::InvalidInput { .. })
            ));
        }
    }

    #[test]
    fn policy_table_is_clamped() {
        let p = RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_millis(1600))
            .expect("valid");
        assert_eq!(policy_arg(&p), "100,200,400,800,1600");
        let huge = RedeliveryPolicy::new(Duration::from_millis(1), 2, Duration::MAX).expect("ok");
        assert!(
            policy_arg(&huge)
                .split(',')
                .all(|d| d.parse::<i64>().is_ok_and(|d| d <= MAX_EXACT_MS))
        );
    }
}
