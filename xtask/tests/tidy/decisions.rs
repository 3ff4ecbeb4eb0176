//! The decision records (`docs/decisions/`): one file per decision, named `NNNN-name.md`,
//! titled `# N. ...` with its own number, each listed in the index (`README.md` there), every
//! index link pointing at a record that exists. A record states the rule as it stands, so it
//! carries no dates (`2026-12-05`, `2026-12`) and no work-log notes ("this session",
//! "session 12"): history is git's, figures are docs/BENCHMARKS.md's. The word "session"
//! alone stays allowed, since PostgreSQL sessions and the console's sessions are rules.

use std::path::Path;

/// Where the records live, relative to the workspace root.
pub const DIR: &str = "docs/decisions";

/// The index of the records, inside [`DIR`].
const INDEX: &str = "README.md";

/// Work-log phrases no record may hold (compared in lower case).
const LOG_PHRASES: &[&str] = &[
    "this session",
    "last session",
    "previous session",
    "earlier session",
    "next session",
];

/// Every broken rule below `root`, as `path: problem`.
pub fn violations(root: &Path) -> Vec<String> {
    let dir = root.join(DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return vec![format!("{DIR}: no such directory")];
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != INDEX && !name.starts_with('.'))
        .collect();
    names.sort();
    let index = std::fs::read_to_string(dir.join(INDEX)).unwrap_or_default();
    let mut found = Vec::new();
    if index.is_empty() {
        found.push(format!("{DIR}/{INDEX}: missing or empty"));
    }
    for name in &names {
        let text = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        found.extend(record_problems(name, &text, &index));
    }
    found.extend(dangling_links(&index, &names));
    found
}

/// What is wrong with one record: its name, its title, its absence from the index, dates
/// and work-log phrases in its text.
fn record_problems(name: &str, text: &str, index: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Some(number) = record_number(name) else {
        found.push(format!("{DIR}/{name}: not named NNNN-name.md"));
        return found;
    };
    let title = format!("# {number}. ");
    if !text.starts_with(&title) {
        found.push(format!(
            "{DIR}/{name}: the first line does not start with {title:?}"
        ));
    }
    if !index.contains(&format!("]({name})")) {
        found.push(format!("{DIR}/{name}: not listed in {INDEX}"));
    }
    for (line, what) in dated_or_logged(text) {
        found.push(format!("{DIR}/{name}:{line}: {what}"));
    }
    found
}

/// The number of a record named `NNNN-name.md` (lower-case letters, digits and dashes after
/// the four digits), or `None` for any other name.
fn record_number(name: &str) -> Option<u32> {
    let stem = name.strip_suffix(".md")?;
    let (digits, rest) = stem.split_at_checked(4)?;
    let slug = rest.strip_prefix('-')?;
    let slug_ok = !slug.is_empty()
        && slug
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !digits.chars().all(|c| c.is_ascii_digit()) || !slug_ok {
        return None;
    }
    digits.parse().ok()
}

/// (line, what) of every date (`YYYY-MM`, so `YYYY-MM-DD` too) and work-log phrase.
fn dated_or_logged(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(date) = year_month(line) {
            found.push((i + 1, format!("a date ({date})")));
        }
        let lower = line.to_ascii_lowercase();
        for phrase in LOG_PHRASES {
            if lower.contains(phrase) {
                found.push((i + 1, format!("a work-log note ({phrase:?})")));
            }
        }
        if let Some(at) = session_number(&lower) {
            found.push((i + 1, format!("a work-log note ({:?})", &line[at..])));
        }
    }
    found
}

