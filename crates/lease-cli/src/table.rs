//! Plain-text tables: left-aligned columns two spaces apart, one line per row.

/// The longest cell a table shows; longer text is cut with `...` (`--json` has it all).
pub const MAX_CELL: usize = 60;

/// A table with a header row.
#[derive(Debug, Clone)]
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table whose first row is `header`.
    pub fn new(header: &[&str]) -> Self {
        Table {
            rows: vec![header.iter().map(|h| (*h).to_owned()).collect()],
        }
    }

    /// Appends a row (cells made printable and cut to [`MAX_CELL`]).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells.iter().map(|c| cell(c)).collect());
    }

    /// The rendered table, ending in a newline.
    pub fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|i| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(i))
                    .map(|c| c.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (i, c) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                line.push_str(c);
                let pad = widths[i].saturating_sub(c.chars().count());
                line.extend(std::iter::repeat_n(' ', pad));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `text` on one line (control characters as spaces), cut to [`MAX_CELL`] characters.
fn cell(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if line.chars().count() <= MAX_CELL {
        return line;
    }
    let mut cut: String = line.chars().take(MAX_CELL - 3).collect();
    cut.push_str("...");
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_long_cells_are_cut() {
        let mut t = Table::new(&["ID", "COUNT"]);
        t.row(vec!["order-42".into(), "3".into()]);
        t.row(vec!["a\nb".into(), "x".repeat(100)]);
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "ID        COUNT");
        assert_eq!(lines[1], "order-42  3");
        assert!(lines[2].starts_with("a b       xxx"));
        assert!(lines[2].ends_with("..."));
        assert_eq!(lines[2].chars().count(), 10 + MAX_CELL);
    }
}
