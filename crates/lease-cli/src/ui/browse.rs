//! The executions page (`/executions`: filters by status, workflow and key, newest admitted
//! first, paged by cursor) and the dead-letter page (`/dead`: the dead executions by id with
//! their last error, paged by id). With `--allow-writes` each row an action applies to has a
//! checkbox, and the buttons of the actions that apply to some row submit the selection to
//! [`super::select`]. Both pages are read when opened (no live stream: a list being selected
//! from must not move under the pointer).

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::{Html, IntoResponse, Response};
use lease::{ExecutionId, ExecutionPage, ExecutionRecord, ExecutionStatus, StatusCounts};
use serde::Deserialize;

use super::controls::{cancellable, csrf_field, failure_status};
use super::html::{escape, execution_link, page, para, query_value, status_cell, table};
use super::state::Ui;
use crate::commands::failing::last_error_cell;
use crate::commands::list;
use crate::failure::Failure;
use crate::output::instant;

/// Rows per page of both lists.
pub const PAGE_ROWS: usize = 50;

/// The executions page's query: its filters (empty: any) and the cursor of the page.
#[derive(Debug, Default, Deserialize)]
pub struct ExecutionsQuery {
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub workflow: String,
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub after: String,
}

impl ExecutionsQuery {
    /// The address of this list's page after `after` (`None`: the newest page).
    fn href(&self, after: Option<&str>) -> String {
        let pairs = [
            ("status", self.status.as_str()),
            ("workflow", self.workflow.as_str()),
            ("key", self.key.as_str()),
            ("after", after.unwrap_or_default()),
        ];
        let query: Vec<String> = pairs
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k}={}", query_value(v)))
            .collect();
        match query.is_empty() {
            true => "/executions".to_owned(),
            false => format!("/executions?{}", query.join("&")),
        }
    }

    /// The page of the backend this query asks for.
    async fn read(&self, ui: &Ui) -> Result<ExecutionPage, Failure> {
        let status = match self.status.as_str() {
            "" => None,
            name => Some(
                name.parse::<ExecutionStatus>()
                    .map_err(|e| Failure::Usage(e.to_string()))?,
            ),
        };
        let filter = list::filter(status, Some(&self.workflow), Some(&self.key))?;
        let after = list::cursor(Some(&self.after))?;
        list::page(&*ui.backend, &filter, after.as_ref(), PAGE_ROWS, &ui.limits).await
    }
}

/// `GET /executions`.
pub async fn executions(State(ui): State<Arc<Ui>>, Query(q): Query<ExecutionsQuery>) -> Response {
    let mut body = filter_form(&q);
    match q.read(&ui).await {
        Ok(found) => body.push_str(&executions_list(&ui, &q, &found)),
        Err(e) => {
            body.push_str(&para("error", &e.to_string()));
            let html = Html(page("Executions", &ui.shown, &body));
            return (failure_status(&e), html).into_response();
        }
    }
    Html(page("Executions", &ui.shown, &body)).into_response()
}

/// The filters, as a GET form (its address is the list's: bookmarkable, Back works).
fn filter_form(q: &ExecutionsQuery) -> String {
    let mut options = String::from("<option value=\"\">any</option>");
    for s in StatusCounts::STATUSES {
        let selected = if q.status == s.as_str() {
            " selected"
        } else {
            ""
        };
        options.push_str(&format!("<option{selected}>{}</option>", s.as_str()));
    }
    format!(
        "<form id=\"filter\" method=\"get\" action=\"/executions\">\
         <label>status <select name=\"status\">{options}</select></label>\
         <label>workflow <input name=\"workflow\" value=\"{}\"></label>\
         <label>key <input name=\"key\" value=\"{}\"></label>\
         <button type=\"submit\">Filter</button> <a id=\"clear\" href=\"/executions\">clear \
         filters</a></form>\n",
        escape(&q.workflow),
        escape(&q.key)
    )
}

