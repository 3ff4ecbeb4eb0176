//! A Redis Cluster for lease-redis's cluster tests: `LEASE_REDIS_CLUSTER_URL`
//! when set, else a throwaway cluster of six `redis-server` processes on loopback (three
//! primaries, each with one replica) created with `redis-cli --cluster create`, stopped and
//! removed when its [`Found`] drops.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::found::Found;
use super::workdir::{log_tail, temp_dir};
use super::{probe, redis::server_args, url};
use crate::cleanup;
use crate::process::{run_ok, which};
use lease_testserver::env_url;

/// The variable naming the cluster (`redis+cluster://host:port,host:port`); read by
/// lease-redis's tests.
pub const ENV: &str = lease_testserver::REDIS_CLUSTER_ENV;
/// Primaries of the throwaway cluster; each gets one replica.
const PRIMARIES: usize = 3;
/// Cluster bus ports are the client port plus this.
const BUS_OFFSET: u16 = 10000;

/// Finds a cluster: `LEASE_REDIS_CLUSTER_URL` (its first node must answer `PING`), else a
/// throwaway one from the local `redis-server` and `redis-cli`.
pub fn discover() -> Result<Found, String> {
    if let Some(url) = env_url(ENV) {
        let first = url
            .strip_prefix("redis+cluster://")
            .and_then(|rest| rest.split(',').next())
            .map(|node| format!("redis://{node}"))
            .ok_or_else(|| format!("{ENV} must be redis+cluster://host:port[,host:port...]"))?;
        if let Some(ep) = url::endpoint(&first, 6379) {
            probe::redis(&ep.host, ep.port, Duration::from_secs(5))
                .map_err(|e| format!("{ENV}={} does not answer: {e}", url::redact(&url)))?;
        }
        return Ok(Found {
            url,
            how: ENV.to_owned(),
            workdir: None,
            _guard: None,
        });
    }
    throwaway_cluster().map_err(|e| format!("{ENV} not set; a throwaway cluster: {e}"))
}

/// The extra arguments that make a throwaway server a cluster node.
pub fn cluster_args() -> [&'static str; 6] {
    [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        "2000",
    ]
}

/// Ports for `n` nodes whose client and bus ports are all free.
fn free_ports(n: usize) -> Result<Vec<u16>, String> {
    let mut ports = Vec::with_capacity(n);
    for _ in 0..200 {
        if ports.len() == n {
            break;
        }
        let port = probe::free_port()?;
        let bus_free = port
            .checked_add(BUS_OFFSET)
            .is_some_and(|bus| std::net::TcpListener::bind(("127.0.0.1", bus)).is_ok());
        if bus_free && !clashes(port, &ports) {
            ports.push(port);
        }
    }
    if ports.len() < n {
        return Err(format!("found only {} of {n} free port pairs", ports.len()));
    }
    Ok(ports)
}

/// Whether `port` or its bus port is one of `chosen`'s client or bus ports (a node's bus
/// port is another's client port: seen as "bind: Address already in use" on a node).
fn clashes(port: u16, chosen: &[u16]) -> bool {
    let bus = |p: u16| p.checked_add(BUS_OFFSET);
    chosen
        .iter()
        .any(|&c| c == port || bus(c) == Some(port) || bus(port) == Some(c))
}

/// The running nodes, killed and their dir removed by the guard.
type Nodes = Arc<Mutex<Vec<Child>>>;

/// Starts one node on `port` in `dir`.
fn start_node(binary: &Path, port: u16, dir: &Path) -> Result<Child, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Command::new(binary)
        .args(server_args(port, dir))
        .args(cluster_args())
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))
}

/// Starts six nodes, creates the cluster and waits until every node reports
/// `cluster_state:ok`.
pub fn throwaway_cluster() -> Result<Found, String> {
    let server = which("redis-server").ok_or("no redis-server on PATH")?;
    let cli = which("redis-cli").ok_or("no redis-cli on PATH")?;
    let started = Instant::now();
    let ports = free_ports(PRIMARIES * 2)?;
    let dir = temp_dir("redis-cluster")?;
    let nodes: Nodes = Arc::new(Mutex::new(Vec::new()));
    let guard = {
        let (nodes, dir) = (Arc::clone(&nodes), dir.clone());
        cleanup::register(
            format!(
                "stop the throwaway redis cluster on ports {ports:?}, remove {}",
                dir.display()
            ),
            move || {
                for mut node in nodes.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
                    let _ = node.kill();
                    let _ = node.wait();
                }
                kill_restarted(&dir);
                let _ = std::fs::remove_dir_all(&dir);
            },
        )
    };
    for &port in &ports {
        let child = start_node(&server, port, &node_dir(&dir, port))?;
        nodes.lock().unwrap_or_else(|e| e.into_inner()).push(child);
    }
    for &port in &ports {
        let log = node_dir(&dir, port).join("redis.log");
        probe::wait_until(
            Duration::from_secs(30),
            || probe::redis("127.0.0.1", port, Duration::from_secs(2)),
            || alive(&nodes, &log),
        )?;
    }
    let mut create = Command::new(&cli);
    create.arg("--cluster").arg("create");
    create.args(ports.iter().map(|p| format!("127.0.0.1:{p}")));
    create.args(["--cluster-replicas", "1", "--cluster-yes"]);
    run_ok(&mut create, Duration::from_secs(60))?;
    for &port in &ports {
        probe::wait_until(
            Duration::from_secs(60),
            || cluster_ok(&cli, port),
            || alive(&nodes, &node_dir(&dir, port).join("redis.log")),
        )?;
    }
    let hosts: Vec<String> = ports[..PRIMARIES]
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect();
    Ok(Found {
        url: format!("redis+cluster://{}", hosts.join(",")),
        how: format!(
            "a throwaway cluster of {} nodes ({PRIMARIES} primaries, one replica each) of {} \
             in {}, ready in {:.1}s",
            ports.len(),
            server.display(),
            dir.display(),
            started.elapsed().as_secs_f64()
        ),
        workdir: Some(dir),
        _guard: Some(guard),
    })
}

