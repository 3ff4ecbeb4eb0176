//! The scheduler: ticks every stored schedule at the backend clock, admitting each due
//! occurrence under its derived id, with no leader (docs/decisions/0035-schedules.md).
//!
//! Any number of processes may run a [`Scheduler`] on one backend namespace. Each tick
//! reads every schedule, plans its due occurrences ([`crate::plan`]), admits them (idempotent
//! by id, so an occurrence two schedulers both admit is one execution), and only then moves
//! the schedule's cursor forward by compare-and-set.

use std::time::Duration;

use lease_core::limits::MAX_BATCH_PAYLOAD_BYTES;
use lease_core::{Admission, ExecutionId, SharedBackend, Timestamp};
use tokio_util::sync::CancellationToken;

use crate::error::{Result, ScheduleError};
use crate::plan::plan;
use crate::schedule::Schedule;
use crate::state::{self, Registered, Stored};

/// The default longest sleep of [`Scheduler::run`] between ticks: how soon it sees a
/// schedule another process registered.
pub const DEFAULT_POLL: Duration = Duration::from_secs(30);

/// One occurrence a tick admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// The schedule.
    pub schedule: String,
    /// The occurrence's instant (the execution's `not_before`).
    pub occurrence: Timestamp,
    /// The execution id derived from both.
    pub execution_id: ExecutionId,
}

/// What one [`Scheduler::tick`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tick {
    /// The backend clock the tick planned at.
    pub now: Timestamp,
    /// The occurrences it admitted (each may already have existed: admission is idempotent).
    pub admitted: Vec<Admitted>,
    /// Some schedule had more due occurrences than its `max_per_tick`: tick again.
    pub more: bool,
    /// The earliest occurrence of any schedule after this tick, if any.
    pub next_at: Option<Timestamp>,
    /// Stored entries that could not be decoded (skipped, logged).
    pub corrupt: Vec<String>,
}

/// One stored schedule as listed (the `lease schedules` rows).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ScheduleInfo {
    /// The name.
    pub name: String,
    /// The definition, cursor and revision as stored.
    #[serde(flatten)]
    pub stored: Stored,
    /// The next occurrence after the cursor and `now`.
    pub next_at: Option<Timestamp>,
}

/// Admits the occurrences of every schedule in a backend namespace.
#[derive(Clone)]
pub struct Scheduler {
    backend: SharedBackend,
    poll: Duration,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("poll", &self.poll)
            .finish_non_exhaustive()
    }
}

impl Scheduler {
    /// A scheduler on `backend`, polling for new schedules every [`DEFAULT_POLL`].
    pub fn new(backend: SharedBackend) -> Self {
        Scheduler {
            backend,
            poll: DEFAULT_POLL,
        }
    }

    /// Sets the longest sleep of [`Scheduler::run`] (at least 1 ms).
    pub fn poll_interval(mut self, poll: Duration) -> Self {
        self.poll = poll.max(Duration::from_millis(1));
        self
    }

    /// Registers `schedule`. An equal definition under its name is
    /// [`Registered::Unchanged`]; a different one is [`ScheduleError::Conflict`] and changes
    /// nothing; one that has no occurrence after the backend clock is
    /// [`ScheduleError::NeverFires`].
    pub async fn register(&self, schedule: &Schedule) -> Result<Registered> {
        let now = self.backend.now().await?;
        state::register(&*self.backend, schedule, now, false).await
    }

    /// Registers `schedule`, replacing a different definition under its name. The cursor
    /// stays: occurrences of the new definition at or before it are never admitted.
    pub async fn replace(&self, schedule: &Schedule) -> Result<Registered> {
        let now = self.backend.now().await?;
        state::register(&*self.backend, schedule, now, true).await
    }

    /// Every stored schedule, by name, with its next occurrence at the backend clock.
    pub async fn schedules(&self) -> Result<Vec<ScheduleInfo>> {
        let now = self.backend.now().await?;
        list(&*self.backend, now).await
    }

