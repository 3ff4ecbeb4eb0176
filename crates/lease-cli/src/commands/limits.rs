//! `lease limits`: the per-key policies and their namespace defaults — concurrency limits
//! ([`lease::ExecutionClient::concurrency_limits`]), start rates (`rate_limits`) and ordered
//! keys (`key_ordering`); with a scope (`--key KEY` or `--default`) and changes
//! (`--set N`/`--remove`, `--rate N/PERIOD`/`--remove-rate`, `--ordered`/`--unordered`),
//! applies them first, in that order. Lowering a limit ends no lease: the key's leases run
//! out before new claims start.
//!
//! With `--workflow W`, `--redelivery BASE,FACTOR,CAP` sets and `--remove-redelivery`
//! removes that workflow's own redelivery policy
//! ([`lease::ExecutionClient::set_redelivery_policy`]); the workflows' policies are listed
//! in a second table.
//!
//! A backend without rate limits, ordered keys or workflow redelivery policies lists its
//! concurrency limits with those marked unsupported; asking it to change one is a failure
//! naming the backend.

use std::collections::BTreeSet;

use lease::{
    ConcurrencyKey, ConcurrencyLimit, ConcurrencyLimits, KeyOrdering, LeaseBackend, LimitScope,
    RateLimit, RateLimits, RedeliveryPolicies, WorkflowName,
};
use serde_json::json;

use crate::cli::{LimitsArgs, show_rate, show_redelivery};
use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::{Output, to_json};
use crate::table::Table;

/// Every policy of the namespace; `None` where the backend does not support it.
pub struct Policies {
    pub concurrency: ConcurrencyLimits,
    pub rates: Option<RateLimits>,
    pub ordering: Option<KeyOrdering>,
    /// The workflows' own redelivery policies.
    pub redelivery: Option<RedeliveryPolicies>,
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
    apply_redelivery(backend, args, limits).await?;
    let policies = policies(backend, limits).await?;
    Ok(Output {
        text: format!(
            "{}\n{}",
            table(&policies),
            redelivery_table(backend.backend_name(), policies.redelivery.as_ref())
        ),
        json: json!({
            "default": to_json(&policies.concurrency.default),
            "keys": to_json(&policies.concurrency.keys),
            "rate_limits": policies.rates.as_ref().map(to_json),
            "key_ordering": policies.ordering.as_ref().map(to_json),
            "redelivery_policies": policies.redelivery.as_ref().map(redelivery_json),
        }),
    })
}

/// `--workflow W --redelivery P` or `--remove-redelivery`; nothing without `--workflow`
/// (clap makes the workflow and one of the two come together). A bad name is a usage error.
async fn apply_redelivery(
    backend: &dyn LeaseBackend,
    args: &LimitsArgs,
    limits: &Limits,
) -> Result<(), Failure> {
    let Some(workflow) = &args.workflow else {
        return Ok(());
    };
    let workflow = WorkflowName::new(workflow.as_str())
        .map_err(|e| Failure::Usage(format!("--workflow {workflow:?}: {e}")))?;
    let set = backend.set_redelivery_policy(&workflow, args.redelivery);
    let name = backend.backend_name();
    limits
        .call_optional(
            name,
            "workflow redelivery policies",
            "set_redelivery_policy",
            set,
        )
        .await
}

/// The workflows' policies as JSON objects, sorted by workflow.
fn redelivery_json(p: &RedeliveryPolicies) -> serde_json::Value {
    p.workflows
        .iter()
        .map(|(w, p)| {
            json!({
                "workflow": w.as_str(),
                "base_ms": p.base_ms(),
                "factor": p.factor(),
                "cap_ms": p.cap_ms(),
            })
        })
        .collect()
}

/// One row per workflow with a redelivery policy of its own: name, base, factor, cap.
pub fn redelivery_rows(p: &RedeliveryPolicies) -> Vec<[String; 2]> {
    p.workflows
        .iter()
        .map(|(w, p)| [w.to_string(), show_redelivery(*p)])
        .collect()
}

/// The workflows' redelivery policies as a table, or a line when there are none or the
/// backend keeps none.
fn redelivery_table(backend: &str, p: Option<&RedeliveryPolicies>) -> String {
    match p {
        None => format!("the {backend} backend does not support workflow redelivery policies\n"),
        Some(p) if p.workflows.is_empty() => {
            "no workflow has a redelivery policy of its own\n".to_owned()
        }
        Some(p) => {
            let mut table = Table::new(&["WORKFLOW", "REDELIVERY (BASE,FACTOR,CAP)"]);
            for row in redelivery_rows(p) {
                table.row(row.to_vec());
            }
            table.render()
        }
    }
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

/// The policies, read at once (the data `limits` and the console's namespace page
/// show): the concurrency limits must read; the others are `None` on a backend without
/// them.
pub async fn policies(backend: &dyn LeaseBackend, limits: &Limits) -> Result<Policies, Failure> {
    let (concurrency, rates, ordering, redelivery) = tokio::join!(
        limits.call("concurrency_limits", backend.concurrency_limits()),
        limits.call("rate_limits", optional(backend.rate_limits())),
        limits.call("key_ordering", optional(backend.key_ordering())),
        limits.call(
            "redelivery_policies",
            optional(backend.redelivery_policies())
        ),
    );
    Ok(Policies {
        concurrency: concurrency?,
        rates: rates?,
        ordering: ordering?,
        redelivery: redelivery?,
    })
}

/// `Unsupported` as `None`.
pub async fn optional<T>(read: impl Future<Output = lease::Result<T>>) -> lease::Result<Option<T>> {
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
