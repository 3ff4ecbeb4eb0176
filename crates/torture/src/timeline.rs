//! The run's picture: an SVG timeline of a few sampled executions, one
//! band per execution and one lane per runtime slot inside it: each lease as a bar from its
//! claim to its end (acknowledgement, release, or expiry), accepted step writes as ticks,
//! refused writes (`Lost`) as red crosses, every claim after an execution's first (the
//! claim that took over) as a triangle, and every injected fault as a vertical line across
//! all bands, labelled with its kind and the slot it hit; a fault with a window (partition,
//! loss, latency: the namespace mode) also shades its slot's lane until it healed. A header
//! repeats the run's summary.
//!
//! The sample is deterministic (the executions with the most claims, then by id), so the same
//! seed and the same history draw the same picture.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::history::{Op, OpKind, OpResult};

use crate::faults::FaultKind;

/// Executions drawn.
pub const SAMPLE: usize = 6;

/// A fault as the controller injected it (also written to the work dir as `faults.json`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct FaultEvent {
    /// Wall-clock microseconds (the clock the operation logs use).
    pub at_us: i64,
    /// When it healed, for a fault with a window (partition, loss, latency).
    pub until_us: Option<i64>,
    /// What.
    pub kind: FaultKind,
    /// The runtime slot (0-based) it hit; `None` for server-wide faults.
    pub slot: Option<usize>,
}

/// One lease of one execution, as drawn.
#[derive(Debug, Clone, PartialEq)]
struct Bar {
    slot: usize,
    token: u64,
    from_us: i64,
    to_us: i64,
    takeover: bool,
}

/// A write mark.
#[derive(Debug, Clone, PartialEq)]
struct Mark {
    slot: usize,
    at_us: i64,
    refused: bool,
}

/// What is drawn of one execution.
#[derive(Debug, Default)]
struct Lane {
    bars: Vec<Bar>,
    marks: Vec<Mark>,
}

const WIDTH: f64 = 1200.0;
const LEFT: f64 = 110.0;
const LANE_H: f64 = 14.0;
const BAND_GAP: f64 = 16.0;
const HEADER: f64 = 64.0;
const COLORS: [&str; 8] = [
    "#4e79a7", "#59a14f", "#b07aa1", "#f28e2b", "#76b7b2", "#edc948", "#9c755f", "#bab0ac",
];

/// The runtime slot (0-based) of a logged process number (`slot * 1000 + incarnation`);
/// the controller's own reads (process 0) have none.
pub fn slot_of(process: u32) -> Option<usize> {
    (process >= 1000).then(|| (process / 1000 - 1) as usize)
}

/// Picks the executions to draw: most claims first, then by id.
fn sample(ops: &[Op], n: usize) -> Vec<String> {
    let mut claims: BTreeMap<&str, usize> = BTreeMap::new();
    for op in ops {
        if matches!(op.kind, OpKind::Claim { .. }) && op.result == OpResult::Accepted {
            *claims.entry(op.execution.as_str()).or_default() += 1;
        }
    }
    let mut by: Vec<(&str, usize)> = claims.into_iter().collect();
    by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    by.into_iter().take(n).map(|(e, _)| e.to_owned()).collect()
}

