//! Project automation, run as `cargo xtask <command>` (alias in `.cargo/config.toml`).
//!
//! Commands:
//! - `test-all [--backend NAME]...`: fmt check, clippy, every backend's tests against
//!   discovered (or throwaway) PostgreSQL and Redis servers, and a summary table.
//! - `bench [ARGS]...`: builds and runs the `lease-bench` benchmarks in release mode
//!   against the discovered servers (markdown table on stdout, JSON in target/bench/).
//! - `torture [--backend NAME]... [ARGS]...`: nemesis runs of each backend under faults,
//!   checked by the history checker (lease-torture).
//! - `plots`: redraws the benchmark plots (`docs/benchmarks/*.svg`) from
//!   `docs/benchmarks/results.csv`.
//! - `package`: packages every publishable crate and verifies each builds on its own, in
//!   dependency order (slow; test-all packages without verifying).
//! - `services [postgres|redis]...`: finds or starts the servers and prints their URLs, for
//!   running one backend's tests by hand.
//!
//! Plain code in the rust-analyzer xtask style, with a tiny main; its dependencies are
//! `ctrlc`, `clap` (the command line, `flags.rs`) and the shared test-server crate
//! (`lease-testserver`, whose `containers` feature starts containers).

mod bench;
mod cleanup;
mod disk;
mod feature_sets;
mod flags;
mod matrix;
mod package;
mod plots;
mod process;
mod services;
mod services_command;
mod setup;
mod summary;
mod test_all;
mod torture;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use flags::Command;

/// The workspace root: the parent of this crate's directory.
fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn main() -> ExitCode {
    let command = match flags::Xtask::parse_args(std::env::args().skip(1)) {
        Ok(x) => x.command,
        Err(e) => {
            // Help on stdout with 0, errors on stderr with 2.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    cleanup::install_interrupt_handler();
    let root = project_root();
    let outcome = match &command {
        Command::TestAll(o) => test_all::run(&root, o),
        Command::Bench(o) => bench::run(&root, &o.args),
        Command::Torture(o) => Ok(torture::run(&root, o)),
        Command::Services(o) => Ok(services_command::run(o)),
        Command::Plots(_) => plots::run(&root),
        Command::Package(_) => package::run(&root),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::from(2)
        }
    }
}
