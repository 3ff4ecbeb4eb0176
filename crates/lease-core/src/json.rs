//! Validated JSON payloads.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{LeaseError, Result};
use crate::limits::MAX_PAYLOAD_BYTES;

/// A JSON document in canonical text form (object keys sorted, no insignificant whitespace),
/// at most [`MAX_PAYLOAD_BYTES`] bytes.
///
/// Canonical text makes equality of two payloads a byte comparison, which every backend
/// (SQL, Lua) can do; compare-and-set relies on it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Json(String);

impl Json {
    /// Parses and canonicalises JSON text. Typed errors for malformed or oversized input.
    pub fn parse(field: &'static str, text: &str) -> Result<Self> {
        check_size(field, text.len())?;
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| LeaseError::MalformedJson {
                field,
                reason: e.to_string(),
            })?;
        Self::from_value(field, &value)
    }

    /// Serialises a value to canonical JSON. Typed error when it exceeds the size limit.
    pub fn from_value(field: &'static str, value: &serde_json::Value) -> Result<Self> {
        let text = serde_json::to_string(value).map_err(|e| LeaseError::MalformedJson {
            field,
            reason: e.to_string(),
        })?;
        check_size(field, text.len())?;
        Ok(Json(text))
    }

    /// Serialises any serde value to canonical JSON.
    pub fn to_json<T: Serialize + ?Sized>(field: &'static str, value: &T) -> Result<Self> {
        let value = serde_json::to_value(value).map_err(|e| LeaseError::MalformedJson {
            field,
            reason: e.to_string(),
        })?;
        Self::from_value(field, &value)
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

    /// Parses the text into a `serde_json::Value`.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(&self.0).unwrap_or(serde_json::Value::Null)
    }

    /// Deserialises the payload into `T`.
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_str(&self.0).map_err(|e| LeaseError::MalformedJson {
            field: "payload",
            reason: e.to_string(),
        })
    }
}

fn check_size(field: &'static str, size: usize) -> Result<()> {
    if size > MAX_PAYLOAD_BYTES {
        return Err(LeaseError::PayloadTooLarge {
            field,
            size,
            max: MAX_PAYLOAD_BYTES,
        });
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

impl Serialize for Json {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        Json::from_value("payload", &value).map_err(serde::de::Error::custom)
    }
}
