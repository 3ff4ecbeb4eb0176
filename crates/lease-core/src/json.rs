//! Validated JSON payloads in canonical text form.
//!
//! The canonical form is produced here, not by serde_json, so it does not change with
//! serde_json's features (Cargo unifies `preserve_order` and `arbitrary_precision` across a
//! build) or its float formatter. Its rules:
//!
//! - **No insignificant whitespace.**
//! - **Object keys sorted by their UTF-8 bytes**; a key given twice is refused.
//! - **Strings** written as serde_json writes them: `"` and `\` escaped, control characters
//!   as `\b \f \n \r \t` or lowercase `\u00xx`, everything else as UTF-8 (`\u0041` and `\/`
//!   become `A` and `/`). Lone surrogates are malformed.
//! - **Numbers keep their exact value.** An integer (no `.`, no exponent) keeps its digits;
//!   `-0` is the decimal `-0.0` (serde_json reads it so). A decimal is written with its
//!   significant digits in serde_json's layout for an f64: fixed for 1e-5 <= |x| < 1e16
//!   (`100.0`, `0.00001`), otherwise scientific (`1e-6`, `1.5e+300`). Equal values of one
//!   kind give equal bytes (`1e2`, `1.00E+2` and `100.0` are all `100.0`); an integer and a
//!   decimal stay distinct (`1` is not `1.0`: serde decodes only the first as an integer).
//!   What serde_json prints for an f64 is already in this form, so such payloads keep their
//!   bytes.
//! - **Only what serde_json can read back**: at most [`MAX_JSON_DEPTH`] nested arrays and
//!   objects, and numbers below 1e308 in magnitude, or an f64 in the shortest form that reads
//!   back as it (up to `1.7976931348623157e+308`). Anything else is refused.
//! - **Size**: at most [`MAX_PAYLOAD_BYTES`] of canonical text; [`Json::parse`] reads at most
//!   [`MAX_JSON_INPUT_BYTES`] of input.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{LeaseError, Result};
use crate::limits::{MAX_JSON_DEPTH, MAX_JSON_INPUT_BYTES, MAX_PAYLOAD_BYTES};

/// Nesting serde_json reads (its recursion limit is 128): the bound used when checking text
/// serde_json has already parsed.
const SERDE_JSON_DEPTH: usize = 128;

/// A JSON document in canonical text form (see the [module docs](self)), at most
/// [`MAX_PAYLOAD_BYTES`] bytes.
///
/// Canonical text makes equality of two payloads a byte comparison, which every backend
/// (SQL, Lua) can do; compare-and-set relies on it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Json(String);

impl Json {
    /// Parses and canonicalises JSON text of at most [`MAX_JSON_INPUT_BYTES`].
    ///
    /// Errors: `PayloadTooLarge` for input over that bound or canonical text over
    /// [`MAX_PAYLOAD_BYTES`]; `MalformedJson` for text that is not JSON; `InvalidInput` for JSON
    /// that cannot be stored and read back (duplicate key, nesting over [`MAX_JSON_DEPTH`],
    /// number out of range).
    pub fn parse(field: &'static str, text: &str) -> Result<Self> {
        check_size(field, text.len(), MAX_JSON_INPUT_BYTES)?;
        Self::from_text(field, text)
    }

    /// Canonicalises a value. The same errors as [`Json::parse`], except the input bound.
    pub fn from_value(field: &'static str, value: &serde_json::Value) -> Result<Self> {
        let mut out = String::new();
        write_value(&mut out, value, 0, MAX_JSON_DEPTH).map_err(|r| r.into_error(field))?;
        Self::sized(field, out)
    }

    /// Serialises any serde value to canonical JSON, through serde_json's text (so numbers
    /// such as `u128` keep their digits).
    pub fn to_json<T: Serialize + ?Sized>(field: &'static str, value: &T) -> Result<Self> {
        let text = serde_json::to_string(value).map_err(|e| LeaseError::MalformedJson {
            field,
            reason: e.to_string(),
        })?;
        Self::from_text(field, &text)
    }

    /// JSON `null`.
    pub fn null() -> Self {
        Json("null".to_owned())
    }

