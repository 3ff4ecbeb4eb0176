//! The two pages: the namespace (counts, live leases, failing executions, corrupt records,
//! paused scopes) and one execution (its record, lease, derived lease history,
//! step records with their tokens and effects). Each page's live part is a fragment that
//! [`super::live`] renders again and pushes; the controls lie outside it, so a push never
//! clears what an operator is typing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use lease::{
    CorruptRecord, EffectId, EffectState, ExecutionId, ExecutionRecord, ExecutionStatus,
    HeapRecord, PauseScope, RedeliveryPolicies, StatusCounts, StepCursor, StepKey, StepPage,
    Timestamp,
};
use serde::Deserialize;

use super::controls;
use super::html::{
    escape, execution_href, execution_link, page, para, query_value, status_cell, table,
};
use super::state::Ui;
use super::timeline;
use crate::commands::{corrupt, failing, history, limits, live, pause, show, status};
use crate::failure::Failure;
use crate::output::{expires_in, instant, seconds};

/// Step records per page of the execution page.
const STEP_PAGE: u32 = 50;
/// Rows of the live-lease, failing and corrupt lists.
const LIST_LIMIT: usize = 50;

/// The execution page's query: the id and, for later step pages, the cursor.
#[derive(Debug, Deserialize)]
pub struct ExecutionQuery {
    /// The execution id.
    pub id: String,
    /// The step key the page starts after.
    pub after: Option<String>,
    /// Its attempt.
    #[serde(default)]
    pub after_attempt: u32,
}

impl ExecutionQuery {
    /// The step cursor, when the query names a valid one.
    pub fn cursor(&self) -> Option<StepCursor> {
        let step_key = StepKey::new(self.after.as_deref()?).ok()?;
        Some(StepCursor {
            step_key,
            step_attempt: self.after_attempt,
        })
    }

    /// The query string of this page (for its event stream).
    pub fn query_string(&self) -> String {
        let mut q = format!("id={}", query_value(&self.id));
        if let Some(after) = &self.after {
            q.push_str(&format!(
                "&after={}&after_attempt={}",
                query_value(after),
                self.after_attempt
            ));
        }
        q
    }
}

/// `GET /`: the namespace page.
pub async fn namespace(State(ui): State<Arc<Ui>>) -> Html<String> {
    let (live, _) = namespace_fragment(&ui).await;
    let mut body = live_div("/events/namespace", &live);
    body.push_str(&controls::namespace_forms(&ui));
    body.push_str(&about_section(&ui));
    Html(page("Namespace", &ui.shown, &body))
}

/// "About this store": the backend's name and what it declares it can do
/// ([`lease::ExecutionClient::capabilities`]); controls it lacks are not offered.
fn about_section(ui: &Ui) -> String {
    let caps = ui.backend.capabilities();
    let rows: Vec<Vec<String>> = caps
        .list()
        .into_iter()
        .map(|(name, has)| vec![escape(name), if has { "yes" } else { "no" }.to_owned()])
        .collect();
    format!(
        "<h2>About this store</h2>\n{}{}",
        para("note", &format!("backend: {}", caps.backend)),
        table("capabilities", &["capability", "supported"], &rows)
    )
}

/// `GET /execution?id=ID`: one execution's page (404 when there is none).
pub async fn execution(State(ui): State<Arc<Ui>>, Query(q): Query<ExecutionQuery>) -> Response {
    let title = format!("Execution {}", q.id);
    let (live, _, status) = match execution_fragment(&ui, &q).await {
        Ok(done) => done,
        Err(e) => {
            let body = para("error", &e.to_string());
            let status = match e {
                Failure::Usage(_) => StatusCode::BAD_REQUEST,
                _ => StatusCode::NOT_FOUND,
            };
            return (status, Html(page(&title, &ui.shown, &body))).into_response();
        }
    };
    let events = format!("/events/execution?{}", q.query_string());
    let mut body = live_div(&events, &live);
    body.push_str(&controls::execution_forms(&ui, &q.id, status));
    Html(page(&title, &ui.shown, &body)).into_response()
}