/// The leases and writes of `execution`. A lease ends at the end of its holder's
/// acknowledgement or release, else at its last accepted expiry (claim or renewal), else
/// where the next claim began.
fn lane(ops: &[Op], execution: &str) -> Lane {
    let mut mine: Vec<&Op> = ops.iter().filter(|o| o.execution == execution).collect();
    mine.sort_by_key(|o| (o.start_us, o.end_us));
    let mut lane = Lane::default();
    let mut claims = 0usize;
    for op in &mine {
        let Some(slot) = slot_of(op.process) else {
            continue;
        };
        match &op.kind {
            OpKind::Claim { expires_at, .. } if op.result == OpResult::Accepted => {
                lane.bars.push(Bar {
                    slot,
                    token: op.token,
                    from_us: op.end_us,
                    to_us: expires_at.saturating_mul(1000),
                    takeover: claims > 0,
                });
                claims += 1;
            }
            OpKind::Renew {
                expires_at: Some(at),
            } if op.result == OpResult::Accepted => {
                if let Some(b) = lane.bars.iter_mut().rev().find(|b| b.token == op.token) {
                    b.to_us = b.to_us.max(at.saturating_mul(1000));
                }
            }
            OpKind::Acknowledge { .. } | OpKind::Release { .. }
                if op.result == OpResult::Accepted =>
            {
                if let Some(b) = lane.bars.iter_mut().rev().find(|b| b.token == op.token) {
                    b.to_us = b.to_us.min(op.end_us);
                }
            }
            OpKind::WriteStep { .. } | OpKind::Acknowledge { .. }
                if matches!(op.result, OpResult::Accepted | OpResult::Lost) =>
            {
                lane.marks.push(Mark {
                    slot,
                    at_us: op.end_us,
                    refused: op.result == OpResult::Lost,
                });
            }
            _ => {}
        }
    }
    lane
}

/// Draws the SVG: `summary` lines in the header, the sampled executions, the faults.
pub fn svg(ops: &[Op], faults: &[FaultEvent], slots: usize, summary: &[String]) -> String {
    let picked = sample(ops, SAMPLE);
    let lanes: Vec<(String, Lane)> = picked.iter().map(|e| (e.clone(), lane(ops, e))).collect();
    let sc = Scale::of(&lanes, slots);
    let height = HEADER + lanes.len() as f64 * (sc.band_h + BAND_GAP) + 30.0;
    let mut s = String::new();
    write_header(&mut s, height, summary);
    for (i, (execution, l)) in lanes.iter().enumerate() {
        let top = HEADER + i as f64 * (sc.band_h + BAND_GAP);
        write_band(&mut s, &sc, top, execution);
        write_bars(&mut s, &sc, top, l);
        write_marks(&mut s, &sc, top, l);
    }
    let bottom = height - 24.0;
    write_fault_windows(&mut s, &sc, faults, lanes.len());
    write_fault_lines(&mut s, &sc, faults, bottom);
    let span = sc.span;
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="{}">{:.1} s shown; bars: leases by slot (colour); triangle: claim that took over; red x: refused write; dashed: fault; shaded: a slot's partition, loss or latency window</text>"#,
        height - 4.0,
        span / 1e6
    );
    s.push_str("</svg>\n");
    s
}

/// The picture's time axis (the span of the sampled lanes) and band height.
struct Scale {
    t0: i64,
    t1: i64,
    span: f64,
    band_h: f64,
}

impl Scale {
    /// The scale of `lanes` drawn with one lane per runtime slot.
    fn of(lanes: &[(String, Lane)], slots: usize) -> Self {
        let times = lanes.iter().flat_map(|(_, l)| {
            l.bars
                .iter()
                .flat_map(|b| [b.from_us, b.to_us])
                .chain(l.marks.iter().map(|m| m.at_us))
        });
        let (t0, t1) = times.fold((i64::MAX, i64::MIN), |(lo, hi), t| (lo.min(t), hi.max(t)));
        let (t0, t1) = if t0 < t1 { (t0, t1) } else { (0, 1) };
        let span = (t1 - t0) as f64;
        let band_h = slots.max(1) as f64 * LANE_H;
        Scale {
            t0,
            t1,
            span,
            band_h,
        }
    }

    /// The x coordinate of time `t` (clamped to the span).
    fn x(&self, t: i64) -> f64 {
        LEFT + ((t.clamp(self.t0, self.t1) - self.t0) as f64 / self.span) * (WIDTH - LEFT - 10.0)
    }
}

/// The opening tag, the white background and the summary lines.
fn write_header(s: &mut String, height: f64, summary: &[String]) {
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="monospace" font-size="11">"#
    );
    s.push_str(r#"<rect width="100%" height="100%" fill="white"/>"#);
    s.push('\n');
    for (i, line) in summary.iter().enumerate() {
        let _ = writeln!(
            s,
            r#"<text x="8" y="{}">{}</text>"#,
            16.0 + 14.0 * i as f64,
            escape(line)
        );
    }
}