    /// Wraps text read back from a backend, which only ever stores canonical `Json`.
    /// Not for user input: use [`Json::parse`].
    #[doc(hidden)]
    pub fn from_stored(text: String) -> Self {
        Json(text)
    }

    /// The canonical text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Parses the text into a `serde_json::Value` that means exactly what the payload says.
    ///
    /// Errors: `MalformedJson` when the text does not parse (only possible for text a backend
    /// returned corrupt); `InvalidInput` when the payload holds a number `Value` cannot
    /// represent exactly (an integer outside i64/u64 or a decimal with more digits than an
    /// f64, unless serde_json's `arbitrary_precision` is on): read those with
    /// [`Json::decode`] into a type that can hold them, or with [`Json::as_str`].
    pub fn to_value(&self) -> Result<serde_json::Value> {
        let value: serde_json::Value =
            serde_json::from_str(&self.0).map_err(|e| LeaseError::MalformedJson {
                field: "payload",
                reason: e.to_string(),
            })?;
        self.check_exact(&value)?;
        Ok(value)
    }

    /// Deserialises the payload into `T`.
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_str(&self.0).map_err(|e| match e.classify() {
            // Valid JSON the type does not accept: the program's type differs, so say that
            // rather than calling the payload invalid.
            serde_json::error::Category::Data => LeaseError::WrongShape {
                field: "payload",
                expected: std::any::type_name::<T>(),
                reason: e.to_string(),
            },
            // Stored text that does not parse (a corrupt record).
            _ => LeaseError::MalformedJson {
                field: "payload",
                reason: e.to_string(),
            },
        })
    }

    /// Canonicalises text whatever its length (the input bound is [`Json::parse`]'s).
    fn from_text(field: &'static str, text: &str) -> Result<Self> {
        let canonical = canonical_text(text, MAX_JSON_DEPTH).map_err(|r| r.into_error(field))?;
        Self::sized(field, canonical)
    }

    /// Rule "at most [`MAX_PAYLOAD_BYTES`] after canonicalisation".
    fn sized(field: &'static str, canonical: String) -> Result<Self> {
        check_size(field, canonical.len(), MAX_PAYLOAD_BYTES)?;
        Ok(Json(canonical))
    }

    /// Rule "reading never changes meaning": `value` (parsed from this payload) canonicalises
    /// to what the payload's own text canonicalises to.
    fn check_exact(&self, value: &serde_json::Value) -> Result<()> {
        let field = "payload";
        let exact = canonical_text(&self.0, SERDE_JSON_DEPTH).map_err(|r| r.into_error(field))?;
        let mut read = String::new();
        write_value(&mut read, value, 0, SERDE_JSON_DEPTH).map_err(|r| r.into_error(field))?;
        if read != exact {
            return Err(LeaseError::invalid(
                field,
                "holds a number serde_json::Value cannot represent exactly (an integer outside \
                 i64/u64 or a decimal with more digits than an f64): read it with Json::decode \
                 into a type that can hold it, or with Json::as_str",
            ));
        }
        Ok(())
    }
}

/// Typed error when `size` exceeds `max`.
fn check_size(field: &'static str, size: usize, max: usize) -> Result<()> {
    if size > max {
        return Err(LeaseError::PayloadTooLarge { field, size, max });
    }
    Ok(())
}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Json({})", self.0)
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Serialises the payload as the JSON value it holds; an error (never a rounded number) when
/// [`Json::to_value`] refuses it.
impl Serialize for Json {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.to_value()
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        Json::from_value("payload", &value).map_err(serde::de::Error::custom)
    }
}

// ---- refusals ---------------------------------------------------------------------------------

/// Why a text or value is refused, before it is tied to a field.
#[derive(Debug)]
enum Refusal {
    /// Not JSON text: `MalformedJson`.
    Malformed(String),
    /// JSON that cannot be stored and read back: `InvalidInput`.
    Unreadable(String),
}

impl Refusal {
    fn into_error(self, field: &'static str) -> LeaseError {
        match self {
            Refusal::Malformed(reason) => LeaseError::MalformedJson { field, reason },
            Refusal::Unreadable(reason) => LeaseError::InvalidInput { field, reason },
        }
    }
}

type Canon<T> = std::result::Result<T, Refusal>;

