//! Per-key policies beyond the concurrency limit: start rates and ordered keys.
//!
//! Both apply to an execution's concurrency key ([`crate::Admission::concurrency_key`]);
//! an execution without a key is never held back by either. Like the concurrency limit,
//! each is set for one key or as the namespace default, and each is checked in the claim's
//! own atomic step over every process, so no interleaving of claims breaks it.
//!
//! **Rate limits.** At most [`RateLimit::starts`] claims of a key's executions in any
//! window of [`RateLimit::period`]: a claim at instant `t` is allowed only while fewer than
//! `starts` claims of the key happened in `(t - period, t]` (a sliding window, exact, not a
//! token bucket: a bucket lets twice the rate through around a refill). A claim is a start
//! whether or not a worker then runs it: a prefetched lease released unstarted used its
//! place, so the rate is never exceeded and at worst under-used. A backend records a key's
//! claim instants only while a rate limit applies to it: a limit set later counts from then.
//!
//! **Ordered keys.** An ordered key's executions run one at a time, in admission order: a
//! claim takes an execution of an ordered key only when it is the key's earliest admitted
//! execution that is neither terminal nor dead, and no execution of the key holds a live
//! lease. A redelivered execution keeps its place (the next one waits for its redelivery
//! delay, a wake it waits for, or a pause over it); a dead or cancelled one leaves the line,
//! and a dead one an operator re-admits takes its place back, after the key's live lease.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::control::LimitScope;
use crate::error::{LeaseError, Result};
use crate::ids::ConcurrencyKey;
use crate::time::Timestamp;

/// The most starts one [`RateLimit`] allows per period.
pub const MAX_RATE_STARTS: u32 = 10_000;
/// The shortest [`RateLimit`] period.
pub const MIN_RATE_PERIOD: Duration = Duration::from_millis(1);
/// The longest [`RateLimit`] period: one day.
pub const MAX_RATE_PERIOD: Duration = Duration::from_secs(24 * 60 * 60);

/// At most `starts` claims of a key's executions in any window of `period` (see the module
/// documentation for what a start is). `starts` is 1 to [`MAX_RATE_STARTS`], `period`
/// [`MIN_RATE_PERIOD`] to [`MAX_RATE_PERIOD`] in whole milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "RawRate", into = "RawRate")]
pub struct RateLimit {
    starts: u32,
    period_ms: u32,
}

/// The stored and serialised form of a [`RateLimit`].
#[derive(Serialize, Deserialize)]
struct RawRate {
    starts: u32,
    period_ms: u64,
}

impl TryFrom<RawRate> for RateLimit {
    type Error = LeaseError;
    fn try_from(raw: RawRate) -> Result<Self> {
        RateLimit::new(raw.starts, Duration::from_millis(raw.period_ms))
    }
}

impl From<RateLimit> for RawRate {
    fn from(limit: RateLimit) -> Self {
        RawRate {
            starts: limit.starts,
            period_ms: limit.period_ms.into(),
        }
    }
}