/// The table of one page, its selection form and its paging links.
fn executions_list(ui: &Ui, q: &ExecutionsQuery, found: &ExecutionPage) -> String {
    let back = q.href((!q.after.is_empty()).then_some(q.after.as_str()));
    let mut out = String::new();
    if found.records.is_empty() {
        out.push_str(&para("note", "no executions match"));
    } else {
        let rows: Vec<Vec<String>> = found
            .records
            .iter()
            .map(|r| {
                let mut row = selection_cell(ui, r);
                row.extend([
                    execution_link(r.id.as_str()),
                    status_cell(r.status),
                    escape(&r.workflow.as_ref().map_or("-".into(), ToString::to_string)),
                    escape(
                        &r.concurrency_key
                            .as_ref()
                            .map_or("-".into(), ToString::to_string),
                    ),
                    r.token.to_string(),
                    instant(r.due_at),
                    r.unacknowledged_deliveries.to_string(),
                    escape(&last_error_cell(r.last_error.as_ref())),
                ]);
                row
            })
            .collect();
        let mut headers = selection_header(ui);
        headers.extend([
            "execution",
            "status",
            "workflow",
            "key",
            "token",
            "due",
            "unacked",
            "last error",
        ]);
        let listed = table("executions", &headers, &rows);
        out.push_str(&selection_form(ui, &found.records, &listed, &back));
    }
    let newest = (!q.after.is_empty()).then(|| q.href(None));
    let older = found.next.as_ref().map(|c| q.href(Some(c.as_str())));
    out.push_str(&paging(newest.as_deref(), older.as_deref()));
    out
}

/// `GET /dead`: the dead-letter page.
#[derive(Debug, Default, Deserialize)]
pub struct DeadQuery {
    #[serde(default)]
    pub after: String,
}

/// `GET /dead?after=ID`.
pub async fn dead(State(ui): State<Arc<Ui>>, Query(q): Query<DeadQuery>) -> Response {
    let title = "Dead letters";
    let found = read_dead(&ui, &q.after).await;
    let records = match found {
        Ok(records) => records,
        Err(e) => {
            let html = Html(page(title, &ui.shown, &para("error", &e.to_string())));
            return (failure_status(&e), html).into_response();
        }
    };
    let mut body = para(
        "note",
        "Executions whose attempts ran out, by id, waiting for an operator: retry re-admits \
         them (attempts counted from 0), cancel ends them.",
    );
    let back = match q.after.as_str() {
        "" => "/dead".to_owned(),
        after => format!("/dead?after={}", query_value(after)),
    };
    if records.is_empty() {
        body.push_str(&para("note", "no dead executions"));
    } else {
        body.push_str(&dead_table(&ui, &records, &back));
    }
    let newest = (!q.after.is_empty()).then_some("/dead");
    let older = records
        .last()
        .filter(|_| records.len() == PAGE_ROWS)
        .map(|r| format!("/dead?after={}", query_value(r.id.as_str())));
    body.push_str(&paging(newest, older.as_deref()));
    Html(page(title, &ui.shown, &body)).into_response()
}

/// One page of dead executions after `after` (empty: the first).
async fn read_dead(ui: &Ui, after: &str) -> Result<Vec<ExecutionRecord>, Failure> {
    let after = match after {
        "" => None,
        id => Some(ExecutionId::new(id).map_err(|e| Failure::Usage(format!("after: {e}")))?),
    };
    let b = &*ui.backend;
    let listed = b.list_dead(after.as_ref(), PAGE_ROWS);
    ui.limits
        .call_optional(b.backend_name(), "dead letters", "list_dead", listed)
        .await
}

fn dead_table(ui: &Ui, records: &[ExecutionRecord], back: &str) -> String {
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            let mut row = selection_cell(ui, r);
            let whole = r
                .last_error
                .as_ref()
                .map_or_else(String::new, |e| format!("{}: {}", e.kind, e.message));
            row.extend([
                execution_link(r.id.as_str()),
                r.unacknowledged_deliveries.to_string(),
                escape(&r.workflow.as_ref().map_or("-".into(), ToString::to_string)),
                instant(r.last_delivery_ended_at),
                format!(
                    "<span title=\"{}\">{}</span>",
                    escape(&whole),
                    escape(&last_error_cell(r.last_error.as_ref()))
                ),
            ]);
            row
        })
        .collect();
    let mut headers = selection_header(ui);
    headers.extend(["execution", "attempts", "workflow", "died", "last error"]);
    let listed = table("dead", &headers, &rows);
    selection_form(ui, records, &listed, back)
}

