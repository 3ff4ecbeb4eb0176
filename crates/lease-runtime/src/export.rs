//! Export of the dispatcher's counters, its in-flight gauge and per-operation latency
//! histograms through the [`metrics`](https://docs.rs/metrics) facade, for
//! whatever recorder the application installs (Prometheus, OpenTelemetry, ...).
//!
//! Only with the cargo feature `metrics`. Without it the exporter is an empty type whose
//! methods are empty and inlined, no clock is read around a call, and the `metrics` crate is
//! not compiled in: the feature costs nothing when off.
//!
//! Handles are registered once, when [`crate::Dispatcher::start`] runs, with the recorder
//! current then: install the recorder (`metrics::set_global_recorder`, or an exporter's
//! `install`) before starting the dispatcher.

/// The metric names and labels (feature `metrics`). Every metric carries the label `backend`
/// ([`lease_core::ExecutionClient::backend_name`]) and, when the backend has one, `namespace`
/// ([`lease_core::ExecutionClient::namespace_name`]: the SQLite or Redis namespace, the PostgreSQL
/// schema).
///
/// | name | kind | what | extra labels |
/// |---|---|---|---|
/// | `lease_dispatcher_claims_total` | counter | leases granted to the dispatcher | |
/// | `lease_dispatcher_claim_calls_total` | counter | claim calls made | |
/// | `lease_dispatcher_empty_claims_total` | counter | claim calls that granted nothing | |
/// | `lease_dispatcher_wakeups_total` | counter | wake-ups received from the backend | |
/// | `lease_dispatcher_purged_total` | counter | terminal executions the retention schedule removed | |
/// | `lease_dispatcher_renewals_total` | counter | accepted renewals | |
/// | `lease_dispatcher_lost_total` | counter | deliveries that lost their lease | |
/// | `lease_dispatcher_acknowledgements_total` | counter | accepted acknowledgements | |
/// | `lease_dispatcher_releases_total` | counter | accepted releases | |
/// | `lease_dispatcher_worker_failures_total` | counter | workers that returned an error or panicked | |
/// | `lease_dispatcher_backend_errors_total` | counter | the dispatcher's own backend calls that failed | |
/// | `lease_dispatcher_in_flight` | gauge | deliveries running now | |
/// | `lease_backend_call_duration_seconds` | histogram | latency of one backend call, from send to reply | `operation`, `outcome` |
///
/// `operation` is one of [`OPERATIONS`](crate::metric_names::OPERATIONS);
/// `outcome` is `ok` (a reply, `Lost` included) or `error` (an error, a call timeout or a
/// panicking adapter). The counters are the same values as [`crate::MetricsSnapshot`],
/// counted from the dispatcher's start.
///
/// [`crate::Dispatcher::start`] registers its handles with the recorder current then:
/// install the recorder (`metrics::set_global_recorder`, or an exporter's `install`) first.
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod names {
    /// Counter: leases granted to the dispatcher by its claims.
    pub const CLAIMS: &str = "lease_dispatcher_claims_total";
    /// Counter: claim calls made (each one statement or script on the backend).
    pub const CLAIM_CALLS: &str = "lease_dispatcher_claim_calls_total";
    /// Counter: claim calls that granted nothing.
    pub const EMPTY_CLAIMS: &str = "lease_dispatcher_empty_claims_total";
    /// Counter: wake-ups received from the backend.
    pub const WAKEUPS: &str = "lease_dispatcher_wakeups_total";
    /// Counter: terminal executions removed by the retention schedule.
    pub const PURGED: &str = "lease_dispatcher_purged_total";
    /// Counter: accepted renewals.
    pub const RENEWALS: &str = "lease_dispatcher_renewals_total";
    /// Counter: deliveries that lost their lease (each counts once).
    pub const LOST: &str = "lease_dispatcher_lost_total";
    /// Counter: accepted acknowledgements.
    pub const ACKNOWLEDGEMENTS: &str = "lease_dispatcher_acknowledgements_total";
    /// Counter: accepted releases.
    pub const RELEASES: &str = "lease_dispatcher_releases_total";
    /// Counter: deliveries whose worker returned an error or panicked.
    pub const WORKER_FAILURES: &str = "lease_dispatcher_worker_failures_total";
    /// Counter: backend calls of the dispatcher itself that failed with an error.
    pub const BACKEND_ERRORS: &str = "lease_dispatcher_backend_errors_total";
    /// Gauge: deliveries running now.
    pub const IN_FLIGHT: &str = "lease_dispatcher_in_flight";
    /// Histogram (seconds): one backend call, labels `operation` and `outcome`.
    pub const CALL_DURATION: &str = "lease_backend_call_duration_seconds";
    /// Label: the backend kind (`memory`, `sqlite`, `postgres`, `redis`, `adapter`).
    pub const LABEL_BACKEND: &str = "backend";
    /// Label: the namespace or schema, on backends that have one.
    pub const LABEL_NAMESPACE: &str = "namespace";
    /// Label of [`CALL_DURATION`]: the operation, one of [`OPERATIONS`].
    pub const LABEL_OPERATION: &str = "operation";
    /// Label of [`CALL_DURATION`]: `ok` or `error`.
    pub const LABEL_OUTCOME: &str = "outcome";
    /// The operations timed, by their trait method names: the dispatcher's own calls, then
    /// the calls a worker makes through its [`crate::Delivery`].
    pub const OPERATIONS: &[&str] = &[
        "claim_due",
        "acknowledge_and_claim",
        "acknowledge",
        "acknowledge_batch",
        "renew",
        "release",
        "now",
        "purge_terminal",
        "write_step",
        "read_step",
        "update",
        "start",
        "request_wake",
    ];
}

