//! `lease`, the operator command of execution leases (issue 15; retention of issue 12):
//! `status`, `failing`, `live`, `show ID`, `corrupt`, `purge --older-than DURATION` and
//! `schedules` on any backend URL ([`lease::open()`]), as a table or `--json`; `ui`, the same
//! in a browser.
//!
//! Every failure is one line on standard error, `lease: error: ...`, with exit status 1
//! (the operation failed: unreachable server, unknown id, backend error) or 2 (bad usage:
//! arguments, URL, duration); connecting and every call are bounded by `--connect-timeout`
//! and `--timeout`.

mod cli;
mod commands;
mod connect;
mod failure;
mod output;
mod table;
mod ui;

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser as _;

use crate::cli::{Cli, Command};
use crate::connect::Limits;
use crate::failure::Failure;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return parse_error(&e),
    };
    match execute(&cli) {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            // A closed pipe (`lease status | head -1`) is not an error worth a message.
            let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
            ExitCode::SUCCESS
        }
        Err(failure) => {
            eprintln!("lease: error: {failure}");
            failure.exit_code()
        }
    }
}

/// `--help` and `--version` print as clap renders them (and the help, with exit status 2,
/// when no command is given); a usage error is clap's first paragraph on one line, without
/// its own `error: `, as every other error, with exit status 2.
fn parse_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let _ = e.print();
        return ExitCode::from(2);
    }
    let text = e.to_string();
    // The first paragraph ("the following required arguments were not provided:" and the
    // arguments on the lines under it), on one line.
    let first = text.split("\n\n").next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let failure = Failure::Usage(first.split_whitespace().collect::<Vec<_>>().join(" "));
    eprintln!("lease: error: {failure}");
    failure.exit_code()
}

/// Opens the backend and runs the command on a runtime of this thread; the rendered output.
fn execute(cli: &Cli) -> Result<String, Failure> {
    let url = cli.url.as_deref().ok_or_else(|| {
        Failure::Usage("no backend URL: pass --url URL or set LEASE_URL".to_owned())
    })?;
    let limits = Limits {
        connect: cli.connect_timeout,
        call: cli.timeout,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Failed(format!("cannot start the runtime: {e}")))?;
    let result = runtime.block_on(async {
        if let Command::Ui(args) = &cli.command {
            let prepared = ui::check(args)?;
            let backend = connect::open(url, &limits).await?;
            return ui::serve(prepared, backend, args, limits, url).await;
        }
        let backend = connect::open(url, &limits).await?;
        commands::run(&*backend, &cli.command, &limits).await
    });
    // Whatever a timed-out connection left running must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_millis(200));
    result.map(|output| output.render(cli.json))
}
