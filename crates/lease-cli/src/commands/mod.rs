//! The subcommands, each one function from the open backend and its arguments to an
//! [`Output`].

pub mod cancel;
pub mod caps;
pub mod corrupt;
pub mod dead;
pub mod failing;
pub mod history;
pub mod limits;
pub mod list;
pub mod live;
pub mod pause;
pub mod purge;
pub mod retry;
mod schedules;
pub mod show;
pub mod status;

use lease::LeaseBackend;

use crate::cli::Command;
use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::Output;

/// `lease migrate`'s report: opening with migration on did the work.
fn migrated() -> Output {
    Output {
        text: "the schema is at this version\n".to_owned(),
        json: serde_json::json!({ "migrated": true }),
    }
}

/// Runs `command` on `backend`, after refusing it, naming the backend, when the backend's
/// declaration lacks a capability it needs ([`caps::refuse_early`]).
pub async fn run(
    backend: &dyn LeaseBackend,
    command: &Command,
    limits: &Limits,
) -> Result<Output, Failure> {
    caps::refuse_early(backend, command)?;
    match command {
        Command::Status => status::run(backend, limits).await,
        Command::Caps => Ok(caps::run(backend)),
        Command::Failing(args) => failing::run(backend, args, limits).await,
        Command::Live(args) => live::run(backend, args, limits).await,
        Command::Show(args) => show::run(backend, args, limits).await,
        Command::Corrupt(args) => corrupt::run(backend, args, limits).await,
        Command::List(args) => list::run(backend, args, limits).await,
        Command::Dead(args) => dead::run(backend, args, limits).await,
        Command::Retry(args) => retry::run(backend, args, limits).await,
        Command::Purge(args) => purge::run(backend, args, limits).await,
        Command::Cancel(args) => cancel::run(backend, args, limits).await,
        Command::Pause(args) => pause::run(backend, args, false, limits).await,
        Command::Resume(args) => pause::run(backend, args, true, limits).await,
        Command::Limits(args) => limits::run(backend, args, limits).await,
        Command::Schedules(args) => schedules::run(backend, args, limits).await,
        Command::Migrate(_) => Ok(migrated()),
        Command::Ui(_) => Err(Failure::Usage(
            "`ui` serves pages; it runs from main, not as a one-shot command".to_owned(),
        )),
    }
}