/// Rule "at most `max_depth` nested arrays and objects".
fn check_depth(depth: usize, max_depth: usize) -> Canon<()> {
    if depth > max_depth {
        return Err(Refusal::Unreadable(format!(
            "nested deeper than {max_depth} arrays/objects"
        )));
    }
    Ok(())
}

// ---- canonical text from text -----------------------------------------------------------------

/// A parsed document: strings decoded, numbers already canonical, object entries sorted.
enum Node<'a> {
    Literal(&'static str),
    Number(String),
    String(Cow<'a, str>),
    Array(Vec<Node<'a>>),
    Object(Vec<(Cow<'a, str>, Node<'a>)>),
}

/// Canonical text of a JSON text (RFC 8259, as strict as serde_json).
fn canonical_text(text: &str, max_depth: usize) -> Canon<String> {
    let node = Parser::new(text, max_depth).document()?;
    let mut out = String::with_capacity(text.len());
    write_node(&mut out, &node);
    Ok(out)
}

/// A recursive-descent JSON parser whose recursion stops at `max_depth`.
struct Parser<'a> {
    text: &'a str,
    pos: usize,
    max_depth: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str, max_depth: usize) -> Self {
        Parser {
            text,
            pos: 0,
            max_depth,
        }
    }

    /// One value, surrounded by whitespace only.
    fn document(mut self) -> Canon<Node<'a>> {
        let node = self.value(0)?;
        self.skip_whitespace();
        if self.pos < self.text.len() {
            return Err(self.malformed("trailing characters"));
        }
        Ok(node)
    }

    fn malformed(&self, what: &str) -> Refusal {
        Refusal::Malformed(format!("{what} at byte {}", self.pos))
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn next_byte(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.pos += 1;
        Some(byte)
    }

    /// Consumes `byte` if it is next.
    fn eat(&mut self, byte: u8) -> bool {
        let found = self.peek() == Some(byte);
        if found {
            self.pos += 1;
        }
        found
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn skip_digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        self.pos - start
    }

    /// A value inside `depth` arrays/objects.
    fn value(&mut self, depth: usize) -> Canon<Node<'a>> {
        self.skip_whitespace();
        match self.peek() {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => Ok(Node::String(self.string()?)),
            Some(b't') => self.literal("true"),
            Some(b'f') => self.literal("false"),
            Some(b'n') => self.literal("null"),
            Some(b'-' | b'0'..=b'9') => Ok(Node::Number(self.number()?)),
            Some(_) => Err(self.malformed("expected a value")),
            None => Err(self.malformed("expected a value, found the end")),
        }
    }

    fn literal(&mut self, word: &'static str) -> Canon<Node<'a>> {
        if !self.text[self.pos..].starts_with(word) {
            return Err(self.malformed("expected a value"));
        }
        self.pos += word.len();
        Ok(Node::Literal(word))
    }

    /// An array that is the `depth`th level of nesting.
    fn array(&mut self, depth: usize) -> Canon<Node<'a>> {
        check_depth(depth, self.max_depth)?;
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.eat(b']') {
            return Ok(Node::Array(items));
        }
        loop {
            items.push(self.value(depth)?);
            self.skip_whitespace();
            match self.next_byte() {
                Some(b',') => {}
                Some(b']') => return Ok(Node::Array(items)),
                _ => return Err(self.malformed("expected ',' or ']'")),
            }
        }
    }

    /// An object that is the `depth`th level of nesting; entries sorted by key bytes.
    fn object(&mut self, depth: usize) -> Canon<Node<'a>> {
        check_depth(depth, self.max_depth)?;
        self.pos += 1;
        let mut entries = Vec::new();
        self.skip_whitespace();
        if self.eat(b'}') {
            return Ok(Node::Object(entries));
        }
        loop {
            self.skip_whitespace();
            if self.peek() != Some(b'"') {
                return Err(self.malformed("expected a string key"));
            }
            let key = self.string()?;
            self.skip_whitespace();
            if !self.eat(b':') {
                return Err(self.malformed("expected ':'"));
            }
            entries.push((key, self.value(depth)?));
            self.skip_whitespace();
            match self.next_byte() {
                Some(b',') => {}
                Some(b'}') => return sorted_entries(entries).map(Node::Object),
                _ => return Err(self.malformed("expected ',' or '}'")),
            }
        }
    }

    /// A string, decoded; borrowed when it has no escapes.
    fn string(&mut self) -> Canon<Cow<'a, str>> {
        self.pos += 1;
        let start = self.pos;
        let mut decoded: Option<String> = None;
        loop {
            let run_start = self.pos;
            while matches!(self.peek(), Some(b) if b != b'"' && b != b'\\' && b >= 0x20) {
                self.pos += 1;
            }
            // The run stops at an ASCII byte or the end, so it is a char boundary.
            let run = &self.text[run_start..self.pos];
            match self.next_byte() {
                Some(b'"') => {
                    return Ok(match decoded {
                        None => Cow::Borrowed(&self.text[start..self.pos - 1]),
                        Some(mut s) => {
                            s.push_str(run);
                            Cow::Owned(s)
                        }
                    });
                }
                Some(b'\\') => {
                    let s = decoded.get_or_insert_with(String::new);
                    s.push_str(run);
                    s.push(self.escape()?);
                }
                Some(_) => {
                    self.pos -= 1;
                    return Err(self.malformed("control character in string"));
                }
                None => return Err(self.malformed("unterminated string")),
            }
        }
    }

    /// The character of an escape, after its backslash.
    fn escape(&mut self) -> Canon<char> {
        Ok(match self.next_byte() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => return self.unicode_escape(),
            _ => return Err(self.malformed("invalid escape")),
        })
    }

    /// `\uXXXX`, a surrogate pair as two of them; a lone surrogate is malformed.
    fn unicode_escape(&mut self) -> Canon<char> {
        let first = self.hex4()?;
        let code = match first {
            0xD800..=0xDBFF => {
                if !(self.eat(b'\\') && self.eat(b'u')) {
                    return Err(self.malformed("lone leading surrogate"));
                }
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(self.malformed("leading surrogate without trailing surrogate"));
                }
                0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(self.malformed("lone trailing surrogate")),
            _ => first,
        };
        char::from_u32(code).ok_or_else(|| self.malformed("invalid unicode escape"))
    }

    fn hex4(&mut self) -> Canon<u32> {
        let mut code = 0;
        for _ in 0..4 {
            let digit = self
                .next_byte()
                .and_then(|b| char::from(b).to_digit(16))
                .ok_or_else(|| self.malformed("expected 4 hex digits"))?;
            code = code * 16 + digit;
        }
        Ok(code)
    }

    /// A number, in canonical form.
    fn number(&mut self) -> Canon<String> {
        let start = self.pos;
        let token = self.lex_number()?;
        token.canonical().map_err(|why| {
            let text = shorten(&self.text[start..self.pos]);
            Refusal::Unreadable(format!("number {text}: {why}"))
        })
    }

    /// The parts of a number, checked against JSON's grammar only.
    fn lex_number(&mut self) -> Canon<NumberToken<'a>> {
        let negative = self.eat(b'-');
        let int_start = self.pos;
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.skip_digits();
            }
            _ => return Err(self.malformed("invalid number")),
        }
        let int = &self.text[int_start..self.pos];
        let frac = if self.eat(b'.') {
            let frac_start = self.pos;
            if self.skip_digits() == 0 {
                return Err(self.malformed("expected a digit after '.'"));
            }
            Some(&self.text[frac_start..self.pos])
        } else {
            None
        };
        let exp = if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            let exp_start = self.pos;
            if !self.eat(b'+') {
                self.eat(b'-');
            }
            if self.skip_digits() == 0 {
                return Err(self.malformed("expected a digit in the exponent"));
            }
            Some(&self.text[exp_start..self.pos])
        } else {
            None
        };
        Ok(NumberToken {
            negative,
            int,
            frac,
            exp,
        })
    }
}

