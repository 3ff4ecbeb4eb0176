//! The RFC 002 conformance suite.
//!
//! An adapter proves itself with one line in a test file, given a [`Harness`]:
//!
//! ```text
//! lease_conformance::conformance_tests!(my_crate::MyHarness);
//! ```
//!
//! It expands to one `#[test]` per row of the RFC's tables and per rule of design.md
//! section 2, each named after its row, each on a fresh store.

pub mod cases;
pub mod context;
pub mod harness;

pub use context::{Ctx, run_case};
pub use harness::Harness;

/// Expands to one named test per conformance case for the harness type `$harness`.
///
/// Invoke it at the top level of an integration-test file; `$harness` must be a path that
/// resolves there.
#[macro_export]
macro_rules! conformance_tests {
    ($harness:ty) => {
        $crate::__case!($harness, leases, claim_sets_status_running);
        $crate::__case!($harness, leases, expired_lease_claimable_with_higher_token);
    };
}

/// One test; an implementation detail of [`conformance_tests!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __case {
    ($harness:ty, $table:ident, $case:ident) => {
        #[test]
        fn $case() {
            $crate::run_case::<$harness, _, _>($crate::cases::$table::$case::<$harness>);
        }
    };
}
