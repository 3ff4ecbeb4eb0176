//! The failover modes (`--replication`), their setup on the server, and the fault's
//! injection through `--failover-cmd`.

use std::path::Path;
use std::time::Duration;

use super::spread;
use super::wait::WAIT_ENV;
use crate::backend::Kind;
use crate::faults::Fault;
use crate::nemesis;
use crate::values;

/// What the replicas promise (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// A write is acknowledged once a replica has it.
    Sync,
    /// A write is acknowledged before any replica has it (negative control).
    Async,
    /// Redis: a primary refuses writes without a replica that acknowledged within 1 s.
    MinReplicas,
    /// Redis: the library waits for one replica after every write (`WAIT`).
    Wait,
}

impl Replication {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Replication::Sync => "sync",
            Replication::Async => "async",
            Replication::MinReplicas => "min-replicas",
            Replication::Wait => "wait",
        }
    }

    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "sync" => Ok(Replication::Sync),
            "async" => Ok(Replication::Async),
            "min-replicas" => Ok(Replication::MinReplicas),
            "wait" => Ok(Replication::Wait),
            _ => Err("sync, async (PostgreSQL); async, min-replicas, wait (Redis)".to_owned()),
        }
    }
}

/// The failover options of a run.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Fails the server over; run with the lag (ms) as its argument (needed for the
    /// `failover` fault; cargo xtask torture starts a pair / cluster with one).
    #[arg(long = "failover-cmd", value_name = "CMD")]
    pub cmd: Option<String>,
    /// PostgreSQL: sync (default), a commit returns once the standby has it; async:
    /// NEGATIVE CONTROL, acknowledged writes of the lag are lost. Redis Cluster: async
    /// (default), min-replicas (min-replicas-to-write 1), wait (the library sends WAIT 1
    /// after every write).
    #[arg(long, value_name = "MODE", value_parser = Replication::parse)]
    pub replication: Option<Replication>,
    /// on: hold the replica back for up to one lease before the primary dies; off: fail
    /// over at once.
    #[arg(long = "failover-lag", value_name = "on|off", default_value = "on",
          action = clap::ArgAction::Set, value_parser = values::on_off)]
    pub lag: bool,
}

impl Options {
    /// The mode in force on `kind`: the one asked for, else sync on PostgreSQL and async on
    /// Redis; a mode the backend does not have is an error.
    pub fn mode(&self, kind: Kind) -> Result<Replication, String> {
        use Replication::*;
        match (kind, self.replication) {
            (Kind::Postgres, None) => Ok(Sync),
            (Kind::Redis, None) => Ok(Async),
            (Kind::Postgres, Some(m @ (Sync | Async))) => Ok(m),
            (Kind::Redis, Some(m @ (Async | MinReplicas | Wait))) => Ok(m),
            (k, Some(m)) => Err(format!(
                "--replication {} does not apply to {}",
                m.name(),
                k.name()
            )),
            (k, None) => Err(format!("{} has no replicas to fail over to", k.name())),
        }
    }

    /// Environment of the runtime processes: [`WAIT_ENV`] in `wait` mode.
    pub fn runtime_env(&self) -> Vec<(&'static str, String)> {
        match self.replication {
            Some(Replication::Wait) => vec![(WAIT_ENV, "1".to_owned())],
            _ => Vec::new(),
        }
    }
}

/// Sets the replication mode on the current primary (every node of a cluster) and waits
/// until new sessions see it.
pub async fn apply(o: &Options, url: &str, kind: Kind, namespace: &str) -> Result<(), String> {
    match (kind, o.mode(kind)?) {
        (Kind::Postgres, mode) => postgres_mode(url, namespace, mode).await,
        (Kind::Redis, mode) => redis_mode(url, mode).await,
        _ => Ok(()),
    }
}

/// `CONFIG SET min-replicas-to-write` (1 for `min-replicas`, else 0) and
/// `min-replicas-max-lag 1` on every node `CLUSTER NODES` lists as connected.
async fn redis_mode(url: &str, mode: Replication) -> Result<(), String> {
    let min = if mode == Replication::MinReplicas {
        1
    } else {
        0
    };
    let first = spread::first_node(url)?;
    let nodes: String = redis_query(first, redis::cmd("CLUSTER").arg("NODES")).await?;
    for line in nodes.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 8 || fields[2].contains("fail") || fields[7] != "connected" {
            continue;
        }
        let addr = fields[1].split('@').next().unwrap_or(fields[1]);
        let _: String = redis_query(
            addr,
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("min-replicas-to-write")
                .arg(min)
                .arg("min-replicas-max-lag")
                .arg(1),
        )
        .await?;
    }
    Ok(())
}

