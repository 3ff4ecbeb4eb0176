//! The controls a run drives besides `--cancel-every` (pause, priorities and per-key limits; history rules
//! 7 to 9): a share of the executions admitted with concurrency keys, the limits set before
//! the first admission, priorities, and pauses of the namespace. Every choice is a hash of
//! the execution's id, so the same run admits the same keys and priorities.

use std::time::Duration;

use clap::builder::RangedU64ValueParser;
use lease_core::{
    Admission, ConcurrencyKey, ConcurrencyLimit, ExecutionId, LeaseBackend, LimitScope, Priority,
};
use serde::Serialize;

use crate::hash::fnv;
use crate::history::{self, Op, OpKind, OpResult};
use crate::mutant::Broken;
use crate::values;

/// The key `--key-limit` also sets its own limit on (the other keys take the default), so
/// both limit scopes are exercised.
pub const OWN_LIMIT_KEY: &str = "k0";

/// Concurrency keys, limits and priorities of a run.
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct Controls {
    /// Admit a share of the executions (--keyed-percent) with one of N concurrency keys
    /// (k0, k1, ..); 0: no keys.
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = RangedU64ValueParser::<u32>::new().range(0..=10_000))]
    pub keys: u32,
    /// Percent of the executions admitted with a key (with --keys).
    #[arg(long, value_name = "PCT", default_value_t = 50,
          value_parser = RangedU64ValueParser::<u32>::new().range(0..=100))]
    pub keyed_percent: u32,
    /// The concurrency limit of every key, set before the first admission as the namespace
    /// default and as k0's own limit (default: unlimited).
    #[arg(long, value_name = "N",
          value_parser = RangedU64ValueParser::<u32>::new().range(1..=100_000))]
    pub key_limit: Option<u32>,
    /// Spread the executions' priorities over N levels around 0; 1: all at the default.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = RangedU64ValueParser::<u32>::new().range(1..=2001))]
    pub priorities: u32,
    /// Pause the namespace every MS for half of it, then resume, during the faults
    /// (history rule 8; default: no pauses).
    #[arg(long, value_name = "MS", value_parser = values::millis)]
    pub pause_every: Option<Duration>,
    /// pause | priority | schedule: NEGATIVE CONTROL, the controller's backend drops its
    /// pauses or stores every priority inverted, or the runtimes' schedulers drop
    /// occurrences (the checker must report violations).
    #[arg(long, value_name = "CONTROL", value_parser = Broken::parse)]
    pub break_control: Option<Broken>,
    /// Every runtime ticks a schedule firing every second until the faults end (history
    /// rule 10).
    #[arg(long)]
    pub schedule: bool,
}

impl Controls {
    /// Whether the run needs a backend with priorities and limits.
    pub fn used(&self) -> bool {
        self.keys > 0 || self.key_limit.is_some() || self.priorities > 1
    }

    /// How long each pause lasts (half of `--pause-every`).
    pub fn pause_for(&self) -> Option<Duration> {
        self.pause_every.map(|every| every / 2)
    }

    /// The concurrency key of execution `id`, if it gets one.
    pub fn key_of(&self, id: &str) -> Option<String> {
        let keyed = self.keys > 0 && fnv(&["keyed", id]) % 100 < u64::from(self.keyed_percent);
        keyed.then(|| format!("k{}", fnv(&["key", id]) % u64::from(self.keys)))
    }

    /// The priority of execution `id`: one of `--priorities` levels centred on 0.
    pub fn priority_of(&self, id: &str) -> i32 {
        let level = fnv(&["priority", id]) % u64::from(self.priorities.max(1));
        i32::try_from(level).unwrap_or(0) - i32::try_from(self.priorities / 2).unwrap_or(0)
    }

    /// The admission of execution `id` with its key and priority.
    pub fn admission(&self, id: ExecutionId) -> Result<Admission, String> {
        let text = id.as_str().to_owned();
        let mut admission = Admission::new(id);
        if self.priorities > 1 {
            admission = admission
                .priority(Priority::new(self.priority_of(&text)).map_err(|e| e.to_string())?);
        }
        if let Some(key) = self.key_of(&text) {
            admission =
                admission.concurrency_key(ConcurrencyKey::new(key).map_err(|e| e.to_string())?);
        }
        Ok(admission)
    }

