//! The controls, with `--allow-writes` only: cancel, retry of a dead execution, pause,
//! resume and retention's dry run,
//! each a POST form carrying the server's CSRF token, each running the command of the same
//! name ([`crate::commands`]) and showing what it printed; each one logged ([`audit`]).

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::{Extension, Form};
use lease::ExecutionStatus;
use serde::Deserialize;

use super::audit::{self, Subject};
use super::guard::Client;
use super::html::{escape, execution_href, page, para};
use super::state::Ui;
use crate::cli::{CancelArgs, PauseArgs, PurgeArgs, RetryArgs};
use crate::commands::{cancel as cancel_cmd, pause as pause_cmd, purge, retry as retry_cmd};
use crate::failure::Failure;
use crate::output::Output;

/// The hidden field every form carries.
pub fn csrf_field(ui: &Ui) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        escape(ui.guard.csrf())
    )
}

/// Why the page has no forms.
pub fn read_only() -> String {
    para(
        "note",
        "read-only: start `lease ui --allow-writes` for cancel, retry, pause, resume and purge's \
         dry run",
    )
}

/// The statuses a cancel applies to (not completed, failed or cancelled: those never change
/// again, so their page offers no cancel at all).
pub const CANCELLABLE: [ExecutionStatus; 4] = [
    ExecutionStatus::Admitted,
    ExecutionStatus::Running,
    ExecutionStatus::Suspended,
    ExecutionStatus::Dead,
];

/// Whether a cancel applies to an execution of `status`.
pub fn cancellable(status: ExecutionStatus) -> bool {
    CANCELLABLE.contains(&status)
}

/// The execution page's controls for an execution of `status`: cancel, with a reason, unless
/// it ended for good; retry of a dead execution, with an optional new input, unless it ended
/// for good. Each form names the statuses it applies to (`data-applies`) and is hidden while
/// the status is another: the page's script shows or hides it as pushes change the status.
/// The server refuses what no longer applies anyway, changing nothing. A control the
/// backend's declaration lacks is left out ([`lease::ExecutionClient::capabilities`]).
pub fn execution_forms(ui: &Ui, id: &str, status: ExecutionStatus) -> String {
    if !ui.allow_writes {
        return read_only();
    }
    if !cancellable(status) {
        return para("note", &format!("{status}: no control applies"));
    }
    let caps = ui.backend.capabilities();
    if !caps.cancel && !caps.attempts {
        return unsupported_controls(caps.backend, "cancel or retry");
    }
    let (csrf, id) = (csrf_field(ui), escape(id));
    let names: Vec<&str> = CANCELLABLE.iter().map(|s| s.as_str()).collect();
    let hidden = |applies: bool| if applies { "" } else { " hidden" };
    let mut out = String::from("<h2>Controls</h2>\n");
    if caps.cancel {
        out.push_str(&cancel_form(&csrf, &id, &names.join(" ")));
    }
    if caps.attempts {
        out.push_str(&retry_form(
            &csrf,
            &id,
            hidden(status == ExecutionStatus::Dead),
        ));
    }
    out
}

/// The note that replaces controls the backend cannot perform (`what`), naming it.
fn unsupported_controls(backend: &str, what: &str) -> String {
    para(
        "note",
        &format!("the {backend} backend does not support {what}: no control here"),
    )
}

/// The cancel form of execution `id` (escaped), shown while the status is one of `applies`.
fn cancel_form(csrf: &str, id: &str, applies: &str) -> String {
    format!(
        "<form id=\"cancel\" method=\"post\" action=\"/cancel\" \
         data-applies=\"{applies}\">{csrf}\
         <input type=\"hidden\" name=\"id\" value=\"{id}\">\
         <input name=\"reason\" size=\"40\" aria-label=\"reason\" \
         value=\"cancelled from the console\"> \
         <button type=\"submit\">Cancel this execution</button></form>\n"
    )
}

