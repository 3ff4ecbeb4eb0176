//! The redelivery delay (RFC 002 "Redelivery delay").

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{LeaseError, Result};
use crate::ids::WorkflowName;

/// How long an execution waits after an unacknowledged delivery before it may be claimed
/// again: `delay(n) = min(cap, base * factor^(n-1))` for `n` consecutive unacknowledged
/// deliveries.
///
/// The RFC requires the delay to be non-zero and never to decrease while
/// `unacknowledged_deliveries` grows; [`RedeliveryPolicy::new`] rejects any policy that
/// could break either rule (zero base, factor below 1, cap below base). There is no random
/// jitter, because jitter that can shrink the next delay breaks the RFC (docs/decisions/0017-redelivery-delays.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedeliveryPolicy {
    base_ms: u64,
    factor: u32,
    cap_ms: u64,
}

impl RedeliveryPolicy {
    /// A validated policy. `base` and `cap` are rounded up to whole milliseconds.
    pub fn new(base: Duration, factor: u32, cap: Duration) -> Result<Self> {
        let base_ms = ceil_ms(base);
        let cap_ms = ceil_ms(cap);
        if base_ms == 0 {
            return Err(LeaseError::invalid("redelivery base", "must be non-zero"));
        }
        if factor == 0 {
            return Err(LeaseError::invalid(
                "redelivery factor",
                "must be at least 1 so the delay never decreases",
            ));
        }
        if cap_ms < base_ms {
            return Err(LeaseError::invalid(
                "redelivery cap",
                format!("{cap:?} is below the base {base:?}"),
            ));
        }
        Ok(RedeliveryPolicy {
            base_ms,
            factor,
            cap_ms,
        })
    }

    /// The delay after `unacknowledged` consecutive unacknowledged deliveries; zero for 0.
    pub fn delay(&self, unacknowledged: u32) -> Duration {
        Duration::from_millis(self.delay_ms(unacknowledged))
    }

    /// [`RedeliveryPolicy::delay`] in milliseconds.
    pub fn delay_ms(&self, unacknowledged: u32) -> u64 {
        if unacknowledged == 0 {
            return 0;
        }
        let mut d = self.base_ms;
        for _ in 1..unacknowledged {
            if d >= self.cap_ms {
                break;
            }
            d = d.saturating_mul(u64::from(self.factor));
        }
        d.min(self.cap_ms)
    }

    /// The first delay, in milliseconds.
    pub fn base_ms(&self) -> u64 {
        self.base_ms
    }

    /// The factor each further unacknowledged delivery multiplies the delay by.
    pub fn factor(&self) -> u32 {
        self.factor
    }

    /// The longest delay, in milliseconds.
    pub fn cap_ms(&self) -> u64 {
        self.cap_ms
    }

    /// A policy a backend read back from its own storage, in the units of
    /// [`RedeliveryPolicy::base_ms`], [`RedeliveryPolicy::factor`] and
    /// [`RedeliveryPolicy::cap_ms`]: validated again, so a damaged row is `InvalidInput`,
    /// never a delay that breaks the RFC.
    pub fn from_parts(base_ms: u64, factor: u32, cap_ms: u64) -> Result<Self> {
        Self::new(
            Duration::from_millis(base_ms),
            factor,
            Duration::from_millis(cap_ms),
        )
    }

    /// The delays for 1, 2, ... unacknowledged deliveries, up to and including the first
    /// that reaches the cap; every later count uses the last entry. Backends that evaluate
    /// the gate in SQL or Lua take this table as an argument.
    pub fn table_ms(&self) -> Vec<u64> {
        let mut out = Vec::new();
        let mut n = 1;
        loop {
            let d = self.delay_ms(n);
            out.push(d);
            if d >= self.cap_ms || n >= 64 || (self.factor == 1 && n >= 1) {
                return out;
            }
            n += 1;
        }
    }
}

impl Default for RedeliveryPolicy {
    /// 1 s, doubling, capped at 5 minutes.
    fn default() -> Self {
        RedeliveryPolicy {
            base_ms: 1_000,
            factor: 2,
            cap_ms: 300_000,
        }
    }
}

/// The redelivery policies workflows have of their own, beside the handle's policy (which
/// every other execution uses), as [`crate::ExecutionClient::redelivery_policies`] reads
/// them. They are stored in the namespace, so every process applies the same one; a claim
/// keeps the policy of the execution's workflow on the record
/// ([`crate::ExecutionRecord::redelivery_policy`]), and the delay after that delivery is
/// the one it names: a change applies from each execution's next claim. Each policy obeys
/// the RFC's rules on its own (non-zero, never decreasing while the count grows).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedeliveryPolicies {
    /// Workflows with a policy of their own, sorted by name.
    pub workflows: Vec<(WorkflowName, RedeliveryPolicy)>,
}

