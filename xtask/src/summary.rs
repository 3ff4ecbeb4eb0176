//! Counting test results from cargo test's `test result:` lines, and the summary table.

use std::fmt::Write as _;

/// Test counts of one or more `test result:` lines.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Tests that passed.
    pub passed: u64,
    /// Tests that failed.
    pub failed: u64,
    /// Tests marked `#[ignore]` that did not run.
    pub ignored: u64,
}

impl Counts {
    /// Adds `other` to these counts.
    pub fn add(&mut self, other: Counts) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.ignored += other.ignored;
    }
}

/// Parses libtest's closing line of one test binary, for example
/// `test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.03s`.
/// `None` for any other line.
pub fn parse_result_line(line: &str) -> Option<Counts> {
    let (_, rest) = line.split_once("test result:")?;
    let mut counts = Counts::default();
    let mut seen = false;
    for part in rest.split(';') {
        let mut words = part.split_whitespace().rev();
        let (Some(label), Some(number)) = (words.next(), words.next()) else {
            continue;
        };
        let Ok(n) = number.parse::<u64>() else {
            continue;
        };
        match label {
            "passed" => counts.passed = n,
            "failed" => counts.failed = n,
            "ignored" => counts.ignored = n,
            _ => continue,
        }
        seen = true;
    }
    seen.then_some(counts)
}

/// The test name of libtest's per-test line (`test a::b ... ok`), for counting distinct
/// names across rows (the same test body runs in several rows). `None` for any
/// other line.
pub fn test_name(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("test ")?;
    let (name, outcome) = rest.rsplit_once(" ... ")?;
    matches!(outcome, "ok" | "FAILED" | "ignored").then_some(name)
}

/// The line under the totals: test runs against distinct test names.
pub fn distinct_line(runs: u64, distinct: usize) -> String {
    format!(
        "{runs} test runs of {distinct} distinct test names (a body several rows run, such as \
         the conformance suite per backend, counts once here)"
    )
}

/// One row of the summary: a backend's counts, wall time and what went wrong, if anything.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Backend name.
    pub name: String,
    /// Summed counts of its test binaries.
    pub counts: Counts,
    /// Of the passed tests, the conformance cases that on their harness only checked a
    /// capability's refusal or absence (the conformance crate's `refusals` record).
    pub refusals: u64,
    /// Wall time of its `cargo test`, build included.
    pub seconds: f64,
    /// Why the row failed beyond failed tests (build failure, missing server), if it did.
    pub problem: Option<String>,
}

/// What a row that ran no test says: a filter or feature that matches nothing proves
/// nothing, and must not read as success.
pub const RAN_NO_TEST: &str = "ran no test";

impl Row {
    /// Why the row failed beyond failed tests: its own problem, or [`RAN_NO_TEST`] when
    /// none of its tests ran (all ignored or none found).
    pub fn problem(&self) -> Option<&str> {
        match &self.problem {
            Some(p) => Some(p),
            None if self.counts.passed + self.counts.failed == 0 => Some(RAN_NO_TEST),
            None => None,
        }
    }

    /// Failures this row adds to the total: its failed tests, or 1 when it failed without a
    /// failed test (a build error, a missing server or no test run must not read as
    /// success).
    pub fn failures(&self) -> u64 {
        if self.problem().is_some() && self.counts.failed == 0 {
            1
        } else {
            self.counts.failed
        }
    }

    /// Passed tests that exercised behaviour: the passed ones but the refusal-only cases.
    pub fn behaviour(&self) -> u64 {
        self.counts.passed.saturating_sub(self.refusals)
    }
}

/// The number of distinct entries of a refusal record (one `harness<TAB>test` line per
/// refusal-only case, possibly repeated when a case checks two refusals).
pub fn count_refusals(record: &str) -> u64 {
    let lines: std::collections::BTreeSet<&str> =
        record.lines().filter(|l| !l.trim().is_empty()).collect();
    lines.len() as u64
}

/// The line under the table: how many of the passed tests exercised behaviour and how
/// many only checked that a backend refuses a capability it lacks.
pub fn refusals_line(rows: &[Row]) -> String {
    let passed: u64 = rows.iter().map(|r| r.counts.passed).sum();
    let refusals: u64 = rows.iter().map(|r| r.refusals).sum();
    format!(
        "of {passed} passed: {} exercised behaviour, {refusals} only checked a capability's \
         refusal (a harness without it: the minimal adapter, a partitioned Redis namespace)",
        passed - refusals.min(passed)
    )
}

/// The totals line, exactly `N passed, M failed, K skipped` (skipped = ignored tests).
pub fn totals_line(rows: &[Row], failed_checks: u64) -> String {
    let passed: u64 = rows.iter().map(|r| r.counts.passed).sum();
    let failed: u64 = rows.iter().map(Row::failures).sum::<u64>() + failed_checks;
    let skipped: u64 = rows.iter().map(|r| r.counts.ignored).sum();
    format!("{passed} passed, {failed} failed, {skipped} skipped")
}

