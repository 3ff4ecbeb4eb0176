//! The torture workflow: several steps whose values are a pure function of the execution id
//! and the step key (each step's value also folds in the *recorded* value of the step
//! before it, so a corrupt or replaced record shows up in every later step and in the
//! outcome). Per execution, derived from its id: how many steps, an optional slow step
//! longer than the lease (only renewals keep it), an optional durable nap (suspend with a
//! wake, then replay), an optional retry reply (release, then replay), and whether the
//! execution ends completed or failed. The even steps `s0, s2, ..` are application steps:
//! their effect is an application row written with their record through the backend's
//! fenced path ([`AppSteps`]); `s1` is an effect step ([`EffectSteps`]: a provider call
//! through `Delivery::effect`); the other odd ones are
//! plain `Delivery::step`s.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use lease_core::{Json, LeaseBackend, WorkflowRunOutcome};
use lease_runtime::{Delivery, DeliveryError, Reply};

use crate::appstep::AppSteps;
use crate::effects::{self, EffectSteps};
use crate::hash::fnv;

/// What one execution does, derived from its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Number of value steps `s0..`.
    pub steps: usize,
    /// Work time of each step, ms.
    pub work_ms: Vec<u64>,
    /// Before this step, a durable nap (step `nap` records the wake time; suspend).
    pub nap_before: Option<usize>,
    /// Before this step, one retry reply (step `retry` is recorded, then the lease released).
    pub retry_before: Option<usize>,
    /// Ends failed instead of completed.
    pub fails: bool,
}

/// The plan of `execution` for leases of `lease_ms`.
pub fn plan(execution: &str, lease_ms: u64) -> Plan {
    let h = fnv(&[execution, "plan"]);
    let steps = 3 + (h % 4) as usize;
    let slow = (h >> 8).is_multiple_of(8);
    let slow_step = ((h >> 12) as usize) % steps;
    let work_ms = (0..steps)
        .map(|i| {
            let w = fnv(&[execution, "work", &i.to_string()]);
            if slow && i == slow_step {
                // Longer than a lease: only renewals keep the delivery alive.
                lease_ms + lease_ms * (w % 8) / 10
            } else {
                w % 25
            }
        })
        .collect();
    let nap_before = (h >> 16)
        .is_multiple_of(4)
        .then(|| 1 + ((h >> 20) as usize) % (steps - 1));
    let retry_before = (h >> 24)
        .is_multiple_of(5)
        .then(|| 1 + ((h >> 28) as usize) % (steps - 1));
    Plan {
        steps,
        work_ms,
        nap_before,
        retry_before,
        fails: (h >> 32).is_multiple_of(8),
    }
}

/// Every step key the workflow of `execution` may write.
pub fn step_keys(execution: &str) -> std::collections::BTreeSet<String> {
    let p = plan(execution, 1000);
    let mut keys: std::collections::BTreeSet<String> =
        (0..p.steps).map(|i| format!("s{i}")).collect();
    if p.nap_before.is_some() {
        keys.insert("nap".to_owned());
    }
    if p.retry_before.is_some() {
        keys.insert("retry".to_owned());
    }
    keys
}

/// Whether step `key` writes an application row: the even value steps `s0, s2, ..` (the
/// same for every execution).
pub fn is_app_step(_execution: &str, key: &str) -> bool {
    key.strip_prefix('s')
        .and_then(|i| i.parse::<usize>().ok())
        .is_some_and(|i| i % 2 == 0)
}

/// How long a nap lasts.
pub const NAP_MS: i64 = 150;

/// The value of step `s{i}`, given the recorded value of the step before (empty for s0).
pub fn step_value(execution: &str, i: usize, previous: &str) -> String {
    let h = fnv(&[execution, &format!("s{i}"), previous]);
    format!("{execution}/s{i}/{h:016x}")
}

fn json_text(value: &impl serde::Serialize) -> Option<String> {
    Json::to_json("torture", value)
        .ok()
        .map(|j| j.as_str().to_owned())
}

/// The recorded JSON text step `key` must hold (attempt 1), or `None` for steps whose
/// value is not derived (the nap's wake time).
pub fn expected_step(execution: &str, key: &str, attempt: u32) -> Option<String> {
    if attempt != lease_runtime::STEP_ATTEMPT {
        return Some("<no such attempt>".to_owned());
    }
    if key == "retry" {
        return json_text(&true);
    }
    if effects::is_effect_step(key) {
        // The effect's kept result names the call that made it: checked by effectcheck.
        return None;
    }
    let i: usize = key.strip_prefix('s')?.parse().ok()?;
    let mut previous = String::new();
    for j in 0..=i {
        previous = step_value(execution, j, &previous);
    }
    json_text(&previous)
}

fn outcome_value(execution: &str, last: &str) -> serde_json::Value {
    serde_json::json!({ "execution": execution, "last": last })
}