/// The live part, with the event stream that replaces it.
pub(super) fn live_div(events: &str, fragment: &str) -> String {
    format!(
        "<div id=\"live\" data-events=\"{}\">{fragment}</div>\n",
        escape(events)
    )
}

/// The namespace's live part (counts, live leases, failing, corrupt, paused) and how long
/// until the first listed lease expires (the page reads again then, so an expired lease
/// leaves the list without a wake-up). The five reads run at once: the page takes the
/// longest of them rather than their sum (`cargo xtask bench --only ui`).
pub async fn namespace_fragment(ui: &Ui) -> (String, Option<Duration>) {
    let b = &*ui.backend;
    let (counts, leases, failing, corrupt, paused, policies) = tokio::join!(
        status::counts(b, &ui.limits),
        live::records(b, LIST_LIMIT, &ui.limits),
        failing::records(b, 1, LIST_LIMIT, &ui.limits),
        corrupt::records(b, LIST_LIMIT, &ui.limits),
        pause::paused(b, &ui.limits),
        limits::policies(b, &ui.limits),
    );
    let mut out = String::from("<h2>Executions by status</h2>\n");
    let running = match counts {
        Ok(counts) => {
            out.push_str(&counts_table(&counts));
            Some(counts.of(ExecutionStatus::Running))
        }
        Err(e) => {
            out.push_str(&para("error", &e.to_string()));
            None
        }
    };
    let next = match &leases {
        Ok((records, now)) => first_expiry(records, *now),
        Err(_) => None,
    };
    out.push_str(&live_section(leases, running));
    out.push_str(&failing_section(failing));
    out.push_str(&corrupt_section(corrupt));
    out.push_str(&paused_section(paused));
    out.push_str(&policies_section(ui, policies));
    (out, next)
}

/// The live leases (at most [`LIST_LIMIT`], soonest expiry first) with their time left at
/// the backend clock; `running` (the count) says when the list is cut.
fn live_section(
    leases: Result<(Vec<ExecutionRecord>, Timestamp), Failure>,
    running: Option<u64>,
) -> String {
    let mut out = String::from(
        "<h2>Live leases</h2>\n<p class=\"note\">Soonest expiry first. Holder: not recorded \
         (no backend stores who holds a lease; the token identifies the delivery).</p>\n",
    );
    let (records, now) = match leases {
        Ok(found) => found,
        Err(e) => {
            out.push_str(&para("error", &e.to_string()));
            return out;
        }
    };
    if records.is_empty() {
        out.push_str(&para("note", "none"));
        return out;
    }
    let rows: Vec<_> = records
        .iter()
        .map(|r| {
            vec![
                execution_link(r.id.as_str()),
                r.token.to_string(),
                expires_in(r.lease_expires_at, now),
                escape(&r.workflow.as_ref().map_or("-".into(), ToString::to_string)),
                escape(
                    &r.concurrency_key
                        .as_ref()
                        .map_or("-".into(), ToString::to_string),
                ),
            ]
        })
        .collect();
    let headers = ["execution", "token", "expires in", "workflow", "key"];
    out.push_str(&table("live-leases", &headers, &rows));
    if let Some(n) = running.filter(|n| *n > records.len() as u64) {
        out.push_str(&para(
            "note",
            &format!("the first {} of {n} live leases", records.len()),
        ));
    }
    out
}