/// One execution's band: its name and grey background.
fn write_band(s: &mut String, sc: &Scale, top: f64, execution: &str) {
    let band_h = sc.band_h;
    let _ = writeln!(
        s,
        r##"<text x="4" y="{}">{}</text><rect x="{LEFT}" y="{top}" width="{}" height="{band_h}" fill="#f4f4f4"/>"##,
        top + 11.0,
        escape(execution),
        WIDTH - LEFT - 10.0
    );
}

/// A lane's leases (one bar each, coloured by slot) and the claims that took over.
fn write_bars(s: &mut String, sc: &Scale, top: f64, l: &Lane) {
    for b in &l.bars {
        let y = top + b.slot as f64 * LANE_H + 2.0;
        let (x0, x1) = (sc.x(b.from_us), sc.x(b.to_us));
        let _ = writeln!(
            s,
            r#"<rect class="lease" x="{x0:.1}" y="{y:.1}" width="{:.1}" height="{}" fill="{}"><title>slot {} token {}</title></rect>"#,
            (x1 - x0).max(1.0),
            LANE_H - 4.0,
            COLORS[b.slot % COLORS.len()],
            b.slot + 1,
            b.token
        );
        if b.takeover {
            let _ = writeln!(
                s,
                r#"<path class="takeover" d="M{x0:.1},{:.1} l-4,-7 l8,0 z" fill="black"><title>claim token {} took over</title></path>"#,
                y, b.token
            );
        }
    }
}

/// A lane's writes: a tick each, a red cross for a refused one.
fn write_marks(s: &mut String, sc: &Scale, top: f64, l: &Lane) {
    for m in &l.marks {
        let y = top + m.slot as f64 * LANE_H + LANE_H / 2.0;
        let cx = sc.x(m.at_us);
        if m.refused {
            let _ = writeln!(
                s,
                r#"<path class="refused" d="M{:.1},{:.1} l8,8 m0,-8 l-8,8" stroke="red" stroke-width="2"><title>write refused (Lost)</title></path>"#,
                cx - 4.0,
                y - 4.0
            );
        } else {
            let _ = writeln!(
                s,
                r#"<line class="write" x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" stroke="black"/>"#,
                y - 3.0,
                y + 3.0
            );
        }
    }
}

/// The shaded windows of the partitions, losses and latencies over every band.
fn write_fault_windows(s: &mut String, sc: &Scale, faults: &[FaultEvent], lanes: usize) {
    let (t0, t1, band_h) = (sc.t0, sc.t1, sc.band_h);
    for f in faults {
        let (Some(until), Some(slot)) = (f.until_us, f.slot) else {
            continue;
        };
        if until < t0 || f.at_us > t1 {
            continue;
        }
        let (x0, x1) = (sc.x(f.at_us), sc.x(until));
        for i in 0..lanes {
            let y = HEADER + i as f64 * (band_h + BAND_GAP) + slot as f64 * LANE_H;
            let _ = writeln!(
                s,
                r##"<rect class="window" x="{x0:.1}" y="{y:.1}" width="{:.1}" height="{LANE_H}" fill="#e15759" fill-opacity="0.15"><title>{} slot {}</title></rect>"##,
                (x1 - x0).max(1.0),
                f.kind.name(),
                slot + 1
            );
        }
    }
}

