//! `cargo xtask plots`: draws the benchmark plots of docs/BENCHMARKS.md.
//!
//! Reads `docs/benchmarks/results.csv` (one line per bar: chart, title, unit, run, group,
//! series, label, value; the numbers exactly as the tables of docs/BENCHMARKS.md give them)
//! and writes one hand-written SVG per chart, `docs/benchmarks/<chart>.svg`: horizontal bars
//! in groups, one colour per series, each bar labelled with its value as the table writes it.
//! No plotting crate: the SVG is a few rectangles and texts.

use std::fmt::Write as _;
use std::path::Path;

/// What `cargo xtask plots --help` prints after the options.
pub const ABOUT: &str = "\
Redraws docs/benchmarks/*.svg from docs/benchmarks/results.csv, the numbers of the drain and
pickup tables of docs/BENCHMARKS.md (one CSV line per bar). Run it after changing the CSV.";

/// Options of `cargo xtask plots`: none.
#[derive(Debug, PartialEq, Eq, clap::Args)]
pub struct Options {}

/// One bar: a CSV line.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The chart (and file stem) it belongs to.
    pub chart: String,
    /// The chart's title.
    pub title: String,
    /// The unit of the value.
    pub unit: String,
    /// The run the figure comes from (date, commit, load).
    pub run: String,
    /// The group of bars it is drawn in (a backend, a concurrency).
    pub group: String,
    /// The series: its colour and legend entry.
    pub series: String,
    /// The bar's own label; empty means the series name.
    pub label: String,
    /// The value as the table writes it (digits without separators, or a decimal).
    pub text: String,
    /// The value as a number.
    pub value: f64,
}

/// One chart: the rows sharing a chart name, in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// File stem.
    pub name: String,
    /// The rows, in file order.
    pub rows: Vec<Row>,
}

/// Layout constants (pixels).
const WIDTH: usize = 900;
const LABEL_X: usize = 16;
const BAR_X: usize = 300;
const BAR_MAX: usize = 480;
const BAR_H: usize = 16;
const ROW_H: usize = 20;
const GROUP_H: usize = 24;
const TOP: usize = 92;
const COLOURS: [&str; 6] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#7f7f7f",
];

/// Runs the command: reads the CSV, writes every chart; returns whether all were written.
pub fn run(root: &Path) -> Result<bool, String> {
    let dir = root.join("docs").join("benchmarks");
    let csv = dir.join("results.csv");
    let text =
        std::fs::read_to_string(&csv).map_err(|e| format!("reading {}: {e}", csv.display()))?;
    for chart in charts(parse_csv(&text)?) {
        let path = dir.join(format!("{}.svg", chart.name));
        std::fs::write(&path, render(&chart))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        eprintln!("plots: {} ({} bars)", path.display(), chart.rows.len());
    }
    Ok(true)
}

/// The rows of the CSV text (a header line first, then one line per bar).
pub fn parse_csv(text: &str) -> Result<Vec<Row>, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let header = lines
        .next()
        .map(|(_, l)| split_fields(l))
        .unwrap_or_default();
    let expected = [
        "chart", "title", "unit", "run", "group", "series", "label", "value",
    ];
    if header != expected {
        return Err(format!(
            "results.csv: the header must be {}",
            expected.join(",")
        ));
    }
    lines.map(|(i, l)| row(i + 1, l)).collect()
}

/// One CSV line as a row; `number` is its line number, for errors.
fn row(number: usize, line: &str) -> Result<Row, String> {
    let f = split_fields(line);
    let [chart, title, unit, run, group, series, label, text] = <[String; 8]>::try_from(f)
        .map_err(|f| format!("results.csv line {number}: {} fields, not 8", f.len()))?;
    let value = text
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| format!("results.csv line {number}: value {text:?} is not a number >= 0"))?;
    if chart.is_empty() || !chart.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(format!("results.csv line {number}: chart name {chart:?}"));
    }
    Ok(Row {
        chart,
        title,
        unit,
        run,
        group,
        series,
        label,
        text,
        value,
    })
}

