//! No ticket numbers and no outside design notes: a comment, doc or message says why in
//! words, because a reader of the repository has neither the tracker behind "issue N" /
//! "Issue N item M" / "issues N and M" nor the `design.md` that lived outside it (the
//! repository's own notes are `docs/decisions/` and `docs/DESIGN.md`, upper case). Checked in every file below
//! [`CHECKED`] (source, docs, SQL, Lua, manifests alike), with no exceptions but this file.

use std::path::{Path, PathBuf};

/// Where the rule applies, relative to the workspace root: a directory (every file below
/// it) or a single file.
pub const CHECKED: &[&str] = &["crates", "xtask", "examples", "docs", ".ci", "README.md"];

/// This file: it has to spell out what it looks for.
const THIS_FILE: &str = "xtask/tests/tidy/references.rs";

/// Every reference below `root` in [`CHECKED`], as `path:line: text`.
pub fn violations(root: &Path) -> Vec<String> {
    let this_file = root.join(THIS_FILE);
    let mut found = Vec::new();
    for checked in CHECKED {
        for path in files(&root.join(checked), &this_file) {
            // Not UTF-8: not text anyone reads as a comment.
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let rel = path.strip_prefix(root).unwrap_or(&path);
            for (line, reference) in references_in(&text) {
                found.push(format!("{}:{line}: {reference}", rel.display()));
            }
        }
    }
    found
}

/// The entries of [`CHECKED`] that do not exist below `root`: a renamed directory would
/// otherwise go unchecked without a word.
pub fn missing_places(root: &Path) -> Vec<String> {
    CHECKED
        .iter()
        .filter(|place| !root.join(place).exists())
        .map(|place| format!("{place}: no such file or directory"))
        .collect()
}

/// (line, text) of every ticket or outside-design reference in `text`: `issue` or `issues`
/// (any case, starting a word) followed by a number, spaces, `#` or comment markers (Rust's
/// `//`, `///`, `//!`, `*`; SQL's and Lua's `--`) allowed between them, even across a line
/// break; and `design.md` in lower case.
pub fn references_in(text: &str) -> Vec<(usize, String)> {
    let lower = text.to_ascii_lowercase();
    let mut found = Vec::new();
    for (at, _) in lower.match_indices("issue") {
        let word_start = lower[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric() && c != '_');
        let rest = &lower[at + "issue".len()..];
        let rest = rest.strip_prefix('s').unwrap_or(rest);
        let number = rest
            .trim_start_matches([' ', '\t', '\r', '\n', '/', '!', '#', '*', '-'])
            .starts_with(|c: char| c.is_ascii_digit());
        if word_start && number {
            found.push((line_of(text, at), excerpt(text, at)));
        }
    }
    for (at, _) in text.match_indices("design.md") {
        found.push((line_of(text, at), excerpt(text, at)));
    }
    found.sort();
    found
}

/// The 1-based line of byte offset `at`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

/// The rest of the line from `at`, shortened.
fn excerpt(text: &str, at: usize) -> String {
    let line = text[at..].lines().next().unwrap_or_default();
    line.chars().take(60).collect()
}

/// `place` itself when it is a file, else every file below it, leaving out `skipped`, build
/// output, hidden entries and symbolic links (crates/lease/README.md is the root README's).
fn files(place: &Path, skipped: &Path) -> Vec<PathBuf> {
    if place == skipped {
        return Vec::new();
    }
    if place.is_file() {
        return vec![place.to_path_buf()];
    }
    let mut found = Vec::new();
    let mut stack = vec![place.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if name == "target" || name.starts_with('.') || kind.is_symlink() {
                continue;
            }
            if path == skipped {
                continue;
            }
            if kind.is_dir() {
                stack.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

#[test]
fn references_are_found_in_every_spelling() {
    let text = "\
fn a() {} // see issue 12
/// Issue 25 item 2: a password stays out of messages.
//! (issues 12 and 13)
// issue #7, and issue12 as a name
/// a wrapped reference (issue
/// 24) still counts
//! design.md section 4
-- a wrapped SQL or Lua reference (issue
-- 16) counts too
";
    let lines: Vec<usize> = references_in(text).iter().map(|(line, _)| *line).collect();
    assert_eq!(lines, [1, 2, 3, 4, 4, 5, 7, 8]);
}

#[test]
fn words_are_not_references() {
    let text = "\
// no token is ever issued twice; tissue 3 is no ticket
// an issue with 3 causes, misissue 4
/// docs/DESIGN.md \"Schedules\" is the repository's own
";
    assert_eq!(references_in(text), Vec::<(usize, String)>::new());
}

/// The rule fails on a planted reference in every checked place (a crate's source, SQL and
/// Lua, docs, the root README), the places last cleaned included, and passes over this
/// file, which has to spell out what it looks for.
#[test]
fn a_planted_reference_fails_the_rule_everywhere() {
    let root = std::env::temp_dir().join(format!("tidy-references-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let write = |rel: &str, text: &str| {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("temp tree");
        std::fs::write(path, text).expect("write");
    };
    write("crates/lease-core/src/clock.rs", "//! ok\n/// (issue 9)\n");
    write(
        "crates/lease-sqlite/src/claim.sql",
        "-- the claim (Issue 21 item 4)\n",
    );
    write("crates/lease-redis/src/scripts/claim.lua", "-- issue 3\n");
    write("crates/bench/src/row.rs", "// issue 24 item 1\n");
    write("crates/torture/src/main.rs", "//! (issue 6)\n");
    write("docs/DESIGN.md", "ok\n\nsee issue 12's comparison\n");
    write("docs/BENCHMARKS.md", "(issue 23 item 1)\n");
    write("README.md", "# ok\nissues 3 and 4\n");
    write("xtask/src/main.rs", "fn main() {}\n");
    write(THIS_FILE, "// issue 1, skipped\n");
    write(
        "examples/redb-adapter/src/lib.rs",
        "//! ../shared/design.md\n",
    );
    let mut found = violations(&root);
    std::fs::remove_dir_all(&root).expect("remove the temp tree");
    found.sort();
    assert_eq!(
        found,
        [
            "README.md:2: issues 3 and 4",
            "crates/bench/src/row.rs:1: issue 24 item 1",
            "crates/lease-core/src/clock.rs:2: issue 9)",
            "crates/lease-redis/src/scripts/claim.lua:1: issue 3",
            "crates/lease-sqlite/src/claim.sql:1: Issue 21 item 4)",
            "crates/torture/src/main.rs:1: issue 6)",
            "docs/BENCHMARKS.md:1: issue 23 item 1)",
            "docs/DESIGN.md:3: issue 12's comparison",
            "examples/redb-adapter/src/lib.rs:1: design.md",
        ]
    );
}
