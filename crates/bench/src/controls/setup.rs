//! What a controls drain sets on its store before admitting, and what its jobs carry: a
//! [`Mix`] of priorities, keys and limits, or [`Configured`], every control the namespace
//! offers set so that none of them can hold a job back.

use std::time::Duration;

use lease_core::{
    Admission, AttemptLimit, AttemptScope, ConcurrencyKey, LimitScope, RateLimit, RedeliveryPolicy,
    SharedBackend, WorkflowName,
};
use serde::Serialize;

use super::mix::Mix;
use crate::error::{Context, Result};

/// Every control configured and none binding, for a drain of at most `jobs_per_key` jobs
/// per key. The jobs carry [`Configured::workflow`] and the keys of [`Configured::mix`]
/// (all at priority 0: priorities are the mix rows' subject). Set before admitting:
///
/// - attempt limits: the namespace default and the workflow's own. An attempt is a delivery
///   that ended unacknowledged; the drain acknowledges every delivery, so no limit can
///   bind, and every claim still reads the one that applies and keeps it on the record;
/// - the workflow's own redelivery policy (kept on each claimed record; no delivery is
///   redelivered);
/// - start rates: the namespace default (every key the jobs carry) and the mix's limited
///   keys' own, each allowing more starts per period than the key has jobs in the whole
///   run, so they cannot bind whatever the timing, while every claim of a key counts it;
/// - concurrency limits on the mix's limited keys, above the jobs one key has in the run;
/// - ordered keys `o000`.. that no job carries. Ordering a key the jobs use would run its
///   jobs one at a time in admission order, which binds at any concurrency above 1 by
///   definition; marked on other keys, the marks are stored and the claims run beside them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Configured {
    /// Keys and concurrency limits (priorities all 0).
    pub mix: Mix,
    /// The jobs' workflow name.
    pub workflow: &'static str,
    /// Attempt limits: the namespace default, then the workflow's.
    pub attempts: (u32, u32),
    /// The workflow's redelivery policy: base ms, factor, cap ms.
    pub redelivery: (u64, u32, u64),
    /// Start rates (starts, period ms): the namespace default, then the limited keys' own.
    pub rates: ((u32, u64), (u32, u64)),
    /// Ordered keys, none carried by a job.
    pub ordered: u64,
}

/// The configured drain's setup: 100 keys, 20 with a concurrency limit of 1000 and a start
/// rate of 10,000 per second, a default rate of 5,000 per second, 10 ordered keys no job
/// uses, attempt limits of 25 (default) and 10 (the workflow), the workflow's redelivery
/// policy 2 s doubling to 60 s. A drain of 20,000 jobs gives a key 200.
pub const CONFIGURED: Configured = Configured {
    mix: Mix {
        levels: [0; 4],
        keys: 100,
        limited: 20,
        limit: 1000,
    },
    workflow: "bench-drain",
    attempts: (25, 10),
    redelivery: (2_000, 2, 60_000),
    rates: ((5_000, 1_000), (10_000, 1_000)),
    ordered: 10,
};

impl Configured {
    /// True when none of the limits can bind a drain of `jobs` (see the type's docs).
    pub fn never_binds(&self, jobs: u64) -> bool {
        let per_key = jobs.div_ceil(self.mix.keys);
        let (default, own) = self.rates;
        u64::from(self.mix.limit) >= per_key
            && u64::from(default.0) >= per_key
            && u64::from(own.0) >= per_key
    }

    fn workflow_name(&self) -> Result<WorkflowName> {
        WorkflowName::new(self.workflow).context(|| "workflow name".into())
    }

    /// `a` with execution `i`'s key and the workflow.
    fn apply(&self, i: u64, a: Admission) -> lease_core::Result<Admission> {
        Ok(self
            .mix
            .apply(i, a)?
            .workflow(WorkflowName::new(self.workflow)?))
    }