    /// Checks that the backend has priorities and limits (when the run uses them) and sets
    /// `--key-limit` as the default and as [`OWN_LIMIT_KEY`]'s own limit, through `backend`
    /// (the controller's recorder, so the history holds the limits).
    pub async fn prepare(&self, backend: &dyn LeaseBackend) -> Result<(), String> {
        if self.pause_every.is_some() {
            backend
                .list_paused()
                .await
                .map_err(|e| format!("--pause-every needs a backend with pauses: {e}"))?;
        }
        if !self.used() {
            return Ok(());
        }
        backend.concurrency_limits().await.map_err(|e| {
            format!("--keys, --key-limit and --priorities need a backend with priorities and limits: {e}")
        })?;
        let Some(n) = self.key_limit else {
            return Ok(());
        };
        let limit = ConcurrencyLimit::new(n).map_err(|e| e.to_string())?;
        let own = ConcurrencyKey::new(OWN_LIMIT_KEY).map_err(|e| e.to_string())?;
        for scope in [LimitScope::Default, LimitScope::Key(own)] {
            backend
                .set_concurrency_limit(&scope, Some(limit))
                .await
                .map_err(|e| format!("set_concurrency_limit {scope:?}: {e}"))?;
        }
        Ok(())
    }
}

/// What a run did with the controls, for the report.
#[derive(Debug, Default, Serialize)]
pub struct ControlFigures {
    /// Cancels that returned `cancelled` (`--cancel-every`).
    pub cancelled: u64,
    /// Cancels that found the execution completed or failed already.
    pub already_terminal: u64,
    /// Executions admitted with a concurrency key.
    pub keyed: u64,
    /// Keys (`--keys`).
    pub keys: u32,
    /// The limit of every key (`--key-limit`).
    pub key_limit: Option<u32>,
    /// Priority levels (`--priorities`).
    pub priorities: u32,
    /// Pauses of the namespace that returned (`--pause-every`).
    pub pauses: u64,
    /// The most leases of one key certainly live at a claim (history rule 7's count): at
    /// the limit, the limit bound during the run.
    pub key_peak: u64,
    /// Scheduled occurrences admitted (`--schedule`).
    pub scheduled: u64,
}

impl ControlFigures {
    /// The figures of a run's history.
    pub fn of(options: &Controls, ops: &[Op]) -> Self {
        let mut f = ControlFigures {
            keys: options.keys,
            key_limit: options.key_limit,
            priorities: options.priorities,
            ..ControlFigures::default()
        };
        let mut keyed = std::collections::BTreeSet::new();
        let mut scheduled = std::collections::BTreeSet::new();
        for op in ops.iter().filter(|op| op.result == OpResult::Accepted) {
            match &op.kind {
                OpKind::Cancel { result } if result == crate::history::CANCELLED => {
                    f.cancelled += 1;
                }
                OpKind::Cancel { result } if result == crate::history::ALREADY_TERMINAL => {
                    f.already_terminal += 1;
                }
                OpKind::Admit { .. } if crate::schedules::is_occurrence(&op.execution) => {
                    scheduled.insert(op.execution.as_str());
                }
                OpKind::Admit { key: Some(_), .. } => {
                    keyed.insert(op.execution.as_str());
                }
                OpKind::Pause => f.pauses += 1,
                _ => {}
            }
        }
        f.keyed = keyed.len() as u64;
        f.scheduled = scheduled.len() as u64;
        if f.keyed > 0 {
            f.key_peak = history::peak_live_leases(ops) as u64;
        }
        f
    }
}

impl std::fmt::Display for ControlFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let limit = self
            .key_limit
            .map_or_else(|| "unlimited".to_owned(), |n| n.to_string());
        writeln!(
            f,
            "  controls: cancels {} cancelled, {} already terminal; keyed executions {} over {} \
             keys, limit {limit}, peak {} live; priority levels {}; pauses {}; scheduled {}",
            self.cancelled,
            self.already_terminal,
            self.keyed,
            self.keys,
            self.key_peak,
            self.priorities,
            self.pauses,
            self.scheduled
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_priorities_are_spread_as_asked() {
        let o = Controls {
            keys: 4,
            keyed_percent: 50,
            key_limit: Some(1),
            priorities: 5,
            ..Controls::default()
        };
        let ids: Vec<String> = (1..=2000).map(|n| format!("e{n:06}")).collect();
        let keyed: Vec<String> = ids.iter().filter_map(|id| o.key_of(id)).collect();
        assert!((800..1200).contains(&keyed.len()), "{}", keyed.len());
        for k in ["k0", "k1", "k2", "k3"] {
            assert!(keyed.iter().any(|x| x == k), "{k}");
        }
        assert!(
            keyed
                .iter()
                .all(|k| ["k0", "k1", "k2", "k3"].contains(&k.as_str()))
        );
        let priorities: std::collections::BTreeSet<i32> =
            ids.iter().map(|id| o.priority_of(id)).collect();
        assert_eq!(priorities, (-2..=2).collect());
        assert_eq!(o.key_of(&ids[7]), o.key_of(&ids[7]));
        assert!(o.used());
        let none = Controls {
            priorities: 1,
            ..Controls::default()
        };
        assert!(!none.used());
        assert!(ids.iter().all(|id| none.key_of(id).is_none()));
        let admission = none.admission(ExecutionId::new("e000001").expect("id"));
        assert!(!admission.expect("admission").uses_controls());
    }
}
