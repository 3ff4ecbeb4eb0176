//! A throwaway Redis Cluster (three primaries, a replica each: [`super::redis_cluster`])
//! with a `failover` script for the torture `failover` fault: it kills a
//! primary (the primaries take turns), waits until its replica was promoted and starts the
//! old primary again as the new primary's replica (`cluster_failover.sh` behind a generated
//! header). Nodes the script restarts run daemonized with a pidfile; the cluster's guard
//! kills them with the nodes it started. Test-all's torture row gets it as the service
//! `redis-cluster-failover` ([`ENV`], [`FAILOVER_ENV`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::found::{Found, failover_pair_from_env, failover_script_of};
use super::redis::server_args;
use super::redis_cluster::{cluster_args, throwaway_cluster};
use crate::process::{run_ok, which};

/// The failover script's body.
const SCRIPT: &str = include_str!("cluster_failover.sh");

/// The variable naming a cluster with a failover script (a `redis+cluster://` URL).
pub const ENV: &str = "LEASE_REDIS_CLUSTER_FAILOVER_URL";
/// The variable naming that cluster's failover script.
pub const FAILOVER_ENV: &str = "LEASE_REDIS_CLUSTER_FAILOVER";

/// A throwaway cluster and its failover script's path.
pub struct FailoverCluster {
    /// The cluster (URL `redis+cluster://` of the primaries); its guard stops every node.
    pub found: Found,
    /// The executable failover script.
    pub script: PathBuf,
}

/// The cluster of [`ENV`] and [`FAILOVER_ENV`] when both are set, else a throwaway one.
pub fn discover() -> Result<Found, String> {
    if let Some(found) = failover_pair_from_env(ENV, FAILOVER_ENV) {
        return Ok(found);
    }
    throwaway()
        .map(|c| c.found)
        .map_err(|e| format!("{ENV} not set; a throwaway cluster: {e}"))
}

/// The failover script of a cluster found by [`discover`]: [`FAILOVER_ENV`], else
/// `failover` in the throwaway cluster's dir.
pub fn failover_script(found: &Found) -> Option<String> {
    failover_script_of(found, FAILOVER_ENV)
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The command line that starts the node on `port` again, daemonized with a pidfile.
pub fn start_line(server: &Path, dir: &Path, port: u16) -> String {
    let node = dir.join(port.to_string());
    let mut args = server_args(port, &node);
    args.extend(cluster_args().map(str::to_owned));
    args.extend([
        "--daemonize".to_owned(),
        "yes".to_owned(),
        "--pidfile".to_owned(),
        node.join("redis.pid").to_string_lossy().into_owned(),
    ]);
    let words: Vec<String> = std::iter::once(server.to_string_lossy().into_owned())
        .chain(args)
        .map(|a| shell_quote(&a))
        .collect();
    format!(
        "cd {} && {} >/dev/null",
        shell_quote(&node.to_string_lossy()),
        words.join(" ")
    )
}

/// The script: a header (paths, `start_node PORT`) and the body.
pub fn script(dir: &Path, cli: &Path, server: &Path, ports: &[u16]) -> String {
    let mut cases = String::new();
    for &port in ports {
        cases.push_str(&format!(
            "        {port}) {} ;;\n",
            start_line(server, dir, port)
        ));
    }
    format!(
        "#!/bin/sh\nCLUSTER_DIR={}\nREDIS_CLI={}\nstart_node() {{\n    case \"$1\" in\n{cases}        *) echo \"unknown node $1\" >&2; return 1 ;;\n    esac\n}}\n{SCRIPT}",
        shell_quote(&dir.to_string_lossy()),
        shell_quote(&cli.to_string_lossy()),
    )
}

/// Starts the cluster and writes its failover script.
pub fn throwaway() -> Result<FailoverCluster, String> {
    let server = which("redis-server").ok_or("no redis-server on PATH")?;
    let cli = which("redis-cli").ok_or("no redis-cli on PATH")?;
    let found = throwaway_cluster()?;
    let dir = found.workdir.clone().ok_or("cluster without a dir")?;
    let mut ports: Vec<u16> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
        .collect();
    ports.sort_unstable();
    let list: String = ports.iter().map(|p| format!("{p}\n")).collect();
    std::fs::write(dir.join("ports"), list).map_err(|e| format!("ports: {e}"))?;
    let path = dir.join("failover");
    std::fs::write(&path, script(&dir, &cli, &server, &ports))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    run_ok(
        Command::new("chmod").arg("+x").arg(&path),
        Duration::from_secs(10),
    )?;
    Ok(FailoverCluster {
        found,
        script: path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_restarts_each_node_daemonized_in_its_dir() {
        let s = script(
            Path::new("/tmp/c"),
            Path::new("/usr/bin/redis-cli"),
            Path::new("/usr/bin/redis-server"),
            &[7001, 7002],
        );
        assert!(s.starts_with("#!/bin/sh\nCLUSTER_DIR='/tmp/c'\n"), "{s}");
        assert!(
            s.contains("7001) cd '/tmp/c/7001' && '/usr/bin/redis-server' '--port' '7001'"),
            "{s}"
        );
        assert!(s.contains("'--cluster-enabled' 'yes'"), "{s}");
        assert!(
            s.contains("'--daemonize' 'yes' '--pidfile' '/tmp/c/7002/redis.pid'"),
            "{s}"
        );
        assert!(s.contains("kill -KILL \"$ppid\""), "{s}");
    }
}