/// The terminal outcome text (`completed:<json>` / `failed:<json>`) of `execution`.
pub fn expected_outcome(execution: &str, lease_ms: u64) -> Option<String> {
    let p = plan(execution, lease_ms);
    let last = expected_step(execution, &format!("s{}", p.steps - 1), 1)?;
    let last: String = serde_json::from_str(&last).ok()?;
    let value = json_text(&outcome_value(execution, &last))?;
    Some(if p.fails {
        format!("failed:{value}")
    } else {
        format!("completed:{value}")
    })
}

/// How a failing execution's worker fails (history rule 11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failing {
    /// It returns an error.
    Error,
    /// It panics.
    Panic,
}

/// Whether `execution` fails every delivery after its first step, and how: a hash of its
/// id under `percent` (`--failing-percent`).
pub fn failing(execution: &str, percent: u32) -> Option<Failing> {
    let h = fnv(&[execution, "failing"]);
    (h % 100 < u64::from(percent)).then_some(if (h >> 8).is_multiple_of(2) {
        Failing::Error
    } else {
        Failing::Panic
    })
}

/// What a delivery's steps write through.
pub struct Steps {
    /// The runtime's (recorded) backend.
    pub backend: Arc<dyn LeaseBackend>,
    /// The application steps.
    pub app: Arc<AppSteps>,
    /// The effect steps.
    pub fx: Arc<EffectSteps>,
}

/// Fails a failing execution's delivery: an error the dispatcher releases for redelivery
/// (an attempt), or a panic it catches and releases likewise.
fn fail(how: Failing, execution: &str) -> Result<Reply, DeliveryError> {
    let message = format!("{execution} fails every delivery (--failing-percent)");
    match how {
        Failing::Error => Err(DeliveryError::Worker(message.into())),
        Failing::Panic => panic!("{message}"),
    }
}

/// Runs one delivery of the workflow; executions `failing_percent` picks fail after their
/// first step.
pub async fn run(
    d: Delivery,
    steps: Steps,
    lease_ms: u64,
    failing_percent: u32,
) -> Result<Reply, DeliveryError> {
    let Steps { backend, app, fx } = steps;
    let execution = d.execution_id().as_str().to_owned();
    let p = plan(&execution, lease_ms);
    let fails_by = failing(&execution, failing_percent);
    let mut previous = String::new();
    for i in 0..p.steps {
        if p.nap_before == Some(i) {
            let now = backend.now().await?.as_millis();
            let until: i64 = d
                .step("nap", || async move { Ok::<_, Infallible>(now + NAP_MS) })
                .await?;
            let now = backend.now().await?.as_millis();
            if now < until {
                d.request_wake(lease_core::Timestamp::from_millis(until))
                    .await?;
                return Ok(Reply::Acknowledge(WorkflowRunOutcome::Suspended));
            }
        }
        if p.retry_before == Some(i) {
            let mut ran = false;
            let _: bool = d
                .step("retry", || {
                    ran = true;
                    async { Ok::<_, Infallible>(true) }
                })
                .await?;
            if ran {
                return Ok(Reply::Retry);
            }
        }
        let work = Duration::from_millis(p.work_ms[i]);
        let value = step_value(&execution, i, &previous);
        let key = format!("s{i}");
        previous = if is_app_step(&execution, &key) {
            app.step(&d, &key, value, work).await?
        } else if effects::is_effect_step(&key) {
            fx.step(&d, &key, value, work).await?
        } else {
            d.step(&key, || async move {
                tokio::time::sleep(work).await;
                Ok::<_, Infallible>(value)
            })
            .await?
        };
        if let Some(how) = fails_by {
            return fail(how, &execution);
        }
    }
    let value = Json::to_json("outcome", &outcome_value(&execution, &previous))?;
    Ok(Reply::Acknowledge(if p.fails {
        WorkflowRunOutcome::Failed(value)
    } else {
        WorkflowRunOutcome::Completed(value)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_chain_and_plans_vary() {
        let a = expected_step("e1", "s0", 1).expect("s0");
        assert_eq!(a, json_text(&step_value("e1", 0, "")).expect("json"));
        let s0 = step_value("e1", 0, "");
        let c = expected_step("e1", "s2", 1).expect("s2");
        assert_eq!(
            c,
            json_text(&step_value("e1", 2, &step_value("e1", 1, &s0))).expect("json")
        );
        assert_eq!(expected_step("e1", "nap", 1), None);
        assert_eq!(expected_step("e1", "s1", 1), None, "the effect step");
        assert!(expected_outcome("e1", 1500).is_some());
        let plans: Vec<Plan> = (0..200).map(|n| plan(&format!("e{n}"), 1500)).collect();
        assert!(plans.iter().any(|p| p.nap_before.is_some()));
        assert!(plans.iter().any(|p| p.retry_before.is_some()));
        assert!(plans.iter().any(|p| p.fails));
        assert!(plans.iter().any(|p| p.work_ms.iter().any(|w| *w >= 1500)));
        assert!(is_app_step("e1", "s0") && is_app_step("e1", "s4"));
        assert!(!is_app_step("e1", "s1") && !is_app_step("e1", "nap"));
    }
}
