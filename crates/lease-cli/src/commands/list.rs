//! `lease list [--status S] [--workflow W] [--key K] [--limit N] [--after CURSOR]`: one page
//! of executions, newest admitted first ([`lease::ExecutionClient::list_executions`]); the
//! page's last line names the command for the next one.

use lease::{
    ConcurrencyKey, ExecutionFilter, ExecutionPage, ExecutionRecord, LeaseBackend, LeaseError,
    ListCursor, WorkflowName,
};
use serde_json::json;

use crate::cli::ListArgs;
use crate::commands::failing::last_error_cell;
use crate::commands::show::shell_word;
use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::{Output, instant, to_json};
use crate::table::Table;

/// One page of the executions `args` filters.
pub async fn run(
    backend: &dyn LeaseBackend,
    args: &ListArgs,
    limits: &Limits,
) -> Result<Output, Failure> {
    let filter = filter(args.status, args.workflow.as_deref(), args.key.as_deref())?;
    let after = cursor(args.after.as_deref())?;
    let page = page(backend, &filter, after.as_ref(), args.limit, limits).await?;
    let mut text = table(&page.records);
    if let Some(next) = &page.next {
        text.push_str(&format!("more: {}\n", next_command(args, next)));
    }
    Ok(Output {
        text,
        json: json!({
            "executions": to_json(&page.records),
            "next": page.next.as_ref().map(ListCursor::as_str),
        }),
    })
}

/// The filter of a status and the texts of a workflow name and a key (empty: any); a name
/// or key no execution could have is a usage error.
pub fn filter(
    status: Option<lease::ExecutionStatus>,
    workflow: Option<&str>,
    key: Option<&str>,
) -> Result<ExecutionFilter, Failure> {
    let workflow = workflow
        .filter(|w| !w.is_empty())
        .map(WorkflowName::new)
        .transpose()
        .map_err(|e| Failure::Usage(format!("workflow: {e}")))?;
    let key = key
        .filter(|k| !k.is_empty())
        .map(ConcurrencyKey::new)
        .transpose()
        .map_err(|e| Failure::Usage(format!("key: {e}")))?;
    Ok(ExecutionFilter {
        status,
        workflow,
        key,
    })
}

/// A cursor's text as a cursor; text no cursor could be is a usage error.
pub fn cursor(text: Option<&str>) -> Result<Option<ListCursor>, Failure> {
    text.filter(|t| !t.is_empty())
        .map(ListCursor::new)
        .transpose()
        .map_err(|e| Failure::Usage(format!("--after: {e}")))
}

/// One page (the data `list` and the console's executions page show). A backend that
/// cannot list executions is a failure naming it; a cursor it did not write, a usage error.
pub async fn page(
    backend: &dyn LeaseBackend,
    filter: &ExecutionFilter,
    after: Option<&ListCursor>,
    limit: usize,
    limits: &Limits,
) -> Result<ExecutionPage, Failure> {
    // A cursor the store did not write is the caller's input (exit 2), not a failure.
    let listed = async {
        match backend.list_executions(filter, after, limit).await {
            Ok(page) => Ok(Ok(page)),
            Err(e @ LeaseError::InvalidInput { .. }) => Ok(Err(Failure::Usage(e.to_string()))),
            Err(e) => Err(e),
        }
    };
    let name = backend.backend_name();
    limits
        .call_optional(name, "listing executions", "list_executions", listed)
        .await?
}

/// `lease list` with the same filters, after `next`.
fn next_command(args: &ListArgs, next: &ListCursor) -> String {
    let mut words = vec!["lease list".to_owned()];
    if let Some(status) = args.status {
        words.push(format!("--status {status}"));
    }
    if let Some(workflow) = &args.workflow {
        words.push(format!("--workflow {}", shell_word(workflow)));
    }
    if let Some(key) = &args.key {
        words.push(format!("--key {}", shell_word(key)));
    }
    words.push(format!("--limit {}", args.limit));
    words.push(format!("--after {}", shell_word(next.as_str())));
    words.join(" ")
}

/// One row per execution; a line saying so when there is none.
fn table(records: &[ExecutionRecord]) -> String {
    if records.is_empty() {
        return "no executions\n".to_owned();
    }
    let mut t = Table::new(&[
        "ID",
        "STATUS",
        "WORKFLOW",
        "KEY",
        "TOKEN",
        "DUE",
        "UNACKED",
        "LAST ERROR",
    ]);
    for r in records {
        t.row(vec![
            r.id.to_string(),
            r.status.as_str().into(),
            r.workflow.as_ref().map_or("-".into(), ToString::to_string),
            r.concurrency_key
                .as_ref()
                .map_or("-".into(), ToString::to_string),
            r.token.to_string(),
            instant(r.due_at),
            r.unacknowledged_deliveries.to_string(),
            last_error_cell(r.last_error.as_ref()),
        ]);
    }
    t.render()
}