impl RateLimit {
    /// Validates a limit: `starts` of 0 or over [`MAX_RATE_STARTS`], a period under
    /// [`MIN_RATE_PERIOD`], over [`MAX_RATE_PERIOD`] or not a whole number of milliseconds
    /// is `InvalidInput`.
    pub fn new(starts: u32, period: Duration) -> Result<Self> {
        if starts == 0 || starts > MAX_RATE_STARTS {
            return Err(LeaseError::invalid(
                "rate limit starts",
                format!("{starts} is outside 1..={MAX_RATE_STARTS}"),
            ));
        }
        if period < MIN_RATE_PERIOD || period > MAX_RATE_PERIOD {
            return Err(LeaseError::invalid(
                "rate limit period",
                format!("{period:?} is outside {MIN_RATE_PERIOD:?}..={MAX_RATE_PERIOD:?}",),
            ));
        }
        if !period.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(LeaseError::invalid(
                "rate limit period",
                format!("{period:?} is not a whole number of milliseconds"),
            ));
        }
        let period_ms = u32::try_from(period.as_millis()).map_err(|_| {
            LeaseError::invalid("rate limit period", format!("{period:?} is too long"))
        })?;
        Ok(RateLimit { starts, period_ms })
    }

    /// A limit a backend read back from its own storage (validated when written), clamped
    /// into range so a damaged value never panics.
    pub fn from_stored(starts: i64, period_ms: i64) -> Self {
        let max_ms = i64::try_from(MAX_RATE_PERIOD.as_millis()).unwrap_or(i64::MAX);
        RateLimit {
            starts: u32::try_from(starts.clamp(1, MAX_RATE_STARTS.into())).unwrap_or(1),
            period_ms: u32::try_from(period_ms.clamp(1, max_ms)).unwrap_or(1),
        }
    }

    /// The most starts per period.
    pub fn starts(self) -> u32 {
        self.starts
    }

    /// The window length.
    pub fn period(self) -> Duration {
        Duration::from_millis(self.period_ms.into())
    }

    /// The window length in milliseconds.
    pub fn period_ms(self) -> i64 {
        self.period_ms.into()
    }

    /// When the key may start again, given its recorded claim instants (`recent`, in any
    /// order; those at or before `now - period` are ignored): `None` when a claim at `now`
    /// is allowed, else the first instant at which fewer than [`RateLimit::starts`] of them
    /// fall in the window.
    pub fn next_start(self, recent: &[Timestamp], now: Timestamp) -> Option<Timestamp> {
        let floor = now.as_millis().saturating_sub(self.period_ms());
        let mut inside: Vec<i64> = recent
            .iter()
            .map(|t| t.as_millis())
            .filter(|&t| t > floor)
            .collect();
        let limit = usize::try_from(self.starts).unwrap_or(usize::MAX);
        if inside.len() < limit {
            return None;
        }
        inside.sort_unstable();
        // Claims stop counting `period` after they happened; the window has room again once
        // all but `starts - 1` of them have left it.
        let leaving = inside[inside.len() - limit];
        Some(Timestamp::from_millis(
            leaving.saturating_add(self.period_ms()),
        ))
    }
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} per {} ms", self.starts, self.period_ms)
    }
}

/// The rate limits of a namespace, as [`crate::ExecutionClient::rate_limits`] reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimits {
    /// The namespace default, for each key without a limit of its own; `None`: unlimited.
    pub default: Option<RateLimit>,
    /// Keys with their own limit, sorted by key.
    pub keys: Vec<(ConcurrencyKey, RateLimit)>,
}

impl RateLimits {
    /// The limit that applies to `key`: its own, else the default; `None` for no key or no
    /// limit.
    pub fn of(&self, key: Option<&ConcurrencyKey>) -> Option<RateLimit> {
        let key = key?;
        self.keys
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, l)| *l)
            .or(self.default)
    }

    /// Sets (`Some`) or removes (`None`) one limit, keeping the keys sorted.
    pub fn set(&mut self, scope: &LimitScope, limit: Option<RateLimit>) {
        match scope {
            LimitScope::Default => self.default = limit,
            LimitScope::Key(key) => crate::named::set_sorted(&mut self.keys, key, limit),
        }
    }
}

/// Which keys are ordered, as [`crate::ExecutionClient::key_ordering`] reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyOrdering {
    /// Every key is ordered ([`LimitScope::Default`] set).
    pub default: bool,
    /// Keys marked ordered one by one, sorted.
    pub keys: Vec<ConcurrencyKey>,
}

impl KeyOrdering {
    /// True when executions of `key` run one at a time in admission order; never for no key.
    pub fn is_ordered(&self, key: Option<&ConcurrencyKey>) -> bool {
        match key {
            None => false,
            Some(key) => self.default || self.keys.binary_search(key).is_ok(),
        }
    }

