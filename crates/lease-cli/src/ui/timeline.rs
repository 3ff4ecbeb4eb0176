//! The execution page's delivery timeline: the delivery history
//! ([`lease::ExecutionClient::deliveries`]) drawn as server-rendered SVG with no external
//! asset (docs/decisions/0043-console.md). One bar per delivery, oldest on top, from its claim to its end
//! (a live one to the backend's now), coloured by how it ended and labelled with its token;
//! a claim that took over an expired lease gets a dashed mark from the lost lease's expiry
//! to the takeover. The colour is never the only cue: each bar's label names its end.

use std::fmt::Write as _;

use lease::{DeliveryEnd, DeliveryHistory, Timestamp};

use super::html::escape;
use crate::commands::history::is_takeover;
use crate::output::instant;

const WIDTH: i64 = 760;
const GUTTER: i64 = 90;
const ROW: i64 = 24;
/// Room right of the latest end for its label, so a label never overlaps its bar nor runs
/// past the picture's edge: the 4 px gap and "acknowledged" at 11 px, ~79 px in DejaVu Sans,
/// with a margin for wider fonts.
const LABEL: i64 = 96;

/// The fill of a bar by how the delivery ended (`None`: live).
fn colour(end: Option<DeliveryEnd>) -> &'static str {
    match end {
        None => "#36c",
        Some(DeliveryEnd::Acknowledged) => "#2a8a2a",
        Some(DeliveryEnd::Suspended) => "#c9a000",
        Some(DeliveryEnd::Released) => "#e07a00",
        Some(DeliveryEnd::NotStarted) => "#999",
        Some(DeliveryEnd::Expired) => "#c22",
        Some(DeliveryEnd::Cancelled) => "#8a3aa8",
    }
}

/// The SVG of `history` at `now`; empty when there is no delivery.
pub fn svg(history: &DeliveryHistory, now: Timestamp) -> String {
    let ds = &history.deliveries;
    let Some(first) = ds.first() else {
        return String::new();
    };
    let start = first.claimed_at.as_millis();
    let end_of = |i: usize| ds[i].ended_at.unwrap_or(now).as_millis().max(start);
    let last = (0..ds.len()).map(end_of).max().unwrap_or(start);
    let span = (last - start).max(1);
    let x = |ms: i64| GUTTER + (ms - start).clamp(0, span) * (WIDTH - GUTTER - LABEL) / span;
    let height = ROW * i64::try_from(ds.len()).unwrap_or(0) + 20;
    let mut out = format!(
        "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" \
         height=\"{height}\" role=\"img\" aria-label=\"delivery timeline\">"
    );
    for (i, e) in ds.iter().enumerate() {
        let y = ROW * i64::try_from(i).unwrap_or(0) + 4;
        let (x0, x1) = (x(e.claimed_at.as_millis()), x(end_of(i)));
        let how = e.end.map_or("live", |end| end.as_str());
        let _ = write!(
            out,
            "<g class=\"delivery d-{how}\" data-token=\"{token}\">\
             <title>token {token}: claimed {claimed}, {how} {ended}</title>\
             <text x=\"4\" y=\"{ty}\" font-size=\"12\">token {token}</text>\
             <rect x=\"{x0}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" fill=\"{fill}\"/>\
             <text x=\"{lx}\" y=\"{ty}\" font-size=\"11\">{how}</text></g>",
            token = e.token,
            claimed = escape(&instant(Some(e.claimed_at))),
            ended = escape(&instant(e.ended_at)),
            ty = y + 13,
            w = (x1 - x0).max(2),
            h = ROW - 8,
            fill = colour(e.end),
            lx = x1 + 4,
        );
        if is_takeover(ds, i) {
            let lost = x(end_of(i - 1));
            let _ = write!(
                out,
                "<g class=\"takeover\"><title>token {token} took over from token {prev} \
                 after its lease expired</title>\
                 <line x1=\"{lost}\" y1=\"{y0}\" x2=\"{x0}\" y2=\"{y1}\" stroke=\"#c22\" \
                 stroke-dasharray=\"3,2\"/><text x=\"{x0}\" y=\"{ty}\" font-size=\"10\" \
                 fill=\"#c22\">takeover</text></g>",
                token = e.token,
                prev = ds[i - 1].token,
                y0 = y - 4,
                y1 = y + ROW / 2,
                ty = y + ROW - 2,
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use lease::FencingToken;

    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    #[test]
    fn a_takeover_draws_two_bars_and_one_mark() {
        let mut h = DeliveryHistory::default();
        h.claim(FencingToken::new(4), at(1_000), None);
        h.claim(FencingToken::new(5), at(9_000), Some(at(6_000)));
        let svg = svg(&h, at(12_000));
        assert_eq!(svg.matches("class=\"delivery ").count(), 2, "{svg}");
        assert!(svg.contains("d-expired") && svg.contains("d-live"), "{svg}");
        assert_eq!(svg.matches("class=\"takeover\"").count(), 1, "{svg}");
        assert!(svg.contains("token #5 took over from token #4"), "{svg}");
        assert!(!svg.contains("href"), "no external asset: {svg}");
    }

    #[test]
    fn no_delivery_draws_nothing_and_a_retry_is_no_takeover() {
        assert_eq!(svg(&DeliveryHistory::default(), at(0)), "");
        let mut h = DeliveryHistory::default();
        h.claim(FencingToken::new(1), at(0), None);
        h.end(DeliveryEnd::Released, at(0), None);
        h.claim(FencingToken::new(2), at(0), None);
        let svg = svg(&h, at(0));
        assert!(!svg.contains("takeover"), "{svg}");
        assert!(svg.contains("d-released"), "{svg}");
    }
}