/// A dashed line at each fault, with its kind and target.
fn write_fault_lines(s: &mut String, sc: &Scale, faults: &[FaultEvent], bottom: f64) {
    let (t0, t1) = (sc.t0, sc.t1);
    for f in faults.iter().filter(|f| f.at_us >= t0 && f.at_us <= t1) {
        let fx = sc.x(f.at_us);
        let target = f
            .slot
            .map_or_else(|| "server".to_owned(), |s| format!("slot {}", s + 1));
        let _ = writeln!(
            s,
            r##"<line class="fault" x1="{fx:.1}" y1="{HEADER}" x2="{fx:.1}" y2="{bottom}" stroke="#e15759" stroke-dasharray="3,3"/><text x="{fx:.1}" y="{}" fill="#e15759" font-size="9">{} {}</text>"##,
            bottom + 12.0,
            f.kind.name(),
            target
        );
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An operation of execution `e1` (shared with the other modules' tests).
    pub(crate) fn op(
        process: u32,
        token: u64,
        start: i64,
        end: i64,
        kind: OpKind,
        result: OpResult,
    ) -> Op {
        Op {
            process,
            execution: "e1".into(),
            token,
            start_us: start,
            end_us: end,
            kind,
            result,
        }
    }

    fn write(process: u32, token: u64, at: i64, result: OpResult) -> Op {
        op(
            process,
            token,
            at,
            at + 10,
            OpKind::WriteStep {
                step_key: "s0".into(),
                step_attempt: 1,
                written: "v".into(),
                recorded: None,
            },
            result,
        )
    }

    /// Slot 1 claims, is paused past its lease; slot 2 takes over with a higher token and
    /// acknowledges; slot 1's late write is refused.
    fn takeover() -> Vec<Op> {
        let claim = |expires_at| OpKind::Claim {
            expires_at,
            duration_ms: 1500,
            first_delivery: false,
        };
        vec![
            op(1001, 1, 0, 1_000, claim(1_501), OpResult::Accepted),
            write(1001, 1, 2_000, OpResult::Accepted),
            op(
                2001,
                2,
                1_600_000,
                1_601_000,
                claim(3_101),
                OpResult::Accepted,
            ),
            write(2001, 2, 1_700_000, OpResult::Accepted),
            write(1001, 1, 1_800_000, OpResult::Lost),
            op(
                2001,
                2,
                1_900_000,
                1_901_000,
                OpKind::Acknowledge {
                    outcome: "completed:null".into(),
                },
                OpResult::Accepted,
            ),
        ]
    }

    #[test]
    fn a_takeover_draws_two_leases_a_triangle_and_a_refused_write() {
        let l = lane(&takeover(), "e1");
        assert_eq!(l.bars.len(), 2, "{l:?}");
        assert_eq!((l.bars[0].slot, l.bars[0].to_us), (0, 1_501_000));
        assert!(!l.bars[0].takeover && l.bars[1].takeover);
        assert_eq!(l.bars[1].to_us, 1_901_000, "ends at its acknowledgement");
        assert_eq!(l.marks.iter().filter(|m| m.refused).count(), 1);
        let faults = [
            FaultEvent {
                at_us: 500_000,
                until_us: None,
                kind: FaultKind::Pause,
                slot: Some(0),
            },
            FaultEvent {
                at_us: 1_000_000,
                until_us: Some(1_500_000),
                kind: FaultKind::Partition,
                slot: Some(0),
            },
        ];
        let svg = svg(&takeover(), &faults, 2, &["seed 7 <run>".into()]);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches(r#"class="lease""#).count(), 2);
        assert_eq!(svg.matches(r#"class="takeover""#).count(), 1);
        assert_eq!(svg.matches(r#"class="refused""#).count(), 1);
        assert_eq!(svg.matches(r#"class="write""#).count(), 2);
        assert!(svg.contains(r#"class="fault""#) && svg.contains("pause slot 1"));
        assert_eq!(
            svg.matches(r#"class="window""#).count(),
            1,
            "one band, one window"
        );
        assert!(svg.contains("partition slot 1"));
        assert!(svg.contains("seed 7 &lt;run&gt;"), "the header is escaped");
    }

    #[test]
    fn the_sample_prefers_executions_with_more_claims() {
        let mut ops = takeover();
        let mut other = ops[0].clone();
        other.execution = "e0".into();
        ops.push(other);
        assert_eq!(sample(&ops, 1), vec!["e1".to_owned()]);
        assert_eq!(sample(&ops, 5), vec!["e1".to_owned(), "e0".to_owned()]);
    }
}