/// Sorts object entries by key bytes; a key given twice is refused.
fn sorted_entries<'a>(
    mut entries: Vec<(Cow<'a, str>, Node<'a>)>,
) -> Canon<Vec<(Cow<'a, str>, Node<'a>)>> {
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    if let Some(pair) = entries.windows(2).find(|pair| pair[0].0 == pair[1].0) {
        return Err(Refusal::Unreadable(format!(
            "duplicate key {:?}",
            shorten(&pair[0].0)
        )));
    }
    Ok(entries)
}

/// At most 40 characters of `text`, for error messages.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_owned(),
    }
}

fn write_node(out: &mut String, node: &Node<'_>) {
    match node {
        Node::Literal(word) => out.push_str(word),
        Node::Number(number) => out.push_str(number),
        Node::String(s) => write_string(out, s),
        Node::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_node(out, item);
            }
            out.push(']');
        }
        Node::Object(entries) => {
            out.push('{');
            for (i, (key, value)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_node(out, value);
            }
            out.push('}');
        }
    }
}

// ---- canonical text from a serde_json::Value ----------------------------------------------------

/// Writes `value` (inside `depth` arrays/objects) in canonical form. Keys are sorted here,
/// whatever map type serde_json was built with; numbers go through the same canonicaliser as
/// parsed text (`Number`'s text is an i64, u64 or f64, or the original digits with
/// `arbitrary_precision`).
fn write_value(
    out: &mut String,
    value: &serde_json::Value,
    depth: usize,
    max_depth: usize,
) -> Canon<()> {
    use serde_json::Value;
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&canonical_number(&n.to_string())?),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            check_depth(depth + 1, max_depth)?;
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item, depth + 1, max_depth)?;
            }
            out.push(']');
        }
        Value::Object(map) => {
            check_depth(depth + 1, max_depth)?;
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_value(out, item, depth + 1, max_depth)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// The canonical form of one number token.
fn canonical_number(token: &str) -> Canon<String> {
    let mut parser = Parser::new(token, 0);
    let number = parser.number()?;
    if parser.pos != token.len() {
        return Err(parser.malformed("trailing characters after a number"));
    }
    Ok(number)
}

// ---- strings ----------------------------------------------------------------------------------

/// Writes `s` quoted, escaped as serde_json escapes: `"`, `\`, and control characters.
fn write_string(out: &mut String, s: &str) {
    out.push('"');
    let mut run_start = 0;
    for (i, byte) in s.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x0C => "\\f",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x00..=0x1F => "",
            _ => continue,
        };
        // `i` is an ASCII byte, so a char boundary.
        out.push_str(&s[run_start..i]);
        run_start = i + 1;
        if escape.is_empty() {
            out.push_str(&format!("\\u{byte:04x}"));
        } else {
            out.push_str(escape);
        }
    }
    out.push_str(&s[run_start..]);
    out.push('"');
}

