//! `cargo xtask services`: finds or starts PostgreSQL and Redis for running a backend's
//! tests by hand, prints the variables to export, and keeps throwaway servers up until
//! Enter, end of input or Ctrl-C.

use std::io::BufRead;

use crate::services::{Service, url};

/// Usage text of the command.
pub const USAGE: &str = "\
usage: cargo xtask services [postgres|redis|redis-cluster|postgres-standby|redis-cluster-failover|postgres-container|redis-container]...

Finds (or starts) the named servers (postgres-standby, a primary with a streaming standby,
redis-cluster-failover, a cluster with its failover script, and the testcontainers ones,
only when named), the first three by default, the way test-all does, and prints
`export LEASE_POSTGRES_URL=...` / `export LEASE_REDIS_URL=...`. Throwaway servers stay up
until you press Enter (or Ctrl-C), then are stopped and removed.";

/// Runs the command; returns whether every server was found.
pub fn run(args: &[String]) -> Result<bool, String> {
    let mut wanted = Vec::new();
    for arg in args {
        let service = Service::from_name(arg).ok_or_else(|| format!("unknown service {arg:?}"))?;
        wanted.push(service);
    }
    if wanted.is_empty() {
        wanted = Service::ALL.to_vec();
    }
    let mut all_found = true;
    let mut held = Vec::new();
    for service in wanted {
        match service.discover() {
            Ok(found) => {
                eprintln!("{}: found via {}", service.name(), found.how);
                if let Some(dir) = &found.workdir {
                    eprintln!("{}: logs in {}", service.name(), dir.display());
                }
                println!("export {}={}", service.env_var(), url::redact(&found.url));
                for (var, value) in service.extra_env(&found) {
                    println!("export {var}={value}");
                }
                held.push(found);
            }
            Err(e) => {
                eprintln!("{}: NOT FOUND: {e}", service.name());
                all_found = false;
            }
        }
    }
    if held.iter().any(|f| f._guard.is_some()) {
        eprintln!("throwaway servers are up; press Enter (or Ctrl-C) to stop them");
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
    }
    drop(held);
    Ok(all_found)
}
