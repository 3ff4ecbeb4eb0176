//! Validated names: execution ids, step keys, store ids and keys, request ids, workflow names.

use crate::error::{LeaseError, Result};
use crate::limits::MAX_ID_BYTES;

mod names;

pub use names::{
    ConcurrencyKey, EffectId, ExecutionId, RequestId, StepKey, StoreId, StoreKey, WorkflowName,
};

/// The rule every name type follows: non-empty, at most [`MAX_ID_BYTES`] bytes, no control
/// characters; a typed error (`InvalidInput` naming `field`) otherwise.
fn check_name(field: &'static str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(LeaseError::invalid(field, "must not be empty"));
    }
    if value.len() > MAX_ID_BYTES {
        return Err(LeaseError::invalid(
            field,
            format!("{} bytes, over the limit of {MAX_ID_BYTES}", value.len()),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(LeaseError::invalid(
            field,
            "must not contain control characters",
        ));
    }
    Ok(())
}

macro_rules! validated {
    ($($name:ident, $field:literal;)*) => {$(
        impl $name {
            /// Validates and wraps a name; a typed error for empty, over-long or control input.
            pub fn new(value: impl Into<String>) -> Result<Self> {
                let value = value.into();
                check_name($field, &value)?;
                Ok(Self(value.into()))
            }

            /// Wraps a value the crate built itself and knows to be valid.
            #[allow(dead_code)]
            pub(crate) fn trusted(value: String) -> Self {
                debug_assert!(check_name($field, &value).is_ok());
                Self(value.into())
            }
        }

        impl TryFrom<String> for $name {
            type Error = LeaseError;
            fn try_from(value: String) -> Result<Self> {
                Self::new(value)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = LeaseError;
            fn try_from(value: &str) -> Result<Self> {
                Self::new(value)
            }
        }
    )*};
}

validated! {
    ExecutionId, "execution id";
    StepKey, "step key";
    StoreId, "store id";
    StoreKey, "store key";
    RequestId, "request id";
    WorkflowName, "workflow name";
    ConcurrencyKey, "concurrency key";
    EffectId, "effect id";
}

impl EffectId {
    /// The effect id of step `step_key` of `execution`: the same for every delivery and
    /// every holder of the execution. The text is `<execution length>:<execution>:<step key>`,
    /// so distinct (execution, step) pairs never share an id; `InvalidInput` when that text
    /// is over [`MAX_ID_BYTES`] (then give an explicit id).
    pub fn for_step(execution: &ExecutionId, step_key: &StepKey) -> Result<Self> {
        let text = format!(
            "{}:{}:{}",
            execution.as_str().len(),
            execution.as_str(),
            step_key.as_str()
        );
        Self::new(text)
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    /// Each constructor, reduced to "accepted or which error".
    type New = fn(String) -> Result<()>;

    const CONSTRUCTORS: [New; 7] = [
        |s| ExecutionId::new(s).map(drop),
        |s| StepKey::new(s).map(drop),
        |s| StoreId::new(s).map(drop),
        |s| StoreKey::new(s).map(drop),
        |s| RequestId::new(s).map(drop),
        |s| WorkflowName::new(s).map(drop),
        |s| EffectId::new(s).map(drop),
    ];

    /// Rule "non-empty, at most 255 bytes of UTF-8, no control characters", for every name.
    #[rstest]
    #[case::empty(String::new())]
    #[case::ascii_256_bytes("x".repeat(MAX_ID_BYTES + 1))]
    #[case::multi_byte_256_bytes(format!("{}ab", "é".repeat(127)))]
    #[case::nul("a\0b".to_owned())]
    #[case::newline("order\n42".to_owned())]
    #[case::tab("\t".to_owned())]
    #[case::delete("a\u{7f}".to_owned())]
    #[case::c1_control("a\u{85}".to_owned())]
    fn bad_names_are_invalid_input(
        #[case] name: String,
        #[values(0, 1, 2, 3, 4, 5, 6)] constructor: usize,
    ) {
        let r = CONSTRUCTORS[constructor](name.clone());
        assert!(
            matches!(r, Err(LeaseError::InvalidInput { .. })),
            "{constructor}: {name:?}: {r:?}"
        );
    }

    #[rstest]
    #[case::one_byte("a".to_owned())]
    #[case::ascii_255_bytes("x".repeat(MAX_ID_BYTES))]
    #[case::multi_byte_255_bytes(format!("{}a", "é".repeat(127)))]
    #[case::four_byte_characters(format!("{}abc", "🦀".repeat(63)))]
    #[case::spaces_and_punctuation("order 42: charge/card|x{y}".to_owned())]
    fn good_names_are_accepted(
        #[case] name: String,
        #[values(0, 1, 2, 3, 4, 5, 6)] constructor: usize,
    ) {
        assert!(name.len() <= MAX_ID_BYTES);
        let r = CONSTRUCTORS[constructor](name.clone());
        assert!(r.is_ok(), "{constructor}: {name:?}: {r:?}");
    }
}