/// The first header: the selection column, with `--allow-writes` only.
fn selection_header(ui: &Ui) -> Vec<&'static str> {
    if ui.allow_writes {
        vec!["select"]
    } else {
        Vec::new()
    }
}

/// The first cell: a checkbox when some action applies to the row (an empty cell when none
/// does); nothing without `--allow-writes`.
fn selection_cell(ui: &Ui, r: &ExecutionRecord) -> Vec<String> {
    if !ui.allow_writes {
        return Vec::new();
    }
    if !any_action(ui, r) {
        return vec![String::new()];
    }
    let id = escape(r.id.as_str());
    vec![format!(
        "<input type=\"checkbox\" name=\"id\" value=\"{id}\" aria-label=\"select {id}\">"
    )]
}

/// Whether an action the backend declares applies to `r`: cancel to any not ended for good,
/// retry to a dead one.
fn any_action(ui: &Ui, r: &ExecutionRecord) -> bool {
    let caps = ui.backend.capabilities();
    (caps.cancel && cancellable(r.status)) || (caps.attempts && r.status == ExecutionStatus::Dead)
}

/// The table inside the selection form, with the buttons of the actions that apply to some
/// row and that the backend declares (cancel: any not ended for good; retry: any dead).
/// Without `--allow-writes`, the table alone.
fn selection_form(ui: &Ui, records: &[ExecutionRecord], listed: &str, back: &str) -> String {
    if !ui.allow_writes {
        return listed.to_owned();
    }
    let caps = ui.backend.capabilities();
    let mut buttons = String::new();
    if caps.attempts && records.iter().any(|r| r.status == ExecutionStatus::Dead) {
        buttons.push_str(
            "<button type=\"submit\" name=\"action\" value=\"retry\" id=\"retry-selected\">\
             Retry selected</button> ",
        );
    }
    if caps.cancel && records.iter().any(|r| cancellable(r.status)) {
        buttons.push_str(
            "<button type=\"submit\" name=\"action\" value=\"cancel\" id=\"cancel-selected\">\
             Cancel selected</button> <label>reason <input name=\"reason\" size=\"30\" \
             value=\"cancelled from the console\"></label>",
        );
    }
    if buttons.is_empty() {
        return listed.to_owned();
    }
    format!(
        "<form id=\"selection\" method=\"post\" action=\"/act\">{}\
         <input type=\"hidden\" name=\"back\" value=\"{}\">\n{listed}<p>{buttons}</p></form>\n",
        csrf_field(ui),
        escape(back)
    )
}

/// The paging links: back to the newest page, and the next (older) one, when they exist.
fn paging(newest: Option<&str>, older: Option<&str>) -> String {
    let mut links = Vec::new();
    if let Some(href) = newest {
        links.push(format!(
            "<a id=\"newest\" href=\"{}\">&laquo; newest</a>",
            escape(href)
        ));
    }
    if let Some(href) = older {
        links.push(format!(
            "<a id=\"older\" rel=\"next\" href=\"{}\">older &raquo;</a>",
            escape(href)
        ));
    }
    match links.is_empty() {
        true => String::new(),
        false => format!("<p class=\"pages\">{}</p>\n", links.join(" ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_addresses_keep_the_filters_and_encode_them() {
        let q = ExecutionsQuery {
            status: "dead".into(),
            workflow: "a b".into(),
            key: String::new(),
            after: "12:x".into(),
        };
        assert_eq!(q.href(None), "/executions?status=dead&workflow=a%20b");
        assert_eq!(
            q.href(Some("9/y")),
            "/executions?status=dead&workflow=a%20b&after=9%2Fy"
        );
        assert_eq!(ExecutionsQuery::default().href(None), "/executions");
    }
}
