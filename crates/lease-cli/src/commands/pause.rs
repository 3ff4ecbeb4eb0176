//! `lease pause [--workflow NAME]`, `lease resume [--workflow NAME]` and `lease pause
//! --list`: hold back claims of a namespace or one workflow, and let them go again
//! ([`lease::ExecutionClient::pause`], `resume`, `list_paused`). Live leases go on.

use lease::{LeaseBackend, PauseScope, WorkflowName};
use serde_json::json;

use crate::cli::PauseArgs;
use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::{Output, to_json};
use crate::table::Table;

/// Pauses (`resume == false`) or resumes the scope `args` names, or lists the paused ones.
pub async fn run(
    backend: &dyn LeaseBackend,
    args: &PauseArgs,
    resume: bool,
    limits: &Limits,
) -> Result<Output, Failure> {
    if args.list {
        return list(backend, limits).await;
    }
    let scope = match &args.workflow {
        Some(name) => PauseScope::Workflow(
            WorkflowName::new(name.as_str()).map_err(|e| Failure::Usage(e.to_string()))?,
        ),
        None => PauseScope::Namespace,
    };
    let changed = if resume {
        limits.call("resume", backend.resume(&scope)).await?
    } else {
        limits.call("pause", backend.pause(&scope)).await?
    };
    let verb = if resume { "resumed" } else { "paused" };
    let text = match (changed, resume) {
        (true, _) => format!("{verb} {scope}\n"),
        (false, false) => format!("{scope} was already paused\n"),
        (false, true) => format!("{scope} was not paused\n"),
    };
    Ok(Output {
        text,
        json: json!({"scope": to_json(&scope), "result": verb, "changed": changed}),
    })
}

/// The paused scopes (the data `pause --list` and the console's namespace page show).
pub async fn paused(
    backend: &dyn LeaseBackend,
    limits: &Limits,
) -> Result<Vec<PauseScope>, Failure> {
    limits.call("list_paused", backend.list_paused()).await
}

async fn list(backend: &dyn LeaseBackend, limits: &Limits) -> Result<Output, Failure> {
    let paused = paused(backend, limits).await?;
    let mut table = Table::new(&["PAUSED"]);
    for scope in &paused {
        table.row(vec![scope.to_string()]);
    }
    Ok(Output {
        text: table.render(),
        json: to_json(&paused),
    })
}
