//! `GET /activity`: the charts of what the console sampled ([`super::activity`]), redrawn
//! by the page's event stream after each sample.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Html;

use super::activity::{now_ms, per_minute};
use super::charts::{PER_MINUTE, bars, statuses};
use super::html::{escape, page, para};
use super::pages::live_div;
use super::state::Ui;

/// `GET /activity`.
pub async fn activity(State(ui): State<Arc<Ui>>) -> Html<String> {
    let body = live_div("/events/activity", &fragment(&ui));
    Html(page("Activity", &ui.shown, &body))
}

/// The live part: every chart, or why there is nothing to draw yet.
pub fn fragment(ui: &Ui) -> String {
    let samples = ui.activity.samples();
    let now = now_ms();
    let mut out = format!(
        "<p class=\"note\" id=\"samples\" data-samples=\"{}\">{}</p>\n",
        samples.len(),
        escape(&format!(
            "{} samples, one every {:?}, taken by this console since it started (at most the \
             last hour); which executions were taken over is on each one's delivery timeline.",
            samples.len(),
            ui.activity.every
        )),
    );
    if samples.len() < 2 {
        out.push_str(&para(
            "note",
            "Waiting for a second sample: the per-minute charts show growth between two.",
        ));
    }
    out.push_str(&statuses(&samples, now));
    let minutes = per_minute(&samples, now);
    for series in &PER_MINUTE {
        out.push_str(&bars(series, &minutes));
    }
    out
}