// ---- numbers ----------------------------------------------------------------------------------

/// The parts of a lexically valid JSON number.
struct NumberToken<'a> {
    negative: bool,
    /// Integer digits: `0` or no leading zero.
    int: &'a str,
    /// Fraction digits, after `.`.
    frac: Option<&'a str>,
    /// Exponent after `e`/`E`, with its sign if any.
    exp: Option<&'a str>,
}

/// Largest magnitude of an exponent accepted, in decimal digits (keeps arithmetic in i64).
const MAX_EXPONENT_DIGITS: usize = 18;

/// Decimal exponent from which numbers are checked against f64's range (10^308 <= |x|).
const TOP_EXPONENT: i64 = 308;

impl NumberToken<'_> {
    /// Canonical text, or why the number cannot be stored.
    fn canonical(&self) -> std::result::Result<String, String> {
        if self.frac.is_none() && self.exp.is_none() {
            return self.canonical_integer();
        }
        let decimal = self.decimal()?;
        decimal.check_range()?;
        Ok(decimal.layout())
    }

    /// Rule "an integer keeps its digits"; `-0` is the decimal `-0.0`.
    fn canonical_integer(&self) -> std::result::Result<String, String> {
        if self.int == "0" {
            return Ok(if self.negative { "-0.0" } else { "0" }.to_owned());
        }
        let first_digit_exponent = self.int.len() as i64 - 1;
        if first_digit_exponent >= TOP_EXPONENT {
            return Err(too_large());
        }
        let sign = if self.negative { "-" } else { "" };
        Ok(format!("{sign}{}", self.int))
    }

    /// The exact value as significant digits and the exponent of the first one.
    fn decimal(&self) -> std::result::Result<Decimal, String> {
        let frac = self.frac.unwrap_or("");
        let all = format!("{}{frac}", self.int);
        let leading_zeros = all.len() - all.trim_start_matches('0').len();
        let digits = all[leading_zeros..].trim_end_matches('0');
        if digits.is_empty() {
            return Ok(Decimal::zero(self.negative));
        }
        let exp = parse_exponent(self.exp.unwrap_or("0"))?;
        Ok(Decimal {
            negative: self.negative,
            digits: digits.to_owned(),
            exponent: self.int.len() as i64 - 1 - leading_zeros as i64 + exp,
        })
    }
}