/// The retry form of dead execution `id` (escaped); `hidden` hides it while not dead.
fn retry_form(csrf: &str, id: &str, hidden: &str) -> String {
    format!(
        "<form id=\"retry\" method=\"post\" action=\"/retry\" data-applies=\"dead\"{hidden}>{csrf}\
         <input type=\"hidden\" name=\"id\" value=\"{id}\">\
         <input name=\"input\" size=\"40\" aria-label=\"new input\" \
         placeholder=\"new input (JSON; empty: keep)\"> \
         <button type=\"submit\">Retry this dead execution</button></form>\n"
    )
}

/// The namespace page's controls: open by id; pause, resume, retention's dry run (each only
/// when the backend declares it).
pub fn namespace_forms(ui: &Ui) -> String {
    let mut out = String::from(
        "<h2>Open an execution</h2>\n<form id=\"open\" method=\"get\" action=\"/execution\">\
         <input name=\"id\" size=\"40\" placeholder=\"execution id\"> \
         <button type=\"submit\">Show</button></form>\n",
    );
    if !ui.allow_writes {
        out.push_str(&read_only());
        return out;
    }
    let caps = ui.backend.capabilities();
    if !caps.pause && !caps.retention {
        out.push_str(&unsupported_controls(caps.backend, "pause or retention"));
        return out;
    }
    let csrf = csrf_field(ui);
    out.push_str("<h2>Controls</h2>\n");
    if caps.pause {
        out.push_str(&format!(
            "<form id=\"pause\" method=\"post\" action=\"/pause\">{csrf}\
             <input name=\"workflow\" placeholder=\"workflow (empty: the namespace)\"> \
             <button type=\"submit\">Pause</button> \
             <button type=\"submit\" formaction=\"/resume\">Resume</button></form>\n"
        ));
    }
    if caps.retention {
        out.push_str(&format!(
            "<form id=\"purge\" method=\"post\" action=\"/purge-dry-run\">{csrf}\
             purge executions that ended more than <input name=\"older_than\" value=\"30d\" \
             size=\"6\"> ago: <button type=\"submit\">Dry run</button></form>\n"
        ));
    }
    out
}

/// A submitted cancel.
#[derive(Debug, Deserialize)]
pub struct CancelForm {
    csrf: String,
    id: String,
    reason: String,
}

/// A submitted retry of a dead execution.
#[derive(Debug, Deserialize)]
pub struct RetryForm {
    csrf: String,
    id: String,
    #[serde(default)]
    input: String,
}

/// A submitted pause or resume.
#[derive(Debug, Deserialize)]
pub struct PauseForm {
    csrf: String,
    #[serde(default)]
    workflow: String,
}

/// A submitted dry run.
#[derive(Debug, Deserialize)]
pub struct PurgeForm {
    csrf: String,
    older_than: String,
}

/// `POST /cancel`: `lease cancel ID --reason TEXT`.
pub async fn cancel(
    State(ui): State<Arc<Ui>>,
    Extension(client): Extension<Client>,
    Form(f): Form<CancelForm>,
) -> Response {
    let subject = Subject("id", &f.id);
    let response = if ui.guard.form_ok(&f.csrf) {
        let args = CancelArgs {
            id: f.id.clone(),
            reason: f.reason,
        };
        let result = cancel_cmd::run(&*ui.backend, &args, &ui.limits).await;
        answer(&ui, "Cancel", result, &execution_href(&f.id))
    } else {
        forged()
    };
    audit::log(&client, "cancel", &subject, response.status());
    response
}

/// `POST /retry`: `lease retry ID [--input JSON]`.
pub async fn retry(
    State(ui): State<Arc<Ui>>,
    Extension(client): Extension<Client>,
    Form(f): Form<RetryForm>,
) -> Response {
    let response = if ui.guard.form_ok(&f.csrf) {
        let input = f.input.trim();
        let args = RetryArgs {
            ids: vec![f.id.clone()],
            input: (!input.is_empty()).then(|| input.to_owned()),
        };
        let result = retry_cmd::run(&*ui.backend, &args, &ui.limits).await;
        answer(&ui, "Retry", result, &execution_href(&f.id))
    } else {
        forged()
    };
    audit::log(&client, "retry", &Subject("id", &f.id), response.status());
    response
}

