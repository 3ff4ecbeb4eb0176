//! `cargo xtask bench`: finds the PostgreSQL and Redis servers the way test-all does, then
//! builds and runs `cargo run --release -p lease-bench -- <args>` with their URLs set.
//! Benchmarks, not tests: no target is enforced here.

use std::path::Path;
use std::process::Command;

use crate::cleanup;
use crate::services::{Found, Service, url};

/// What `cargo xtask bench --help` prints after the options.
pub const ABOUT: &str = "\
Runs the lease-bench crate in release mode: ops/s of claim_due (batch 1 and 32), renew,
write_step and acknowledge, end-to-end executions/s through the dispatcher (0 and 3 fenced
steps at concurrency 1, 8 and 64) and admit_batch x1000, each next to the same SQL
statements / Lua scripts issued without the library; then the wake-up rows (pickup latency,
timer lateness, redelivery delay, idle claims, herds; select with --only pickup, timer,
redelivery, idle, herd); then the fenced-write rows (--only fenced: a fenced application
transaction beside the same transaction unfenced, step_in_tx beside write_step + a separate
transaction); then the drain and storage rows (--only drain: 20,000 jobs drained by a
worker process beside the best job queue; ack_and_claim; stored: per-operation cost at 10^3
to 10^6 stored executions; purge: purge_terminal throughput); then the control rows (--only
controls: claim_due x1 with priorities and concurrency keys in use beside the plain claim at
10^3 to 10^6 stored, the drain with them beside the plain drain at C = 1 and 8, cancel ->
worker cancelled against the renewal interval); then the shard rows (--backend redis
--only shards: one namespace drained on a standalone redis-server and on clusters of 1, 2 and
3 primaries the row starts itself, jobs/s and server CPU per job). Prints markdown tables;
JSON goes to target/bench/.

ARGS are passed to lease-bench: [--backend sqlite|postgres|redis|memory|all]...
[--duration D] [--rounds N] [--quick] [--only WORD]... [--wait-load L] [--wait-max D]
[--stored-max N] (see `cargo run -p lease-bench -- --help`).

PostgreSQL and Redis are found as test-all finds them (LEASE_POSTGRES_URL / LEASE_REDIS_URL,
the local port, throwaway binaries, containers); only the servers of the selected backends.";

/// Options of `cargo xtask bench`: everything is lease-bench's.
#[derive(Debug, PartialEq, Eq, clap::Args)]
pub struct Options {
    /// Arguments of lease-bench, passed as given.
    #[arg(
        value_name = "ARGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub args: Vec<String>,
}

/// The services the selected backends need (every one when no `--backend` is given).
pub fn services_for(args: &[String]) -> Vec<Service> {
    let mut names = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "--backend" {
            if let Some(v) = it.next() {
                names.extend(v.split(',').map(str::trim).map(str::to_owned));
            }
        } else if let Some(v) = arg.strip_prefix("--backend=") {
            names.extend(v.split(',').map(str::trim).map(str::to_owned));
        }
    }
    let all = names.is_empty() || names.iter().any(|n| n == "all");
    Service::ALL
        .into_iter()
        .filter(|s| all || names.iter().any(|n| n == s.name()))
        .collect()
}

/// Runs the command; returns whether the benchmark ran to the end.
pub fn run(root: &Path, args: &[String]) -> Result<bool, String> {
    let mut held: Vec<Found> = Vec::new();
    let mut env = Vec::new();
    for service in services_for(args) {
        let found = service
            .discover()
            .map_err(|e| format!("{}: {e}", service.name()))?;
        eprintln!(
            "{}: found via {} -> {}",
            service.name(),
            found.how,
            url::redact(&found.url)
        );
        env.push((service.env_var(), found.url.clone()));
        held.push(found);
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // The console rows (`ui ...`) run the `lease` binary built beside lease-bench.
    let mut build = Command::new(&cargo);
    build
        .current_dir(root)
        .args(["build", "--release", "--quiet", "-p", "lease-cli"]);
    let built = cleanup::run_child(&mut build).map_err(|e| format!("building lease-cli: {e}"))?;
    if !built.success() {
        return Err("cargo build --release -p lease-cli failed".into());
    }
    let mut cmd = Command::new(&cargo);
    cmd.current_dir(root)
        .args(["run", "--release", "--quiet", "-p", "lease-bench", "--"])
        .args(args);
    if !args
        .iter()
        .any(|a| a == "--json-dir" || a.starts_with("--json-dir="))
    {
        cmd.arg("--json-dir").arg(root.join("target").join("bench"));
    }
    for (k, v) in &env {
        cmd.env(k, v);
    }
    let status = cleanup::run_child(&mut cmd).map_err(|e| format!("running lease-bench: {e}"))?;
    drop(held);
    Ok(status.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn only_the_selected_backends_need_servers() {
        assert_eq!(services_for(&[]), Service::ALL.to_vec());
        assert_eq!(
            services_for(&args(&["--backend", "sqlite,memory"])),
            Vec::<Service>::new()
        );
        assert_eq!(
            services_for(&args(&["--backend=redis", "--quick"])),
            vec![Service::Redis]
        );
        assert_eq!(
            services_for(&args(&["--backend", "all"])),
            Service::ALL.to_vec()
        );
    }
}