/// Kills the nodes a failover script started again, daemonized with a `redis.pid` in their
/// node dir ([`super::cluster_failover`]); the cluster's own children are killed before.
fn kill_restarted(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if let Ok(pid) = std::fs::read_to_string(entry.path().join("redis.pid")) {
            let _ = Command::new("kill").args(["-KILL", pid.trim()]).status();
        }
    }
}

fn node_dir(dir: &Path, port: u16) -> PathBuf {
    dir.join(port.to_string())
}

/// Fails when a node has exited, with the tail of `log`.
fn alive(nodes: &Nodes, log: &Path) -> Result<(), String> {
    let mut nodes = nodes.lock().unwrap_or_else(|e| e.into_inner());
    for node in nodes.iter_mut() {
        if let Ok(Some(status)) = node.try_wait() {
            return Err(format!(
                "a cluster node exited ({status}){}",
                log_tail(log, 10)
            ));
        }
    }
    Ok(())
}

/// `Ok` once the node on `port` reports `cluster_state:ok` and knows all 16384 slots.
fn cluster_ok(cli: &Path, port: u16) -> Result<(), String> {
    let info = run_ok(
        Command::new(cli).args(["-p", &port.to_string(), "cluster", "info"]),
        Duration::from_secs(5),
    )?;
    interpret_cluster_info(&info)
}

/// Checks a `CLUSTER INFO` reply: state ok with every slot assigned and served.
pub fn interpret_cluster_info(info: &str) -> Result<(), String> {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    match (field("cluster_state"), field("cluster_slots_ok")) {
        (Some("ok"), Some("16384")) => Ok(()),
        (state, slots) => Err(format!(
            "cluster_state {}, cluster_slots_ok {}",
            state.unwrap_or("?"),
            slots.unwrap_or("?")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_whose_bus_is_another_nodes_client_port_clashes() {
        assert!(clashes(36559, &[46559]), "its bus port is taken by a node");
        assert!(clashes(46559, &[36559]), "it is a node's bus port");
        assert!(clashes(40000, &[40000]));
        assert!(!clashes(40001, &[40000, 50002]));
    }

    #[test]
    fn cluster_info_must_be_ok_with_every_slot() {
        assert_eq!(
            interpret_cluster_info("cluster_state:ok\r\ncluster_slots_ok:16384\r\n"),
            Ok(())
        );
        assert!(interpret_cluster_info("cluster_state:fail\r\ncluster_slots_ok:16384").is_err());
        assert!(interpret_cluster_info("cluster_state:ok\r\ncluster_slots_ok:0").is_err());
        assert!(interpret_cluster_info("").is_err());
    }

    /// Starts a real throwaway cluster, checks every primary answers, stops it, and checks
    /// the ports are closed and the dir gone. Needs redis-server and redis-cli, as CI has.
    #[test]
    fn throwaway_cluster_starts_and_is_removed() {
        let found = throwaway_cluster().expect("throwaway cluster");
        eprintln!("{}", found.how);
        let hosts = found.url.strip_prefix("redis+cluster://").expect("scheme");
        let ports: Vec<u16> = hosts
            .split(',')
            .map(|h| {
                h.rsplit(':')
                    .next()
                    .and_then(|p| p.parse().ok())
                    .expect("port")
            })
            .collect();
        assert_eq!(ports.len(), PRIMARIES);
        for &port in &ports {
            probe::redis("127.0.0.1", port, Duration::from_secs(5)).expect("PONG");
        }
        let dir = found.workdir.clone().expect("workdir");
        drop(found);
        assert!(!dir.exists(), "{} left behind", dir.display());
        for port in ports {
            assert!(probe::redis("127.0.0.1", port, Duration::from_secs(2)).is_err());
        }
    }
}