#[cfg(feature = "metrics")]
mod on {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use ::metrics::{Counter, Gauge, Histogram, Label};

    use super::names::*;
    use lease_core::client::LeaseBackend;

    /// Units and descriptions (a Prometheus exporter prints them as `# HELP`).
    fn describe() {
        use ::metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
        for (name, what) in [
            (CLAIMS, "Leases granted to the dispatcher by its claims."),
            (CLAIM_CALLS, "Claim calls the dispatcher made."),
            (EMPTY_CLAIMS, "Claim calls that granted nothing."),
            (WAKEUPS, "Wake-ups received from the backend."),
            (
                PURGED,
                "Terminal executions removed by the retention schedule.",
            ),
            (RENEWALS, "Accepted lease renewals."),
            (LOST, "Deliveries that lost their lease."),
            (ACKNOWLEDGEMENTS, "Accepted acknowledgements."),
            (RELEASES, "Accepted releases."),
            (
                WORKER_FAILURES,
                "Deliveries whose worker returned an error or panicked.",
            ),
            (
                BACKEND_ERRORS,
                "Backend calls of the dispatcher that failed.",
            ),
        ] {
            describe_counter!(name, Unit::Count, what);
        }
        describe_gauge!(IN_FLIGHT, Unit::Count, "Deliveries running now.");
        describe_histogram!(
            CALL_DURATION,
            Unit::Seconds,
            "Latency of one backend call, by operation and outcome."
        );
    }

    /// The registered handles; `None` (the default) records nothing.
    #[derive(Clone, Default)]
    pub(crate) struct Exporter(Option<Arc<Handles>>);

    struct Handles {
        claims: Counter,
        claim_calls: Counter,
        empty_claims: Counter,
        wakeups: Counter,
        purged: Counter,
        renewals: Counter,
        lost: Counter,
        acknowledgements: Counter,
        releases: Counter,
        worker_failures: Counter,
        backend_errors: Counter,
        in_flight: Gauge,
        /// Per operation of [`OPERATIONS`]: (name, ok, error).
        calls: Vec<(&'static str, Histogram, Histogram)>,
    }

    impl Exporter {
        /// An exporter that records nothing (a delivery built outside a dispatcher).
        pub(crate) fn disabled() -> Self {
            Exporter(None)
        }

        /// Registers every handle with the current recorder, labelled for `backend`.
        pub(crate) fn register(backend: &dyn LeaseBackend) -> Self {
            describe();
            let mut labels = vec![Label::new(LABEL_BACKEND, backend.backend_name())];
            if let Some(ns) = backend.namespace_name() {
                labels.push(Label::new(LABEL_NAMESPACE, ns));
            }
            let counter = |name: &'static str| ::metrics::counter!(name, labels.iter());
            let histogram = |op: &'static str, outcome: &'static str| {
                let mut l = labels.clone();
                l.push(Label::new(LABEL_OPERATION, op));
                l.push(Label::new(LABEL_OUTCOME, outcome));
                ::metrics::histogram!(CALL_DURATION, l)
            };
            Exporter(Some(Arc::new(Handles {
                claims: counter(CLAIMS),
                claim_calls: counter(CLAIM_CALLS),
                empty_claims: counter(EMPTY_CLAIMS),
                wakeups: counter(WAKEUPS),
                purged: counter(PURGED),
                renewals: counter(RENEWALS),
                lost: counter(LOST),
                acknowledgements: counter(ACKNOWLEDGEMENTS),
                releases: counter(RELEASES),
                worker_failures: counter(WORKER_FAILURES),
                backend_errors: counter(BACKEND_ERRORS),
                in_flight: ::metrics::gauge!(IN_FLIGHT, labels.iter()),
                calls: OPERATIONS
                    .iter()
                    .map(|&op| (op, histogram(op, "ok"), histogram(op, "error")))
                    .collect(),
            })))
        }

