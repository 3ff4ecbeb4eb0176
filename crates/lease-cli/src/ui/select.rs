//! Acting on a selection (`POST /act`, `--allow-writes` only): cancel or retry the
//! executions checked on the executions or dead-letter page. The form carries the CSRF
//! token as every form does. More than one execution is confirmed first, on a page listing
//! them whose form submits the same selection again with `confirmed=yes`; the action itself
//! is one control-log line with every id ([`audit::log_ids`]).

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::{Extension, Form};

use super::audit;
use super::controls::{answer, csrf_field, failure_status, forged};
use super::guard::Client;
use super::html::{escape, page, para};
use super::state::Ui;
use crate::cli::{CancelArgs, RetryArgs};
use crate::commands::{cancel, retry};

/// The most executions one submission acts on (a list page shows fewer).
pub const MAX_SELECTION: usize = 100;
/// The cancel reason when the form's is empty.
const DEFAULT_REASON: &str = "cancelled from the console";

/// A submitted selection.
#[derive(Debug, Default)]
struct Selection {
    csrf: String,
    action: String,
    /// The ids in the order checked, each once.
    ids: Vec<String>,
    reason: String,
    confirmed: bool,
    back: String,
}

impl Selection {
    /// The form's fields (`id` repeated, one per checkbox).
    fn read(fields: Vec<(String, String)>) -> Self {
        let mut s = Selection::default();
        for (name, value) in fields {
            match name.as_str() {
                "csrf" => s.csrf = value,
                "action" => s.action = value,
                "id" if !s.ids.contains(&value) => s.ids.push(value),
                "reason" => s.reason = value,
                "confirmed" => s.confirmed = value == "yes",
                "back" => s.back = value,
                _ => {}
            }
        }
        // Only a path of this server: the link back must not lead to another site.
        if !s.back.starts_with('/') || s.back.starts_with("//") || s.back.contains('\\') {
            s.back = "/executions".to_owned();
        }
        s
    }

    /// The action's name as a verb and its page title.
    fn verb(&self) -> Option<(&'static str, &'static str)> {
        match self.action.as_str() {
            "cancel" => Some(("cancel", "Cancel")),
            "retry" => Some(("retry", "Retry")),
            _ => None,
        }
    }
}

/// `POST /act`.
pub async fn act(
    State(ui): State<Arc<Ui>>,
    Extension(client): Extension<Client>,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    let s = Selection::read(fields);
    let (response, acted) = respond(&ui, &s).await;
    if acted {
        let action = s.verb().map_or("selection", |(verb, _)| verb);
        audit::log_ids(&client, action, &s.ids, response.status());
    }
    response
}

/// The answer, and whether it is the action's (logged) rather than the confirmation step.
async fn respond(ui: &Ui, s: &Selection) -> (Response, bool) {
    if !ui.guard.form_ok(&s.csrf) {
        return (forged(), true);
    }
    let Some((verb, title)) = s.verb() else {
        return (refusal(ui, "Selection", "unknown action"), true);
    };
    if s.ids.is_empty() {
        let text = "no execution selected: check at least one";
        return (refusal(ui, title, text), true);
    }
    if s.ids.len() > MAX_SELECTION {
        let text = format!("at most {MAX_SELECTION} executions at once");
        return (refusal(ui, title, &text), true);
    }
    if s.ids.len() > 1 && !s.confirmed {
        return (confirmation(ui, s, verb, title), false);
    }
    let response = match verb {
        "cancel" => cancel_each(ui, s).await,
        _ => retry_all(ui, s).await,
    };
    (response, true)
}

/// A 400 page saying why nothing was done.
fn refusal(ui: &Ui, title: &str, text: &str) -> Response {
    let body = para("error", text);
    (StatusCode::BAD_REQUEST, Html(page(title, &ui.shown, &body))).into_response()
}

/// The confirmation step: the selection listed, a form submitting it again confirmed, and
/// the way back (nothing is done until it is submitted).
fn confirmation(ui: &Ui, s: &Selection, verb: &str, title: &str) -> Response {
    let n = s.ids.len();
    let mut hidden = csrf_field(ui);
    let field = |name: &str, value: &str| {
        format!(
            "<input type=\"hidden\" name=\"{name}\" value=\"{}\">",
            escape(value)
        )
    };
    for (name, value) in [
        ("action", s.action.as_str()),
        ("reason", s.reason.as_str()),
        ("back", s.back.as_str()),
        ("confirmed", "yes"),
    ] {
        hidden.push_str(&field(name, value));
    }
    let items: String = s
        .ids
        .iter()
        .map(|id| {
            hidden.push_str(&field("id", id));
            format!("<li>{}</li>", escape(id))
        })
        .collect();
    let body = format!(
        "<p id=\"question\">{verb} these {n} executions?</p>\n<ul id=\"selected\">{items}</ul>\n\
         <form id=\"confirm\" method=\"post\" action=\"/act\">{hidden}\
         <button type=\"submit\">Yes, {verb} {n} executions</button> \
         <a id=\"back\" href=\"{}\">No, go back</a></form>\n",
        escape(&s.back)
    );
    Html(page(&format!("{title} {n} executions?"), &ui.shown, &body)).into_response()
}

/// Cancels each selected execution in turn (the backends cancel one at a time); the page
/// lists each outcome, and the status is the first failure's (200 when none failed).
async fn cancel_each(ui: &Ui, s: &Selection) -> Response {
    let reason = match s.reason.trim() {
        "" => DEFAULT_REASON.to_owned(),
        reason => reason.to_owned(),
    };
    let mut status = StatusCode::OK;
    let mut items = String::new();
    for id in &s.ids {
        let args = CancelArgs {
            id: id.clone(),
            reason: reason.clone(),
        };
        let (class, text) = match cancel::run(&*ui.backend, &args, &ui.limits).await {
            Ok(out) => ("message", out.text),
            Err(e) => {
                if status == StatusCode::OK {
                    status = failure_status(&e);
                }
                ("error", e.to_string())
            }
        };
        items.push_str(&format!(
            "<li class=\"{class}\">{}</li>",
            escape(text.trim_end())
        ));
    }
    let body = format!(
        "<ul id=\"result\">{items}</ul>\n<p><a id=\"back\" href=\"{}\">back</a></p>\n",
        escape(&s.back)
    );
    (status, Html(page("Cancel", &ui.shown, &body))).into_response()
}

/// Re-admits the selection in one step, all or none (`lease retry ID...`).
async fn retry_all(ui: &Ui, s: &Selection) -> Response {
    let args = RetryArgs {
        ids: s.ids.clone(),
        input: None,
    };
    let result = retry::run(&*ui.backend, &args, &ui.limits).await;
    answer(ui, "Retry", result, &s.back)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_selection_keeps_each_id_once_in_order_and_a_local_way_back() {
        let s = Selection::read(fields(&[
            ("id", "b"),
            ("id", "a"),
            ("id", "b"),
            ("action", "cancel"),
            ("back", "/dead?after=x"),
            ("confirmed", "yes"),
        ]));
        assert_eq!(s.ids, ["b", "a"]);
        assert_eq!(s.back, "/dead?after=x");
        assert!(s.confirmed);
        for elsewhere in ["https://evil.example/", "//evil.example", "/\\evil", ""] {
            let s = Selection::read(fields(&[("back", elsewhere)]));
            assert_eq!(s.back, "/executions", "{elsewhere}");
        }
        assert!(
            Selection::read(fields(&[("action", "purge")]))
                .verb()
                .is_none()
        );
    }
}
