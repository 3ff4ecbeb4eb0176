//! `lease retry ID... [--input JSON]`: re-admits dead executions in one atomic step
//! ([`lease::ExecutionClient::retry_dead`]): each due now with its attempts counted from 0.
//!
//! Exit 0 when all were re-admitted; 1 for an unknown id, an execution that is not dead or
//! a backend without dead letters (then nothing changed); 2 for a bad id or input.

use lease::{ExecutionId, Json, LeaseBackend};
use serde_json::json;

use crate::cli::RetryArgs;
use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::Output;

/// Re-admits `args.ids`, with `args.input` when given.
pub async fn run(
    backend: &dyn LeaseBackend,
    args: &RetryArgs,
    limits: &Limits,
) -> Result<Output, Failure> {
    let ids = args
        .ids
        .iter()
        .map(|id| ExecutionId::new(id.as_str()).map_err(|e| Failure::Usage(e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    let input = args
        .input
        .as_deref()
        .map(|text| Json::parse("--input", text))
        .transpose()
        .map_err(|e| Failure::Usage(e.to_string()))?;
    let records = limits
        .call("retry_dead", backend.retry_dead(&ids, input.as_ref()))
        .await?;
    let text = records
        .iter()
        .map(|r| format!("re-admitted {}\n", r.id))
        .collect();
    Ok(Output {
        text,
        json: json!({
            "result": "retried",
            "ids": records.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        }),
    })
}
