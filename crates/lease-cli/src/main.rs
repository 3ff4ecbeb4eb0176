//! `lease`, the operator command of execution leases: `status`, `caps`, `failing`, `live`,
//! `show ID`, `corrupt`, `purge --older-than DURATION` and `schedules` on any backend URL
//! ([`lease::open()`]), as a table or `--json`; `ui`, the same in a browser.
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
mod usage;

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
        Err(e) => {
            // The arguments as typed, for the redaction of a URL clap's message quotes.
            let args: Vec<String> = std::env::args_os()
                .map(|arg| arg.to_string_lossy().into_owned())
                .collect();
            return usage::parse_error(&e, &args);
        }
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
            let backend = connect::open(url, &limits, None).await?;
            return ui::serve(prepared, backend, args, limits, url).await;
        }
        let migrate = match &cli.command {
            Command::Migrate(args) => Some(args.lock_timeout),
            _ => None,
        };
        let backend = connect::open(url, &limits, migrate).await?;
        commands::run(&*backend, &cli.command, &limits).await
    });
    // Whatever a timed-out connection left running must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_millis(200));
    result.map(|output| output.render(cli.json))
}
