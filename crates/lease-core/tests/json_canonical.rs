//! Canonical JSON keeps what it was given: key order by UTF-8 bytes whatever serde_json's
//! map type, numbers kept exactly, nothing stored that cannot be read back, and the size
//! limit measured on the canonical text.

use lease_core::limits::{MAX_JSON_DEPTH, MAX_JSON_INPUT_BYTES, MAX_PAYLOAD_BYTES};
use lease_core::{Json, LeaseError};
use rstest::rstest;
use serde_json::Value;

fn canon(text: &str) -> String {
    match Json::parse("t", text) {
        Ok(json) => json.as_str().to_owned(),
        Err(e) => panic!("{} refused: {e}", short(text)),
    }
}

fn short(text: &str) -> String {
    text.chars().take(80).collect()
}

fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

fn nested_value(depth: usize) -> Value {
    (1..depth).fold(Value::Array(vec![]), |inner, _| Value::Array(vec![inner]))
}

fn is_invalid_input(r: &lease_core::Result<Json>) -> bool {
    matches!(r, Err(LeaseError::InvalidInput { field: "t", .. }))
}

// ---- finding 11: key order is the canonicaliser's, by UTF-8 bytes --------------------------

/// Rule "object keys sorted by their UTF-8 bytes": both orders give the same bytes, nested
/// objects too, and non-ASCII keys sort by bytes ("z" 0x7A before "é" 0xC3 0xA9).
#[test]
fn keys_sorted_by_utf8_bytes_in_parse() {
    assert_eq!(canon(r#"{"b":1,"a":2}"#), r#"{"a":2,"b":1}"#);
    assert_eq!(canon(r#"{"a":2,"b":1}"#), r#"{"a":2,"b":1}"#);
    assert_eq!(
        canon(r#"{"é":1,"z":{"y":[{"b":0,"a":0}],"x":0},"A":2,"\u00e8":3}"#),
        r#"{"A":2,"z":{"x":0,"y":[{"a":0,"b":0}]},"è":3,"é":1}"#
    );
}

/// Same rule for `from_value`, whatever order the map was filled in.
#[test]
fn keys_sorted_by_utf8_bytes_in_from_value() {
    let mut map = serde_json::Map::new();
    map.insert("b".into(), Value::from(1));
    map.insert("é".into(), Value::from(3));
    map.insert("a".into(), Value::from(2));
    let json = Json::from_value("t", &Value::Object(map)).expect("json");
    assert_eq!(json.as_str(), r#"{"a":2,"b":1,"é":3}"#);
}

/// Duplicate keys are refused (typed), not silently reduced to the last one.
#[test]
fn duplicate_keys_refused() {
    let r = Json::parse("t", r#"{"a":1,"b":0,"a":2}"#);
    assert!(is_invalid_input(&r), "{r:?}");
    let r = Json::parse("t", r#"{"x":{"a":1,"\u0061":2}}"#);
    assert!(is_invalid_input(&r), "{r:?}");
}

// ---- finding 12: numbers keep their value ---------------------------------------------------

/// Integers outside i64/u64 are kept digit for digit.
#[rstest]
#[case::thirty_digits("123456789012345678901234567890")]
#[case::thirty_digits_negative("-123456789012345678901234567890")]
#[case::two_to_the_64("18446744073709551616")]
#[case::i64_min_minus_one("-9223372036854775809")]
#[case::u64_max("18446744073709551615")]
#[case::i64_min("-9223372036854775808")]
#[case::u128_max("340282366920938463463374607431768211455")]
fn big_integers_kept_exactly(#[case] text: &str) {
    assert_eq!(canon(text), text);
    assert_eq!(
        canon(&format!("{{\"n\": [ {text} ]}}")),
        format!("{{\"n\":[{text}]}}")
    );
}

/// Decimals with more digits than an f64 holds are kept digit for digit.
#[test]
fn long_decimals_kept_exactly() {
    assert_eq!(canon("0.30000000000000000001"), "0.30000000000000000001");
    assert_eq!(
        canon("3.14159265358979323846264338327950288"),
        "3.14159265358979323846264338327950288"
    );
    assert_eq!(
        canon("-12345678901234567890.5"),
        "-1.23456789012345678905e+19"
    );
    assert_eq!(canon("1e-400"), "1e-400");
    assert_eq!(canon("-2.5E-400"), "-2.5e-400");
}

/// Rule "equal values of one kind give equal bytes": the exponent, trailing zeros and case of
/// `e` are normalised to serde_json's own layout for an f64 (fixed for 1e-5 <= |x| < 1e16).
#[rstest]
fn equal_decimals_give_equal_bytes(
    #[values("100.0", "1e2", "1E2", "1E+2", "1.00e+2", "10e1", "1000e-1", "0.001e5")] text: &str,
) {
    assert_eq!(canon(text), "100.0", "{text}");
}

/// Every spelling of zero as a decimal is `0.0`.
#[rstest]
fn decimal_zeros_give_equal_bytes(
    #[values("0.0", "0e5", "0.000", "0E-7", "0e99999999999999999999999")] text: &str,
) {
    assert_eq!(canon(text), "0.0", "{text}");
}

/// The layout of each kind of decimal: serde_json's for an f64.
#[rstest]
#[case::negative_zero_with_exponent("-0.0e3", "-0.0")]
#[case::trailing_zero("1.50", "1.5")]
#[case::long_mantissa_scaled("12345678901234567890123e18", "1.2345678901234567890123e+40")]
#[case::long_mantissa_kept("1.2345678901234567890123e+40", "1.2345678901234567890123e+40")]
#[case::smallest_fixed("0.00001", "0.00001")]
#[case::largest_exponent_form_below_one("0.000001", "1e-6")]
#[case::largest_fixed("1234567890123456.0", "1234567890123456.0")]
#[case::smallest_exponent_form_above_one("12345678901234567.0", "1.2345678901234567e+16")]
fn decimal_layout(#[case] text: &str, #[case] expected: &str) {
    assert_eq!(canon(text), expected);
}

/// Integers and decimals stay distinct kinds (`1` is not `1.0`: serde decodes only the first
/// into an integer type); `-0` is the decimal `-0.0`, as serde_json reads it.
#[test]
fn integer_and_decimal_kinds_stay_distinct() {
    assert_eq!(canon("1"), "1");
    assert_eq!(canon("1.0"), "1.0");
    assert_eq!(canon("0"), "0");
    assert_eq!(canon("-0"), "-0.0");
    assert_ne!(canon("100"), canon("1e2"));
}

/// Numbers serde_json cannot read back (|x| >= 1e308, except an f64 in shortest form) are
/// refused with a typed error instead of being stored.
#[rstest]
#[case::e400("1e400")]
#[case::minus_e400("-1e400")]
#[case::e309("1e309")]
#[case::above_f64_max_long("1.797693134862315708e308")]
#[case::above_f64_max("1.7976931348623158e308")]
#[case::huge_exponent("1e99999999999999999999999")]
#[case::huge_negative_exponent("1e-99999999999999999999999")]
#[case::f64_max_in_digits(format!("{:.0}", f64::MAX))]
#[case::four_hundred_nines("9".repeat(400))]
fn numbers_too_large_to_read_back_refused(#[case] text: String) {
    let r = Json::parse("t", &text);
    assert!(is_invalid_input(&r), "{text}: {r:?}");
}

/// The largest numbers that still read back are kept.
#[rstest]
#[case::e308("1e308", "1e+308")]
#[case::f64_max("1.7976931348623157e308", "1.7976931348623157e+308")]
#[case::minus_f64_max("-1.7976931348623157E+308", "-1.7976931348623157e+308")]
#[case::long_decimal_below_e308("9.99999999999999999999e307", "9.99999999999999999999e+307")]
#[case::three_hundred_eight_nines("9".repeat(308), "9".repeat(308))]
fn largest_readable_numbers_kept(#[case] text: String, #[case] expected: String) {
    assert_eq!(canon(&text), expected);
}

/// Every number accepted above, and every f64 near the top of the range, reads back with
/// serde_json (default features): nothing stored is unreadable.
#[test]
fn accepted_numbers_read_back() {
    let mut texts: Vec<String> = [
        "123456789012345678901234567890",
        "3.14159265358979323846264338327950288",
        "1e-400",
        "9.99999999999999999999e307",
        "1.7976931348623157e308",
    ]
    .iter()
    .map(|t| canon(t))
    .collect();
    texts.push(canon(&"9".repeat(308)));
    texts.push(canon(&format!("-0.{}e-7", "1".repeat(100_000))));
    texts.push(canon(&format!("{}.5", "7".repeat(300))));
    let mut f = f64::MAX;
    for _ in 0..2000 {
        texts.push(Json::to_json("t", &f).expect("f64").as_str().to_owned());
        texts.push(Json::to_json("t", &-f).expect("f64").as_str().to_owned());
        f = f64::from_bits(f.to_bits() - 1);
    }
    for text in texts {
        let back: Result<Value, _> = serde_json::from_str(&text);
        assert!(back.is_ok(), "{text}: {back:?}");
    }
}

/// What serde_json prints for an f64 is already canonical: `from_value`, `to_json` and
/// `parse` agree with it, so payloads stored before this change keep their bytes.
#[test]
fn f64_text_is_unchanged() {
    let mut rng = Lcg(7);
    let mut samples = vec![
        0.1,
        1.0,
        1e15,
        1e16,
        1e-5,
        1e-6,
        5e-324,
        f64::MIN_POSITIVE,
        -0.0,
    ];
    samples.extend(
        (0..20_000)
            .map(|_| f64::from_bits(rng.next()))
            .filter(|f| f.is_finite()),
    );
    for f in samples {
        let printed = serde_json::to_string(&f).expect("f64");
        assert_eq!(canon(&printed), printed);
        let from_value = Json::from_value("t", &serde_json::json!(f)).expect("json");
        assert_eq!(from_value.as_str(), printed);
    }
}

/// u128 values survive `to_json` and `decode` exactly (they used to be refused by
/// `serde_json::to_value`).
#[test]
fn u128_round_trips() {
    let json = Json::to_json("t", &u128::MAX).expect("u128");
    assert_eq!(json.as_str(), u128::MAX.to_string());
    assert_eq!(json.decode::<u128>().expect("decode"), u128::MAX);
}

// ---- strings: the same escapes as serde_json -------------------------------------------------

/// Strings are written as serde_json writes them (only `"`, `\` and control characters
/// escaped, `\b \f \n \r \t` short forms, lowercase `\u00xx`), whatever escapes came in.
#[test]
fn strings_written_as_serde_json_writes_them() {
    let all: String = (0..=0x10FFFF_u32).filter_map(char::from_u32).collect();
    for chunk in all.chars().collect::<Vec<_>>().chunks(4096) {
        let s: String = chunk.iter().collect();
        let printed = serde_json::to_string(&s).expect("string");
        assert_eq!(canon(&printed), printed);
        let escaped: String = chunk.iter().map(|c| escape_all(*c)).collect();
        assert_eq!(canon(&format!("\"{escaped}\"")), printed);
    }
    assert_eq!(
        canon(r#""\u0041\/\ud83d\ude00\u007f""#),
        "\"A/\u{1F600}\u{7F}\""
    );
}

fn escape_all(c: char) -> String {
    let mut units = [0u16; 2];
    c.encode_utf16(&mut units)
        .iter()
        .map(|u| format!("\\u{u:04X}"))
        .collect()
}

/// Text serde_json refuses is refused: lone surrogates, raw control characters, bad escapes,
/// leading zeros, trailing garbage.
#[rstest]
#[case::lone_high_surrogate(r#""\ud800""#)]
#[case::lone_low_surrogate(r#""\udc00x""#)]
#[case::high_surrogate_then_letter(r#""\ud800\u0041""#)]
#[case::raw_control_character("\"a\u{1}\"")]
#[case::bad_escape(r#""\x""#)]
#[case::leading_zero("01")]
#[case::no_fraction_digits("1.")]
#[case::no_integer_digits(".5")]
#[case::no_exponent_digits("1e")]
#[case::lone_minus("-")]
#[case::plus_sign("+1")]
#[case::missing_comma("[1 2]")]
#[case::missing_colon("{\"a\" 1}")]
#[case::number_key("{1:2}")]
#[case::byte_order_mark("\u{feff}1")]
#[case::trailing_garbage("1 x")]
#[case::unclosed_array("[")]
#[case::unclosed_string("\"abc")]
#[case::truncated_true("tru")]
#[case::truncated_null("nul")]
fn malformed_text_refused(#[case] text: &str) {
    let r = Json::parse("t", text);
    assert!(
        matches!(r, Err(LeaseError::MalformedJson { field: "t", .. })),
        "{text:?}: {r:?}"
    );
    assert!(serde_json::from_str::<Value>(text).is_err(), "{text:?}");
}

/// Random documents: `parse` (of compact and pretty text) and `from_value` give serde_json's
/// own compact text with sorted keys, the form stored before this change.
#[test]
fn random_documents_match_serde_json() {
    let mut rng = Lcg(42);
    for _ in 0..2000 {
        let mut value = random_value(&mut rng, 0);
        let pretty = serde_json::to_string_pretty(&value).expect("pretty");
        value.sort_all_objects();
        let expected = serde_json::to_string(&value).expect("compact");
        assert_eq!(canon(&pretty), expected);
        assert_eq!(canon(&expected), expected);
        assert_eq!(
            Json::from_value("t", &value).expect("json").as_str(),
            expected
        );
    }
}

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 ^ (self.0 >> 29)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn random_value(rng: &mut Lcg, depth: usize) -> Value {
    let kinds = if depth > 5 { 6 } else { 8 };
    match rng.below(kinds) {
        0 => Value::Null,
        1 => Value::Bool(rng.below(2) == 0),
        2 => Value::from(rng.next() as i64 >> rng.below(64)),
        3 => Value::from(rng.next()),
        4 => serde_json::json!(f64::from_bits(rng.next()) % 1e6),
        5 => Value::String(random_string(rng)),
        6 => Value::Array(
            (0..rng.below(5))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        _ => Value::Object(
            (0..rng.below(5))
                .map(|_| (random_string(rng), random_value(rng, depth + 1)))
                .collect(),
        ),
    }
}

fn random_string(rng: &mut Lcg) -> String {
    const ALPHABET: [char; 12] = [
        'a', 'b', 'Z', '"', '\\', '\n', '\u{1}', 'é', '€', '😀', '/', ' ',
    ];
    (0..rng.below(6))
        .map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize])
        .collect()
}

// ---- finding 13: nothing is stored that cannot be read back ---------------------------------

/// Rule "at most MAX_JSON_DEPTH nested arrays/objects": the 200-deep array of the finding and
/// one level over the limit are refused by `from_value` and `parse`; the limit is accepted and
/// parses back with serde_json.
#[test]
fn nesting_deeper_than_the_limit_refused() {
    for depth in [200, MAX_JSON_DEPTH + 1] {
        let r = Json::from_value("t", &nested_value(depth));
        assert!(is_invalid_input(&r), "from_value {depth}: {r:?}");
        let r = Json::parse("t", &nested(depth));
        assert!(is_invalid_input(&r), "parse {depth}: {r:?}");
    }
    let at_limit = Json::from_value("t", &nested_value(MAX_JSON_DEPTH)).expect("at the limit");
    assert_eq!(
        at_limit,
        Json::parse("t", &nested(MAX_JSON_DEPTH)).expect("at the limit")
    );
    let back: Value = serde_json::from_str(at_limit.as_str()).expect("reads back");
    assert_eq!(back, nested_value(MAX_JSON_DEPTH));
    let deep_object =
        (0..MAX_JSON_DEPTH + 1).fold(String::from("1"), |inner, _| format!("{{\"k\":{inner}}}"));
    assert!(is_invalid_input(&Json::parse("t", &deep_object)));
}

/// Deep input is refused without exhausting the stack (the parser stops at the limit).
#[test]
fn very_deep_input_refused_without_overflow() {
    let text = "[".repeat(MAX_PAYLOAD_BYTES);
    assert!(is_invalid_input(&Json::parse("t", &text)));
}

// ---- finding 14: the size limit is on the canonical text ------------------------------------

/// A pretty-printed text over MAX_PAYLOAD_BYTES whose canonical form is exactly at the limit is
/// accepted; one canonical byte more is PayloadTooLarge with the canonical size.
#[test]
fn size_limit_measured_after_canonicalisation() {
    let at_limit = |extra: usize| {
        let x = "x".repeat(MAX_PAYLOAD_BYTES - r#"{"a":[""]}"#.len() + extra);
        format!(
            "{{\n    \"a\": [\n        \"{x}\"\n    ]\n}}\n{}",
            " ".repeat(300)
        )
    };
    let text = at_limit(0);
    assert!(text.len() > MAX_PAYLOAD_BYTES);
    let json = Json::parse("t", &text).expect("canonical form is at the limit");
    assert_eq!(json.as_str().len(), MAX_PAYLOAD_BYTES);
    let r = Json::parse("t", &at_limit(1));
    assert!(
        matches!(r, Err(LeaseError::PayloadTooLarge { size, max, .. })
            if size == MAX_PAYLOAD_BYTES + 1 && max == MAX_PAYLOAD_BYTES),
        "{r:?}"
    );
}

/// The raw text is capped at MAX_JSON_INPUT_BYTES (bounding the work), whatever it shrinks to.
#[test]
fn raw_input_capped() {
    let padded = |len: usize| format!("{}1", " ".repeat(len - 1));
    assert_eq!(canon(&padded(MAX_JSON_INPUT_BYTES)), "1");
    let r = Json::parse("t", &padded(MAX_JSON_INPUT_BYTES + 1));
    assert!(
        matches!(r, Err(LeaseError::PayloadTooLarge { size, max, .. })
            if size == MAX_JSON_INPUT_BYTES + 1 && max == MAX_JSON_INPUT_BYTES),
        "{r:?}"
    );
}

/// Numbers can grow under canonicalisation (`1e15` is 18 bytes canonical): the limit is
/// checked on what is stored.
#[test]
fn growth_counts_against_the_limit() {
    let count = MAX_PAYLOAD_BYTES / "1000000000000000.0,".len() + 1;
    let text = format!("[{}1]", "1e15,".repeat(count));
    assert!(text.len() < MAX_PAYLOAD_BYTES);
    let r = Json::parse("t", &text);
    assert!(matches!(r, Err(LeaseError::PayloadTooLarge { size, .. }) if size > MAX_PAYLOAD_BYTES));
}
