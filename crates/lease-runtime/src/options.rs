//! Dispatcher options and their validation (RFC 002 `DispatcherOptions`).

use std::time::Duration;

use lease_core::error::{LeaseError, Result};
use lease_core::limits::{MAX_CLAIM_LIMIT, MAX_LEASE, MIN_LEASE};

/// Largest accepted `concurrency`.
pub const MAX_CONCURRENCY: usize = 10_000;
/// Longest accepted poll interval.
pub const MAX_POLL_INTERVAL: Duration = Duration::from_secs(3600);
/// Default bound on each backend call the dispatcher makes.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Default poll interval of a dispatcher whose backend sends no wake-ups.
pub const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// Default backstop poll of a dispatcher whose backend sends wake-ups: only a lost
/// notification waits this long.
pub const DEFAULT_BACKSTOP: Duration = Duration::from_secs(10);

/// How a [`crate::Dispatcher`] claims, renews and runs deliveries.
///
/// RFC 002: "The dispatcher will accept a concurrency limit"; lease duration and renewal
/// interval are left to us: a 30 s lease renewed every third of it, so two renewals in a
/// row can fail before the lease expires.
/// Setters take and return `self`; [`DispatcherOptions::validate`] (called by
/// `Dispatcher::start`) rejects an inconsistent set with [`LeaseError::InvalidInput`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatcherOptions {
    concurrency: usize,
    lease_duration: Duration,
    renew_every: Option<Duration>,
    poll_interval: Option<Duration>,
    /// `None`: the batch adapts to the backlog ([`crate::growth`]).
    claim_batch: Option<usize>,
    call_timeout: Duration,
    retention: Option<(Duration, Duration)>,
    /// `None`: the bound adapts to how soon held leases start.
    prefetch: Option<usize>,
}

/// Default bound on leases held locally beyond the running ones (prefetch), where an
/// adaptive bound starts.
pub const DEFAULT_PREFETCH: usize = 32;
/// Default claim batch, where an adaptive batch starts.
pub const DEFAULT_CLAIM_BATCH: usize = 32;
/// The largest an adaptive claim batch or prefetch bound grows to.
pub const MAX_ADAPTIVE: usize = 512;
/// The longest a prefetched lease is held before it starts (also capped by `renew_every`).
pub const MAX_PREFETCH_HOLD: Duration = Duration::from_secs(1);

impl Default for DispatcherOptions {
    /// Concurrency 16, 30 s leases renewed every 10 s; claims of 32 at a time and a prefetch
    /// bound of 32, both growing with a backlog up to [`MAX_ADAPTIVE`] and shrinking back when
    /// it drains; polling every second, or every 10 s as a backstop when the backend sends
    /// wake-ups.
    fn default() -> Self {
        DispatcherOptions {
            concurrency: 16,
            lease_duration: Duration::from_secs(30),
            renew_every: None,
            poll_interval: None,
            claim_batch: None,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            retention: None,
            prefetch: None,
        }
    }
}

