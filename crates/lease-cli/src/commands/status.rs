//! `lease status`: executions by status ([`lease::ExecutionClient::status_counts`]).

use lease::{LeaseBackend, StatusCounts};

use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::{Output, to_json};
use crate::table::Table;

/// The counts by effective status (the data `status` and the console's namespace page show).
pub async fn counts(backend: &dyn LeaseBackend, limits: &Limits) -> Result<StatusCounts, Failure> {
    limits.call("status_counts", backend.status_counts()).await
}

/// Counts by effective status, the total, the undecodable records, and the takeovers so far
/// (claims that took over an expired lease; not a status, so not in the total).
pub async fn run(backend: &dyn LeaseBackend, limits: &Limits) -> Result<Output, Failure> {
    let counts = counts(backend, limits).await?;
    let mut table = Table::new(&["STATUS", "COUNT"]);
    for status in StatusCounts::STATUSES {
        table.row(vec![status.as_str().into(), counts.of(status).to_string()]);
    }
    table.row(vec!["total".into(), counts.total().to_string()]);
    table.row(vec!["corrupt".into(), counts.corrupt.to_string()]);
    table.row(vec!["takeovers".into(), counts.takeovers.to_string()]);
    let mut json = to_json(&counts);
    if let Some(map) = json.as_object_mut() {
        map.insert("total".into(), counts.total().into());
    }
    Ok(Output {
        text: table.render(),
        json,
    })
}