    /// Marks (`true`) or unmarks one scope, keeping the keys sorted. Unmarking a key leaves
    /// it ordered while the default is set.
    pub fn set(&mut self, scope: &LimitScope, ordered: bool) {
        match scope {
            LimitScope::Default => self.default = ordered,
            LimitScope::Key(key) => match (self.keys.binary_search(key), ordered) {
                (Err(at), true) => self.keys.insert(at, key.clone()),
                (Ok(at), false) => {
                    self.keys.remove(at);
                }
                _ => {}
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    #[test]
    fn bad_rates_are_refused() {
        let ms = Duration::from_millis;
        for (starts, period) in [
            (0, ms(1000)),
            (MAX_RATE_STARTS + 1, ms(1000)),
            (1, Duration::ZERO),
            (1, Duration::from_micros(999)),
            (1, Duration::from_micros(1500)),
            (1, MAX_RATE_PERIOD + ms(1)),
        ] {
            let r = RateLimit::new(starts, period);
            assert!(matches!(r, Err(LeaseError::InvalidInput { .. })), "{r:?}");
        }
        assert!(RateLimit::new(MAX_RATE_STARTS, MAX_RATE_PERIOD).is_ok());
        assert!(RateLimit::new(1, MIN_RATE_PERIOD).is_ok());
    }

    #[test]
    fn the_window_is_sliding_and_half_open() {
        let limit = RateLimit::new(2, Duration::from_millis(100)).expect("valid");
        assert_eq!(limit.next_start(&[], at(0)), None);
        assert_eq!(limit.next_start(&[at(10)], at(50)), None);
        assert_eq!(limit.next_start(&[at(30), at(10)], at(50)), Some(at(110)));
        // At 110 the start at 10 has left (110 - 100 = 10 is outside (10, 110]).
        assert_eq!(limit.next_start(&[at(10), at(30)], at(110)), None);
        // A limit lowered under what is recorded waits for enough of them to leave.
        let one = RateLimit::new(1, Duration::from_millis(100)).expect("valid");
        assert_eq!(
            one.next_start(&[at(10), at(20), at(30)], at(50)),
            Some(at(130))
        );
    }

    #[test]
    fn rates_round_trip_through_serde_and_refuse_bad_values() {
        let limit = RateLimit::new(5, Duration::from_secs(60)).expect("valid");
        let text = serde_json::to_string(&limit).expect("valid");
        assert_eq!(text, r#"{"starts":5,"period_ms":60000}"#);
        assert_eq!(
            serde_json::from_str::<RateLimit>(&text).expect("valid"),
            limit
        );
        assert!(serde_json::from_str::<RateLimit>(r#"{"starts":0,"period_ms":5}"#).is_err());
    }

    #[test]
    fn limits_and_ordering_resolve_by_key_then_default() {
        let a = ConcurrencyKey::new("a").expect("valid");
        let b = ConcurrencyKey::new("b").expect("valid");
        let slow = RateLimit::new(1, Duration::from_secs(1)).expect("valid");
        let fast = RateLimit::new(9, Duration::from_secs(1)).expect("valid");
        let mut rates = RateLimits::default();
        rates.set(&LimitScope::Key(b.clone()), Some(slow));
        assert_eq!(rates.of(Some(&a)), None);
        rates.set(&LimitScope::Default, Some(fast));
        assert_eq!(rates.of(Some(&a)), Some(fast));
        assert_eq!(rates.of(Some(&b)), Some(slow));
        assert_eq!(rates.of(None), None);

        let mut order = KeyOrdering::default();
        order.set(&LimitScope::Key(b.clone()), true);
        order.set(&LimitScope::Key(a.clone()), true);
        assert_eq!(order.keys, vec![a.clone(), b.clone()]);
        order.set(&LimitScope::Key(a.clone()), false);
        assert!(!order.is_ordered(Some(&a)) && order.is_ordered(Some(&b)));
        order.set(&LimitScope::Default, true);
        assert!(order.is_ordered(Some(&a)) && !order.is_ordered(None));
    }
}
