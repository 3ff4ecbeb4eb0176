//! Recurring admissions for execution leases (docs/decisions/0035-schedules.md).
//!
//! A [`Schedule`] is a cron expression (parsed by `croner`) read in an explicit IANA time
//! zone (`chrono-tz`). Each occurrence admits one execution whose id is derived from the
//! schedule's name and the occurrence's instant, `schedule:<name>:<unix ms>`, with
//! `not_before` the occurrence, so any number of processes running a [`Scheduler`] on one
//! backend admit each occurrence exactly once, with no leader: admission is idempotent by
//! id. Schedules and their cursors live in the store [`STORE`], so this works through the
//! four client traits on every backend, with no adapter change.
//!
//! After downtime, each schedule's [`CatchUp`] policy decides what happens to *missed*
//! occurrences (older than its grace window when a tick considers them): the last one, all
//! (bounded per tick), or none. Occurrences within the grace window are always admitted.
//!
//! ```
//! # async fn demo(backend: lease_core::SharedBackend) -> Result<(), lease_schedule::ScheduleError> {
//! use lease_schedule::{CatchUp, Schedule, Scheduler};
//!
//! let nightly = Schedule::new("nightly-report", "0 2 * * *", "Europe/Berlin")?
//!     .workflow(lease_core::WorkflowName::new("report")?)
//!     .catch_up(CatchUp::Last);
//! let scheduler = Scheduler::new(backend);
//! scheduler.register(&nightly).await?;
//! let tick = scheduler.tick().await?; // or `scheduler.run(cancel).await`
//! # let _ = tick;
//! # Ok(())
//! # }
//! ```

pub mod error;
pub mod plan;
pub mod schedule;
pub mod scheduler;
pub mod state;

pub use error::{Result, ScheduleError};
pub use schedule::{
    CatchUp, DEFAULT_GRACE, DEFAULT_MAX_PER_TICK, Definition, ID_PREFIX, MAX_GRACE, MAX_NAME_BYTES,
    Schedule, check_name,
};
pub use scheduler::{Admitted, DEFAULT_POLL, ScheduleInfo, Scheduler, Tick, list};
pub use state::{Registered, STORE, Stored};
/// The token [`Scheduler::run`] stops on (re-exported from `tokio-util`).
pub use tokio_util::sync::CancellationToken;
