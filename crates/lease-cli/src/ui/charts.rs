//! The activity page's pictures, drawn on the server as inline SVG (no script, no external
//! asset): a bar per minute for admissions, completions, failures, deaths and takeovers, and
//! a line per
//! waiting status over the sampled hour. Every bar and point carries its number in a
//! `data-value` attribute and a `<title>` (read aloud, shown on hover), so the picture is
//! never the only place a number is.

use std::fmt::Write as _;

use super::activity::{MINUTE_MS, Minute, Sample, WINDOW};
use super::html::escape;

const WIDTH: i64 = 600;
const HEIGHT: i64 = 120;
/// Room on the left for the scale's label.
const LEFT: i64 = 40;

/// One per-minute series: its id, title, colour and how to read it from a minute.
pub struct Series {
    pub id: &'static str,
    pub title: &'static str,
    pub colour: &'static str,
    pub read: fn(&Minute) -> u64,
}

/// The five per-minute series, in the page's order.
pub const PER_MINUTE: [Series; 5] = [
    Series {
        id: "admitted",
        title: "Admitted per minute",
        colour: "#36c",
        read: |m| m.admitted,
    },
    Series {
        id: "completed",
        title: "Completed per minute",
        colour: "#393",
        read: |m| m.completed,
    },
    Series {
        id: "failed",
        title: "Failed per minute",
        colour: "#c63",
        read: |m| m.failed,
    },
    Series {
        id: "dead",
        title: "Died (out of attempts) per minute",
        colour: "#c22",
        read: |m| m.dead,
    },
    Series {
        id: "takeovers",
        title: "Taken over (lease expired) per minute",
        colour: "#85c",
        read: |m| m.takeovers,
    },
];

/// A bar chart of `series` over `minutes` (oldest first); a minute with a purge is hatched
/// grey behind its bar.
pub fn bars(series: &Series, minutes: &[Minute]) -> String {
    let max = minutes.iter().map(series.read).max().unwrap_or(0).max(1);
    let slot = (WIDTH - LEFT) / i64::try_from(minutes.len().max(1)).unwrap_or(1);
    let mut svg = open(&format!("chart-{}", series.id), series.title, max);
    for (i, m) in minutes.iter().enumerate() {
        let value = (series.read)(m);
        let x = LEFT + slot * i64::try_from(i).unwrap_or(0);
        if m.purged {
            let _ = write!(
                svg,
                "<rect class=\"purged\" x=\"{x}\" y=\"0\" width=\"{slot}\" height=\"{HEIGHT}\" \
                 fill=\"#eee\"><title>a purge ran in this minute</title></rect>"
            );
        }
        let h = scaled(value, max);
        let _ = write!(
            svg,
            "<rect class=\"bar\" data-minute=\"{}\" data-value=\"{value}\" x=\"{x}\" y=\"{}\" \
             width=\"{}\" height=\"{h}\" fill=\"{}\"><title>{value} at {}</title></rect>",
            m.start_ms,
            HEIGHT - h,
            (slot - 1).max(1),
            series.colour,
            minute_label(m.start_ms),
        );
    }
    close(
        svg,
        &format!(
            "{}: {} in the last hour",
            series.title,
            total(series, minutes)
        ),
    )
}

/// Lines of the waiting statuses (admitted, running, suspended, dead) at each sample of the
/// hour ending at `now_ms`.
pub fn statuses(samples: &[Sample], now_ms: i64) -> String {
    type Read = fn(&Sample) -> u64;
    let lines: [(&str, &str, Read); 4] = [
        ("admitted", "#36c", |s| s.counts.admitted),
        ("running", "#393", |s| s.counts.running),
        ("suspended", "#b80", |s| s.counts.suspended),
        ("dead", "#c22", |s| s.counts.dead),
    ];
    let max = samples
        .iter()
        .flat_map(|s| lines.iter().map(move |(_, _, read)| read(s)))
        .max()
        .unwrap_or(0)
        .max(1);
    let window = i64::try_from(WINDOW.as_millis()).unwrap_or(i64::MAX);
    let start = now_ms - window;
    let mut svg = open("chart-statuses", "Executions by status", max);
    for (name, colour, read) in lines {
        let mut points = String::new();
        for s in samples.iter().filter(|s| s.at_ms >= start) {
            let x = LEFT + (s.at_ms - start) * (WIDTH - LEFT) / window.max(1);
            let _ = write!(points, "{x},{} ", HEIGHT - scaled(read(s), max));
        }
        let last = samples.last().map_or(0, read);
        let _ = write!(
            svg,
            "<polyline class=\"line\" data-status=\"{name}\" data-value=\"{last}\" \
             points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\">\
             <title>{name}: {last} now</title></polyline>",
            points.trim_end()
        );
    }
    close(
        svg,
        "admitted, running, suspended and dead executions over the last hour",
    )
}

