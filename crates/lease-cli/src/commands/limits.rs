//! `lease limits`: the concurrency limits per key and the namespace default
//! ([`lease::ExecutionClient::concurrency_limits`]); with `--set N` or `--remove`, changes
//! one (`--key KEY` or `--default`) first ([`lease::ExecutionClient::set_concurrency_limit`]).
//! Lowering a limit ends no lease: the key's leases run out before new claims start.

use lease::{ConcurrencyKey, ConcurrencyLimit, LeaseBackend, LimitScope};

use crate::cli::LimitsArgs;
use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::{Output, to_json};
use crate::table::Table;

/// Applies the change `args` asks for, if any, then lists the limits.
pub async fn run(
    backend: &dyn LeaseBackend,
    args: &LimitsArgs,
    limits: &Limits,
) -> Result<Output, Failure> {
    if let Some(change) = change(args)? {
        let (scope, limit) = change;
        limits
            .call(
                "set_concurrency_limit",
                backend.set_concurrency_limit(&scope, limit),
            )
            .await?;
    }
    let all = limits
        .call("concurrency_limits", backend.concurrency_limits())
        .await?;
    let mut table = Table::new(&["KEY", "LIMIT"]);
    let default = all
        .default
        .map_or("unlimited".to_owned(), |l| l.get().to_string());
    table.row(vec!["(default)".into(), default]);
    for (key, limit) in &all.keys {
        table.row(vec![key.to_string(), limit.get().to_string()]);
    }
    Ok(Output {
        text: table.render(),
        json: to_json(&all),
    })
}

/// The change asked for: `None` to only list. The scope flags and `--set`/`--remove` come
/// in pairs (clap enforces it); a bad key or limit is a usage error.
fn change(args: &LimitsArgs) -> Result<Option<(LimitScope, Option<ConcurrencyLimit>)>, Failure> {
    let usage = |e: lease::LeaseError| Failure::Usage(e.to_string());
    let scope = match (&args.key, args.default) {
        (Some(key), _) => LimitScope::Key(ConcurrencyKey::new(key.as_str()).map_err(usage)?),
        (None, true) => LimitScope::Default,
        (None, false) => return Ok(None),
    };
    let limit = match args.set {
        Some(n) => Some(ConcurrencyLimit::new(n).map_err(usage)?),
        None => None,
    };
    Ok(Some((scope, limit)))
}