    /// Sets every control on `lib`'s namespace.
    async fn set(&self, lib: &SharedBackend) -> Result<()> {
        self.mix.set_limits(lib).await?;
        let workflow = self.workflow_name()?;
        let (default, own) = self.attempts;
        for (scope, n) in [
            (AttemptScope::Default, default),
            (AttemptScope::Workflow(workflow.clone()), own),
        ] {
            let limit = AttemptLimit::new(n).context(|| "attempt limit".into())?;
            lib.set_attempt_limit(&scope, Some(limit))
                .await
                .context(|| "set_attempt_limit".into())?;
        }
        let (base, factor, cap) = self.redelivery;
        let policy = RedeliveryPolicy::new(
            Duration::from_millis(base),
            factor,
            Duration::from_millis(cap),
        )
        .context(|| "redelivery policy".into())?;
        lib.set_redelivery_policy(&workflow, Some(policy))
            .await
            .context(|| "set_redelivery_policy".into())?;
        self.set_keys(lib).await
    }

    /// The start rates and the ordered keys.
    async fn set_keys(&self, lib: &SharedBackend) -> Result<()> {
        let rate = |(starts, ms): (u32, u64)| {
            RateLimit::new(starts, Duration::from_millis(ms)).context(|| "rate limit".into())
        };
        let (default, own) = self.rates;
        lib.set_rate_limit(&LimitScope::Default, Some(rate(default)?))
            .await
            .context(|| "set_rate_limit".into())?;
        for k in 0..self.mix.limited {
            lib.set_rate_limit(&key_scope(&format!("k{k:03}"))?, Some(rate(own)?))
                .await
                .context(|| "set_rate_limit".into())?;
        }
        for k in 0..self.ordered {
            lib.set_key_ordering(&key_scope(&format!("o{k:03}"))?, true)
                .await
                .context(|| "set_key_ordering".into())?;
        }
        Ok(())
    }
}

fn key_scope(key: &str) -> Result<LimitScope> {
    Ok(LimitScope::Key(
        ConcurrencyKey::new(key).context(|| "key".into())?,
    ))
}

/// The controls of one drain row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Setup {
    /// Priorities, keys and limits in use (limits of 2 bind now and then).
    Mix(Mix),
    /// Every control configured, none binding.
    Configured(Configured),
}

impl Setup {
    /// Sets the controls on `lib`'s namespace (before the jobs are admitted).
    pub async fn set(&self, lib: &SharedBackend) -> Result<()> {
        match self {
            Setup::Mix(mix) => mix.set_limits(lib).await,
            Setup::Configured(c) => c.set(lib).await,
        }
    }

    /// `a` as execution `i` is admitted under these controls.
    pub fn apply(&self, i: u64, a: Admission) -> lease_core::Result<Admission> {
        match self {
            Setup::Mix(mix) => mix.apply(i, a),
            Setup::Configured(c) => c.apply(i, a),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configured_jobs_carry_a_key_and_the_workflow_and_nothing_binds() {
        let id = lease_core::ExecutionId::new("x").expect("id");
        let a = Setup::Configured(CONFIGURED)
            .apply(4, Admission::new(id))
            .expect("admission");
        assert_eq!(a.priority.get(), 0);
        assert_eq!(
            a.workflow.map(|w| w.to_string()).as_deref(),
            Some("bench-drain")
        );
        assert_eq!(
            a.concurrency_key.map(|k| k.to_string()).as_deref(),
            Some("k001")
        );
        assert!(CONFIGURED.never_binds(crate::drain::JOBS));
        assert!(!CONFIGURED.never_binds(1_000_000_000));
    }

    /// Every control lands on the store (the memory backend keeps them as the others do).
    #[tokio::test]
    async fn every_control_is_set() {
        let lib: SharedBackend = std::sync::Arc::new(lease_core::MemoryBackend::new());
        Setup::Configured(CONFIGURED).set(&lib).await.expect("set");
        let attempts = lib.attempt_limits().await.expect("attempts");
        assert_eq!(attempts.default.map(AttemptLimit::get), Some(25));
        assert_eq!(attempts.workflows.len(), 1);
        let policies = lib.redelivery_policies().await.expect("policies");
        assert_eq!(policies.workflows.len(), 1);
        let rates = lib.rate_limits().await.expect("rates");
        assert!(rates.default.is_some());
        assert_eq!(rates.keys.len(), 20);
        assert_eq!(
            lib.concurrency_limits().await.expect("limits").keys.len(),
            20
        );
        let ordering = lib.key_ordering().await.expect("ordering");
        assert!(!ordering.default);
        assert_eq!(ordering.keys.len(), 10);
        assert!(ordering.keys.iter().all(|k| k.to_string().starts_with('o')));
    }
}
