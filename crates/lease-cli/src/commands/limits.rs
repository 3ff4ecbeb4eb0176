//! `lease limits`: the per-key policies and their namespace defaults — concurrency limits
//! ([`lease::ExecutionClient::concurrency_limits`]), start rates (`rate_limits`) and ordered
//! keys (`key_ordering`); with a scope (`--key KEY` or `--default`) and changes
//! (`--set N`/`--remove`, `--rate N/PERIOD`/`--remove-rate`, `--ordered`/`--unordered`),
//! applies them first, in that order. Lowering a limit ends no lease: the key's leases run
//! out before new claims start.
//!
//! A backend without rate limits or ordered keys lists its concurrency limits with those
//! columns marked unsupported; asking it to change one is a failure naming the backend.

use std::collections::BTreeSet;

use lease::{
    ConcurrencyKey, ConcurrencyLimit, ConcurrencyLimits, KeyOrdering, LeaseBackend, LimitScope,
    RateLimit, RateLimits,
};
use serde_json::json;

use crate::cli::{LimitsArgs, show_rate};
use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::{Output, to_json};
use crate::table::Table;

/// Every policy of the namespace; `None` where the backend does not support it.
pub struct Policies {
    pub concurrency: ConcurrencyLimits,
    pub rates: Option<RateLimits>,
    pub ordering: Option<KeyOrdering>,
}

/// Applies the changes `args` asks for, if any, then lists the policies.
pub async fn run(
    backend: &dyn LeaseBackend,
    args: &LimitsArgs,
    limits: &Limits,
) -> Result<Output, Failure> {
    if let Some(scope) = scope(args)? {
        apply(backend, args, &scope, limits).await?;
    }
    let policies = policies(backend, limits).await?;
    Ok(Output {
        text: table(&policies),
        json: json!({
            "default": to_json(&policies.concurrency.default),
            "keys": to_json(&policies.concurrency.keys),
            "rate_limits": policies.rates.as_ref().map(to_json),
            "key_ordering": policies.ordering.as_ref().map(to_json),
        }),
    })
}

/// The scope the changes apply to: `None` to only list. clap makes a scope come with at
/// least one change and the reverse; a bad key is a usage error.
fn scope(args: &LimitsArgs) -> Result<Option<LimitScope>, Failure> {
    match (&args.key, args.default) {
        (Some(key), _) => {
            let key =
                ConcurrencyKey::new(key.as_str()).map_err(|e| Failure::Usage(e.to_string()))?;
            Ok(Some(LimitScope::Key(key)))
        }
        (None, true) => Ok(Some(LimitScope::Default)),
        (None, false) => Ok(None),
    }
}

/// The changes of `args` on `scope`: concurrency, then rate, then ordering (each call its
/// own step; a failure leaves the earlier ones applied and says which failed).
async fn apply(
    backend: &dyn LeaseBackend,
    args: &LimitsArgs,
    scope: &LimitScope,
    limits: &Limits,
) -> Result<(), Failure> {
    let name = backend.backend_name();
    if args.set.is_some() || args.remove {
        let limit = args
            .set
            .map(ConcurrencyLimit::new)
            .transpose()
            .map_err(|e| Failure::Usage(e.to_string()))?;
        let set = backend.set_concurrency_limit(scope, limit);
        limits
            .call_optional(name, "concurrency limits", "set_concurrency_limit", set)
            .await?;
    }
    if args.rate.is_some() || args.remove_rate {
        let set = backend.set_rate_limit(scope, args.rate);
        limits
            .call_optional(name, "rate limits", "set_rate_limit", set)
            .await?;
    }
    if args.ordered || args.unordered {
        let set = backend.set_key_ordering(scope, args.ordered);
        limits
            .call_optional(name, "ordered keys", "set_key_ordering", set)
            .await?;
    }
    Ok(())
}

/// The three policies, read at once (the data `limits` and the console's namespace page
/// show): the concurrency limits must read; the others are `None` on a backend without
/// them.
pub async fn policies(backend: &dyn LeaseBackend, limits: &Limits) -> Result<Policies, Failure> {
    let (concurrency, rates, ordering) = tokio::join!(
        limits.call("concurrency_limits", backend.concurrency_limits()),
        limits.call("rate_limits", optional(backend.rate_limits())),
        limits.call("key_ordering", optional(backend.key_ordering())),
    );
    Ok(Policies {
        concurrency: concurrency?,
        rates: rates?,
        ordering: ordering?,
    })
}

/// `Unsupported` as `None`.
async fn optional<T>(read: impl Future<Output = lease::Result<T>>) -> lease::Result<Option<T>> {
    match read.await {
        Ok(value) => Ok(Some(value)),
        Err(lease::LeaseError::Unsupported { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// One row per scope: the default, then each key with any policy of its own.
pub fn rows(p: &Policies) -> Vec<[String; 4]> {
    const UNSUPPORTED: &str = "unsupported";
    let rate = |r: Option<RateLimit>| r.map_or("unlimited".to_owned(), show_rate);
    let mut rows = vec![[
        "(default)".to_owned(),
        p.concurrency
            .default
            .map_or("unlimited".to_owned(), |l| l.get().to_string()),
        p.rates
            .as_ref()
            .map_or(UNSUPPORTED.to_owned(), |r| rate(r.default)),
        p.ordering
            .as_ref()
            .map_or(UNSUPPORTED.to_owned(), |o| yes_no(o.default)),
    ]];
    let mut keys: BTreeSet<&ConcurrencyKey> = p.concurrency.keys.iter().map(|(k, _)| k).collect();
    keys.extend(p.rates.iter().flat_map(|r| r.keys.iter().map(|(k, _)| k)));
    keys.extend(p.ordering.iter().flat_map(|o| o.keys.iter()));
    for key in keys {
        let own = p.concurrency.keys.iter().find(|(k, _)| k == key);
        rows.push([
            key.to_string(),
            own.map_or("-".to_owned(), |(_, l)| l.get().to_string()),
            p.rates.as_ref().map_or(UNSUPPORTED.to_owned(), |r| {
                r.keys
                    .iter()
                    .find(|(k, _)| k == key)
                    .map_or("-".to_owned(), |(_, l)| show_rate(*l))
            }),
            p.ordering.as_ref().map_or(UNSUPPORTED.to_owned(), |o| {
                yes_no(o.keys.binary_search(key).is_ok())
            }),
        ]);
    }
    rows
}

fn yes_no(yes: bool) -> String {
    if yes { "yes" } else { "-" }.to_owned()
}

/// The policies as a table (`-`: the key has none of its own; the default applies).
fn table(p: &Policies) -> String {
    let mut table = Table::new(&["KEY", "LIMIT", "RATE", "ORDERED"]);
    for row in rows(p) {
        table.row(row.to_vec());
    }
    table.render()
}