impl DispatcherOptions {
    /// The defaults (see [`Default`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// The maximum number of deliveries this dispatcher runs at once (RFC 002
    /// `concurrency`), 1..=[`MAX_CONCURRENCY`].
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency;
        self
    }

    /// The duration of each lease and of each renewal, measured on the backend clock.
    pub fn lease_duration(mut self, lease: Duration) -> Self {
        self.lease_duration = lease;
        self
    }

    /// How often a live lease is renewed (default: a third of the lease duration). Must be
    /// at most half the lease, so at least one renewal can fail before the lease expires.
    pub fn renew_every(mut self, every: Duration) -> Self {
        self.renew_every = Some(every);
        self
    }

    /// The longest the claim loop waits between claims when nothing was due. It claims
    /// earlier when a slot frees, [`crate::Dispatcher::wake`] is called, the
    /// backend sends a wake-up ([`lease_core::ExecutionClient::wakeups`]) or the next claimable
    /// instant the last claim reported arrives; with wake-ups it is only the backstop for a
    /// lost notification. Default: [`DEFAULT_POLL`] without wake-ups, [`DEFAULT_BACKSTOP`]
    /// with them.
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = Some(every);
        self
    }

    /// The most leases one `claim_due` call asks for (also capped by the free slots),
    /// 1..=[`MAX_CLAIM_LIMIT`], fixed. Unset, the batch starts at [`DEFAULT_CLAIM_BATCH`],
    /// doubles after each claim that got all the batch asked for (up to [`MAX_ADAPTIVE`])
    /// and halves after one that came back short.
    pub fn claim_batch(mut self, batch: usize) -> Self {
        self.claim_batch = Some(batch);
        self
    }

    /// The longest the dispatcher waits for any one backend call it makes (claim, renew,
    /// acknowledge, release), 1 ms..=1 h, default [`DEFAULT_CALL_TIMEOUT`]. A call that
    /// times out counts as an unknown outcome: the dispatcher never assumes it applied.
    /// A renewal is also cut off at the delivery's local deadline (design: local deadline).
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Retention: every `every`, purge terminal executions that ended more than
    /// `keep` ago (backend clock), with their step records, receipts and start records
    /// (`ExecutionClient::purge_terminal`, batches of 1000, at most 100 batches a pass).
    /// Off by default. `keep` must be at least a day (a purged id's receipts and start
    /// request are forgotten, so no holder may outlive it); `every` 1 s..=1 day.
    pub fn retain_terminal(mut self, keep: Duration, every: Duration) -> Self {
        self.retention = Some((keep, every));
        self
    }

    /// Prefetch: while work is waiting (the last claim got all it asked for), the
    /// claim loop claims up to `n` leases beyond the free slots and holds them locally, so a
    /// slot that frees starts its next execution without a claim round trip, and the
    /// acknowledgement of the delivery before it goes out in the background (batched with
    /// others). A held lease is a live lease: issued with its own token, its local deadline
    /// and renewal schedule running from its claim. The number held adapts to the observed
    /// run time and to how long the running deliveries have run (a slot that overran the
    /// average is not expected to free), so that each is expected to start within
    /// [`DispatcherOptions::get_prefetch_hold`];
    /// one that has not started by then is released unrun. `0` turns prefetch off (every
    /// lease claimed is started at once). 0..=[`MAX_CLAIM_LIMIT`], fixed. Unset, the bound
    /// starts at [`DEFAULT_PREFETCH`], doubles (up to [`MAX_ADAPTIVE`]) after a claim that
    /// got all it asked for while the bound, not the expected starts, limited it, and halves
    /// when a held lease is released unrun or a claim comes back short.
    pub fn prefetch(mut self, n: usize) -> Self {
        self.prefetch = Some(n);
        self
    }

    /// The configured prefetch bound, or where the adaptive one starts.
    pub fn get_prefetch(&self) -> usize {
        self.prefetch.unwrap_or(DEFAULT_PREFETCH)
    }

    /// Whether the prefetch bound adapts (none was set).
    pub fn adapts_prefetch(&self) -> bool {
        self.prefetch.is_none()
    }

    /// Whether the claim batch adapts (none was set).
    pub fn adapts_claim_batch(&self) -> bool {
        self.claim_batch.is_none()
    }

    /// The longest a prefetched lease is held before it starts: `renew_every`, at most
    /// [`MAX_PREFETCH_HOLD`]. Never more than half the lease (`renew_every` is at most that),
    /// so a held lease starts well inside its local deadline.
    pub fn get_prefetch_hold(&self) -> Duration {
        self.get_renew_every().min(MAX_PREFETCH_HOLD)
    }

    /// The retention schedule: (keep, every), if set.
    pub fn get_retention(&self) -> Option<(Duration, Duration)> {
        self.retention
    }

    /// The configured call timeout.
    pub fn get_call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// The local deadline margin: a delivery stops this long before its lease would expire
    /// unrenewed, measured from when the claim or last successful renewal was sent (a tenth
    /// of the lease, so a clock running up to 10% slower than the backend's stays safe).
    pub fn get_deadline_margin(&self) -> Duration {
        self.lease_duration / 10
    }

    /// The configured concurrency.
    pub fn get_concurrency(&self) -> usize {
        self.concurrency
    }

    /// The configured lease duration.
    pub fn get_lease_duration(&self) -> Duration {
        self.lease_duration
    }

    /// The renewal interval: the configured one, or a third of the lease.
    pub fn get_renew_every(&self) -> Duration {
        self.renew_every.unwrap_or(self.lease_duration / 3)
    }

    /// The poll interval for a backend without wake-ups: the configured one or
    /// [`DEFAULT_POLL`].
    pub fn get_poll_interval(&self) -> Duration {
        self.poll_interval.unwrap_or(DEFAULT_POLL)
    }

    /// The longest wait between claims: the configured poll interval, else [`DEFAULT_POLL`]
    /// for a backend that only polls and [`DEFAULT_BACKSTOP`] for one that sends wake-ups.
    pub fn get_backstop(&self, wakeups: bool) -> Duration {
        match (self.poll_interval, wakeups) {
            (Some(d), _) => d,
            (None, false) => DEFAULT_POLL,
            (None, true) => DEFAULT_BACKSTOP,
        }
    }

    /// The configured claim batch size, or where the adaptive one starts.
    pub fn get_claim_batch(&self) -> usize {
        self.claim_batch.unwrap_or(DEFAULT_CLAIM_BATCH)
    }

    /// Checks every option and their consistency; a typed error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        if self.concurrency == 0 || self.concurrency > MAX_CONCURRENCY {
            return Err(LeaseError::invalid(
                "concurrency",
                format!("{} is outside 1..={MAX_CONCURRENCY}", self.concurrency),
            ));
        }
        // At least 3 ms so the default third of it is still a whole millisecond.
        let min_lease = MIN_LEASE.max(Duration::from_millis(3));
        if self.lease_duration < min_lease || self.lease_duration > MAX_LEASE {
            return Err(LeaseError::invalid(
                "lease_duration",
                format!(
                    "{:?} is outside {min_lease:?}..={MAX_LEASE:?}",
                    self.lease_duration
                ),
            ));
        }
        let renew = self.get_renew_every();
        if renew < Duration::from_millis(1) {
            return Err(LeaseError::invalid(
                "renew_every",
                format!("{renew:?} is shorter than 1 ms"),
            ));
        }
        if renew.saturating_mul(2) > self.lease_duration {
            return Err(LeaseError::invalid(
                "renew_every",
                format!(
                    "{renew:?} is more than half the lease duration {:?}: renewal must come \
                     well inside the lease so one failed renewal does not lose it",
                    self.lease_duration
                ),
            ));
        }
        let poll = self.get_poll_interval();
        if poll < Duration::from_millis(1) || poll > MAX_POLL_INTERVAL {
            return Err(LeaseError::invalid(
                "poll_interval",
                format!("{poll:?} is outside 1ms..={MAX_POLL_INTERVAL:?}"),
            ));
        }
        lease_core::limits::check_limit("claim_batch", self.get_claim_batch())?;
        if self.get_prefetch() > MAX_CLAIM_LIMIT {
            return Err(LeaseError::invalid(
                "prefetch",
                format!("{} is outside 0..={MAX_CLAIM_LIMIT}", self.get_prefetch()),
            ));
        }
        if self.call_timeout < Duration::from_millis(1) || self.call_timeout > MAX_POLL_INTERVAL {
            return Err(LeaseError::invalid(
                "call_timeout",
                format!(
                    "{:?} is outside 1ms..={MAX_POLL_INTERVAL:?}",
                    self.call_timeout
                ),
            ));
        }
        if let Some((keep, every)) = self.retention {
            let day = Duration::from_secs(24 * 60 * 60);
            if keep < day {
                return Err(LeaseError::invalid(
                    "retain_terminal keep",
                    format!("{keep:?} is shorter than a day"),
                ));
            }
            if every < Duration::from_secs(1) || every > day {
                return Err(LeaseError::invalid(
                    "retain_terminal every",
                    format!("{every:?} is outside 1s..=1 day"),
                ));
            }
        }
        debug_assert!(self.get_claim_batch() <= MAX_CLAIM_LIMIT && MAX_ADAPTIVE <= MAX_CLAIM_LIMIT);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);
    const DAY: Duration = Duration::from_secs(86_400);

    fn d() -> DispatcherOptions {
        DispatcherOptions::default()
    }

    fn field(o: DispatcherOptions) -> &'static str {
        match o.validate() {
            Err(LeaseError::InvalidInput { field, .. }) => field,
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }

    #[test]
    fn defaults_are_valid_and_renew_at_a_third() {
        let o = DispatcherOptions::default();
        o.validate().expect("defaults valid");
        assert_eq!(o.get_renew_every(), Duration::from_secs(10));
    }

    /// Each bad option is `InvalidInput` naming its field.
    #[rstest]
    #[case::no_concurrency(d().concurrency(0), "concurrency")]
    #[case::too_much_concurrency(d().concurrency(MAX_CONCURRENCY + 1), "concurrency")]
    #[case::zero_lease(d().lease_duration(Duration::ZERO), "lease_duration")]
    #[case::lease_over_the_maximum(d().lease_duration(MAX_LEASE * 2), "lease_duration")]
    #[case::zero_renewal(d().renew_every(Duration::ZERO), "renew_every")]
    #[case::renewal_over_half_the_lease(d().renew_every(Duration::from_secs(16)), "renew_every")]
    #[case::renewal_as_long_as_the_lease(d().renew_every(Duration::from_secs(30)), "renew_every")]
    #[case::zero_poll(d().poll_interval(Duration::ZERO), "poll_interval")]
    #[case::no_claim_batch(d().claim_batch(0), "claim_batch")]
    #[case::claim_batch_over_the_limit(d().claim_batch(MAX_CLAIM_LIMIT + 1), "claim_batch")]
    #[case::lease_under_3_ms(d().lease_duration(Duration::from_millis(2)), "lease_duration")]
    #[case::poll_over_an_hour(d().poll_interval(MAX_POLL_INTERVAL * 2), "poll_interval")]
    #[case::prefetch_over_the_limit(d().prefetch(MAX_CLAIM_LIMIT + 1), "prefetch")]
    #[case::zero_call_timeout(d().call_timeout(Duration::ZERO), "call_timeout")]
    #[case::call_timeout_over_an_hour(d().call_timeout(MAX_POLL_INTERVAL * 2), "call_timeout")]
    #[case::retention_under_a_day(d().retain_terminal(HOUR, HOUR), "retain_terminal keep")]
    #[case::retention_pass_under_a_second(
        d().retain_terminal(DAY, Duration::from_millis(999)),
        "retain_terminal every"
    )]
    #[case::retention_pass_over_a_day(d().retain_terminal(DAY, DAY * 2), "retain_terminal every")]
    fn rejects_each_bad_option_with_its_name(
        #[case] options: DispatcherOptions,
        #[case] expected: &str,
    ) {
        assert_eq!(field(options), expected);
    }

    /// The boundaries themselves are valid.
    #[rstest]
    #[case::renewal_at_exactly_half_the_lease(d().renew_every(Duration::from_secs(15)))]
    #[case::lease_of_3_ms(d().lease_duration(Duration::from_millis(3)))]
    #[case::lease_of_a_day(d().lease_duration(MAX_LEASE))]
    #[case::concurrency_at_the_maximum(d().concurrency(MAX_CONCURRENCY))]
    #[case::claim_batch_at_the_limit(d().claim_batch(MAX_CLAIM_LIMIT))]
    #[case::no_prefetch(d().prefetch(0))]
    #[case::prefetch_at_the_limit(d().prefetch(MAX_CLAIM_LIMIT))]
    #[case::poll_and_call_timeout_of_an_hour(d().poll_interval(HOUR).call_timeout(HOUR))]
    #[case::retention_of_a_day_every_second(d().retain_terminal(DAY, Duration::from_secs(1)))]
    #[case::retention_of_a_day_every_day(d().retain_terminal(DAY, DAY))]
    fn accepts_the_boundaries(#[case] options: DispatcherOptions) {
        options.validate().expect("valid");
    }
}
