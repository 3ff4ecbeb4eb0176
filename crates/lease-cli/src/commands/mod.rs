//! The subcommands, each one function from the open backend and its arguments to an
//! [`Output`].

mod cancel;
mod corrupt;
mod failing;
mod limits;
mod pause;
mod purge;
mod schedules;
mod show;
mod status;

use lease::LeaseBackend;

use crate::cli::Command;
use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::Output;

/// Runs `command` on `backend`.
pub async fn run(
    backend: &dyn LeaseBackend,
    command: &Command,
    limits: &Limits,
) -> Result<Output, Failure> {
    match command {
        Command::Status => status::run(backend, limits).await,
        Command::Failing(args) => failing::run(backend, args, limits).await,
        Command::Show(args) => show::run(backend, args, limits).await,
        Command::Corrupt(args) => corrupt::run(backend, args, limits).await,
        Command::Purge(args) => purge::run(backend, args, limits).await,
        Command::Cancel(args) => cancel::run(backend, args, limits).await,
        Command::Pause(args) => pause::run(backend, args, false, limits).await,
        Command::Resume(args) => pause::run(backend, args, true, limits).await,
        Command::Limits(args) => limits::run(backend, args, limits).await,
        Command::Schedules(args) => schedules::run(backend, args, limits).await,
    }
}
