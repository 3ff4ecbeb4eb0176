//! Server-side statement counters for the idle-cost rows, on a store nobody else uses, so
//! the count is the dispatcher's own:
//!
//! - PostgreSQL: a private database (`CREATE DATABASE ... TEMPLATE template0`, dropped
//!   afterwards) whose `pg_stat_database.xact_commit + xact_rollback` is read from a
//!   connection to the configured database (so the reads do not count themselves). Every
//!   statement outside an explicit transaction is one transaction. PostgreSQL 15 flushes a
//!   backend's counters when it goes idle at most once a second, so a window's count can
//!   be off by the statements of its last second.
//! - Redis: a private `redis-server` on a free loopback port (no persistence), whose
//!   `INFO commandstats` calls are summed, less the `INFO` calls of the bench itself. When
//!   no `redis-server` binary can be started, the shared server's counters are read
//!   instead (they then include every other client's commands: noted in the row).

use std::process::Stdio;
use std::time::Duration;

use sqlx::Row;

use crate::error::{BenchError, Result, raw};

/// A private PostgreSQL database.
pub struct PrivateDatabase {
    admin: sqlx::PgPool,
    /// Its name.
    pub name: String,
    /// A URL to it.
    pub url: String,
}

/// `url` with its database path replaced by `db`.
pub fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority_start..].find('/') {
        Some(slash) => &base[..authority_start + slash],
        None => base,
    };
    match query {
        Some(q) => format!("{base}/{db}?{q}"),
        None => format!("{base}/{db}"),
    }
}

impl PrivateDatabase {
    /// Creates a fresh database on the server of `url`.
    pub async fn create(url: &str) -> Result<Self> {
        let admin = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(url)
            .await
            .map_err(|e| raw("postgres", "connect", e))?;
        let name = format!(
            "bench_idle_{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "CREATE DATABASE \"{name}\" TEMPLATE template0"
        )))
        .execute(&admin)
        .await
        .map_err(|e| raw("postgres", "create database", e))?;
        let url = with_database(url, &name);
        Ok(PrivateDatabase { admin, name, url })
    }

    /// Transactions committed or rolled back in the database so far.
    pub async fn transactions(&self) -> Result<u64> {
        let row = sqlx::query(
            "SELECT (xact_commit + xact_rollback)::bigint FROM pg_stat_database WHERE datname = $1",
        )
        .bind(&self.name)
        .fetch_one(&self.admin)
        .await
        .map_err(|e| raw("postgres", "pg_stat_database", e))?;
        let n: i64 = row
            .try_get(0)
            .map_err(|e| raw("postgres", "pg_stat_database", e))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Drops the database (and every connection still on it).
    pub async fn drop(self) -> Result<()> {
        let r = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
            self.name
        )))
        .execute(&self.admin)
        .await
        .map(|_| ())
        .map_err(|e| raw("postgres", "drop database", e));
        self.admin.close().await;
        r
    }
}

/// A Redis server whose command counters the bench reads.
pub struct CountedRedis {
    child: Option<tokio::process::Child>,
    /// Its URL.
    pub url: String,
    conn: redis::aio::MultiplexedConnection,
}

/// The options of a throwaway redis-server the bench starts: nothing kept on disk,
/// protected mode on (it listens on loopback only).
pub const EPHEMERAL_REDIS: [&str; 6] = [
    "--save",
    "",
    "--appendonly",
    "no",
    "--protected-mode",
    "yes",
];

impl CountedRedis {
    /// A private server, or the shared one at `shared_url` when none can be started.
    pub async fn start(shared_url: &str) -> Result<Self> {
        if let Some(s) = Self::private().await {
            return Ok(s);
        }
        Self::connect(None, shared_url.to_owned()).await
    }

    /// True when the counters are the bench's alone.
    pub fn private_server(&self) -> bool {
        self.child.is_some()
    }

    async fn private() -> Option<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let child = tokio::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(EPHEMERAL_REDIS)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .ok()?;
        let url = format!("redis://127.0.0.1:{port}");
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            if let Ok(s) = Self::connect(None, url.clone()).await {
                return Some(CountedRedis {
                    child: Some(child),
                    ..s
                });
            }
        }
        None
    }

    async fn connect(child: Option<tokio::process::Child>, url: String) -> Result<Self> {
        let client = redis::Client::open(url.as_str()).map_err(|e| raw("redis", "connect", e))?;
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| raw("redis", "connect", e))?;
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .map_err(|e| raw("redis", "ping", e))?;
        Ok(CountedRedis { child, url, conn })
    }

    /// Commands the server ran so far, by command (`INFO` itself left out).
    pub async fn commands(&self) -> Result<Vec<(String, u64)>> {
        let mut conn = self.conn.clone();
        let text: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut conn)
            .await
            .map_err(|e| raw("redis", "info", e))?;
        Ok(parse_commandstats(&text))
    }

    /// Stops a private server.
    pub async fn stop(mut self) -> Result<()> {
        if let Some(mut c) = self.child.take() {
            c.start_kill()
                .map_err(|e| BenchError::Setup(format!("stop redis-server: {e}")))?;
            let _ = c.wait().await;
        }
        Ok(())
    }
}

/// `cmdstat_evalsha:calls=12,usec=...` lines -> (command, calls), without `info`.
pub fn parse_commandstats(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let (name, rest) = l.trim().strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .split(',')
                .find_map(|kv| kv.strip_prefix("calls="))?
                .parse()
                .ok()?;
            (name != "info").then(|| (name.to_owned(), calls))
        })
        .collect()
}

/// `after - before`, command by command, without zero entries.
pub fn command_delta(before: &[(String, u64)], after: &[(String, u64)]) -> Vec<(String, u64)> {
    after
        .iter()
        .filter_map(|(name, n)| {
            let was = before
                .iter()
                .find(|(b, _)| b == name)
                .map_or(0, |(_, c)| *c);
            let d = n.saturating_sub(was);
            (d > 0).then(|| (name.clone(), d))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_get_the_private_database() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/test", "b1"),
            "postgres://postgres@127.0.0.1:5432/b1"
        );
        assert_eq!(
            with_database("postgres://u@h:1/test?sslmode=disable", "b1"),
            "postgres://u@h:1/b1?sslmode=disable"
        );
        assert_eq!(with_database("postgres://h", "b1"), "postgres://h/b1");
    }

    #[test]
    fn commandstats_parse_and_subtract() {
        let before = parse_commandstats(
            "# Commandstats\r\ncmdstat_evalsha:calls=10,usec=5,usec_per_call=0.5\r\n\
             cmdstat_info:calls=3,usec=1\r\n",
        );
        assert_eq!(before, vec![("evalsha".to_owned(), 10)]);
        let after = parse_commandstats(
            "cmdstat_evalsha:calls=12,usec=5\r\ncmdstat_ping:calls=1,usec=1\r\n",
        );
        assert_eq!(
            command_delta(&before, &after),
            vec![("evalsha".to_owned(), 2), ("ping".to_owned(), 1)]
        );
    }
}
