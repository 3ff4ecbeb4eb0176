//! Counters a user can read while the dispatcher runs.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::export::Exporter;

/// Live counters of one dispatcher. Shared (`Arc`) between the dispatcher and whoever reads
/// it; every counter only grows, except `in_flight`. With the cargo feature `metrics` every
/// change is also exported through the `metrics` facade (names in
/// `lease_runtime::metric_names`).
#[derive(Debug, Default)]
pub struct DispatcherMetrics {
    claims: AtomicU64,
    claim_calls: AtomicU64,
    empty_claims: AtomicU64,
    wakeups: AtomicU64,
    purged: AtomicU64,
    renewals: AtomicU64,
    lost: AtomicU64,
    acknowledgements: AtomicU64,
    releases: AtomicU64,
    worker_failures: AtomicU64,
    backend_errors: AtomicU64,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    prefetched: AtomicU64,
    prefetch_released: AtomicU64,
    /// The `metrics` facade handles (empty without the feature).
    export: Exporter,
}

/// A point-in-time copy of [`DispatcherMetrics`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// Leases granted to this dispatcher by `claim_due`.
    pub claims: u64,
    /// Claim calls made (each one statement or script on the backend).
    pub claim_calls: u64,
    /// Claim calls that granted nothing (a poll, or a wake-up another dispatcher won).
    pub empty_claims: u64,
    /// Wake-ups received from the backend ([`lease_core::ExecutionClient::wakeups`]).
    pub wakeups: u64,
    /// Terminal executions removed by the retention schedule.
    pub purged: u64,
    /// Accepted renewals.
    pub renewals: u64,
    /// Deliveries that lost their lease (a fenced write, renewal, release or acknowledgement
    /// returned `Lost`); each counts once.
    pub lost: u64,
    /// Accepted acknowledgements.
    pub acknowledgements: u64,
    /// Accepted releases (retry replies, worker errors and panics, shutdown).
    pub releases: u64,
    /// Deliveries whose worker returned an error or panicked.
    pub worker_failures: u64,
    /// Backend calls of the dispatcher itself that failed with an error.
    pub backend_errors: u64,
    /// Deliveries running now.
    pub in_flight: usize,
    /// The most deliveries that ever ran at once.
    pub max_in_flight: usize,
    /// Leases claimed beyond the free slots and held until one freed (prefetch);
    /// also counted in `claims`.
    pub prefetched: u64,
    /// Held leases released unrun: their hold bound passed before a slot freed, or shutdown
    /// began (also counted in `releases` when the release was accepted).
    pub prefetch_released: u64,
}

impl DispatcherMetrics {
    /// Counters that are also exported through `export`.
    pub(crate) fn exporting(export: Exporter) -> Self {
        DispatcherMetrics {
            export,
            ..DispatcherMetrics::default()
        }
    }

    /// The exporter, for timing backend calls.
    pub(crate) fn export(&self) -> &Exporter {
        &self.export
    }

    /// Copies every counter.
    pub fn snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            claims: self.claims.load(Ordering::SeqCst),
            claim_calls: self.claim_calls.load(Ordering::SeqCst),
            empty_claims: self.empty_claims.load(Ordering::SeqCst),
            wakeups: self.wakeups.load(Ordering::SeqCst),
            purged: self.purged.load(Ordering::SeqCst),
            renewals: self.renewals.load(Ordering::SeqCst),
            lost: self.lost.load(Ordering::SeqCst),
            acknowledgements: self.acknowledgements.load(Ordering::SeqCst),
            releases: self.releases.load(Ordering::SeqCst),
            worker_failures: self.worker_failures.load(Ordering::SeqCst),
            backend_errors: self.backend_errors.load(Ordering::SeqCst),
            in_flight: self.in_flight.load(Ordering::SeqCst),
            max_in_flight: self.max_in_flight.load(Ordering::SeqCst),
            prefetched: self.prefetched.load(Ordering::SeqCst),
            prefetch_released: self.prefetch_released.load(Ordering::SeqCst),
        }
    }

    /// One claim call that granted `n` leases.
    pub(crate) fn claim_call(&self, n: usize) {
        self.claims.fetch_add(n as u64, Ordering::SeqCst);
        self.claim_calls.fetch_add(1, Ordering::SeqCst);
        if n == 0 {
            self.empty_claims.fetch_add(1, Ordering::SeqCst);
        }
        self.export.claim_call(n);
    }
    pub(crate) fn prefetched(&self) {
        self.prefetched.fetch_add(1, Ordering::SeqCst);
    }
    pub(crate) fn prefetch_released(&self) {
        self.prefetch_released.fetch_add(1, Ordering::SeqCst);
    }
    /// Held leases released unrun so far (the claim loop's growth reads it).
    pub(crate) fn prefetch_released_count(&self) -> u64 {
        self.prefetch_released.load(Ordering::SeqCst)
    }
    pub(crate) fn purged(&self, n: usize) {
        self.purged.fetch_add(n as u64, Ordering::SeqCst);
        self.export.purged(n);
    }
    pub(crate) fn wakeup(&self) {
        self.wakeups.fetch_add(1, Ordering::SeqCst);
        self.export.wakeup();
    }
    pub(crate) fn renewed(&self) {
        self.renewals.fetch_add(1, Ordering::SeqCst);
        self.export.renewed();
    }
    pub(crate) fn lost(&self) {
        self.lost.fetch_add(1, Ordering::SeqCst);
        self.export.lost();
    }
    pub(crate) fn acknowledged(&self) {
        self.acknowledgements.fetch_add(1, Ordering::SeqCst);
        self.export.acknowledged();
    }
    pub(crate) fn released(&self) {
        self.releases.fetch_add(1, Ordering::SeqCst);
        self.export.released();
    }
    pub(crate) fn worker_failed(&self) {
        self.worker_failures.fetch_add(1, Ordering::SeqCst);
        self.export.worker_failed();
    }
    pub(crate) fn backend_error(&self) {
        self.backend_errors.fetch_add(1, Ordering::SeqCst);
        self.export.backend_error();
    }
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }
    pub(crate) fn delivery_started(&self) {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        self.export.in_flight(now);
    }
    pub(crate) fn delivery_ended(&self) {
        let now = self.in_flight.fetch_sub(1, Ordering::SeqCst) - 1;
        self.export.in_flight(now);
    }
}
