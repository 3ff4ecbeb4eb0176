//! The name types themselves (execution ids, step keys, store ids and keys, request ids,
//! workflow names, effect ids): data only, naming nothing else of the crate, so
//! [`crate::LeaseError`] can carry them without a circle. Their validating constructors are
//! in [`crate::ids`].

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        ///
        /// Non-empty, at most [`MAX_ID_BYTES`](crate::limits::MAX_ID_BYTES) bytes of UTF-8,
        /// no control characters: the constructors and the checks are in [`crate::ids`].
        ///
        /// Shared text: a clone is a reference count, since every call that hands work to
        /// a backend (and every record a claim returns) copies the names it carries.
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(pub(super) Arc<str>);

        impl $name {
            /// The name as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                String::from(&*value.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

name_type!(
    /// Caller-chosen id of an execution (one workflow run), unique per backend namespace.
    ExecutionId
);
name_type!(
    /// Key of a step inside an execution (the replay rule's unit).
    StepKey
);
name_type!(
    /// Identity of a store (RFC 005, reduced): one initial state per id.
    StoreId
);
name_type!(
    /// Key of one entry inside a store.
    StoreKey
);
name_type!(
    /// Start-request id (RFC 003): a repeat with the same id starts nothing.
    RequestId
);
name_type!(
    /// Name of the workflow an execution runs.
    WorkflowName
);
name_type!(
    /// The key whose live leases a concurrency limit counts (a tenant, a
    /// customer, an account).
    ConcurrencyKey
);
name_type!(
    /// Identity of one effect (RFC 004, reduced): a repeated `begin` with the same id, by any
    /// holder, finds the effect instead of creating another. Pass it to the external system
    /// as its idempotency key.
    EffectId
);
