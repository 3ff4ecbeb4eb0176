//! `lease-torture`: nemesis runs of the lease backends (issue 6). The controller
//! (`lease-torture run`) starts N runtime processes of this same binary
//! (`lease-torture runtime`), each running a dispatcher over a shared backend and logging
//! every claim, renewal, step write, acknowledgement and release; it injects a seeded
//! schedule of faults (SIGSTOP, SIGKILL, dropped connections, late renewals, server
//! restarts), then checks the merged history with `lease_conformance::history` and the
//! workflow's application rows (issue 13) with [`appcheck`].
//! Usually run through `cargo xtask torture`.

mod app;
mod appcheck;
mod appstep;
mod args;
mod backend;
mod controller;
mod effectcheck;
mod effects;
mod failover;
mod faults;
mod nemesis;
mod oplog;
mod recorder;
mod report;
mod runtime;
mod skew;
mod timeline;
mod trueclock;
mod workflow;

use std::process::ExitCode;

const HELP: &str = "\
usage: lease-torture run [options]      (see lease-torture run --help)
       lease-torture runtime ...        (started by the controller)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filter = std::env::var("LEASE_TORTURE_LOG").unwrap_or_else(|_| "error".to_owned());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .try_init();
    let Some((command, rest)) = args.split_first() else {
        eprintln!("{HELP}");
        return ExitCode::from(2);
    };
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
    match command.as_str() {
        "run" => {
            if rest.iter().any(|a| a == "-h" || a == "--help") {
                println!("{}", controller::usage());
                return ExitCode::SUCCESS;
            }
            match controller::RunArgs::parse(rest) {
                Ok(a) => runtime.block_on(controller::main(a)),
                Err(e) => {
                    eprintln!("lease-torture: {e}\n\n{}", controller::usage());
                    ExitCode::from(2)
                }
            }
        }
        "runtime" => match runtime::RuntimeArgs::parse(rest) {
            Ok(a) => runtime.block_on(runtime::main(a)),
            Err(e) => {
                eprintln!("lease-torture runtime: {e}");
                ExitCode::from(2)
            }
        },
        "help" | "-h" | "--help" => {
            println!("{HELP}");
            ExitCode::SUCCESS
        }
        other => {
            eprintln!("lease-torture: unknown command {other:?}\n\n{HELP}");
            ExitCode::from(2)
        }
    }
}
