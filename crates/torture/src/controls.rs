//! The controls a run drives besides `--cancel-every` (pause, priorities, per-key limits,
//! attempt limits, rates and ordered keys; history rules 7 to 9 and 11 to 13): a share of
//! the executions admitted with concurrency keys, the limits set before the first
//! admission, priorities, and pauses of the namespace. Every choice is a hash of the
//! execution's id, so the same run admits the same keys and priorities.
//!
//! A backend that answers a setting with `Unsupported` runs without it, and the report
//! names the rule left unjudged and why ([`Controls::not_judged`]): never a silent skip.

use std::time::Duration;

use clap::builder::RangedU64ValueParser;
use lease_core::{
    Admission, AttemptLimit, AttemptScope, ConcurrencyKey, ConcurrencyLimit, ExecutionId,
    LeaseBackend, LeaseError, LimitScope, Priority, RateLimit, WorkflowName,
};
use serde::Serialize;

use crate::hash::fnv;
use crate::history::{self, Op, OpKind, OpResult};
use crate::mutant::Broken;
use crate::values;

/// The key `--key-limit` also sets its own limit on (the other keys take the default), so
/// both limit scopes are exercised.
pub const OWN_LIMIT_KEY: &str = "k0";

/// The workflow `--workflow-attempt-limit` sets its own attempt limit on; half of the
/// executions name it at admission, the other half [`DEFAULT_LIMIT_WORKFLOW`], so both
/// attempt limit scopes are exercised.
pub const OWN_LIMIT_WORKFLOW: &str = "torture-own";

/// The workflow the other executions name with `--workflow-attempt-limit`: it has no limit
/// of its own, so the namespace default applies.
pub const DEFAULT_LIMIT_WORKFLOW: &str = "torture";

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
    /// pause | priority | schedule | attempts | rate | ordering: NEGATIVE CONTROL, the
    /// controller's backend drops its pauses, stores every priority inverted, stores the
    /// attempt limit one higher, or drops its rates or key orderings, or the runtimes'
    /// schedulers drop occurrences (the checker must report violations).
    /// Several may be given, comma-separated or repeated.
    #[arg(long, value_name = "CONTROL", value_delimiter = ',', value_parser = Broken::parse)]
    pub break_control: Vec<Broken>,
    /// Every runtime ticks a schedule firing every second until the faults end (history
    /// rule 10).
    #[arg(long)]
    pub schedule: bool,
    /// The namespace default attempt limit, set before the first admission (history rule
    /// 11; default: unlimited).
    #[arg(long, value_name = "N",
          value_parser = RangedU64ValueParser::<u32>::new().range(1..=10_000))]
    pub attempt_limit: Option<u32>,
    /// The attempt limit of the workflow `torture-own`, set before the first admission; half
    /// of the executions name that workflow, the rest `torture`, which takes the default
    /// (history rule 11 judges each by the limit that applied).
    #[arg(long, value_name = "N",
          value_parser = RangedU64ValueParser::<u32>::new().range(1..=10_000))]
    pub workflow_attempt_limit: Option<u32>,
    /// Percent of the executions whose worker fails every delivery after its first step
    /// (by an error, or by a panic) until their attempts run out (needs --attempt-limit).
    #[arg(long, value_name = "PCT", default_value_t = 0,
          value_parser = RangedU64ValueParser::<u32>::new().range(0..=100))]
    pub failing_percent: u32,
    /// The start rate of every key, set before the first admission as the namespace
    /// default: at most STARTS claims of a key per MS (history rule 12; needs --keys).
    #[arg(long, value_name = "STARTS/MS", value_parser = parse_rate)]
    pub rate: Option<RateLimit>,
    /// Mark the keys k0 to k(N-1) ordered, one by one, before the first admission (history
    /// rule 13; at most --keys).
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = RangedU64ValueParser::<u32>::new().range(0..=10_000))]
    pub ordered_keys: u32,
    /// The rules the backend left unjudged, each with why (filled by [`Controls::prepare`]).
    #[arg(skip)]
    pub not_judged: Vec<String>,
}

/// Parses `STARTS/MS` into a rate limit.
fn parse_rate(text: &str) -> Result<RateLimit, String> {
    let (starts, ms) = text
        .split_once('/')
        .ok_or_else(|| format!("{text:?}: expected STARTS/MS, e.g. 5/1000"))?;
    let starts: u32 = starts
        .trim()
        .parse()
        .map_err(|e| format!("{text:?}: starts: {e}"))?;
    let ms: u64 = ms
        .trim()
        .parse()
        .map_err(|e| format!("{text:?}: ms: {e}"))?;
    RateLimit::new(starts, Duration::from_millis(ms)).map_err(|e| e.to_string())
}