/// The first `19YY-MM` or `20YY-MM` in `line` (a year, a dash, a month 01..=12) that is not
/// part of a longer number.
fn year_month(line: &str) -> Option<&str> {
    let bytes = line.as_bytes();
    let is_date = |at: usize| {
        let w = &bytes[at..at + 7];
        let digits = |r: std::ops::Range<usize>| w[r].iter().all(u8::is_ascii_digit);
        let shape = (&w[..2] == b"19" || &w[..2] == b"20") && digits(0..4) && w[4] == b'-';
        let month_ok = digits(5..7) && (1..=12).contains(&((w[5] - b'0') * 10 + w[6] - b'0'));
        let before_ok = at == 0 || !bytes[at - 1].is_ascii_digit();
        let after_ok = bytes.get(at + 7).is_none_or(|b| !b.is_ascii_digit());
        shape && month_ok && before_ok && after_ok
    };
    (0..bytes.len().saturating_sub(6))
        .find(|&at| is_date(at))
        .map(|at| &line[at..at + 7])
}

/// The offset of "session" followed by a number ("session 12", "session #3").
fn session_number(lower: &str) -> Option<usize> {
    lower.match_indices("session").find_map(|(at, word)| {
        let rest = lower[at + word.len()..].trim_start_matches([' ', '#']);
        rest.starts_with(|c: char| c.is_ascii_digit()).then_some(at)
    })
}

/// Index links to records (`](NNNN-...md)`) whose file does not exist.
fn dangling_links(index: &str, names: &[String]) -> Vec<String> {
    index
        .match_indices("](")
        .filter_map(|(at, _)| {
            let target = index[at + 2..].split(')').next()?;
            record_number(target)?;
            (!names.iter().any(|n| n == target))
                .then(|| format!("{DIR}/{INDEX}: links to {target}, which does not exist"))
        })
        .collect()
}

#[test]
fn dates_and_log_notes_are_found() {
    let text = "# 1. A rule\n\
        measured on 2026-12-05 at load 3\n\
        as of 2026-11\n\
        in this session we tried\n\
        (session 12)\n\
        a PostgreSQL session keeps its lock\n\
        the range 2020-2030 and 120260-12 and 2026-13 are no dates\n";
    let lines: Vec<usize> = dated_or_logged(text).iter().map(|(l, _)| *l).collect();
    assert_eq!(lines, [2, 3, 4, 5]);
}

#[test]
fn record_names_are_checked() {
    assert_eq!(record_number("0007-claim-order.md"), Some(7));
    assert_eq!(record_number("0042-a2-b.md"), Some(42));
    for bad in [
        "7-claim.md",
        "0007_claim.md",
        "0007-Claim.md",
        "0007-.md",
        "notes.md",
    ] {
        assert_eq!(record_number(bad), None, "{bad}");
    }
}

/// A planted tree: an unlisted record, a wrong title, a dated record, a badly named file
/// and a dangling index link are each reported; a good record is not.
#[test]
fn a_planted_tree_fails_the_rule() {
    let root = std::env::temp_dir().join(format!("tidy-decisions-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let dir = root.join(DIR);
    std::fs::create_dir_all(&dir).expect("temp tree");
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).expect("write");
    write(
        INDEX,
        "| [0001](0001-good.md) | [0002](0002-titled.md) | [0003](0003-dated.md) | [0009](0009-gone.md) |\n",
    );
    write("0001-good.md", "# 1. Good\n\nA PostgreSQL session.\n");
    write("0002-titled.md", "# 3. Wrong number\n");
    write("0003-dated.md", "# 3. Dated\n\nRun on 2026-12-04.\n");
    write("0004-unlisted.md", "# 4. Unlisted\n");
    write("notes.md", "scratch\n");
    let mut found = violations(&root);
    std::fs::remove_dir_all(&root).expect("remove the temp tree");
    found.sort();
    assert_eq!(
        found,
        [
            "docs/decisions/0002-titled.md: the first line does not start with \"# 2. \"",
            "docs/decisions/0003-dated.md:3: a date (2026-12)",
            "docs/decisions/0004-unlisted.md: not listed in README.md",
            "docs/decisions/README.md: links to 0009-gone.md, which does not exist",
            "docs/decisions/notes.md: not named NNNN-name.md",
        ]
    );
}
