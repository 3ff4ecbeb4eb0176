//! `--schedule` (history rule 10): every runtime ticks one schedule firing every second
//! over its recorder (no leader: each process admits the same occurrences, idempotently),
//! until a backend instant the controller sets at the end of the faults; after the run the
//! controller derives, from the stored entry, every occurrence the schedule settled, each
//! of which must have been admitted exactly once.

use std::collections::BTreeSet;
use std::time::Duration;

use lease_core::{LeaseBackend, SharedBackend, Timestamp};
use lease_schedule::{CatchUp, Schedule, Scheduler};

/// The schedule's name (its executions are `schedule:torture:<ms>`).
pub const NAME: &str = "torture";
/// Every second, in UTC.
const CRON: &str = "* * * * * *";
/// How often a runtime ticks.
const TICK: Duration = Duration::from_millis(200);

/// The run's schedule: every second, every missed occurrence admitted (`All`), so every
/// occurrence from the registration to the cursor must exist.
pub fn schedule() -> Result<Schedule, String> {
    Schedule::new(NAME, CRON, "UTC")
        .map(|s| s.catch_up(CatchUp::All))
        .map_err(|e| e.to_string())
}

/// Whether `id` names an occurrence of the run's schedule.
pub fn is_occurrence(id: &str) -> bool {
    id.starts_with(&format!("schedule:{NAME}:"))
}

/// A runtime's scheduler: registers the schedule (equal definitions are `Unchanged`; a
/// failed registration is retried at the next tick) and ticks until the backend clock
/// reaches `until_ms`. A failed tick is retried: the cursor moves only after the admissions.
pub async fn run(backend: SharedBackend, until_ms: i64) {
    let Ok(schedule) = schedule() else {
        return;
    };
    let scheduler = Scheduler::new(backend.clone());
    let mut registered = false;
    loop {
        match backend.now().await {
            Ok(now) if now.as_millis() >= until_ms => return,
            Ok(_) => {}
            Err(_) => {
                tokio::time::sleep(TICK).await;
                continue;
            }
        }
        if !registered {
            registered = scheduler.register(&schedule).await.is_ok();
        }
        if registered {
            let _ = scheduler.tick().await;
        }
        tokio::time::sleep(TICK).await;
    }
}

/// The execution ids of every occurrence the stored schedule settled: from its
/// registration (inclusive) to its cursor. Empty when it was never registered.
pub async fn settled_occurrences(backend: &dyn LeaseBackend) -> Result<BTreeSet<String>, String> {
    let now = backend.now().await.map_err(|e| e.to_string())?;
    let listed = lease_schedule::list(backend, now)
        .await
        .map_err(|e| format!("schedules: {e}"))?;
    let schedule = schedule()?;
    let mut ids = BTreeSet::new();
    for info in listed.into_iter().filter(|i| i.name == NAME) {
        let Some(through) = info.stored.through else {
            continue;
        };
        let mut at = Timestamp::from_millis(info.stored.registered_at.as_millis() - 1);
        while let Some(next) = schedule.next_after(at).filter(|n| *n <= through) {
            ids.insert(
                schedule
                    .execution_id(next)
                    .map_err(|e| e.to_string())?
                    .as_str()
                    .to_owned(),
            );
            at = next;
        }
    }
    Ok(ids)
}