    /// Admits every occurrence of every schedule due at the backend clock, per its catch-up
    /// policy, then moves each schedule's cursor past what it settled. Writes nothing when
    /// nothing is due (and never creates the store).
    pub async fn tick(&self) -> Result<Tick> {
        let now = self.backend.now().await?;
        let mut tick = Tick {
            now,
            admitted: Vec::new(),
            more: false,
            next_at: None,
            corrupt: Vec::new(),
        };
        for (key, value) in state::read_only_entries(&*self.backend).await? {
            let name = key.as_str();
            let loaded = state::decode(name, &value).and_then(|stored| {
                Schedule::from_definition(name, stored.definition.clone()).map(|s| (stored, s))
            });
            let (stored, schedule) = match loaded {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::warn!(schedule = name, error = %e, "skipping a stored schedule");
                    tick.corrupt.push(name.to_owned());
                    continue;
                }
            };
            self.tick_one(&schedule, &stored, &mut tick).await?;
        }
        Ok(tick)
    }

    /// One schedule's part of a tick.
    async fn tick_one(&self, schedule: &Schedule, stored: &Stored, tick: &mut Tick) -> Result<()> {
        let p = plan(schedule, stored.cursor(), tick.now);
        let admissions = p
            .admit
            .iter()
            .map(|at| schedule.admission(*at))
            .collect::<Result<Vec<_>>>()?;
        for batch in admission_batches(&admissions, schedule) {
            self.backend.admit_batch(batch).await?;
        }
        if let Some(through) = p.through {
            let last_admitted = p.admit.last().copied();
            let receipt_id = schedule.execution_id(last_admitted.unwrap_or(through))?;
            state::advance(
                &*self.backend,
                schedule.name(),
                through,
                last_admitted,
                &receipt_id,
            )
            .await?;
        }
        for (at, admission) in p.admit.iter().zip(admissions) {
            tick.admitted.push(Admitted {
                schedule: schedule.name().to_owned(),
                occurrence: *at,
                execution_id: admission.id,
            });
        }
        tick.more |= p.more;
        let after = p.through.unwrap_or(stored.cursor()).max(tick.now);
        if let Some(next) = schedule.next_after(after) {
            tick.next_at = Some(tick.next_at.map_or(next, |n| n.min(next)));
        }
        Ok(())
    }

    /// Ticks until `cancel` fires: after each tick it sleeps until the next occurrence of any
    /// schedule (by the backend clock), at most the poll interval, or not at all when a
    /// tick stopped at a bound. A failed tick is logged and retried after the poll interval.
    pub async fn run(&self, cancel: CancellationToken) -> Result<()> {
        loop {
            let wait = match self.tick().await {
                Ok(t) if t.more => Duration::ZERO,
                Ok(t) => t
                    .next_at
                    .map_or(self.poll, |n| n.saturating_since(t.now).min(self.poll)),
                Err(e) => {
                    tracing::warn!(error = %e, "schedule tick failed");
                    self.poll
                }
            };
            tokio::select! {
                () = cancel.cancelled() => return Ok(()),
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// `admissions` (all carrying the schedule's input) in batches `admit_batch` takes: at most
/// [`MAX_BATCH_PAYLOAD_BYTES`] of inputs each (a large input times `max_per_tick` can be
/// more), at least one admission each. Admission is idempotent by id, so a tick that fails
/// between two batches admits the rest on the next tick.
fn admission_batches<'a>(
    admissions: &'a [Admission],
    schedule: &Schedule,
) -> std::slice::Chunks<'a, Admission> {
    let input = schedule.definition().input.as_ref();
    let per_batch = match input.map_or(0, |j| j.as_str().len()) {
        0 => admissions.len(),
        bytes => MAX_BATCH_PAYLOAD_BYTES / bytes,
    };
    admissions.chunks(per_batch.max(1))
}

/// Every stored schedule of `store`, by name, with its next occurrence after `now`, without
/// writing anything (the operator command's read). An entry that cannot be decoded is
/// [`ScheduleError::CorruptState`].
pub async fn list<S: lease_core::StoreClient + ?Sized>(
    store: &S,
    now: Timestamp,
) -> Result<Vec<ScheduleInfo>> {
    let mut out = Vec::new();
    for (key, value) in state::read_only_entries(store).await? {
        let name = key.as_str().to_owned();
        let stored = state::decode(&name, &value)?;
        let schedule = Schedule::from_definition(&name, stored.definition.clone()).map_err(
            |e: ScheduleError| ScheduleError::CorruptState {
                name: name.clone(),
                reason: e.to_string(),
            },
        )?;
        let next_at = schedule.next_after(stored.cursor().max(now));
        out.push(ScheduleInfo {
            name,
            stored,
            next_at,
        });
    }
    Ok(out)
}