async fn redis_query<T: redis::FromRedisValue>(addr: &str, cmd: &redis::Cmd) -> Result<T, String> {
    let client =
        redis::Client::open(format!("redis://{addr}")).map_err(|e| format!("{addr}: {e}"))?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| format!("{addr}: {e}"))?;
    cmd.query_async(&mut conn)
        .await
        .map_err(|e| format!("{addr}: {e}"))
}

async fn postgres_mode(url: &str, namespace: &str, mode: Replication) -> Result<(), String> {
    let names = match mode {
        Replication::Sync => "*",
        _ => "",
    };
    // The backend's pool connects only to the writable host of the URL.
    let backend = lease::postgres::PostgresBackend::connect(
        lease::postgres::PostgresConfig::new(url)
            .schema(namespace)
            .max_connections(1),
    )
    .await
    .map_err(|e| format!("replication mode: {e}"))?;
    let pool = backend.pool();
    let set = format!("ALTER SYSTEM SET synchronous_standby_names = '{names}'");
    sqlx::raw_sql(sqlx::AssertSqlSafe(set))
        .execute(pool)
        .await
        .map_err(|e| format!("ALTER SYSTEM: {e}"))?;
    sqlx::query("SELECT pg_reload_conf()")
        .execute(pool)
        .await
        .map_err(|e| format!("pg_reload_conf: {e}"))?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now: Result<String, _> =
            sqlx::query_scalar("SELECT current_setting('synchronous_standby_names')")
                .fetch_one(pool)
                .await;
        match now {
            Ok(v) if v == names => break,
            _ if tokio::time::Instant::now() >= deadline => {
                return Err(format!(
                    "synchronous_standby_names is not {names:?} 10 s after the reload"
                ));
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    backend.close().await;
    Ok(())
}

/// Runs one failover: the script with the lag, then the mode again on the new primary.
/// Returns how long the script took.
pub async fn inject(
    o: &Options,
    f: &Fault,
    dir: &Path,
    url: &str,
    kind: Kind,
    namespace: &str,
) -> Result<Duration, String> {
    let cmd = o.cmd.as_deref().ok_or("no --failover-cmd")?;
    let lag = if o.lag { f.hold.as_millis() } else { 0 };
    let line = match kind {
        // The cluster script fails over the primary serving one of these keys' slots, taking
        // them in turn (its own count of failovers): the home keys (the token counter among
        // them), then each partition's. One partition: every key of the namespace is in the
        // home slot; more: the namespace's partitions are spread over every primary
        // (`spread_namespace`), so each failover hits the run.
        Kind::Redis => {
            let keys: Vec<String> = spread::failover_keys(namespace, spread::partitions(url))
                .iter()
                .map(|k| format!("'{k}'"))
                .collect();
            format!("{cmd} {lag} {}", keys.join(" "))
        }
        _ => format!("{cmd} {lag}"),
    };
    let took = nemesis::restart(&line, &dir.join("failover.log")).await?;
    apply(o, url, kind, namespace).await?;
    Ok(took)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The failover options alone on a command line.
    #[derive(Debug, clap::Parser)]
    struct Line {
        #[command(flatten)]
        o: Options,
    }

    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        use clap::Parser;
        Line::try_parse_from(std::iter::once("t").chain(args.iter().copied())).map(|l| l.o)
    }

    #[test]
    fn options_parse_with_defaults() {
        let o = parse(&["--replication", "async", "--failover-cmd", "sh f"]).expect("parse");
        assert_eq!(o.mode(Kind::Postgres), Ok(Replication::Async));
        assert!(o.mode(Kind::Sqlite).is_err());
        assert_eq!(o.cmd.as_deref(), Some("sh f"));
        assert!(o.lag);
        assert!(parse(&["--replication", "maybe"]).is_err());
        let o = parse(&["--replication=wait", "--failover-lag", "off"]).expect("wait");
        assert!(!o.lag);
        assert!(o.mode(Kind::Postgres).is_err());
        assert_eq!(o.mode(Kind::Redis), Ok(Replication::Wait));
        assert_eq!(o.runtime_env(), [(WAIT_ENV, "1".to_owned())]);
        assert!(parse(&["--failover-lag", "maybe"]).is_err());
    }
}
