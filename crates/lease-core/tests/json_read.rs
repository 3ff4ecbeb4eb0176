//! Reading a payload never silently yields something else: `to_value` and `Serialize`
//! return the payload's exact meaning or an error, never `null`.

use lease_core::{Json, LeaseError};
use serde_json::Value;

/// A payload parses back to the value it was built from.
#[test]
fn to_value_round_trips() {
    let value = serde_json::json!({"b": [1, -2, 2.5, "x", null, true], "a": {"c": {}}});
    let json = Json::from_value("t", &value).expect("json");
    assert_eq!(json.to_value().expect("readable"), value);
    assert_eq!(Json::null().to_value().expect("null"), Value::Null);
}

/// Stored text that does not parse (corrupt row, or nesting serde_json will not read) is an
/// error, not `null`.
#[test]
fn unreadable_text_is_an_error_not_null() {
    for text in [
        format!("{}{}", "[".repeat(200), "]".repeat(200)),
        "[1,".to_owned(),
    ] {
        let json = Json::from_stored(text.clone());
        let r = json.to_value();
        assert!(
            matches!(r, Err(LeaseError::MalformedJson { .. })),
            "{:.20}: {r:?}",
            text
        );
    }
}

/// A number `serde_json::Value` cannot hold exactly (without serde_json's
/// `arbitrary_precision`) is an error from `to_value` and from `Serialize`, never a rounded
/// f64; `decode` into a type that can hold it and `as_str` stay exact.
#[test]
fn inexact_numbers_are_an_error_not_rounded() {
    let big = "123456789012345678901234567890";
    let json = Json::parse("t", &format!("{{\"n\":{big}}}")).expect("json");
    let via_value = json.to_value();
    let serialized = serde_json::to_string(&json);
    if cfg!(feature = "test-arbitrary-precision") {
        let value = via_value.expect("exact with arbitrary_precision");
        assert_eq!(value["n"].to_string(), big);
        assert_eq!(serialized.expect("exact"), json.as_str());
    } else {
        assert!(
            matches!(via_value, Err(LeaseError::InvalidInput { .. })),
            "{via_value:?}"
        );
        assert!(serialized.is_err(), "{serialized:?}");
    }
    #[derive(serde::Deserialize)]
    struct N {
        n: u128,
    }
    assert_eq!(
        json.decode::<N>().expect("decode").n,
        123_456_789_012_345_678_901_234_567_890
    );
}

/// `Serialize` writes the payload as JSON (not as a string of JSON).
#[test]
fn serialize_embeds_the_payload() {
    let json = Json::parse("t", r#"{"b":1,"a":[true]}"#).expect("json");
    let outer = serde_json::to_string(&serde_json::json!({ "p": json })).expect("serialize");
    assert_eq!(outer, r#"{"p":{"a":[true],"b":1}}"#);
}

/// Valid JSON of another shape than the type asked for is `WrongShape`, naming the type and
/// what differs, never "not valid JSON"; text that does not parse stays `MalformedJson`.
#[test]
fn decoding_valid_json_of_another_shape_says_so() {
    #[derive(Debug, serde::Deserialize)]
    struct Welcome {
        #[allow(dead_code)]
        user_id: u64,
    }
    let json = Json::parse("input", r#"{"user_id":"seven"}"#).expect("valid JSON");
    match json.decode::<Welcome>() {
        Err(LeaseError::WrongShape {
            field: "payload",
            expected,
            reason,
        }) => {
            assert!(expected.ends_with("Welcome"), "{expected}");
            assert!(reason.contains("seven"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let corrupt = Json::from_stored("[1,".to_owned());
    assert!(matches!(
        corrupt.decode::<Vec<u8>>(),
        Err(LeaseError::MalformedJson { .. })
    ));
}
