//! `lease dead [--after ID] [--limit N]`: dead executions, out of attempts and waiting for
//! an operator ([`lease::ExecutionClient::list_dead`]), by id, with their last error.

use lease::{ExecutionId, ExecutionRecord, LeaseBackend};

use crate::cli::DeadArgs;
use crate::commands::failing::last_error_cell;
use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::{Output, instant, to_json};
use crate::table::Table;

/// One page of dead executions; its last line names the command for the next page when the
/// page is full.
pub async fn run(
    backend: &dyn LeaseBackend,
    args: &DeadArgs,
    limits: &Limits,
) -> Result<Output, Failure> {
    let after = args
        .after
        .as_deref()
        .map(ExecutionId::new)
        .transpose()
        .map_err(|e| Failure::Usage(format!("--after: {e}")))?;
    let records = limits
        .call("list_dead", backend.list_dead(after.as_ref(), args.limit))
        .await?;
    Ok(Output {
        text: table(&records, args.limit),
        json: to_json(&records),
    })
}

/// One row per execution; a line saying so when there is none.
fn table(records: &[ExecutionRecord], limit: usize) -> String {
    if records.is_empty() {
        return "no dead executions\n".to_owned();
    }
    let mut t = Table::new(&["ID", "ATTEMPTS", "WORKFLOW", "DIED", "LAST ERROR"]);
    for r in records {
        t.row(vec![
            r.id.to_string(),
            r.unacknowledged_deliveries.to_string(),
            r.workflow.as_ref().map_or("-".into(), ToString::to_string),
            instant(r.last_delivery_ended_at),
            last_error_cell(r.last_error.as_ref()),
        ]);
    }
    let mut text = t.render();
    if let Some(last) = records.last().filter(|_| records.len() == limit) {
        text.push_str(&format!(
            "more may remain: lease dead --after {} --limit {limit}\n",
            last.id
        ));
    }
    text
}
