//! `cargo xtask services`: finds or starts PostgreSQL and Redis for running a backend's
//! tests by hand, prints the variables to export, and keeps throwaway servers up until
//! Enter, end of input or Ctrl-C.

use std::io::BufRead;

use crate::services::{Service, url};

/// What `cargo xtask services --help` prints after the options.
pub const ABOUT: &str = "\
Finds (or starts) the named servers (postgres-standby, a primary with a streaming standby,
redis-cluster-failover, a cluster with its failover script, and the testcontainers ones,
only when named), the first three by default, the way test-all does, and prints
`export LEASE_POSTGRES_URL=...` / `export LEASE_REDIS_URL=...`. Throwaway servers stay up
until you press Enter (or Ctrl-C), then are stopped and removed.";

/// Options of `cargo xtask services`.
#[derive(Debug, PartialEq, Eq, clap::Args)]
pub struct Options {
    /// Servers to find or start (default: postgres, redis, redis-cluster; the others only
    /// when named, see above); a name it does not know is refused with the list.
    #[arg(value_name = "SERVICE", value_parser = service)]
    pub services: Vec<Service>,
}

/// clap's value parser of a service name.
fn service(name: &str) -> Result<Service, String> {
    Service::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Service::ALL
            .into_iter()
            .chain(Service::ON_REQUEST)
            .map(Service::name)
            .collect();
        format!("unknown service (one of {})", names.join(", "))
    })
}

/// Runs the command; returns whether every server was found.
pub fn run(options: &Options) -> bool {
    let mut wanted = options.services.clone();
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
    all_found
}
