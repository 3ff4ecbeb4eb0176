//! A migration's text cut into the parts the runner applies one at a time: runs of
//! statements applied in one transaction, and the single statements PostgreSQL refuses
//! inside one (`CREATE [UNIQUE] INDEX CONCURRENTLY`, `DROP INDEX CONCURRENTLY`), each
//! applied on its own so building an index on a busy table never blocks its writers.
//!
//! A concurrent statement starts a line and ends at the first line ending in `;`; the
//! migration files keep them out of function bodies.

/// One part of a migration, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Part {
    /// Statements applied together in one transaction.
    Transaction(String),
    /// One statement applied outside any transaction.
    Concurrent(Concurrent),
}

/// A statement PostgreSQL runs only outside a transaction block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Concurrent {
    /// The statement as written (with `{s}` for the schema).
    pub(crate) sql: String,
    /// Which index it builds or drops (unqualified).
    pub(crate) index: String,
    /// Whether it builds the index (else it drops it).
    pub(crate) builds: bool,
}

impl Concurrent {
    /// The same statement without `CONCURRENTLY`, for a transaction that creates the
    /// schema: its tables are new and seen by no one, so nothing waits on the build.
    pub(crate) fn plain(&self) -> String {
        self.sql.replacen(" CONCURRENTLY", "", 1)
    }
}

/// `sql` cut into parts; parts of only comments and blank lines are left out.
pub(crate) fn parts(sql: &str) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut run = String::new();
    let mut lines = sql.lines();
    while let Some(line) = lines.next() {
        let Some((index, builds)) = concurrent_head(line) else {
            run.push_str(line);
            run.push('\n');
            continue;
        };
        let mut statement = line.to_owned();
        let mut end = line;
        while !end.trim_end().ends_with(';') {
            let Some(next) = lines.next() else { break };
            statement.push('\n');
            statement.push_str(next);
            end = next;
        }
        flush(&mut parts, &mut run);
        parts.push(Part::Concurrent(Concurrent {
            sql: statement.trim_end().trim_end_matches(';').to_owned(),
            index,
            builds,
        }));
    }
    flush(&mut parts, &mut run);
    parts
}

/// Ends the current run of transactional statements, unless it holds no statement.
fn flush(parts: &mut Vec<Part>, run: &mut String) {
    let code = run
        .lines()
        .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with("--"));
    if code {
        parts.push(Part::Transaction(std::mem::take(run)));
    }
    run.clear();
}

/// When `line` starts a concurrent statement: the index it names and whether it builds it.
fn concurrent_head(line: &str) -> Option<(String, bool)> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
    let upper: Vec<&str> = upper.iter().map(String::as_str).collect();
    let (builds, rest) = match upper.as_slice() {
        ["CREATE", "INDEX", "CONCURRENTLY", ..] => (true, 3),
        ["CREATE", "UNIQUE", "INDEX", "CONCURRENTLY", ..] => (true, 4),
        ["DROP", "INDEX", "CONCURRENTLY", ..] => (false, 3),
        _ => return None,
    };
    let skip = match upper.get(rest..) {
        Some(["IF", "NOT", "EXISTS", ..]) => 3,
        Some(["IF", "EXISTS", ..]) => 2,
        _ => 0,
    };
    let name = words.get(rest + skip)?.trim_end_matches(';');
    // A dropped index is named with its schema (`{s}.name`); a built one never is.
    let name = name.rsplit('.').next().unwrap_or(name);
    Some((name.to_owned(), builds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_statements_are_cut_out_in_order() {
        let sql = "-- header\nALTER TABLE {s}.t ADD COLUMN c int;\n\n\
                   CREATE UNIQUE INDEX CONCURRENTLY t_c ON {s}.t (c)\n    WHERE c > 0;\n\
                   DROP INDEX CONCURRENTLY IF EXISTS {s}.t_old;\n\
                   CREATE INDEX t_plain ON {s}.t (c);\n-- trailing comment\n";
        let got = parts(sql);
        assert_eq!(got.len(), 4, "{got:?}");
        assert!(matches!(&got[0], Part::Transaction(t) if t.contains("ALTER TABLE")));
        let Part::Concurrent(build) = &got[1] else {
            panic!("{got:?}")
        };
        assert_eq!(
            (build.index.as_str(), build.builds),
            ("t_c", true),
            "{build:?}"
        );
        assert_eq!(
            build.sql,
            "CREATE UNIQUE INDEX CONCURRENTLY t_c ON {s}.t (c)\n    WHERE c > 0"
        );
        assert_eq!(
            build.plain(),
            "CREATE UNIQUE INDEX t_c ON {s}.t (c)\n    WHERE c > 0"
        );
        assert!(matches!(&got[2], Part::Concurrent(d) if d.index == "t_old" && !d.builds));
        assert!(matches!(&got[3], Part::Transaction(t) if t.contains("t_plain")));
    }

    #[test]
    fn a_migration_without_concurrent_statements_is_one_part() {
        let sql = "CREATE TABLE {s}.t (x int);\nCREATE INDEX t_x ON {s}.t (x);\n";
        assert_eq!(parts(sql), vec![Part::Transaction(sql.to_owned())]);
    }
}