        fn with(&self, f: impl FnOnce(&Handles)) {
            if let Some(h) = &self.0 {
                f(h);
            }
        }

        pub(crate) fn claim_call(&self, n: usize) {
            self.with(|h| {
                h.claims.increment(n as u64);
                h.claim_calls.increment(1);
                if n == 0 {
                    h.empty_claims.increment(1);
                }
            });
        }
        pub(crate) fn purged(&self, n: usize) {
            self.with(|h| h.purged.increment(n as u64));
        }
        pub(crate) fn wakeup(&self) {
            self.with(|h| h.wakeups.increment(1));
        }
        pub(crate) fn renewed(&self) {
            self.with(|h| h.renewals.increment(1));
        }
        pub(crate) fn lost(&self) {
            self.with(|h| h.lost.increment(1));
        }
        pub(crate) fn acknowledged(&self) {
            self.with(|h| h.acknowledgements.increment(1));
        }
        pub(crate) fn released(&self) {
            self.with(|h| h.releases.increment(1));
        }
        pub(crate) fn worker_failed(&self) {
            self.with(|h| h.worker_failures.increment(1));
        }
        pub(crate) fn backend_error(&self) {
            self.with(|h| h.backend_errors.increment(1));
        }
        pub(crate) fn in_flight(&self, now: usize) {
            self.with(|h| h.in_flight.set(now as f64));
        }

        fn observe(&self, operation: &'static str, elapsed: Duration, ok: bool) {
            self.with(|h| {
                if let Some((_, okh, errh)) = h.calls.iter().find(|(op, ..)| *op == operation) {
                    if ok { okh } else { errh }.record(elapsed.as_secs_f64());
                } else {
                    debug_assert!(false, "{operation} is not in OPERATIONS");
                }
            });
        }

        /// Runs `call`, recording its latency under `operation`.
        pub(crate) async fn timed<T, E>(
            &self,
            operation: &'static str,
            call: impl Future<Output = std::result::Result<T, E>>,
        ) -> std::result::Result<T, E> {
            if self.0.is_none() {
                return call.await;
            }
            let start = Instant::now();
            let result = call.await;
            self.observe(operation, start.elapsed(), result.is_ok());
            result
        }
    }
}

#[cfg(not(feature = "metrics"))]
mod off {
    use lease_core::client::LeaseBackend;

    /// Without the feature `metrics`: nothing, and every method does nothing.
    #[derive(Clone, Default)]
    pub(crate) struct Exporter;

    impl Exporter {
        #[inline(always)]
        pub(crate) fn disabled() -> Self {
            Exporter
        }
        #[inline(always)]
        pub(crate) fn register(_: &dyn LeaseBackend) -> Self {
            Exporter
        }
        #[inline(always)]
        pub(crate) fn claim_call(&self, _: usize) {}
        #[inline(always)]
        pub(crate) fn purged(&self, _: usize) {}
        #[inline(always)]
        pub(crate) fn wakeup(&self) {}
        #[inline(always)]
        pub(crate) fn renewed(&self) {}
        #[inline(always)]
        pub(crate) fn lost(&self) {}
        #[inline(always)]
        pub(crate) fn acknowledged(&self) {}
        #[inline(always)]
        pub(crate) fn released(&self) {}
        #[inline(always)]
        pub(crate) fn worker_failed(&self) {}
        #[inline(always)]
        pub(crate) fn backend_error(&self) {}
        #[inline(always)]
        pub(crate) fn in_flight(&self, _: usize) {}
        /// Awaits `call`, reading no clock.
        #[inline(always)]
        pub(crate) async fn timed<T, E>(
            &self,
            _: &'static str,
            call: impl Future<Output = std::result::Result<T, E>>,
        ) -> std::result::Result<T, E> {
            call.await
        }
    }
}

#[cfg(not(feature = "metrics"))]
pub(crate) use off::Exporter;
#[cfg(feature = "metrics")]
pub(crate) use on::Exporter;

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter").finish_non_exhaustive()
    }
}
