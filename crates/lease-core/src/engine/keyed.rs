//! The engine's per-key policies ([`crate::keyed`]): start rates' claim instants.

use crate::control::LimitScope;
use crate::execution::ExecutionRecord;
use crate::keyed::RateLimit;
use crate::time::Timestamp;

use super::{Namespace, Tx};

/// [`crate::ExecutionClient::set_rate_limit`]. A key no limit applies to any more forgets
/// its claim instants (they are kept only while a limit applies, so a limit set later
/// counts from then).
pub(super) fn set_rate(namespace: &mut Namespace, scope: &LimitScope, limit: Option<RateLimit>) {
    namespace.rates.set(scope, limit);
    let Namespace {
        rates, rate_starts, ..
    } = namespace;
    rate_starts.retain(|key, _| rates.of(Some(key)).is_some());
}

/// Records the claim of `record` at `now` as a start of its key, if a rate applies.
pub(super) fn record_start(tx: &mut impl Tx, record: &ExecutionRecord, now: Timestamp) {
    if let Some(key) = &record.concurrency_key
        && tx.namespace().rates.of(Some(key)).is_some()
    {
        let starts = &mut tx.namespace_mut().rate_starts;
        starts.entry(key.clone()).or_default().push(now);
    }
}

/// Drops the claim instants that left their key's window at `now` (and those of keys no
/// limit applies to), so the namespace stays as small as the rates allow.
pub(super) fn prune_starts(tx: &mut impl Tx, now: Timestamp) {
    if tx.namespace().rate_starts.is_empty() {
        return;
    }
    let Namespace {
        rates, rate_starts, ..
    } = tx.namespace_mut();
    rate_starts.retain(|key, instants| {
        let Some(rate) = rates.of(Some(key)) else {
            return false;
        };
        let floor = now.as_millis().saturating_sub(rate.period_ms());
        instants.retain(|t| t.as_millis() > floor);
        !instants.is_empty()
    });
}
