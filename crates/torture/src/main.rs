//! `lease-torture`: nemesis runs of the lease backends. The controller
//! (`lease-torture run`) starts N runtime processes of this same binary
//! (`lease-torture runtime`), each running a dispatcher over a shared backend and logging
//! every claim, renewal, step write, acknowledgement and release; it injects a seeded
//! schedule of faults (SIGSTOP, SIGKILL, dropped connections, late renewals, server
//! restarts), then checks the merged history with `crate::history` and the
//! workflow's application rows with [`appcheck`].
//! Usually run through `cargo xtask torture`.

mod app;
mod appcheck;
mod appstep;
mod backend;
mod cli;
mod controller;
mod controls;
mod effectcheck;
mod effects;
mod failover;
mod faults;
mod forward;
mod hash;
mod history;
mod lostlease;
mod mutant;
mod nemesis;
mod netns;
mod opcount;
mod oplog;
mod recorder;
mod report;
mod runtime;
mod schedules;
mod skew;
mod timeline;
mod trueclock;
mod values;
mod workflow;

use std::process::ExitCode;

use cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = match Cli::parse_args(std::env::args().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            // Help on stdout with 0, errors on stderr with 2.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let filter = std::env::var("LEASE_TORTURE_LOG").unwrap_or_else(|_| "error".to_owned());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .try_init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("lease-torture: cannot start tokio: {e}");
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Command::Run(a) => runtime.block_on(controller::main(*a)),
        Command::Runtime(a) => runtime.block_on(runtime::main(a)),
    }
}
