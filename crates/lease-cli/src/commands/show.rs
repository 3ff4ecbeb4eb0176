//! `lease show ID`: one execution's record (`get`, the effective view) and one page of its
//! step records (`list_steps_page`, at most `--limit`, after `--after`/`--after-attempt`),
//! read one after the other. When more remain, the last line names the command for the next
//! page (so an execution with many steps is never read whole). Then the
//! execution's delivery history ([`super::history`]), or a line when the backend keeps none.

use lease::{
    ExecutionId, ExecutionRecord, HeapRecord, LeaseBackend, StepCursor, StepKey, StepPage,
};
use serde_json::json;

use super::history;
use crate::cli::ShowArgs;
use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::{Output, instant, to_json};
use crate::table::Table;

/// The record and steps of `args.id`; an id no execution has is a failure, an id no
/// execution could have is a usage error.
pub async fn run(
    backend: &dyn LeaseBackend,
    args: &ShowArgs,
    limits: &Limits,
) -> Result<Output, Failure> {
    let after = cursor(args)?;
    let limit = args.limit;
    let (record, page) = fetch(backend, &args.id, after.as_ref(), limit, limits).await?;
    let deliveries = history::fetch(backend, &record.id, limits).await?;
    let text = format!(
        "{}\n{}{}\n{}",
        record_table(&record),
        steps_table(&page.records),
        next_hint(&args.id, &page, limit),
        history::text(backend.backend_name(), deliveries.as_ref()),
    );
    Ok(Output {
        text,
        json: json!({
            "record": to_json(&record),
            "steps": to_json(&page.records),
            "more": page.more,
            "next": to_json(&page.next()),
            "deliveries": history::json(deliveries.as_ref()),
        }),
    })
}

/// The record of execution `id` and one page of its step records (the data `show` and the
/// console's execution page show): an id no execution has is a failure, an id no execution
/// could have is a usage error.
pub async fn fetch(
    backend: &dyn LeaseBackend,
    id: &str,
    after: Option<&StepCursor>,
    limit: u32,
    limits: &Limits,
) -> Result<(ExecutionRecord, StepPage), Failure> {
    let execution =
        ExecutionId::new(id).map_err(|e| Failure::Usage(format!("execution id {id:?}: {e}")))?;
    let record = limits
        .call("get", backend.get(&execution))
        .await?
        .ok_or_else(|| Failure::Failed(format!("no execution {id:?}")))?;
    let page = limits
        .call(
            "list_steps_page",
            backend.list_steps_page(&execution, after, limit),
        )
        .await?;
    Ok((record, page))
}

/// `--after KEY --after-attempt N` as a cursor; a key no step could have is a usage error.
fn cursor(args: &ShowArgs) -> Result<Option<StepCursor>, Failure> {
    let Some(key) = &args.after else {
        return Ok(None);
    };
    let step_key =
        StepKey::new(key.as_str()).map_err(|e| Failure::Usage(format!("--after {key:?}: {e}")))?;
    Ok(Some(StepCursor {
        step_key,
        step_attempt: args.after_attempt,
    }))
}

/// The command for the next page, when more step records remain.
fn next_hint(id: &str, page: &StepPage, limit: u32) -> String {
    let Some(next) = page.next() else {
        return String::new();
    };
    format!(
        "more step records: lease show {} --after {} --after-attempt {} --limit {limit}\n",
        shell_word(id),
        shell_word(next.step_key.as_str()),
        next.step_attempt
    )
}

/// `text` as one shell word: unchanged when it is plain, else single-quoted.
pub fn shell_word(text: &str) -> String {
    let plain = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c));
    if plain {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// The record as field/value lines.
fn record_table(r: &ExecutionRecord) -> String {
    let mut t = Table::new(&["FIELD", "VALUE"]);
    for (name, value) in record_fields(r) {
        t.row(vec![name.into(), value]);
    }
    t.render()
}

/// The record's fields by name, as `show` and the console's execution page list them.
pub fn record_fields(r: &ExecutionRecord) -> [(&'static str, String); 16] {
    let (outcome, value) = match &r.outcome {
        Some(o) => (o.status().as_str(), o.text().to_owned()),
        None => ("-", "-".to_owned()),
    };
    [
        ("id", r.id.to_string()),
        ("status", r.status.as_str().into()),
        ("workflow", opt(r.workflow.as_ref())),
        ("input", opt(r.input.as_ref())),
        ("token", r.token.to_string()),
        ("lease expires", instant(r.lease_expires_at)),
        ("due", instant(r.due_at)),
        ("wake after claim", instant(r.wake_after_claim)),
        (
            "unacked deliveries",
            r.unacknowledged_deliveries.to_string(),
        ),
        ("last delivery ended", instant(r.last_delivery_ended_at)),
        ("ever suspended", r.ever_suspended.to_string()),
        ("outcome", outcome.into()),
        ("outcome value", value),
        ("trace context", opt(r.trace_context.as_ref())),
        ("attempt limit", opt(r.attempt_limit.as_ref())),
        ("last error", last_error(r.last_error.as_ref())),
    ]
}

/// The last error with its instant as the other instants are shown (not milliseconds
/// since the epoch); `-` for none.
fn last_error(last: Option<&lease::LastError>) -> String {
    last.map_or_else(
        || "-".to_owned(),
        |e| {
            format!(
                "attempt {} at {}: {}: {}",
                e.attempt,
                instant(Some(e.at)),
                e.kind,
                e.message
            )
        },
    )
}

/// The step records, by step key then attempt.
fn steps_table(steps: &[HeapRecord]) -> String {
    if steps.is_empty() {
        return "no step records\n".to_owned();
    }
    let mut t = Table::new(&["STEP", "ATTEMPT", "DONE", "TOKEN", "RESPONSE"]);
    for s in steps {
        t.row(vec![
            s.step_key.to_string(),
            s.step_attempt.to_string(),
            s.done.to_string(),
            s.token.to_string(),
            s.response.to_string(),
        ]);
    }
    t.render()
}

fn opt(value: Option<&impl ToString>) -> String {
    value.map_or_else(|| "-".to_owned(), ToString::to_string)
}
