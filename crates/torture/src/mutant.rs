//! The negative controls of the controls (history rules 8 to 13): a wrapper under the
//! controller's recorder that breaks controls for real, so the run's claims break their
//! rules and the checker must report it (`--break-control`, one or several).
//!
//! - `pause`: every pause is answered "paused" and never reaches the backend, so the
//!   runtimes go on claiming inside the windows the log shows paused;
//! - `priority`: every admission is stored at the opposite priority (the log keeps the one
//!   asked for), so the backend claims the lowest first;
//! - `schedule` (history rule 10, in the runtimes' schedulers, above their recorders):
//!   every fourth occurrence's admission is answered as if admitted and never sent, so the
//!   schedule's cursor passes occurrences that do not exist;
//! - `attempts` (rule 11): the attempt limit reaches the backend one higher than asked (and
//!   logged), so executions are delivered once more after their attempts ran out;
//! - `rate` (rule 12) and `ordering` (rule 13): rate limits and key orderings are answered
//!   as set and never reach a backend that supports them, so keys claim at any rate and
//!   ordered keys run concurrently and out of order.

use std::sync::Arc;

use async_trait::async_trait;
use lease_core::{
    Admission, AttemptLimit, AttemptScope, ExecutionClient, ExecutionRecord, HeapClient,
    LeaseBackend, LimitScope, PauseScope, Priority, RateLimit, Result, StartClient, StoreClient,
};

/// Which control `--break-control` breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// Pauses are dropped.
    Pause,
    /// Priorities are stored inverted.
    Priority,
    /// Scheduled occurrences are dropped.
    Schedule,
    /// Attempt limits are stored one higher.
    Attempts,
    /// Rate limits are dropped.
    Rate,
    /// Key orderings are dropped.
    Ordering,
}

impl Broken {
    /// Parses `pause`, `priority`, `schedule`, `attempts`, `rate` or `ordering`.
    pub fn parse(text: &str) -> Result<Broken, String> {
        match text {
            "pause" => Ok(Broken::Pause),
            "priority" => Ok(Broken::Priority),
            "schedule" => Ok(Broken::Schedule),
            "attempts" => Ok(Broken::Attempts),
            "rate" => Ok(Broken::Rate),
            "ordering" => Ok(Broken::Ordering),
            other => Err(format!(
                "{other:?}: expected pause, priority, schedule, attempts, rate or ordering"
            )),
        }
    }
}

/// A backend with some controls broken.
pub struct Mutant {
    inner: Arc<dyn LeaseBackend>,
    broken: Vec<Broken>,
}

impl Mutant {
    /// Wraps `inner`, breaking every control in `broken`.
    pub fn wrap(inner: Arc<dyn LeaseBackend>, broken: &[Broken]) -> Arc<dyn LeaseBackend> {
        Arc::new(Mutant {
            inner,
            broken: broken.to_vec(),
        })
    }

    fn breaks(&self, control: Broken) -> bool {
        self.broken.contains(&control)
    }
}

#[async_trait]
impl lease_core::ForwardExecution for Mutant {
    fn inner_execution(&self) -> &dyn ExecutionClient {
        &*self.inner
    }

    async fn admit(&self, admission: &Admission) -> Result<ExecutionRecord> {
        if !self.breaks(Broken::Priority) {
            return self.inner.admit(admission).await;
        }
        let mut inverted = admission.clone();
        inverted.priority = Priority::new(-admission.priority.get())?;
        self.inner.admit(&inverted).await
    }

    async fn admit_batch(&self, admissions: &[Admission]) -> Result<Vec<ExecutionRecord>> {
        if !self.breaks(Broken::Schedule) {
            return self.inner.admit_batch(admissions).await;
        }
        let now = self.inner.now().await?;
        let kept: Vec<Admission> = admissions.iter().filter(|a| !dropped(a)).cloned().collect();
        let mut stored = if kept.is_empty() {
            Vec::new()
        } else {
            self.inner.admit_batch(&kept).await?
        }
        .into_iter();
        Ok(admissions
            .iter()
            .map(|a| match dropped(a) {
                true => ExecutionRecord::admitted(a, now),
                false => stored
                    .next()
                    .unwrap_or_else(|| ExecutionRecord::admitted(a, now)),
            })
            .collect())
    }

    async fn pause(&self, scope: &PauseScope) -> Result<bool> {
        if self.breaks(Broken::Pause) {
            return Ok(true);
        }
        self.inner.pause(scope).await
    }

