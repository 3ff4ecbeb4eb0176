//! The memory backend's per-key policies ([`crate::keyed`]): start rates and ordered keys,
//! each under the one lock like every other operation.

use crate::control::LimitScope;
use crate::execution::ExecutionRecord;
use crate::keyed::RateLimit;
use crate::time::Timestamp;

use super::{MemoryBackend, State};

impl MemoryBackend {
    /// [`crate::ExecutionClient::set_rate_limit`]. A key no limit applies to any more
    /// forgets its claim instants (they are kept only while a limit applies, so a limit
    /// set later counts from then). Any change may let claims proceed: the wake-up path
    /// hears "now".
    pub(super) fn set_rate(&self, scope: &LimitScope, limit: Option<RateLimit>) {
        let mut s = self.lock();
        s.rates.set(scope, limit);
        let State {
            rates, rate_starts, ..
        } = &mut *s;
        rate_starts.retain(|key, _| rates.of(Some(key)).is_some());
        drop(s);
        self.hub.signal(self.clock.now());
    }

    /// [`crate::ExecutionClient::set_key_ordering`]; unmarking may let claims proceed, so
    /// the wake-up path hears "now" (marking signals too: harmless, and simpler).
    pub(super) fn set_ordering(&self, scope: &LimitScope, ordered: bool) {
        self.lock().ordering.set(scope, ordered);
        self.hub.signal(self.clock.now());
    }
}

impl State {
    /// Records the claim of `record` at `now` as a start of its key, if a rate applies.
    pub(super) fn record_start(&mut self, record: &ExecutionRecord, now: Timestamp) {
        if let Some(key) = &record.concurrency_key
            && self.rates.of(Some(key)).is_some()
        {
            self.rate_starts.entry(key.clone()).or_default().push(now);
        }
    }

    /// Drops the claim instants that left their key's window at `now` (and those of keys
    /// no limit applies to), so the record stays as small as the rates allow.
    pub(super) fn prune_starts(&mut self, now: Timestamp) {
        let State {
            rates, rate_starts, ..
        } = self;
        rate_starts.retain(|key, instants| {
            let Some(rate) = rates.of(Some(key)) else {
                return false;
            };
            let floor = now.as_millis().saturating_sub(rate.period_ms());
            instants.retain(|t| t.as_millis() > floor);
            !instants.is_empty()
        });
    }
}
