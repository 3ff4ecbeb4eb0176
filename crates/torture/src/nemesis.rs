//! Injecting faults into the backend server: killing one runtime's connections and
//! restarting the server.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use crate::backend::Kind;
use crate::faults::client_ports;

/// The port of a `postgres://` or `redis://` URL (default 5432 / 6379).
pub fn server_port(url: &str, kind: Kind) -> u16 {
    let default = if kind == Kind::Redis { 6379 } else { 5432 };
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    host_port
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or(default)
}

/// A connection to the server that kills a runtime's connections.
pub enum Dropper {
    /// PostgreSQL: `pg_terminate_backend` by client port.
    Postgres(sqlx::PgPool),
    /// Redis: `CLIENT KILL ID` by client address, on a fresh connection each time (a
    /// server restart breaks any connection kept open).
    Redis(Box<redis::Client>),
}

impl Dropper {
    /// Connects to the server of `url` (a PostgreSQL or Redis URL without `namespace`).
    pub async fn connect(url: &str, kind: Kind) -> Result<Dropper, String> {
        match kind {
            Kind::Postgres => sqlx::postgres::PgPoolOptions::new()
                .max_connections(1)
                .acquire_timeout(Duration::from_secs(10))
                .connect_lazy(url)
                .map(Dropper::Postgres)
                .map_err(|e| format!("postgres admin connection: {e}")),
            Kind::Redis => {
                let client =
                    redis::Client::open(url).map_err(|e| format!("redis admin client: {e}"))?;
                Ok(Dropper::Redis(Box::new(client)))
            }
            Kind::Sqlite => Err("SQLite has no connections to drop".to_owned()),
        }
    }

    /// Kills the connections of process `pid` to the server on `server_port`; returns how
    /// many were killed.
    pub async fn drop_connections(&mut self, pid: u32, server_port: u16) -> Result<u64, String> {
        let ports: BTreeSet<u16> = client_ports(pid, server_port).into_iter().collect();
        if ports.is_empty() {
            return Ok(0);
        }
        match self {
            Dropper::Postgres(pool) => {
                let ports: Vec<i32> = ports.iter().map(|p| i32::from(*p)).collect();
                sqlx::query_scalar::<_, i64>(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                     WHERE client_port = ANY($1) AND pid <> pg_backend_pid()",
                )
                .bind(ports)
                .fetch_one(&*pool)
                .await
                .map(|n| u64::try_from(n).unwrap_or(0))
                .map_err(|e| format!("pg_terminate_backend: {e}"))
            }
            Dropper::Redis(client) => {
                let conn = &mut client
                    .get_multiplexed_async_connection()
                    .await
                    .map_err(|e| format!("redis admin connection: {e}"))?;
                let list: String = redis::cmd("CLIENT")
                    .arg("LIST")
                    .query_async(conn)
                    .await
                    .map_err(|e| format!("CLIENT LIST: {e}"))?;
                let mut killed = 0;
                for id in client_ids(&list, &ports) {
                    let n: i64 = redis::cmd("CLIENT")
                        .arg("KILL")
                        .arg("ID")
                        .arg(id)
                        .query_async(conn)
                        .await
                        .map_err(|e| format!("CLIENT KILL ID {id}: {e}"))?;
                    killed += u64::try_from(n).unwrap_or(0);
                }
                Ok(killed)
            }
        }
    }
}

/// The ids of the clients in a `CLIENT LIST` reply whose address port is in `ports`.
pub fn client_ids(list: &str, ports: &BTreeSet<u16>) -> Vec<u64> {
    list.lines()
        .filter_map(|line| {
            let mut id = None;
            let mut port = None;
            for field in line.split_whitespace() {
                if let Some(v) = field.strip_prefix("id=") {
                    id = v.parse::<u64>().ok();
                } else if let Some(v) = field.strip_prefix("addr=") {
                    port = v.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok());
                }
            }
            match (id, port) {
                (Some(id), Some(p)) if ports.contains(&p) => Some(id),
                _ => None,
            }
        })
        .collect()
}

/// Runs the server restart command with `sh -c`, output appended to `log`; fails after
/// two minutes.
pub async fn restart(command: &str, log: &Path) -> Result<Duration, String> {
    let started = std::time::Instant::now();
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("sh -c {command:?}: {e}"))?;
    match tokio::time::timeout(Duration::from_secs(120), child.wait()).await {
        Ok(Ok(s)) if s.success() => Ok(started.elapsed()),
        Ok(Ok(s)) => Err(format!(
            "restart command exited with {s} (see {})",
            log.display()
        )),
        Ok(Err(e)) => Err(format!("restart command: {e}")),
        Err(_) => Err("restart command took over 2 minutes".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_of_urls_and_client_list_parsing() {
        assert_eq!(
            server_port("postgres://postgres@127.0.0.1:5433/test", Kind::Postgres),
            5433
        );
        assert_eq!(server_port("postgres://h/db", Kind::Postgres), 5432);
        assert_eq!(server_port("redis://127.0.0.1:7001", Kind::Redis), 7001);
        assert_eq!(server_port("redis://u:p@h/0", Kind::Redis), 6379);
        let list = "id=3 addr=127.0.0.1:40001 laddr=127.0.0.1:6379 fd=8 name=\n\
                    id=4 addr=127.0.0.1:40002 laddr=127.0.0.1:6379 fd=9 name=\n";
        assert_eq!(client_ids(list, &[40002].into()), vec![4]);
    }
}
