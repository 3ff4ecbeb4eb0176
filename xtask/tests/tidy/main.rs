//! `tidy`: the tree's own rules, checked on every `cargo xtask test-all` (the `tidy` row),
//! in the style of rust-analyzer's tidy test. Each rule is one test that lists every place
//! breaking it:
//! - functions: none over 80 lines in the library crates, none over 150 anywhere outside
//!   tests ([`lengths`]);
//! - no import circle between the modules of a crate ([`circles`]);
//! - the adapter skeleton: the same file for the same concern in every adapter, each client
//!   trait implemented in its own file, statements in `.sql`/`.lua` files beside the module
//!   that runs them ([`skeleton`]);
//! - wrappers forward every method: only backends implement the client traits, a wrapper
//!   implements their `Forward*` twins, whose defaults forward each method ([`forwarding`]);
//! - no tracker ticket numbers and no outside design notes in crates/, xtask/, examples/,
//!   docs/ and README.md: the reason is written out instead ([`references`]);
//! - decision records: one `NNNN-name.md` per decision in docs/decisions/, each listed in its
//!   index, none dated or carrying work-log notes ([`decisions`]).

mod circles;
mod decisions;
mod forwarding;
mod lengths;
mod references;
mod skeleton;
mod source;

use std::path::PathBuf;

/// The workspace root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lies inside the workspace")
        .to_path_buf()
}

/// Fails with every violation of one rule, one per line.
fn assert_none(rule: &str, violations: Vec<String>) {
    assert!(
        violations.is_empty(),
        "{rule}: {} violation(s)\n{}",
        violations.len(),
        violations.join("\n")
    );
}

#[test]
fn no_function_over_its_limit() {
    assert_none("function length", lengths::violations(&root()));
}

#[test]
fn no_import_circle_inside_a_crate() {
    assert_none("import circles", circles::violations(&root()));
}

#[test]
fn adapters_share_one_skeleton() {
    assert_none("adapter skeleton", skeleton::violations(&root()));
}

#[test]
fn wrappers_forward_every_method() {
    assert_none("wrapper forwarding", forwarding::violations(&root()));
}

#[test]
fn no_ticket_references() {
    assert_none(
        "checked places that do not exist",
        references::missing_places(&root()),
    );
    assert_none("ticket references", references::violations(&root()));
}

#[test]
fn decision_records_are_indexed_and_undated() {
    assert_none("decision records", decisions::violations(&root()));
}
