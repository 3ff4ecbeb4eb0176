//! Canonical JSON does not depend on serde_json's features. Cargo unifies features, so any
//! crate in a build can turn on `preserve_order` (insertion-ordered maps) or
//! `arbitrary_precision` (numbers kept as text in `Value`) for everyone. Run with
//! `cargo test -p lease-core --features test-preserve-order,test-arbitrary-precision`.
#![cfg(any(feature = "test-preserve-order", feature = "test-arbitrary-precision"))]

use lease_core::Json;
use serde_json::Value;

const UNSORTED: &str = r#"{"b":1,"a":{"d":[{"z":0,"y":0}],"c":2}}"#;
const SORTED: &str = r#"{"a":{"c":2,"d":[{"y":0,"z":0}]},"b":1}"#;

/// The feature really is on: serde_json keeps the input order (so the test can fail).
#[cfg(feature = "test-preserve-order")]
#[test]
fn preserve_order_is_on() {
    let value: Value = serde_json::from_str(UNSORTED).expect("json");
    assert_eq!(serde_json::to_string(&value).expect("text"), UNSORTED);
}

/// The feature really is on: serde_json keeps a big integer's digits.
#[cfg(feature = "test-arbitrary-precision")]
#[test]
fn arbitrary_precision_is_on() {
    let value: Value = serde_json::from_str("123456789012345678901234567890").expect("json");
    assert_eq!(value.to_string(), "123456789012345678901234567890");
}

/// Both orders give the same sorted bytes through `parse`, `from_value`, `to_json` and the
/// `Deserialize` impl.
#[test]
fn canonical_text_is_sorted_whatever_the_map_type() {
    let reordered = r#"{"a":{"c":2,"d":[{"y":0,"z":0}]},"b":1}"#;
    for text in [UNSORTED, reordered] {
        assert_eq!(Json::parse("t", text).expect("parse").as_str(), SORTED);
        let value: Value = serde_json::from_str(text).expect("value");
        assert_eq!(
            Json::from_value("t", &value).expect("value").as_str(),
            SORTED
        );
        assert_eq!(
            Json::to_json("t", &value).expect("to_json").as_str(),
            SORTED
        );
        let json: Json = serde_json::from_str(text).expect("deserialize");
        assert_eq!(json.as_str(), SORTED);
    }
}

/// Numbers canonicalise to the same bytes whether `Value` holds them as text or as i64/u64/f64.
#[test]
fn numbers_are_the_same_whatever_the_number_type() {
    for (text, canonical) in [
        (
            "[1E2, 1.50, -0, 0.000001, 18446744073709551615]",
            "[100.0,1.5,-0.0,1e-6,18446744073709551615]",
        ),
        (
            "[2.5e+300, -9223372036854775808]",
            "[2.5e+300,-9223372036854775808]",
        ),
    ] {
        assert_eq!(Json::parse("t", text).expect("parse").as_str(), canonical);
        let value: Value = serde_json::from_str(text).expect("value");
        assert_eq!(
            Json::from_value("t", &value).expect("value").as_str(),
            canonical
        );
    }
}
