//! Typed input on both sides of an execution: an admission that serialises its input, and a
//! delivery that decodes it, where a mismatch is a typed failure of that execution rather
//! than a backend error retried forever.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::delivery::Delivery;
use crate::error::DeliveryError;
use lease_core::error::Result;
use lease_core::execution::Admission;
use lease_core::ids::{ExecutionId, WorkflowName};
use lease_core::json::Json;

impl Delivery {
    /// The workflow input decoded into `T`; an execution admitted without input decodes as
    /// JSON `null` (so `()` or `Option<_>` accept it).
    ///
    /// An input of another shape is [`DeliveryError::BadInput`] with the decoder's message
    /// (what was expected, and where): returned with `?`, the dispatcher fails the execution with
    /// `{"error": "bad_input", ...}` once, since every redelivery would read the same input.
    pub fn input_as<T: DeserializeOwned>(&self) -> Result<T, DeliveryError> {
        let bad_input = |reason: String| DeliveryError::BadInput {
            workflow: self.workflow().cloned(),
            reason,
        };
        match self.input() {
            Some(input) => {
                serde_json::from_str(input.as_str()).map_err(|e| bad_input(e.to_string()))
            }
            None => serde_json::from_str("null")
                .map_err(|e| bad_input(format!("the execution was admitted without input ({e})"))),
        }
    }
}

/// Admissions with a typed input: `Admission::typed(id, "signup", &signup)?`.
///
/// An extension of [`Admission`], in scope with `use lease::TypedAdmission`.
pub trait TypedAdmission: Sized {
    /// An admission of execution `id` running `workflow`, its input `input` serialised to
    /// canonical JSON. `InvalidInput` for a bad workflow name; the JSON errors of
    /// [`Json::to_json`] (field `workflow input`) for an input that cannot be stored.
    fn typed<T: Serialize + ?Sized>(id: ExecutionId, workflow: &str, input: &T) -> Result<Self>;

    /// The same admission with `input` serialised as its input.
    fn typed_input<T: Serialize + ?Sized>(self, input: &T) -> Result<Self>;
}

impl TypedAdmission for Admission {
    fn typed<T: Serialize + ?Sized>(id: ExecutionId, workflow: &str, input: &T) -> Result<Self> {
        let workflow = WorkflowName::new(workflow)?;
        Admission::new(id).workflow(workflow).typed_input(input)
    }

    fn typed_input<T: Serialize + ?Sized>(self, input: &T) -> Result<Self> {
        Ok(self.input(Json::to_json("workflow input", input)?))
    }
}
