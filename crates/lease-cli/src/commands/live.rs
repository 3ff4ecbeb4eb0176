//! `lease live`: the executions holding a live lease now
//! ([`lease::ExecutionClient::list_live_leases`]), soonest expiry first.

use lease::{ExecutionRecord, LeaseBackend, Timestamp};

use crate::cli::LiveArgs;
use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::{Output, expires_in, instant, to_json};
use crate::table::Table;

/// At most `--limit` live leases, soonest expiry first, with how long each has left at the
/// backend clock. No backend records who holds a lease: the token names the delivery.
pub async fn run(
    backend: &dyn LeaseBackend,
    args: &LiveArgs,
    limits: &Limits,
) -> Result<Output, Failure> {
    let (records, now) = records(backend, args.limit, limits).await?;
    Ok(Output {
        text: table(&records, now),
        json: to_json(&records),
    })
}

/// At most `limit` live leases and the backend clock read just after them (the data `live`
/// and the console's namespace page show).
pub async fn records(
    backend: &dyn LeaseBackend,
    limit: usize,
    limits: &Limits,
) -> Result<(Vec<ExecutionRecord>, Timestamp), Failure> {
    let records = limits
        .call("list_live_leases", backend.list_live_leases(limit))
        .await?;
    let now = limits.call("now", backend.now()).await?;
    Ok((records, now))
}

/// One row per lease; a line saying so when there is none.
fn table(records: &[ExecutionRecord], now: Timestamp) -> String {
    if records.is_empty() {
        return "no live leases\n".to_owned();
    }
    let mut t = Table::new(&["ID", "TOKEN", "EXPIRES IN", "EXPIRES AT", "WORKFLOW", "KEY"]);
    for r in records {
        t.row(vec![
            r.id.to_string(),
            r.token.to_string(),
            expires_in(r.lease_expires_at, now),
            instant(r.lease_expires_at),
            r.workflow.as_ref().map_or("-".into(), ToString::to_string),
            r.concurrency_key
                .as_ref()
                .map_or("-".into(), ToString::to_string),
        ]);
    }
    t.render()
}