/// The key `n` of `--keys`.
fn key_name(n: u32) -> String {
    format!("k{n}")
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
        keyed.then(|| {
            let n = fnv(&["key", id]) % u64::from(self.keys);
            key_name(u32::try_from(n).unwrap_or(0))
        })
    }

    /// The priority of execution `id`: one of `--priorities` levels centred on 0.
    pub fn priority_of(&self, id: &str) -> i32 {
        let level = fnv(&["priority", id]) % u64::from(self.priorities.max(1));
        i32::try_from(level).unwrap_or(0) - i32::try_from(self.priorities / 2).unwrap_or(0)
    }

    /// The workflow execution `id` names at admission (only with
    /// `--workflow-attempt-limit`).
    pub fn workflow_of(&self, id: &str) -> Option<&'static str> {
        self.workflow_attempt_limit?;
        Some(if fnv(&["workflow", id]).is_multiple_of(2) {
            OWN_LIMIT_WORKFLOW
        } else {
            DEFAULT_LIMIT_WORKFLOW
        })
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
        if let Some(workflow) = self.workflow_of(&text) {
            admission = admission.workflow(WorkflowName::new(workflow).map_err(|e| e.to_string())?);
        }
        Ok(admission)
    }

    /// Checks that the backend has priorities and limits (when the run uses them) and sets
    /// `--key-limit` as the default and as [`OWN_LIMIT_KEY`]'s own limit, then the attempt
    /// limit, the rate and the ordered keys, through `backend` (the controller's recorder,
    /// so the history holds them). A setting the backend answers `Unsupported` is dropped
    /// from the run and named in [`Controls::not_judged`].
    pub async fn prepare(&mut self, backend: &dyn LeaseBackend) -> Result<(), String> {
        self.check_combinations()?;
        if self.pause_every.is_some() {
            backend
                .list_paused()
                .await
                .map_err(|e| format!("--pause-every needs a backend with pauses: {e}"))?;
        }
        self.set_attempt_limit(backend).await?;
        if !self.used() {
            return Ok(());
        }
        backend.concurrency_limits().await.map_err(|e| {
            format!("--keys, --key-limit and --priorities need a backend with priorities and limits: {e}")
        })?;
        self.set_rate(backend).await?;
        self.set_ordering(backend).await?;
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

    /// Options that need others.
    fn check_combinations(&self) -> Result<(), String> {
        if self.failing_percent > 0 && self.attempt_limit.is_none() {
            return Err(
                "--failing-percent needs --attempt-limit (failing executions would \
                        be delivered for ever)"
                    .into(),
            );
        }
        if self.rate.is_some() && self.keys == 0 {
            return Err("--rate needs --keys (a rate applies to keyed executions)".into());
        }
        if self.ordered_keys > self.keys {
            return Err(format!(
                "--ordered-keys {} needs at least as many --keys ({})",
                self.ordered_keys, self.keys
            ));
        }
        Ok(())
    }

    /// Sets `--attempt-limit` as the namespace default and `--workflow-attempt-limit` as
    /// [`OWN_LIMIT_WORKFLOW`]'s own; without attempt limits, rule 11 is not judged and no
    /// execution fails on purpose (it could never die).
    async fn set_attempt_limit(&mut self, backend: &dyn LeaseBackend) -> Result<(), String> {
        let own = WorkflowName::new(OWN_LIMIT_WORKFLOW).map_err(|e| e.to_string())?;
        let scopes = [
            (AttemptScope::Default, self.attempt_limit),
            (AttemptScope::Workflow(own), self.workflow_attempt_limit),
        ];
        for (scope, n) in scopes {
            let Some(n) = n else { continue };
            let limit = AttemptLimit::new(n).map_err(|e| e.to_string())?;
            let set = backend.set_attempt_limit(&scope, Some(limit)).await;
            if self.unsupported(set, "11 (attempt limits)", "set_attempt_limit")? {
                self.attempt_limit = None;
                self.workflow_attempt_limit = None;
                self.failing_percent = 0;
                return Ok(());
            }
        }
        Ok(())
    }

    /// Sets `--rate` as the namespace default rate.
    async fn set_rate(&mut self, backend: &dyn LeaseBackend) -> Result<(), String> {
        let Some(rate) = self.rate else {
            return Ok(());
        };
        let set = backend
            .set_rate_limit(&LimitScope::Default, Some(rate))
            .await;
        if self.unsupported(set, "12 (rate limits)", "set_rate_limit")? {
            self.rate = None;
        }
        Ok(())
    }

    /// Marks the keys k0 to k(N-1) ordered (`--ordered-keys`).
    async fn set_ordering(&mut self, backend: &dyn LeaseBackend) -> Result<(), String> {
        for n in 0..self.ordered_keys {
            let key = ConcurrencyKey::new(key_name(n)).map_err(|e| e.to_string())?;
            let set = backend.set_key_ordering(&LimitScope::Key(key), true).await;
            if self.unsupported(set, "13 (ordered keys)", "set_key_ordering")? {
                self.ordered_keys = 0;
                return Ok(());
            }
        }
        Ok(())
    }

    /// `Ok(true)` when `set` was refused as `Unsupported` (the rule is noted unjudged), its
    /// error for any other failure.
    fn unsupported(
        &mut self,
        set: lease_core::Result<()>,
        rule: &str,
        call: &str,
    ) -> Result<bool, String> {
        match set {
            Ok(()) => Ok(false),
            Err(e @ LeaseError::Unsupported { .. }) => {
                self.not_judged.push(format!(
                    "rule {rule} not judged: the backend does not support it ({call}: {e})"
                ));
                Ok(true)
            }
            Err(e) => Err(format!("{call}: {e}")),
        }
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
    /// The attempt limit (`--attempt-limit`, when the backend took it).
    pub attempt_limit: Option<u32>,
    /// The own attempt limit of the workflow `torture-own` (`--workflow-attempt-limit`).
    pub workflow_attempt_limit: Option<u32>,
    /// Executions read dead (their attempts ran out).
    pub dead: u64,
    /// The most certain attempts of one execution in a row (history rule 11's count): at
    /// the limit, the limit bound.
    pub attempt_peak: u32,
    /// The rate of every key (`--rate`, when the backend took it).
    pub rate: Option<String>,
    /// The most claims of one key in one window of its rate (history rule 12's count): at
    /// the rate's starts, the rate bound.
    pub rate_peak: u64,
    /// Keys marked ordered (`--ordered-keys`, when the backend took them).
    pub ordered_keys: u32,
    /// Claims of an ordered key at which another execution of the key was waiting (history
    /// rule 13's figure: above 0, the ordering held executions back).
    pub ordered_waits: u64,
    /// The most executions of an ordered key waiting at one of its claims.
    pub ordered_backlog: u64,
    /// The rules this backend left unjudged, each with why.
    pub not_judged: Vec<String>,
}

impl ControlFigures {
    /// The figures of a run's history.
    pub fn of(options: &Controls, ops: &[Op]) -> Self {
        let mut f = ControlFigures {
            keys: options.keys,
            key_limit: options.key_limit,
            priorities: options.priorities,
            attempt_limit: options.attempt_limit,
            workflow_attempt_limit: options.workflow_attempt_limit,
            rate: options.rate.map(|r| r.to_string()),
            ordered_keys: options.ordered_keys,
            not_judged: options.not_judged.clone(),
            ..ControlFigures::default()
        };
        let mut dead = std::collections::BTreeSet::new();
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
                OpKind::ReadDead => {
                    dead.insert(op.execution.as_str());
                }
                _ => {}
            }
        }
        f.keyed = keyed.len() as u64;
        f.scheduled = scheduled.len() as u64;
        if f.keyed > 0 {
            f.key_peak = history::peak_live_leases(ops) as u64;
            f.rate_peak = history::peak_rate_window(ops) as u64;
        }
        f.dead = dead.len() as u64;
        f.attempt_peak = history::peak_attempts(ops);
        let (waits, backlog) = history::ordered_backlog(ops);
        f.ordered_waits = waits;
        f.ordered_backlog = backlog as u64;
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
        )?;
        let limit = self
            .attempt_limit
            .map_or_else(|| "unlimited".to_owned(), |n| n.to_string());
        let own = self
            .workflow_attempt_limit
            .map_or_else(String::new, |n| format!(" ({OWN_LIMIT_WORKFLOW}: {n})"));
        writeln!(
            f,
            "  attempts: limit {limit}{own}, peak {} in a row, dead {}; rate {}, peak {} in a \
             window; ordered keys {}, {} claims with others of the key waiting (most {})",
            self.attempt_peak,
            self.dead,
            self.rate.as_deref().unwrap_or("unlimited"),
            self.rate_peak,
            self.ordered_keys,
            self.ordered_waits,
            self.ordered_backlog
        )?;
        for note in &self.not_judged {
            writeln!(f, "  NOT JUDGED: {note}")?;
        }
        Ok(())
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
