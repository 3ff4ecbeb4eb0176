//! Rule 12 (rate limits): at most `starts` claims of a key's executions in any window
//! `(t - period, t]` of the backend clock.
//!
//! Every accepted claim logs its backend instant (`expires_at - duration_ms`), the instant
//! the backend records for the key's rate, so the rule counts, for each claim at instant
//! `t`, the claims of its key whose instants fall in `(t - period, t]`. A backend counts a
//! key's claims only while a rate applies to it, so only claims invoked after the set that
//! gave the rate returned count; claims whose replies were lost are not in the log. Both
//! only lower the count. The rate is the key's own, else the default, as it may have been
//! at the claim ([`super::scoped`]); the claim is reported only when every rate it may
//! have had is exceeded (one that may have been unlimited is not judged).

use std::collections::BTreeMap;

use super::keys::{Lease, leases_by_key};
use super::op::{Op, OpKind, Rate};
use super::scoped::{Set, possible, sets_of};
use super::violation::Violation;

/// A rate that may have applied to a claim, with the set that gave it.
struct Applied {
    rate: Rate,
    since_us: i64,
}

/// Rule 12: every claim of a keyed execution against the rates it may have had.
pub(super) fn claims_within_rate(
    ops: &[Op],
    by_exec: &BTreeMap<&str, Vec<&Op>>,
    out: &mut Vec<Violation>,
) {
    let sets = rate_sets(ops);
    if sets.is_empty() {
        return;
    }
    for (key, leases) in &leases_by_key(ops, by_exec) {
        for lease in leases {
            let Some(rates) = rates_at(&sets, key, lease.claim) else {
                continue;
            };
            let windows: Vec<(Rate, Vec<&Lease<'_>>)> = rates
                .iter()
                .map(|a| (a.rate, window(leases, lease.claimed_at, a)))
                .collect();
            if windows
                .iter()
                .all(|(rate, inside)| inside.len() > rate.starts as usize)
            {
                let (rate, inside) = &windows[0];
                out.push(Violation::RateExceeded {
                    key: (*key).to_owned(),
                    starts: rate.starts,
                    period_ms: rate.period_ms,
                    at_ms: lease.claimed_at,
                    claims: inside.iter().map(|l| l.name()).collect(),
                });
            }
        }
    }
}

/// The most claims of one key in one window of its rate (the figure that shows a rate
/// bound: at `starts`, the key used its whole rate).
pub fn peak_rate_window(ops: &[Op]) -> usize {
    let mut by_exec: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in ops {
        by_exec.entry(op.execution.as_str()).or_default().push(op);
    }
    let sets = rate_sets(ops);
    let mut peak = 0;
    for (key, leases) in &leases_by_key(ops, &by_exec) {
        for lease in leases {
            for a in rates_at(&sets, key, lease.claim).unwrap_or_default() {
                peak = peak.max(window(leases, lease.claimed_at, &a).len());
            }
        }
    }
    peak
}

/// The rate sets of the log.
fn rate_sets(ops: &[Op]) -> Vec<Set<'_, Option<Rate>>> {
    sets_of(ops, |op| match &op.kind {
        OpKind::SetRateLimit { key, rate } => Some((key.as_deref(), *rate)),
        _ => None,
    })
}

/// Every rate `key` may have had when `claim` committed; `None` when it may have had none.
fn rates_at(sets: &[Set<'_, Option<Rate>>], key: &str, claim: &Op) -> Option<Vec<Applied>> {
    let own = possible(sets, Some(key), claim.start_us, claim.end_us);
    let default = possible(sets, None, claim.start_us, claim.end_us);
    let mut out = Vec::new();
    for o in &own {
        for d in &default {
            // A key's own rate removed (`None`) falls back to the default.
            let set = o.filter(|s| s.value.is_some()).or(*d)?;
            out.push(Applied {
                rate: set.value?,
                since_us: set.op.end_us,
            });
        }
    }
    Some(out)
}

/// The leases of the key claimed in `(at_ms - period, at_ms]` by calls invoked after the
/// rate's set returned.
fn window<'l, 'a>(leases: &'l [Lease<'a>], at_ms: i64, applied: &Applied) -> Vec<&'l Lease<'a>> {
    leases
        .iter()
        .filter(|l| {
            l.claim.start_us > applied.since_us
                && l.claimed_at > at_ms - applied.rate.period_ms
                && l.claimed_at <= at_ms
        })
        .collect()
}
