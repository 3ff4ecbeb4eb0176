//! The row's own throwaway servers: `redis-server` processes on free loopback ports, no
//! persistence, each in a temporary directory: one standalone server, or a cluster of k
//! primaries without replicas (slots split in node order, [`super::slots::range`];
//! formed with `CLUSTER ADDSLOTSRANGE`, `CLUSTER SET-CONFIG-EPOCH` and `CLUSTER MEET`, since
//! `redis-cli --cluster create` wants at least three primaries). Stopped (and their
//! directory removed) by [`Servers::stop`], or killed on drop.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use redis::aio::MultiplexedConnection;

use super::slots;
use crate::anchors::redis_connect;
use crate::error::{BenchError, Result};

/// How long a server or the cluster may take to be ready.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// One server set: a standalone server or a cluster's primaries.
pub struct Servers {
    children: Vec<tokio::process::Child>,
    ports: Vec<u16>,
    cluster: bool,
    dir: PathBuf,
}

fn setup(what: impl std::fmt::Display) -> BenchError {
    BenchError::Setup(format!("shards: {what}"))
}

/// A free loopback port whose cluster bus port (+10000) is free too.
fn free_port() -> Result<u16> {
    for _ in 0..100 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(setup)?;
        let port = listener.local_addr().map_err(setup)?.port();
        if port < 55_000 && std::net::TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return Ok(port);
        }
    }
    Err(setup("no free port pair"))
}

impl Servers {
    /// Starts a standalone server (`nodes == 0`) or a cluster of `nodes` primaries.
    pub async fn start(nodes: usize) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!(
            "lease-bench-shards-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        ));
        std::fs::create_dir_all(&dir).map_err(|e| setup(format!("{}: {e}", dir.display())))?;
        let mut servers = Servers {
            children: Vec::new(),
            ports: Vec::new(),
            cluster: nodes > 0,
            dir,
        };
        for _ in 0..nodes.max(1) {
            servers.spawn()?;
        }
        let mut conns = Vec::new();
        for &port in &servers.ports {
            conns.push(connect_when_up(port).await?);
        }
        if servers.cluster {
            form_cluster(&servers.ports, &mut conns).await?;
        }
        Ok(servers)
    }

    fn spawn(&mut self) -> Result<()> {
        let port = free_port()?;
        let mut cmd = tokio::process::Command::new("redis-server");
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(crate::wake::servers::EPHEMERAL_REDIS)
            .arg("--dir")
            .arg(&self.dir);
        if self.cluster {
            cmd.args(["--cluster-enabled", "yes", "--cluster-config-file"])
                .arg(format!("nodes-{port}.conf"));
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| setup(format!("start redis-server: {e}")))?;
        self.children.push(child);
        self.ports.push(port);
        Ok(())
    }

    /// The URL the library opens: `redis://` for the standalone server,
    /// `redis+cluster://` naming every primary for a cluster; `?partitions=N` when N > 1.
    pub fn url(&self, partitions: u16) -> String {
        let nodes: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let scheme = if self.cluster {
            "redis+cluster"
        } else {
            "redis"
        };
        let query = if partitions > 1 {
            format!("?partitions={partitions}")
        } else {
            String::new()
        };
        format!("{scheme}://{}{query}", nodes.join(","))
    }

    /// A connection to each server (the cost probe's).
    pub async fn connections(&self) -> Result<Vec<MultiplexedConnection>> {
        let mut conns = Vec::new();
        for port in &self.ports {
            conns.push(redis_connect(&format!("redis://127.0.0.1:{port}")).await?);
        }
        Ok(conns)
    }

    /// Stops every server and removes the directory.
    pub async fn stop(mut self) {
        for child in &mut self.children {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for Servers {
    /// The children are killed on drop (`kill_on_drop`); their directory goes too.
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A connection to the server on `port` once it answers `PING` (polled every 20 ms).
async fn connect_when_up(port: u16) -> Result<MultiplexedConnection> {
    let url = format!("redis://127.0.0.1:{port}");
    let deadline = tokio::time::Instant::now() + READY_WITHIN;
    loop {
        if let Ok(mut conn) = redis_connect(&url).await {
            let pong: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut conn).await;
            if pong.is_ok() {
                return Ok(conn);
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(setup(format!("redis-server on {port} not up within 30 s")));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn command(conn: &mut MultiplexedConnection, cmd: &redis::Cmd, what: &str) -> Result<()> {
    cmd.query_async::<redis::Value>(conn)
        .await
        .map(|_| ())
        .map_err(|e| setup(format!("{what}: {e}")))
}

/// Gives node i its slot range and config epoch i + 1, introduces every node to the first,
/// and waits until every node reports `cluster_state:ok` with all nodes known.
async fn form_cluster(ports: &[u16], conns: &mut [MultiplexedConnection]) -> Result<()> {
    let n = ports.len();
    for (i, conn) in conns.iter_mut().enumerate() {
        let (lo, hi) = slots::range(i, n);
        let mut add = redis::cmd("CLUSTER");
        add.arg("ADDSLOTSRANGE").arg(lo).arg(hi);
        command(conn, &add, "CLUSTER ADDSLOTSRANGE").await?;
        let mut epoch = redis::cmd("CLUSTER");
        epoch.arg("SET-CONFIG-EPOCH").arg(i + 1);
        command(conn, &epoch, "CLUSTER SET-CONFIG-EPOCH").await?;
    }
    for &port in &ports[1..] {
        let mut meet = redis::cmd("CLUSTER");
        meet.arg("MEET").arg("127.0.0.1").arg(port);
        command(&mut conns[0], &meet, "CLUSTER MEET").await?;
    }
    let deadline = tokio::time::Instant::now() + READY_WITHIN;
    let want = format!("cluster_known_nodes:{n}");
    loop {
        let mut ready = true;
        for conn in conns.iter_mut() {
            let info: String = redis::cmd("CLUSTER")
                .arg("INFO")
                .query_async(conn)
                .await
                .map_err(|e| setup(format!("CLUSTER INFO: {e}")))?;
            ready &= info.contains("cluster_state:ok") && info.contains(&want);
        }
        if ready {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(setup(format!("a {n}-node cluster not ok within 30 s")));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_every_primary_and_the_partitions() {
        let s = Servers {
            children: Vec::new(),
            ports: vec![7001, 7002],
            cluster: true,
            dir: PathBuf::from("/nonexistent"),
        };
        assert_eq!(
            s.url(6),
            "redis+cluster://127.0.0.1:7001,127.0.0.1:7002?partitions=6"
        );
        let single = Servers {
            children: Vec::new(),
            ports: vec![7003],
            cluster: false,
            dir: PathBuf::from("/nonexistent"),
        };
        assert_eq!(single.url(1), "redis://127.0.0.1:7003");
    }
}