/// An exponent's value; more than [`MAX_EXPONENT_DIGITS`] significant digits is refused.
fn parse_exponent(text: &str) -> std::result::Result<i64, String> {
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let digits = digits.trim_start_matches('0');
    if digits.len() > MAX_EXPONENT_DIGITS {
        return Err(if negative {
            format!("exponent has more than {MAX_EXPONENT_DIGITS} digits")
        } else {
            too_large()
        });
    }
    let value: i64 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| "invalid exponent".to_owned())?
    };
    Ok(if negative { -value } else { value })
}

fn too_large() -> String {
    "too large for serde_json to read back (magnitude must be below 1e308, or an f64 written \
     in shortest form up to 1.7976931348623157e+308); send it as a string"
        .to_owned()
}

/// A non-integer number: `0.d1d2d3... x 10^(exponent + 1)`, digits without leading or
/// trailing zeros (empty for zero).
#[derive(Debug, PartialEq)]
struct Decimal {
    negative: bool,
    digits: String,
    /// Decimal exponent of the first digit: 10^exponent <= |x| < 10^(exponent+1).
    exponent: i64,
}

impl Decimal {
    fn zero(negative: bool) -> Self {
        Decimal {
            negative,
            digits: String::new(),
            exponent: 0,
        }
    }

    /// Rule "below 1e308, or an f64 in shortest form": serde_json's default parser refuses
    /// some values between 1e308 and f64::MAX, but reads every f64's shortest text.
    fn check_range(&self) -> std::result::Result<(), String> {
        if self.exponent < TOP_EXPONENT {
            return Ok(());
        }
        if self.exponent == TOP_EXPONENT && self.is_f64_shortest() {
            return Ok(());
        }
        Err(too_large())
    }

    /// True when this is exactly what serde_json prints for the f64 nearest to it.
    fn is_f64_shortest(&self) -> bool {
        let Ok(nearest) = self.layout().parse::<f64>() else {
            return false;
        };
        if !nearest.is_finite() {
            return false;
        }
        let Ok(printed) = serde_json::to_string(&nearest) else {
            return false;
        };
        let mut parser = Parser::new(&printed, 0);
        matches!(parser.lex_number().map(|t| t.decimal()), Ok(Ok(d)) if d == *self)
    }

    /// serde_json's layout for an f64 (its formatter's): fixed for exponents -5..=15 (with
    /// `.0` when integral), otherwise scientific with a signed exponent.
    fn layout(&self) -> String {
        let mut out = String::with_capacity(self.digits.len() + 8);
        if self.negative {
            out.push('-');
        }
        if self.digits.is_empty() {
            out.push_str("0.0");
            return out;
        }
        let n = self.digits.len() as i64;
        let e = self.exponent;
        if (-5..=15).contains(&e) {
            if n - 1 <= e {
                out.push_str(&self.digits);
                push_zeros(&mut out, e + 1 - n);
                out.push_str(".0");
            } else if e >= 0 {
                let (whole, fraction) = self.digits.split_at(e as usize + 1);
                out.push_str(whole);
                out.push('.');
                out.push_str(fraction);
            } else {
                out.push_str("0.");
                push_zeros(&mut out, -e - 1);
                out.push_str(&self.digits);
            }
        } else {
            let (first, rest) = self.digits.split_at(1);
            out.push_str(first);
            if !rest.is_empty() {
                out.push('.');
                out.push_str(rest);
            }
            out.push_str(if e >= 0 { "e+" } else { "e-" });
            out.push_str(&e.unsigned_abs().to_string());
        }
        out
    }
}

fn push_zeros(out: &mut String, count: i64) {
    for _ in 0..count {
        out.push('0');
    }
}
