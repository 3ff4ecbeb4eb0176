//! Live pages: each open page holds one server-sent event stream; the server renders the
//! page's live part again when the backend signals a wake-up (the dispatcher's
//! `wakeups()`), when the page's own record changes by the clock (its lease expires, it
//! falls due; on the namespace page, the first listed live lease expires), or, without wake-ups, every `--refresh`; and pushes it only when it
//! changed. No open page, no stream, no receiver and no reads (docs/decisions/0043-console.md).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt as _};
use lease::WakeReceiver;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use super::activity_page;
use super::guard::SessionEnd;
use super::html::para;
use super::pages::{self, ExecutionQuery};
use super::state::Ui;

/// With wake-ups, the longest a page goes without a fresh read (writes that signal nothing,
/// such as step writes and terminal acknowledgements, show within this).
const MAX_QUIET: Duration = Duration::from_secs(15);
/// The shortest gap between two reads for one page (a burst of wake-ups costs one read).
const MIN_GAP: Duration = Duration::from_millis(250);
/// Past the instant a record changes by the clock, so the backend clock has passed it too.
const PAST_INSTANT: Duration = Duration::from_millis(20);

/// The page's script: replace the live part with each pushed event, then show only the
/// controls (`data-applies`: the statuses they apply to) that apply to the status pushed.
const SCRIPT: &str = "(function(){function applies(){var s=document.getElementById('status');\
if(!s)return;document.querySelectorAll('[data-applies]').forEach(function(f){\
f.hidden=f.dataset.applies.split(' ').indexOf(s.dataset.status)<0;});}\
var el=document.getElementById('live');\
if(!el||!window.EventSource)return;var es=new EventSource(el.dataset.events);\
es.onmessage=function(e){el.innerHTML=e.data;applies();\
document.body.dataset.pushes=String(Number(document.body.dataset.pushes||0)+1);};})();\n";

/// `GET /live.js`.
pub async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
}

/// What one stream renders.
enum Watched {
    Namespace,
    Activity,
    Execution(ExecutionQuery),
}

/// One stream's state between pushes.
struct Live {
    /// Its place among `--max-event-streams`, freed when the browser goes away.
    _slot: OwnedSemaphorePermit,
    ui: Arc<Ui>,
    watched: Watched,
    wake: Option<WakeReceiver>,
    last: Option<String>,
    rendered_at: Option<Instant>,
    next_change: Option<Duration>,
}

/// `GET /events/namespace`.
pub async fn namespace(
    State(ui): State<Arc<Ui>>,
    Extension(end): Extension<SessionEnd>,
) -> Response {
    events(ui, Watched::Namespace, end)
}

/// `GET /events/activity`: redrawn after each sample (the quiet bound also applies).
pub async fn activity(
    State(ui): State<Arc<Ui>>,
    Extension(end): Extension<SessionEnd>,
) -> Response {
    events(ui, Watched::Activity, end)
}

/// `GET /events/execution?id=ID`.
pub async fn execution(
    State(ui): State<Arc<Ui>>,
    Extension(end): Extension<SessionEnd>,
    Query(q): Query<ExecutionQuery>,
) -> Response {
    events(ui, Watched::Execution(q), end)
}

/// The stream, when a slot is free (else 503): subscribe to wake-ups first, so nothing
/// between the page's read and the first push is missed; then render, wait, render again;
/// end with the session (the browser's reconnection then needs a new one).
fn events(ui: Arc<Ui>, watched: Watched, end: SessionEnd) -> Response {
    let Ok(slot) = Arc::clone(&ui.streams).try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "refused: too many open pages (--max-event-streams)",
        )
            .into_response();
    };
    let live = Live {
        _slot: slot,
        wake: ui.backend.wakeups(),
        ui,
        watched,
        last: None,
        rendered_at: None,
        next_change: None,
    };
    let stream = pushes(live);
    match end.0 {
        Some(end) => {
            let ended = tokio::time::sleep_until(Instant::from_std(end));
            Sse::new(stream.take_until(ended))
                .keep_alive(KeepAlive::default())
                .into_response()
        }
        None => Sse::new(stream)
            .keep_alive(KeepAlive::default())
            .into_response(),
    }
}

/// Each rendering of the live part that differs from the last pushed.
fn pushes(live: Live) -> impl Stream<Item = Result<Event, Infallible>> + Send {
    futures::stream::unfold(live, |mut live| async move {
        loop {
            live.wait().await;
            let html = live.render().await;
            if live.last.as_deref() != Some(html.as_str()) {
                let event = Event::default().data(&html);
                live.last = Some(html);
                return Some((Ok(event), live));
            }
        }
    })
}

impl Live {
    /// Until something may have changed: a wake-up, the record's own next change, or the
    /// bounded quiet (`--refresh` without wake-ups); never sooner than [`MIN_GAP`] after
    /// the last read.
    async fn wait(&mut self) {
        let Some(rendered_at) = self.rendered_at else {
            return;
        };
        let quiet = if self.wake.is_some() {
            MAX_QUIET
        } else {
            self.ui.refresh
        };
        let timer = self
            .next_change
            .map_or(quiet, |d| (d + PAST_INSTANT).min(quiet));
        match &self.wake {
            Some(wake) => {
                tokio::select! {
                    _ = wake.recv() => {}
                    () = tokio::time::sleep_until(rendered_at + timer) => {}
                }
            }
            None => tokio::time::sleep_until(rendered_at + timer).await,
        }
        tokio::time::sleep_until(rendered_at + MIN_GAP).await;
    }

    async fn render(&mut self) -> String {
        self.rendered_at = Some(Instant::now());
        match &self.watched {
            Watched::Namespace => {
                let (html, next) = pages::namespace_fragment(&self.ui).await;
                self.next_change = next;
                html
            }
            Watched::Activity => {
                self.next_change = Some(self.ui.activity.every);
                activity_page::fragment(&self.ui)
            }
            Watched::Execution(q) => match pages::execution_fragment(&self.ui, q).await {
                Ok((html, next, _)) => {
                    self.next_change = next;
                    html
                }
                Err(e) => para("error", &e.to_string()),
            },
        }
    }
}