/// The fields of one CSV line: commas separate, a field in double quotes may hold commas
/// (a doubled quote inside it is one quote).
fn split_fields(line: &str) -> Vec<String> {
    let (mut fields, mut field, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    fields.push(field);
    fields
}

/// The rows grouped by chart, charts in order of first appearance.
pub fn charts(rows: Vec<Row>) -> Vec<Chart> {
    let mut out: Vec<Chart> = Vec::new();
    for row in rows {
        match out.iter_mut().find(|c| c.name == row.chart) {
            Some(chart) => chart.rows.push(row),
            None => out.push(Chart {
                name: row.chart.clone(),
                rows: vec![row],
            }),
        }
    }
    out
}

/// The groups of a chart in order of first appearance, each with its rows.
fn groups(chart: &Chart) -> Vec<(&str, Vec<&Row>)> {
    let mut out: Vec<(&str, Vec<&Row>)> = Vec::new();
    for row in &chart.rows {
        match out.iter_mut().find(|(g, _)| *g == row.group) {
            Some((_, rows)) => rows.push(row),
            None => out.push((&row.group, vec![row])),
        }
    }
    out
}

/// The series of a chart in order of first appearance (their index is their colour).
fn series(chart: &Chart) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for row in &chart.rows {
        if !out.contains(&row.series.as_str()) {
            out.push(&row.series);
        }
    }
    out
}

/// The SVG text of one chart.
pub fn render(chart: &Chart) -> String {
    let groups = groups(chart);
    let bars: usize = groups.iter().map(|(_, rows)| rows.len()).sum();
    let height = TOP + groups.len() * GROUP_H + bars * ROW_H + 16;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    heading(&mut svg, chart);
    legend(&mut svg, &series(chart));
    let max = chart.rows.iter().map(|r| r.value).fold(0.0, f64::max);
    let colours = series(chart);
    let mut y = TOP;
    for (group, rows) in &groups {
        let _ = writeln!(
            svg,
            "<text x=\"{LABEL_X}\" y=\"{}\" font-weight=\"bold\">{}</text>",
            y + 16,
            escape(group)
        );
        y += GROUP_H;
        for row in rows {
            let colour = colours.iter().position(|s| *s == row.series).unwrap_or(0);
            bar(&mut svg, row, y, max, COLOURS[colour % COLOURS.len()]);
            y += ROW_H;
        }
    }
    svg.push_str("</svg>\n");
    svg
}

/// The title, the run and the unit at the top of a chart.
fn heading(svg: &mut String, chart: &Chart) {
    let first = &chart.rows[0];
    let _ = writeln!(
        svg,
        "<text x=\"{LABEL_X}\" y=\"24\" font-size=\"16\" font-weight=\"bold\">{}</text>\n\
         <text x=\"{LABEL_X}\" y=\"44\" fill=\"#444\">{} ({})</text>",
        escape(&first.title),
        escape(&first.run),
        escape(&first.unit)
    );
}

/// One legend entry per series, in a row under the heading.
fn legend(svg: &mut String, series: &[&str]) {
    let mut x = LABEL_X;
    for (i, name) in series.iter().enumerate() {
        let _ = writeln!(
            svg,
            "<rect class=\"legend\" x=\"{x}\" y=\"58\" width=\"12\" height=\"12\" fill=\"{}\"/>\
             <text x=\"{}\" y=\"69\">{}</text>",
            COLOURS[i % COLOURS.len()],
            x + 16,
            escape(name)
        );
        x += 28 + 7 * name.chars().count();
    }
}

/// One bar at height `y`: its label, the bar scaled to `max`, its value.
fn bar(svg: &mut String, row: &Row, y: usize, max: f64, colour: &str) {
    let label = if row.label.is_empty() {
        &row.series
    } else {
        &row.label
    };
    let width = if max > 0.0 {
        (row.value / max * BAR_MAX as f64).round().max(1.0)
    } else {
        1.0
    };
    let shown = display_value(&row.text);
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{}\">{}</text>\n\
         <rect class=\"bar\" x=\"{BAR_X}\" y=\"{y}\" width=\"{width}\" height=\"{BAR_H}\" \
         fill=\"{colour}\"><title>{}: {} {}</title></rect>\n\
         <text x=\"{}\" y=\"{}\">{}</text>",
        LABEL_X + 12,
        y + 12,
        escape(label),
        escape(&format!("{} / {label}", row.group)),
        shown,
        escape(&row.unit),
        BAR_X as f64 + width + 6.0,
        y + 12,
        shown
    );
}

