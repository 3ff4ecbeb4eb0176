//! `lease failing`: executions that keep failing ([`lease::ExecutionClient::list_failing`]).

use lease::{ExecutionRecord, LastError, LeaseBackend};

use crate::cli::FailingArgs;
use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::{Output, instant, to_json};
use crate::table::Table;

/// The executions with at least `--min` unacknowledged deliveries, most failing first.
pub async fn run(
    backend: &dyn LeaseBackend,
    args: &FailingArgs,
    limits: &Limits,
) -> Result<Output, Failure> {
    let records = records(backend, args.min, args.limit, limits).await?;
    Ok(Output {
        text: table(&records),
        json: to_json(&records),
    })
}

/// At most `limit` executions with at least `min` unacknowledged deliveries (the data
/// `failing` and the console's namespace page show).
pub async fn records(
    backend: &dyn LeaseBackend,
    min: u32,
    limit: usize,
    limits: &Limits,
) -> Result<Vec<ExecutionRecord>, Failure> {
    limits
        .call("list_failing", backend.list_failing(min, limit))
        .await
}

/// One row per execution; a line saying so when there is none.
fn table(records: &[ExecutionRecord]) -> String {
    if records.is_empty() {
        return "no failing executions\n".to_owned();
    }
    let mut t = Table::new(&[
        "ID",
        "UNACKED",
        "STATUS",
        "WORKFLOW",
        "LAST ENDED",
        "DUE",
        "LAST ERROR",
    ]);
    for r in records {
        t.row(vec![
            r.id.to_string(),
            r.unacknowledged_deliveries.to_string(),
            r.status.as_str().into(),
            r.workflow.as_ref().map_or("-".into(), ToString::to_string),
            instant(r.last_delivery_ended_at),
            instant(r.due_at),
            last_error_cell(r.last_error.as_ref()),
        ]);
    }
    t.render()
}

/// The longest last-error message a table cell shows, in characters (`show` prints it
/// whole).
const ERROR_CELL_CHARS: usize = 80;

/// A last error as one table cell: `kind: message`, the message on one line and cut to
/// [`ERROR_CELL_CHARS`] (with `...`); `-` for none.
pub fn last_error_cell(last: Option<&LastError>) -> String {
    let Some(last) = last else {
        return "-".to_owned();
    };
    let line = last
        .message
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let mut cell: String = line.chars().take(ERROR_CELL_CHARS).collect();
    if cell.len() < line.len() {
        cell.push_str("...");
    }
    format!("{}: {cell}", last.kind)
}