    async fn set_attempt_limit(
        &self,
        scope: &AttemptScope,
        limit: Option<AttemptLimit>,
    ) -> Result<()> {
        if !self.breaks(Broken::Attempts) {
            return self.inner.set_attempt_limit(scope, limit).await;
        }
        let one_more = limit.map(|l| AttemptLimit::new(l.get() + 1)).transpose()?;
        self.inner.set_attempt_limit(scope, one_more).await
    }

    async fn set_rate_limit(&self, scope: &LimitScope, limit: Option<RateLimit>) -> Result<()> {
        if !self.breaks(Broken::Rate) {
            return self.inner.set_rate_limit(scope, limit).await;
        }
        // A backend without rates still says so: the control breaks a rate, not the check
        // that the backend has them.
        self.inner.rate_limits().await.map(drop)
    }

    async fn set_key_ordering(&self, scope: &LimitScope, ordered: bool) -> Result<()> {
        if !self.breaks(Broken::Ordering) {
            return self.inner.set_key_ordering(scope, ordered).await;
        }
        self.inner.key_ordering().await.map(drop)
    }
}

/// Whether the schedule mutant drops `admission`: every fourth second's occurrence.
fn dropped(admission: &Admission) -> bool {
    admission
        .not_before
        .is_some_and(|at| at.as_millis().div_euclid(1000) % 4 == 0)
}

impl lease_core::ForwardHeap for Mutant {
    fn inner_heap(&self) -> &dyn HeapClient {
        &*self.inner
    }
}

impl lease_core::ForwardStore for Mutant {
    fn inner_store(&self) -> &dyn StoreClient {
        &*self.inner
    }
}

impl lease_core::ForwardStart for Mutant {
    fn inner_start(&self) -> &dyn StartClient {
        &*self.inner
    }
}

#[cfg(test)]
mod tests {
    use lease_core::{ExecutionId, MemoryBackend};

    use super::*;

    #[tokio::test]
    async fn each_mutant_breaks_its_control_only() {
        let memory: Arc<dyn LeaseBackend> = Arc::new(MemoryBackend::new());
        let paused = Mutant::wrap(memory.clone(), &[Broken::Pause]);
        assert!(paused.pause(&PauseScope::Namespace).await.expect("pause"));
        assert!(memory.list_paused().await.expect("list").is_empty());
        let inverted = Mutant::wrap(memory.clone(), &[Broken::Priority]);
        let admission = Admission::new(ExecutionId::new("e1").expect("id"))
            .priority(Priority::new(3).expect("priority"));
        let stored = inverted.admit(&admission).await.expect("admit");
        assert_eq!(stored.priority.get(), -3);
        assert!(inverted.pause(&PauseScope::Namespace).await.expect("pause"));
        assert_eq!(memory.list_paused().await.expect("list").len(), 1);
        assert!(Broken::parse("cancel").is_err());
        // The attempt limit reaches the backend one higher.
        let lenient = Mutant::wrap(memory.clone(), &[Broken::Attempts]);
        let two = AttemptLimit::new(2).expect("limit");
        lenient
            .set_attempt_limit(&AttemptScope::Default, Some(two))
            .await
            .expect("set");
        let stored = memory.attempt_limits().await.expect("limits").default;
        assert_eq!(stored.map(AttemptLimit::get), Some(3));
        // Rates and orderings are answered as set and never stored.
        let lawless = Mutant::wrap(memory.clone(), &[Broken::Rate, Broken::Ordering]);
        let rate = RateLimit::new(1, std::time::Duration::from_secs(1)).expect("rate");
        lawless
            .set_rate_limit(&LimitScope::Default, Some(rate))
            .await
            .expect("set rate");
        lawless
            .set_key_ordering(&LimitScope::Default, true)
            .await
            .expect("set ordering");
        assert_eq!(memory.rate_limits().await.expect("rates").default, None);
        assert!(!memory.key_ordering().await.expect("ordering").default);
        // Every fourth second's occurrence is answered as admitted and never stored.
        let dropping = Mutant::wrap(memory.clone(), &[Broken::Schedule]);
        let at = |ms| {
            Admission::new(ExecutionId::new(format!("schedule:t:{ms}")).expect("id"))
                .not_before(lease_core::Timestamp::from_millis(ms))
        };
        let answered = dropping
            .admit_batch(&[at(4000), at(5000)])
            .await
            .expect("admit_batch");
        assert_eq!(answered.len(), 2);
        let dropped = memory.get(&at(4000).id).await.expect("get");
        let kept = memory.get(&at(5000).id).await.expect("get");
        assert!(dropped.is_none() && kept.is_some());
    }
}
