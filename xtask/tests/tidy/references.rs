//! No ticket numbers and no outside design notes: a comment, doc or message says why in
//! words, because a reader of the repository has neither the tracker behind "issue N" /
//! "Issue N item M" / "issues N and M" nor the `design.md` that lived outside it (the
//! repository's own notes are `docs/DESIGN.md`, upper case). Checked in the places listed in
//! [`CLEANED`], every file below them; the list grows as the rest of the tree is cleaned.

use std::path::{Path, PathBuf};

/// A directory checked (relative to the workspace root), with entries below it left out
/// (relative to the directory: a file, or a directory and everything in it).
pub struct Place {
    pub dir: &'static str,
    pub except: &'static [&'static str],
}

/// The places already cleaned of ticket references.
pub const CLEANED: &[Place] = &[
    Place {
        dir: "xtask",
        except: &[],
    },
    Place {
        dir: "crates/lease",
        except: &[],
    },
    Place {
        dir: "crates/lease-schedule",
        except: &[],
    },
    Place {
        dir: "crates/lease-testserver",
        except: &[],
    },
    Place {
        dir: "crates/lease-worker",
        except: &[],
    },
    Place {
        dir: "crates/lease-core/src",
        except: &["memory.rs", "memory", "lib.rs"],
    },
    Place {
        dir: "crates/lease-sqlite/examples",
        except: &[],
    },
    Place {
        dir: "crates/lease-postgres/examples",
        except: &[],
    },
    Place {
        dir: "crates/lease-redis/examples",
        except: &[],
    },
];

/// This file: it has to spell out what it looks for.
const THIS_FILE: &str = "xtask/tests/tidy/references.rs";

/// Every reference in the cleaned places below `root`, as `path:line: text`.
pub fn violations(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for place in CLEANED {
        for path in files(&root.join(place.dir), place.except) {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            if rel == Path::new(THIS_FILE) {
                continue;
            }
            // Not UTF-8: not text anyone reads as a comment.
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            for (line, reference) in references_in(&text) {
                found.push(format!("{}:{line}: {reference}", rel.display()));
            }
        }
    }
    found
}

/// The places and exceptions of [`CLEANED`] that do not exist below `root`: a renamed
/// directory would otherwise be checked by nobody without a word.
pub fn missing_places(root: &Path) -> Vec<String> {
    let mut missing = Vec::new();
    for place in CLEANED {
        let dir = root.join(place.dir);
        if !dir.is_dir() {
            missing.push(format!("{}: no such directory", place.dir));
        }
        for except in place.except {
            if !dir.join(except).exists() {
                missing.push(format!("{}/{except}: excepted but absent", place.dir));
            }
        }
    }
    missing
}

/// (line, text) of every ticket or outside-design reference in `text`: `issue` or `issues`
/// (any case, starting a word) followed by a number, spaces, `#` or comment markers
/// allowed between them, even across a line break; and `design.md` in lower case.
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
            .trim_start_matches([' ', '\t', '\r', '\n', '/', '!', '#', '*'])
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

/// Every file below `dir` except the `except` entries, skipping build output, hidden
/// entries and symbolic links (crates/lease/README.md is the root README's).
fn files(dir: &Path, except: &[&str]) -> Vec<PathBuf> {
    let skipped: Vec<PathBuf> = except.iter().map(|e| dir.join(e)).collect();
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
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
            if skipped.contains(&path) {
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
";
    let lines: Vec<usize> = references_in(text).iter().map(|(line, _)| *line).collect();
    assert_eq!(lines, [1, 2, 3, 4, 4, 5, 7]);
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

/// The rule fails on a file holding a reference in a cleaned place, and passes over the
/// same reference in an excepted file.
#[test]
fn a_reference_in_a_cleaned_place_fails_the_rule() {
    let root = std::env::temp_dir().join(format!("tidy-references-{}", std::process::id()));
    let core = root.join("crates/lease-core/src");
    std::fs::create_dir_all(&core).expect("temp tree");
    std::fs::create_dir_all(root.join("xtask/src")).expect("temp tree");
    std::fs::write(core.join("lib.rs"), "//! issue 3 (excepted)\n").expect("write");
    std::fs::write(core.join("clock.rs"), "//! ok\n/// (issue 9)\n").expect("write");
    std::fs::write(root.join("xtask/src/main.rs"), "fn main() {}\n").expect("write");
    let found = violations(&root);
    std::fs::remove_dir_all(&root).expect("remove the temp tree");
    assert_eq!(found, ["crates/lease-core/src/clock.rs:2: issue 9)"]);
}