/// The chart's frame: its id, an accessible title and the top of the scale.
fn open(id: &str, title: &str, max: u64) -> String {
    format!(
        "<figure><figcaption>{title}</figcaption><svg id=\"{id}\" role=\"img\" \
         aria-label=\"{title}\" viewBox=\"0 0 {WIDTH} {}\" width=\"{WIDTH}\" height=\"{}\">\
         <text x=\"0\" y=\"10\" font-size=\"10\">{max}</text>\
         <text x=\"0\" y=\"{HEIGHT}\" font-size=\"10\">0</text>\
         <line x1=\"{LEFT}\" y1=\"{HEIGHT}\" x2=\"{WIDTH}\" y2=\"{HEIGHT}\" stroke=\"#999\"/>",
        HEIGHT + 14,
        HEIGHT + 14,
        title = escape(title),
    )
}

fn close(mut svg: String, summary: &str) -> String {
    let _ = writeln!(
        svg,
        "<text x=\"{LEFT}\" y=\"{}\" font-size=\"10\">-60 min</text>\
         <text x=\"{}\" y=\"{}\" font-size=\"10\">now</text></svg>\
         <p class=\"note\">{}</p></figure>",
        HEIGHT + 12,
        WIDTH - 20,
        HEIGHT + 12,
        escape(summary)
    );
    svg
}

/// `value`'s bar height against `max` (at least 1 pixel for a non-zero value).
fn scaled(value: u64, max: u64) -> i64 {
    let h = u128::from(value) * u128::from(HEIGHT.unsigned_abs()) / u128::from(max.max(1));
    let h = i64::try_from(h).unwrap_or(HEIGHT).min(HEIGHT);
    if value > 0 { h.max(1) } else { 0 }
}

fn total(series: &Series, minutes: &[Minute]) -> u64 {
    minutes.iter().map(series.read).sum()
}

/// `HH:MM` (UTC) of a minute's start.
fn minute_label(start_ms: i64) -> String {
    let minutes = start_ms.div_euclid(MINUTE_MS);
    format!(
        "{:02}:{:02} UTC",
        minutes.div_euclid(60).rem_euclid(24),
        minutes.rem_euclid(60)
    )
}

#[cfg(test)]
mod tests {
    use lease::StatusCounts;

    use super::*;

    #[test]
    fn bars_carry_their_numbers_and_scale_to_the_largest() {
        let minutes: Vec<Minute> = (0..3)
            .map(|i| Minute {
                start_ms: i * MINUTE_MS,
                completed: [0, 5, 10][usize::try_from(i).expect("small")],
                ..Minute::default()
            })
            .collect();
        let svg = bars(&PER_MINUTE[1], &minutes);
        assert!(svg.contains("id=\"chart-completed\""), "{svg}");
        assert!(svg.contains("data-value=\"10\""), "{svg}");
        assert!(
            svg.contains(&format!("height=\"{HEIGHT}\" fill=\"#393\"")),
            "the largest is full height: {svg}"
        );
        assert!(svg.contains("15 in the last hour"), "{svg}");
        assert!(svg.contains("00:01 UTC"), "{svg}");
        assert!(!svg.contains("purged"), "{svg}");
    }

    #[test]
    fn status_lines_end_at_the_last_sample() {
        let sample = |at_ms, running| Sample {
            at_ms,
            counts: StatusCounts {
                running,
                ..StatusCounts::default()
            },
        };
        let now = 10 * MINUTE_MS;
        let svg = statuses(&[sample(now - 1000, 2), sample(now, 7)], now);
        assert!(
            svg.contains("data-status=\"running\" data-value=\"7\""),
            "{svg}"
        );
        assert!(
            svg.contains(&format!("{WIDTH},0")),
            "the last point is at the top right: {svg}"
        );
    }

    #[test]
    fn a_small_count_is_still_visible() {
        assert_eq!(scaled(1, 1_000_000), 1);
        assert_eq!(scaled(0, 5), 0);
        assert_eq!(scaled(5, 5), HEIGHT);
    }
}