/// The time until the first of `records` expires, from `now` (zero once past).
fn first_expiry(records: &[ExecutionRecord], now: Timestamp) -> Option<Duration> {
    let at = records.iter().filter_map(|r| r.lease_expires_at).min()?;
    let ms = at.as_millis().saturating_sub(now.as_millis()).max(0);
    Some(Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

fn failing_section(failing: Result<Vec<ExecutionRecord>, Failure>) -> String {
    let mut out = String::from("<h2>Executions that keep failing</h2>\n");
    match failing {
        Ok(records) if records.is_empty() => out.push_str(&para("note", "none")),
        Ok(records) => out.push_str(&failing_table(&records)),
        Err(e) => out.push_str(&para("error", &e.to_string())),
    }
    out
}

fn corrupt_section(corrupt: Result<Vec<CorruptRecord>, Failure>) -> String {
    let mut out = String::from("<h2>Corrupt records</h2>\n");
    match corrupt {
        Ok(records) if records.is_empty() => out.push_str(&para("note", "none")),
        Ok(records) => {
            let rows: Vec<_> = records
                .iter()
                .map(|r| vec![escape(&r.id), escape(&r.problem)])
                .collect();
            out.push_str(&table("corrupt", &["id", "problem"], &rows));
        }
        Err(e) => out.push_str(&para("error", &e.to_string())),
    }
    out
}

fn paused_section(paused: Result<Vec<PauseScope>, Failure>) -> String {
    let mut out = String::from("<h2>Paused</h2>\n");
    match paused {
        Ok(scopes) if scopes.is_empty() => out.push_str(&para("note", "nothing is paused")),
        Ok(scopes) => {
            let rows: Vec<_> = scopes
                .iter()
                .map(|s| vec![escape(&s.to_string())])
                .collect();
            out.push_str(&table("paused", &["scope"], &rows));
        }
        Err(e) => out.push_str(&para("note", &e.to_string())),
    }
    out
}

/// The per-key policies: concurrency limit, start rate, ordered; "unsupported" in a column
/// the backend does not have.
fn policies_section(ui: &Ui, policies: Result<limits::Policies, Failure>) -> String {
    let mut out = String::from(
        "<h2>Keys: concurrency, rate, order</h2>\n<p class=\"note\">A key without a policy of \
         its own (-) follows the default; `lease limits` changes them.</p>\n",
    );
    match policies {
        Ok(p) => {
            let redelivery = redelivery_section(ui, p.redelivery.as_ref());
            let rows: Vec<Vec<String>> = limits::rows(&p)
                .into_iter()
                .map(|row| row.iter().map(|c| escape(c)).collect())
                .collect();
            let headers = ["key", "concurrency limit", "start rate", "ordered"];
            out.push_str(&table("policies", &headers, &rows));
            let missing: Vec<&str> = [
                (p.rates.is_none(), "rate limits"),
                (p.ordering.is_none(), "ordered keys"),
            ]
            .into_iter()
            .filter_map(|(gone, what)| gone.then_some(what))
            .collect();
            if !missing.is_empty() {
                let name = ui.backend.backend_name();
                out.push_str(&para(
                    "note",
                    &format!(
                        "the {name} backend does not support {}",
                        missing.join(" or ")
                    ),
                ));
            }
            out.push_str(&redelivery);
        }
        Err(e) => out.push_str(&para("error", &e.to_string())),
    }
    out
}

/// The workflows' own redelivery policies (`lease limits --workflow W --redelivery ...`).
fn redelivery_section(ui: &Ui, policies: Option<&RedeliveryPolicies>) -> String {
    let mut out = String::from(
        "<h2>Workflows: redelivery</h2>\n<p class=\"note\">The delay after n unacknowledged \
         deliveries in a row is min(cap, base &times; factor<sup>n-1</sup>); a workflow \
         without a policy of its own follows the handle's.</p>\n",
    );
    match policies {
        None => {
            let name = ui.backend.backend_name();
            out.push_str(&para(
                "note",
                &format!("the {name} backend does not support workflow redelivery policies"),
            ));
        }
        Some(p) if p.workflows.is_empty() => {
            out.push_str(&para(
                "note",
                "no workflow has a redelivery policy of its own",
            ));
        }
        Some(p) => {
            let rows: Vec<Vec<String>> = limits::redelivery_rows(p)
                .into_iter()
                .map(|row| row.iter().map(|c| escape(c)).collect())
                .collect();
            let headers = ["workflow", "redelivery (base,factor,cap)"];
            out.push_str(&table("redelivery", &headers, &rows));
        }
    }
    out
}

fn counts_table(counts: &StatusCounts) -> String {
    // Each count links to the executions of that status.
    let mut rows: Vec<Vec<String>> = StatusCounts::STATUSES
        .iter()
        .map(|s| {
            vec![
                status_cell(*s),
                format!(
                    "<a href=\"/executions?status={}\">{}</a>",
                    s.as_str(),
                    counts.of(*s)
                ),
            ]
        })
        .collect();
    rows.push(vec!["total".into(), counts.total().to_string()]);
    rows.push(vec!["corrupt".into(), counts.corrupt.to_string()]);
    // Not a status: claims that took over an expired lease, since the namespace began.
    rows.push(vec!["takeovers".into(), counts.takeovers.to_string()]);
    table("counts", &["status", "count"], &rows)
}

fn failing_table(records: &[ExecutionRecord]) -> String {
    let rows: Vec<_> = records
        .iter()
        .map(|r| {
            vec![
                execution_link(r.id.as_str()),
                r.unacknowledged_deliveries.to_string(),
                status_cell(r.status),
                escape(&r.workflow.as_ref().map_or("-".into(), ToString::to_string)),
                r.token.to_string(),
                instant(r.last_delivery_ended_at),
                instant(r.due_at),
            ]
        })
        .collect();
    let headers = [
        "execution",
        "unacked",
        "status",
        "workflow",
        "token",
        "last delivery ended",
        "due",
    ];
    table("failing", &headers, &rows)
}

/// One execution's live part, how long until its record changes by the clock alone (its
/// lease expires, it falls due) when that is known, and its status (which controls apply).
pub async fn execution_fragment(
    ui: &Ui,
    q: &ExecutionQuery,
) -> Result<(String, Option<Duration>, ExecutionStatus), Failure> {
    let b = &*ui.backend;
    let cursor = q.cursor();
    let (record, steps) = show::fetch(b, &q.id, cursor.as_ref(), STEP_PAGE, &ui.limits).await?;
    let now = ui.limits.call("now", b.now()).await?;
    let mut out = String::from("<h2>Record</h2>\n");
    // The status cell carries the status for the page's script, which shows only the
    // controls that apply to it after each push.
    let rows: Vec<_> = show::record_fields(&record)
        .into_iter()
        .map(|(name, value)| match name {
            "status" => vec![
                escape(name),
                format!(
                    "<span id=\"status\" data-status=\"{0}\" class=\"st st-{0}\">{0}</span>",
                    record.status.as_str()
                ),
            ],
            _ => vec![escape(name), escape(&value)],
        })
        .collect();
    out.push_str(&table("record", &["field", "value"], &rows));
    out.push_str(&lease_section(&record, &steps.records, now));
    out.push_str(&deliveries_section(ui, &record.id, now).await);
    out.push_str(&steps_section(ui, &record.id, &q.id, &steps).await);
    Ok((out, next_change(&record, now), record.status))
}

/// The time until the record changes with the clock: lease expiry, or the due instant.
fn next_change(record: &ExecutionRecord, now: Timestamp) -> Option<Duration> {
    [
        record.lease_expires_at,
        record.due_at,
        record.wake_after_claim,
    ]
    .into_iter()
    .flatten()
    .filter(|t| *t > now)
    .map(|t| Duration::from_millis(u64::try_from(t.as_millis() - now.as_millis()).unwrap_or(0)))
    .min()
}

/// The lease now, and the history the stored fields tell (docs/decisions/0018-delivery-history.md).
fn lease_section(r: &ExecutionRecord, steps: &[HeapRecord], now: Timestamp) -> String {
    let lease = match r.lease_expires_at {
        Some(at) if r.status == ExecutionStatus::Running && at > now => format!(
            "live: token {}, expires in {} (at {})",
            r.token,
            seconds(at.as_millis() - now.as_millis()),
            instant(Some(at))
        ),
        _ => format!("no live lease; latest token {}", r.token),
    };
    let mut tokens: BTreeMap<String, usize> = BTreeMap::new();
    for s in steps {
        *tokens.entry(s.token.to_string()).or_default() += 1;
    }
    let written: Vec<String> = tokens
        .iter()
        .map(|(t, n)| format!("token {t}: {n} step record(s)"))
        .collect();
    let history = [
        format!(
            "{} deliveries in a row ended without an acknowledgement (expired or released \
             leases); the last ended {}",
            r.unacknowledged_deliveries,
            instant(r.last_delivery_ended_at)
        ),
        if written.is_empty() {
            "no step records on this page".to_owned()
        } else {
            format!(
                "step records on this page were written under {}",
                written.join("; ")
            )
        },
    ];
    let items: String = history
        .iter()
        .map(|h| format!("<li>{}</li>", escape(h)))
        .collect();
    format!(
        "<h2>Lease</h2>\n<p id=\"lease\">{}</p>\n<ul id=\"history\">{items}</ul>\n",
        escape(&lease)
    )
}

/// The delivery history: the timeline, then the same entries as a table; a note when the
/// backend keeps none.
async fn deliveries_section(ui: &Ui, id: &ExecutionId, now: Timestamp) -> String {
    let mut out = String::from("<h2>Deliveries</h2>\n");
    let h = match history::fetch(&*ui.backend, id, &ui.limits).await {
        Ok(Some(h)) => h,
        Ok(None) => {
            let name = ui.backend.backend_name();
            out.push_str(&para(
                "note",
                &format!("the {name} backend keeps no delivery history"),
            ));
            return out;
        }
        Err(e) => {
            out.push_str(&para("error", &e.to_string()));
            return out;
        }
    };
    if h.deliveries.is_empty() {
        out.push_str(&para("note", "no deliveries yet"));
        return out;
    }
    out.push_str(&timeline::svg(&h, now));
    let rows: Vec<Vec<String>> = (0..h.deliveries.len())
        .map(|i| {
            history::row(&h.deliveries, i)
                .iter()
                .map(|c| escape(c))
                .collect()
        })
        .collect();
    let headers = ["token", "claimed", "ended", "how", "error", "takeover"];
    out.push_str(&table("deliveries", &headers, &rows));
    if h.earlier > 0 {
        let earlier = format!("{} earlier deliveries not kept", h.earlier);
        out.push_str(&para("note", &earlier));
    }
    out
}

/// The step records of this page, with each one's effect when the backend has effects.
async fn steps_section(ui: &Ui, id: &ExecutionId, raw_id: &str, page: &StepPage) -> String {
    let mut out = String::from("<h2>Step records</h2>\n");
    if page.records.is_empty() {
        out.push_str(&para("note", "no step records"));
        return out;
    }
    let mut rows = Vec::with_capacity(page.records.len());
    for s in &page.records {
        rows.push(vec![
            escape(s.step_key.as_str()),
            s.step_attempt.to_string(),
            s.done.to_string(),
            s.token.to_string(),
            format!("<code>{}</code>", escape(&s.response.to_string())),
            effect_of(ui, id, &s.step_key).await,
        ]);
    }
    let headers = ["step", "attempt", "done", "token", "response", "effect"];
    out.push_str(&table("steps", &headers, &rows));
    if let Some(next) = page.next() {
        let href = format!(
            "{}&after={}&after_attempt={}",
            execution_href(raw_id),
            query_value(next.step_key.as_str()),
            next.step_attempt
        );
        out.push_str(&format!(
            "<p><a id=\"next-steps\" href=\"{}\">next step records</a></p>\n",
            escape(&href)
        ));
    }
    out
}

/// The effect the step driver begins for a step (`EffectId::for_step`), if there is one.
async fn effect_of(ui: &Ui, id: &ExecutionId, step: &StepKey) -> String {
    let Some(effects) = ui.backend.effects() else {
        return "-".to_owned();
    };
    let Ok(effect) = EffectId::for_step(id, step) else {
        return "-".to_owned();
    };
    match ui
        .limits
        .call("read_effect", effects.read_effect(&effect))
        .await
    {
        Ok(Some(e)) => match e.state {
            EffectState::Pending => format!("pending since {}", instant(Some(e.begun_at))),
            EffectState::Settled(v) => format!(
                "settled {}: <code>{}</code>",
                instant(e.settled_at),
                escape(&v.to_string())
            ),
        },
        Ok(None) => "-".to_owned(),
        Err(e) => format!("<span class=\"error\">{}</span>", escape(&e.to_string())),
    }
}
