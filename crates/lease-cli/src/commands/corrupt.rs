//! `lease corrupt`: records the backend cannot decode ([`lease::ExecutionClient::list_corrupt`]).

use lease::{CorruptRecord, LeaseBackend};
use serde_json::json;

use crate::cli::CorruptArgs;
use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::Output;
use crate::table::Table;

/// At most `--limit` undecodable records, by id, with what could not be decoded.
pub async fn run(
    backend: &dyn LeaseBackend,
    args: &CorruptArgs,
    limits: &Limits,
) -> Result<Output, Failure> {
    let records = records(backend, args.limit, limits).await?;
    let json = records
        .iter()
        .map(|r| json!({ "id": r.id, "problem": r.problem }))
        .collect();
    let text = if records.is_empty() {
        "no corrupt records\n".to_owned()
    } else {
        let mut t = Table::new(&["ID", "PROBLEM"]);
        for r in &records {
            t.row(vec![r.id.clone(), r.problem.clone()]);
        }
        t.render()
    };
    Ok(Output {
        text,
        json: serde_json::Value::Array(json),
    })
}

/// At most `limit` undecodable records (the data `corrupt` and the console's namespace page
/// show).
pub async fn records(
    backend: &dyn LeaseBackend,
    limit: usize,
    limits: &Limits,
) -> Result<Vec<CorruptRecord>, Failure> {
    limits
        .call("list_corrupt", backend.list_corrupt(limit))
        .await
}
