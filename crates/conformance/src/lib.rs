//! The RFC 002 conformance suite.
//!
//! An adapter proves itself with one line in a test file, given a [`Harness`]:
//!
//! ```text
//! lease_conformance::conformance_tests!(my_crate::MyHarness);
//! ```
//!
//! It expands to one `#[test]` per row of the RFC's tables and per rule of the execution
//! model the tables leave out (`cases::semantics`), each named after its row, each on a
//! fresh store.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod cases;
pub mod context;
pub mod harness;
pub mod race;
pub mod refusals;

pub use context::{Ctx, run_case};
pub use harness::Harness;
/// The test-table crate [`conformance_tests!`] expands to (built without its `crate-name`
/// feature, so its macros name it `rstest` and find this re-export): an adapter's test crate
/// needs no rstest dependency of its own, and may write its own tables with
/// `use lease_conformance::rstest::rstest;`.
pub use rstest;

/// Expands to one named test per conformance case for the harness type `$harness`.
///
/// Invoke it at the top level of an integration-test file; `$harness` must be a path that
/// resolves there.
#[macro_export]
macro_rules! conformance_tests {
    ($harness:ty) => {
        $crate::__leases_cases!($harness);
        $crate::__fencing_cases!($harness);
        $crate::__redelivery_cases!($harness);
        $crate::__semantics_cases!($harness);
        $crate::__store_cases!($harness);
        $crate::__bad_input_cases!($harness);
        $crate::__pickup_cases!($harness);
        $crate::__combined_cases!($harness);
        $crate::__retention_cases!($harness);
        $crate::__schedules_cases!($harness);
        $crate::__counts_cases!($harness);
        $crate::__effects_cases!($harness);
        $crate::__differential_cases!($harness);
        $crate::__dispatcher_cases!($harness);
        $crate::__cancel_cases!($harness);
        $crate::__pause_cases!($harness);
        $crate::__priority_cases!($harness);
        $crate::__limits_cases!($harness);
        $crate::__backlog_cases!($harness);
        $crate::__traces_cases!($harness);
        $crate::__live_cases!($harness);
        $crate::__attempts_cases!($harness);
        $crate::__rates_cases!($harness);
        $crate::__ordering_cases!($harness);
        $crate::__browse_cases!($harness);
        $crate::__workflow_redelivery_cases!($harness);
        $crate::__history_cases!($harness);
        $crate::__declared_cases!($harness);
    };
}

/// One test per case of table module `$table`; an implementation detail of
/// [`conformance_tests!`] (each module's `__<module>_cases!` lists its cases through it).
#[doc(hidden)]
#[macro_export]
macro_rules! __cases {
    ($harness:ty, $table:ident, [$($case:ident),* $(,)?]) => {
        $($crate::__case!($harness, $table, $case);)*
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

#[cfg(test)]
mod tests {
    /// The body of `macro_rules! name { ... }` in `source` (up to its closing line).
    fn macro_body<'a>(source: &'a str, name: &str) -> Option<&'a str> {
        let start = source.find(&format!("macro_rules! {name} {{"))?;
        let rest = &source[start..];
        let end = rest.find("\n}\n")?;
        Some(&rest[..end])
    }

    /// Whether `word` occurs in `text` as a whole identifier.
    fn has_word(text: &str, word: &str) -> bool {
        text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|w| w == word)
    }

    /// Every case of every cases module is listed in that module's own `__<module>_cases!`
    /// macro, and [`conformance_tests!`] expands every module's macro, so none is silently
    /// skipped.
    #[test]
    fn every_case_is_listed_in_its_module_macro() {
        let lib = include_str!("lib.rs");
        let suite = macro_body(lib, "conformance_tests").expect("conformance_tests! in lib.rs");
        let modules = [
            ("leases", include_str!("cases/leases.rs")),
            ("fencing", include_str!("cases/fencing.rs")),
            ("redelivery", include_str!("cases/redelivery.rs")),
            ("semantics", include_str!("cases/semantics.rs")),
            ("store", include_str!("cases/store.rs")),
            ("bad_input", include_str!("cases/bad_input.rs")),
            ("pickup", include_str!("cases/pickup.rs")),
            ("differential", include_str!("cases/differential.rs")),
            ("combined", include_str!("cases/combined.rs")),
            ("retention", include_str!("cases/retention.rs")),
            ("schedules", include_str!("cases/schedules.rs")),
            ("counts", include_str!("cases/counts.rs")),
            ("effects", include_str!("cases/effects.rs")),
            ("dispatcher", include_str!("cases/dispatcher.rs")),
            ("cancel", include_str!("cases/cancel.rs")),
            ("pause", include_str!("cases/pause.rs")),
            ("priority", include_str!("cases/priority.rs")),
            ("limits", include_str!("cases/limits.rs")),
            ("backlog", include_str!("cases/backlog.rs")),
            ("traces", include_str!("cases/traces.rs")),
            ("live", include_str!("cases/live.rs")),
            ("attempts", include_str!("cases/attempts.rs")),
            ("rates", include_str!("cases/rates.rs")),
            ("ordering", include_str!("cases/ordering.rs")),
            ("browse", include_str!("cases/browse.rs")),
            (
                "workflow_redelivery",
                include_str!("cases/workflow_redelivery.rs"),
            ),
            ("history", include_str!("cases/history.rs")),
            ("declared", include_str!("cases/declared.rs")),
        ];
        let mut count = 0;
        for (module, source) in modules {
            let name = format!("__{module}_cases");
            assert!(
                has_word(suite, &name),
                "conformance_tests! does not expand {name}!"
            );
            let list = macro_body(source, &name)
                .unwrap_or_else(|| panic!("cases/{module}.rs defines no {name}!"));
            for line in source.lines() {
                let Some(rest) = line.strip_prefix("pub async fn ") else {
                    continue;
                };
                let case = rest.split('<').next().unwrap_or_default();
                count += 1;
                assert!(has_word(list, case), "{module}::{case} is not in {name}!");
            }
        }
        assert!(count >= 45, "only {count} cases");
    }
}
