//! Controller mode: admits executions, runs the runtime processes (re-executing this
//! binary), injects the seeded fault schedule, shows progress, stops the faults at the
//! deadline, waits for every execution within the liveness bound, reads the final state
//! (the application rows too), runs the history checker and the application-row checker
//! and prints the report.
//!
//! [`args`] holds the options, [`state`] the controller's state, [`run`] the steps of a
//! run; [`spawn`] starts and stops the runtimes, [`inject`] the faults, [`drive`] the
//! fault window and the drain, [`cancel`] and [`pause`] the controls, [`finish`] the final
//! reads, the checks and the report.

mod args;
mod cancel;
mod drive;
mod finish;
mod inject;
mod pause;
mod run;
mod spawn;
mod state;

pub use args::RunArgs;
pub use run::main;
