//! Project automation, run as `cargo xtask <command>` (alias in `.cargo/config.toml`).
//!
//! Commands:
//! - `test-all [--backend NAME]...`: fmt check, clippy, every backend's tests against
//!   discovered (or throwaway) PostgreSQL and Redis servers, and a summary table.
//! - `bench [ARGS]...`: builds and runs the `lease-bench` benchmarks in release mode
//!   against the discovered servers (markdown table on stdout, JSON in target/bench/).
//! - `torture [--backend NAME]... [ARGS]...`: nemesis runs of each backend under faults,
//!   checked by the history checker (lease-torture).
//! - `services [postgres|redis]...`: finds or starts the servers and prints their URLs, for
//!   running one backend's tests by hand.
//!
//! Plain code in the rust-analyzer xtask style; its dependencies are `ctrlc` and the shared
//! test-server crate (`lease-testserver`, whose `containers` feature starts containers).

mod bench;
mod cleanup;
mod matrix;
mod process;
mod services;
mod services_command;
mod summary;
mod test_all;
mod torture;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

const HELP: &str = "\
usage: cargo xtask <command>

commands:
  test-all [--backend NAME]...   fmt, clippy, every backend's tests, summary
  bench [ARGS]...                benchmarks vs raw baselines (release mode; --help)
  torture [ARGS]...              backends under faults + history check (--help)
  services [postgres|redis]...   find or start servers, print LEASE_*_URL to export
  help                           this text";

/// The workspace root: the parent of this crate's directory.
fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        eprintln!("{HELP}");
        return ExitCode::from(2);
    };
    match command.as_str() {
        "test-all" => {
            if rest.iter().any(|a| a == "-h" || a == "--help") {
                println!("{}", test_all::USAGE);
                return ExitCode::SUCCESS;
            }
            let options = match test_all::parse_args(rest) {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("xtask: {e}\n\n{}", test_all::USAGE);
                    return ExitCode::from(2);
                }
            };
            cleanup::install_interrupt_handler();
            match test_all::run(&project_root(), &options) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::FAILURE,
                Err(e) => {
                    eprintln!("xtask: {e}");
                    ExitCode::from(2)
                }
            }
        }
        "bench" => {
            if rest.iter().any(|a| a == "-h" || a == "--help") {
                println!("{}", bench::USAGE);
                return ExitCode::SUCCESS;
            }
            cleanup::install_interrupt_handler();
            match bench::run(&project_root(), rest) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::FAILURE,
                Err(e) => {
                    eprintln!("xtask: {e}");
                    ExitCode::from(2)
                }
            }
        }
        "torture" => {
            if rest.iter().any(|a| a == "-h" || a == "--help") {
                println!("{}", torture::USAGE);
                return ExitCode::SUCCESS;
            }
            cleanup::install_interrupt_handler();
            match torture::run(&project_root(), rest) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::FAILURE,
                Err(e) => {
                    eprintln!("xtask: {e}\n\n{}", torture::USAGE);
                    ExitCode::from(2)
                }
            }
        }
        "services" => {
            if rest.iter().any(|a| a == "-h" || a == "--help") {
                println!("{}", services_command::USAGE);
                return ExitCode::SUCCESS;
            }
            cleanup::install_interrupt_handler();
            match services_command::run(rest) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::FAILURE,
                Err(e) => {
                    eprintln!("xtask: {e}\n\n{}", services_command::USAGE);
                    ExitCode::from(2)
                }
            }
        }
        "help" | "-h" | "--help" => {
            println!("{HELP}");
            ExitCode::SUCCESS
        }
        other => {
            eprintln!("xtask: unknown command {other:?}\n\n{HELP}");
            ExitCode::from(2)
        }
    }
}