impl RedeliveryPolicies {
    /// The policy of an execution of `workflow` when it has one of its own; `None`: the
    /// handle's policy applies.
    pub fn of(&self, workflow: Option<&WorkflowName>) -> Option<RedeliveryPolicy> {
        let workflow = workflow?;
        self.workflows
            .iter()
            .find(|(name, _)| name == workflow)
            .map(|(_, p)| *p)
    }

    /// Sets (`Some`) or removes (`None`) one workflow's policy, keeping them sorted by name.
    pub fn set(&mut self, workflow: &WorkflowName, policy: Option<RedeliveryPolicy>) {
        crate::named::set_sorted(&mut self.workflows, workflow, policy);
    }
}

fn ceil_ms(d: Duration) -> u64 {
    let ms = d.as_millis() + u128::from(!d.subsec_nanos().is_multiple_of(1_000_000));
    u64::try_from(ms).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn stored_parts_round_trip_and_damaged_ones_are_refused() {
        let p = RedeliveryPolicy::new(MS(250), 3, MS(9000)).expect("valid");
        let back = RedeliveryPolicy::from_parts(p.base_ms(), p.factor(), p.cap_ms());
        assert_eq!(back.expect("valid"), p);
        assert!(RedeliveryPolicy::from_parts(0, 2, 10).is_err());
        assert!(RedeliveryPolicy::from_parts(10, 2, 5).is_err());
    }

    #[test]
    fn a_workflows_own_policy_is_found_and_others_use_the_handles() {
        let name = |s: &str| WorkflowName::new(s).expect("name");
        let slow = RedeliveryPolicy::new(MS(5000), 2, MS(60_000)).expect("valid");
        let mut ps = RedeliveryPolicies::default();
        ps.set(&name("b"), Some(slow));
        ps.set(&name("a"), Some(RedeliveryPolicy::default()));
        assert_eq!(ps.workflows[0].0, name("a"), "sorted by name");
        assert_eq!(ps.of(Some(&name("b"))), Some(slow));
        assert_eq!(ps.of(Some(&name("c"))), None);
        assert_eq!(ps.of(None), None);
        ps.set(&name("b"), None);
        assert_eq!(ps.of(Some(&name("b"))), None);
    }

    #[test]
    fn delays_are_non_zero_and_never_decrease() {
        let p = RedeliveryPolicy::new(MS(3), 3, Duration::from_secs(1)).expect("valid");
        let mut last = 0;
        for n in 1..200 {
            let d = p.delay_ms(n);
            assert!(d > 0 && d >= last, "n={n} d={d} last={last}");
            last = d;
        }
        assert_eq!(last, 1000);
    }

    /// `table_ms` lists the delays up to the first that reaches the cap, and agrees with
    /// `delay_ms` for every count (the last entry repeats).
    #[rstest]
    #[case::tripling(MS(3), 3, MS(1000), &[3, 9, 27, 81, 243, 729, 1000])]
    #[case::doubling_to_an_exact_cap(MS(100), 2, MS(1600), &[100, 200, 400, 800, 1600])]
    #[case::flat(MS(5), 1, MS(5), &[5])]
    #[case::cap_equals_base(MS(7), 10, MS(7), &[7])]
    #[case::sub_millisecond_base_rounds_up(Duration::from_micros(1), 2, MS(4), &[1, 2, 4])]
    #[case::default_policy(Duration::from_secs(1), 2, Duration::from_secs(300),
        &[1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000, 256000, 300000])]
    fn table_matches_delay(
        #[case] base: Duration,
        #[case] factor: u32,
        #[case] cap: Duration,
        #[case] expected: &[u64],
    ) {
        let p = RedeliveryPolicy::new(base, factor, cap).expect("valid");
        let table = p.table_ms();
        assert_eq!(table, expected);
        for n in 1..50u32 {
            let i = (n as usize).min(table.len()) - 1;
            assert_eq!(table[i], p.delay_ms(n), "n={n}");
        }
    }

    /// The policies that could break the RFC's "non-zero" and "never decreasing" rules.
    #[rstest]
    #[case::zero_base(Duration::ZERO, 2, Duration::from_secs(1))]
    #[case::zero_factor(Duration::from_secs(1), 0, Duration::from_secs(1))]
    #[case::cap_below_base(Duration::from_secs(2), 2, Duration::from_secs(1))]
    fn rejects_policies_that_break_the_rfc(
        #[case] base: Duration,
        #[case] factor: u32,
        #[case] cap: Duration,
    ) {
        assert!(matches!(
            RedeliveryPolicy::new(base, factor, cap),
            Err(LeaseError::InvalidInput { .. })
        ));
    }
}
