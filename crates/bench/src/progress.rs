//! One line on stderr per measured row, while the run goes on.

use crate::measure::Sample;
use crate::row::{Row, thousands};

/// Prints `row` to stderr as soon as it is measured.
pub fn print(row: &Row) {
    let rate = |s: Option<Sample>| s.map_or_else(|| "-".into(), |s| thousands(s.rate()));
    eprintln!(
        "lease-bench: {:<8} {:<16} library {:>9} raw {:>9} ratio {:>5} load {:.2}{}",
        row.backend,
        row.name,
        rate(row.library),
        rate(row.raw),
        row.ratio.map_or_else(|| "-".into(), |r| format!("{r:.2}")),
        row.load_1m,
        row.error
            .as_ref()
            .map_or_else(String::new, |e| format!("  ERROR {e}")),
    );
}