/// `POST /pause`: `lease pause [--workflow NAME]`.
pub async fn pause(
    State(ui): State<Arc<Ui>>,
    Extension(client): Extension<Client>,
    Form(f): Form<PauseForm>,
) -> Response {
    pause_or_resume(&ui, &client, f, false).await
}

/// `POST /resume`: `lease resume [--workflow NAME]`.
pub async fn resume(
    State(ui): State<Arc<Ui>>,
    Extension(client): Extension<Client>,
    Form(f): Form<PauseForm>,
) -> Response {
    pause_or_resume(&ui, &client, f, true).await
}

async fn pause_or_resume(ui: &Ui, client: &Client, f: PauseForm, resume: bool) -> Response {
    let workflow = f.workflow.trim();
    let (action, title) = if resume {
        ("resume", "Resume")
    } else {
        ("pause", "Pause")
    };
    let response = if ui.guard.form_ok(&f.csrf) {
        let args = PauseArgs {
            workflow: (!workflow.is_empty()).then(|| workflow.to_owned()),
            list: false,
        };
        let result = pause_cmd::run(&*ui.backend, &args, resume, &ui.limits).await;
        answer(ui, title, result, "/")
    } else {
        forged()
    };
    let scope = if workflow.is_empty() {
        "namespace"
    } else {
        workflow
    };
    audit::log(client, action, &Subject("scope", scope), response.status());
    response
}

/// `POST /purge-dry-run`: `lease purge --older-than D --dry-run` (purges nothing).
pub async fn purge_dry_run(
    State(ui): State<Arc<Ui>>,
    Extension(client): Extension<Client>,
    Form(f): Form<PurgeForm>,
) -> Response {
    let response = if ui.guard.form_ok(&f.csrf) {
        let result = match humantime::parse_duration(f.older_than.trim()) {
            Ok(older_than) => {
                let args = PurgeArgs {
                    older_than,
                    batch: 1,
                    dry_run: true,
                    force: false,
                };
                purge::run(&*ui.backend, &args, &ui.limits).await
            }
            Err(e) => Err(Failure::Usage(format!(
                "older than {:?}: {e}",
                f.older_than
            ))),
        };
        answer(&ui, "Purge (dry run)", result, "/")
    } else {
        forged()
    };
    let subject = Subject("older_than", &f.older_than);
    audit::log(&client, "purge-dry-run", &subject, response.status());
    response
}

/// A form without this server's CSRF token: made elsewhere, refused, nothing done.
pub fn forged() -> Response {
    (
        StatusCode::FORBIDDEN,
        "refused: the form does not carry this server's token",
    )
        .into_response()
}

/// The HTTP status of a failed command: bad input 400, already ended 409, the backend's
/// failure (or lack of the capability) 502.
pub fn failure_status(e: &Failure) -> StatusCode {
    match e {
        Failure::Usage(_) => StatusCode::BAD_REQUEST,
        Failure::AlreadyEnded(_) => StatusCode::CONFLICT,
        Failure::Failed(_) => StatusCode::BAD_GATEWAY,
    }
}

/// What the command printed, or its error, and the way back.
pub fn answer(ui: &Ui, title: &str, result: Result<Output, Failure>, back: &str) -> Response {
    let (status, class, text) = match result {
        Ok(out) => (StatusCode::OK, "message", out.text),
        Err(e) => (failure_status(&e), "error", e.to_string()),
    };
    let body = format!(
        "<p id=\"result\" class=\"{class}\">{}</p>\n<p><a id=\"back\" href=\"{}\">back</a></p>\n",
        escape(text.trim_end()),
        escape(back)
    );
    (status, Html(page(title, &ui.shown, &body))).into_response()
}