/// The value as the tables write it: integers with thousands separators, decimals as given.
pub fn display_value(text: &str) -> String {
    if text.contains('.') || !text.chars().all(|c| c.is_ascii_digit()) {
        return text.to_owned();
    }
    let digits: Vec<char> = text.chars().collect();
    let mut out = String::new();
    for (i, c) in digits.iter().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(*c);
    }
    out
}

/// Text made safe for SVG: `&`, `<`, `>` and `"` escaped.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "chart,title,unit,run,group,series,label,value
drain-x,\"Drain, x\",jobs/s,\"2026-12-02, main abc\",C = 1,this project,,19193
drain-x,\"Drain, x\",jobs/s,\"2026-12-02, main abc\",C = 1,apalis 1.0.0,,124
drain-x,\"Drain, x\",jobs/s,\"2026-12-02, main abc\",C = 8,this project,,27769
pickup,Pickup,ms,run,PostgreSQL,raw bound,NOTIFY->LISTEN p99,0.68
";

    #[test]
    fn a_plot_has_one_bar_per_row_and_its_labels() {
        let charts = charts(parse_csv(CSV).expect("parses"));
        assert_eq!(charts.len(), 2);
        let drain = render(&charts[0]);
        assert_eq!(drain.matches("<rect class=\"bar\"").count(), 3);
        assert_eq!(drain.matches("<rect class=\"legend\"").count(), 2);
        for text in [
            "Drain, x",
            "2026-12-02, main abc",
            "C = 1",
            "C = 8",
            "this project",
            "apalis 1.0.0",
            ">19,193<",
            ">124<",
            ">27,769<",
        ] {
            assert!(drain.contains(text), "{text} missing from {drain}");
        }
        let pickup = render(&charts[1]);
        assert_eq!(pickup.matches("<rect class=\"bar\"").count(), 1);
        assert!(pickup.contains("NOTIFY-&gt;LISTEN p99") && pickup.contains(">0.68<"));
    }

    #[test]
    fn the_longest_bar_is_the_largest_value() {
        let charts = charts(parse_csv(CSV).expect("parses"));
        let svg = render(&charts[0]);
        assert!(
            svg.contains(&format!("width=\"{BAR_MAX}\" height")),
            "{svg}"
        );
    }

    #[test]
    fn values_keep_the_tables_digits() {
        assert_eq!(display_value("19193"), "19,193");
        assert_eq!(display_value("124"), "124");
        assert_eq!(display_value("1000"), "1,000");
        assert_eq!(display_value("0.90"), "0.90");
        assert_eq!(display_value("110"), "110");
    }

    #[test]
    fn bad_lines_are_refused_naming_the_line() {
        let header = "chart,title,unit,run,group,series,label,value\n";
        let short = format!("{header}c,t,u,r,g,s,1\n");
        assert!(parse_csv(&short).expect_err("short").contains("line 2"));
        let nan = format!("{header}c,t,u,r,g,s,l,fast\n");
        assert!(parse_csv(&nan).expect_err("nan").contains("fast"));
        let path = format!("{header}../x,t,u,r,g,s,l,1\n");
        assert!(parse_csv(&path).is_err());
        assert!(parse_csv("a,b\n").is_err());
    }

    #[test]
    fn quoted_fields_hold_commas_and_quotes() {
        assert_eq!(
            split_fields("a,\"b, c\",\"d \"\"e\"\"\""),
            ["a", "b, c", "d \"e\""]
        );
    }

    #[test]
    fn the_committed_data_draws_every_row() {
        let root = crate::project_root();
        let text = std::fs::read_to_string(root.join("docs/benchmarks/results.csv"))
            .expect("docs/benchmarks/results.csv");
        let rows = parse_csv(&text).expect("parses");
        for chart in charts(rows) {
            let svg = render(&chart);
            assert_eq!(svg.matches("<rect class=\"bar\"").count(), chart.rows.len());
            let committed = std::fs::read_to_string(
                root.join("docs/benchmarks")
                    .join(format!("{}.svg", chart.name)),
            )
            .expect("the committed SVG");
            assert_eq!(
                committed, svg,
                "{}.svg is stale: cargo xtask plots",
                chart.name
            );
        }
    }
}