/// The summary table: backend, passed (behaviour, refusal-only), failed, ignored, seconds,
/// and a status note.
pub fn table(rows: &[Row]) -> String {
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(0).max(7);
    let mut out = format!(
        "{:<width$}  {:>9}  {:>7}  {:>6}  {:>7}  {:>7}  status\n",
        "backend", "behaviour", "refusal", "failed", "ignored", "seconds"
    );
    for r in rows {
        let status = match r.problem() {
            None if r.counts.failed == 0 => "ok".to_owned(),
            None => "FAILED".to_owned(),
            Some(p) => format!("FAILED: {p}"),
        };
        let _ = writeln!(
            out,
            "{:<width$}  {:>9}  {:>7}  {:>6}  {:>7}  {:>7.1}  {status}",
            r.name,
            r.behaviour(),
            r.refusals,
            r.failures(),
            r.counts.ignored,
            r.seconds
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ok_and_failed_lines() {
        assert_eq!(
            parse_result_line(
                "test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.03s"
            ),
            Some(Counts {
                passed: 12,
                failed: 0,
                ignored: 1
            })
        );
        assert_eq!(
            parse_result_line(
                "test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured; 5 filtered out; finished in 1.20s"
            ),
            Some(Counts {
                passed: 3,
                failed: 2,
                ignored: 0
            })
        );
        assert_eq!(
            parse_result_line(
                "test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s"
            ),
            Some(Counts::default())
        );
    }

    #[test]
    fn test_names_of_per_test_lines_only() {
        assert_eq!(test_name("test a::b ... ok"), Some("a::b"));
        assert_eq!(test_name("test claim_once ... FAILED"), Some("claim_once"));
        assert_eq!(test_name("test slow ... ignored"), Some("slow"));
        assert_eq!(test_name("test result: ok. 1 passed; 0 failed"), None);
        assert_eq!(test_name("running 3 tests"), None);
    }

    #[test]
    fn ignores_other_lines() {
        assert_eq!(parse_result_line("test foo::bar ... ok"), None);
        assert_eq!(parse_result_line("running 3 tests"), None);
        assert_eq!(parse_result_line("test result: garbage"), None);
        assert_eq!(parse_result_line(""), None);
    }

    fn row(name: &str, passed: u64, failed: u64, ignored: u64, problem: Option<&str>) -> Row {
        Row {
            name: name.into(),
            counts: Counts {
                passed,
                failed,
                ignored,
            },
            refusals: 0,
            seconds: 1.0,
            problem: problem.map(str::to_owned),
        }
    }

    #[test]
    fn a_failed_build_counts_as_one_failure() {
        let rows = vec![
            Row {
                refusals: 4,
                ..row("memory", 40, 0, 2, None)
            },
            row("postgres", 0, 0, 0, Some("no PostgreSQL server found")),
            row("redis", 5, 2, 0, Some("cargo test exited with 101")),
        ];
        assert_eq!(totals_line(&rows, 0), "45 passed, 3 failed, 2 skipped");
        assert_eq!(totals_line(&rows, 1), "45 passed, 4 failed, 2 skipped");
        let table = table(&rows);
        assert!(
            table.starts_with("backend   behaviour  refusal  failed  ignored  seconds  status\n"),
            "{table}"
        );
        assert!(
            table.contains("memory           36        4       0        2      1.0  ok\n"),
            "{table}"
        );
        assert!(
            table.contains(
                "postgres          0        0       1        0      1.0  FAILED: no PostgreSQL"
            ),
            "{table}"
        );
    }

    /// A row whose tests all were filtered out or ignored proved nothing: it fails.
    #[test]
    fn a_row_that_ran_no_test_fails() {
        for empty in [row("tidy", 0, 0, 0, None), row("slow", 0, 0, 3, None)] {
            assert_eq!(empty.problem(), Some(RAN_NO_TEST), "{empty:?}");
            assert_eq!(empty.failures(), 1, "{empty:?}");
            assert!(table(&[empty]).contains("FAILED: ran no test"));
        }
        let rows = [row("memory", 3, 0, 0, None), row("tidy", 0, 0, 0, None)];
        assert_eq!(totals_line(&rows, 0), "3 passed, 1 failed, 0 skipped");
        assert_eq!(row("memory", 1, 0, 0, None).failures(), 0);
    }

    #[test]
    fn refusal_only_cases_are_counted_apart() {
        let record = "Minimal\tcancel_twice\nMinimal\tlimits_x\nMinimal\tlimits_x\n\
                      Memory\tcancel_twice\n\n";
        assert_eq!(count_refusals(record), 3);
        let rows = [
            Row {
                refusals: 3,
                ..row("memory", 10, 0, 0, None)
            },
            row("sqlite", 5, 0, 0, None),
        ];
        assert_eq!(rows[0].behaviour(), 7);
        assert!(
            refusals_line(&rows).starts_with(
                "of 15 passed: 12 exercised behaviour, 3 only checked a capability's refusal"
            ),
            "{}",
            refusals_line(&rows)
        );
    }
}
