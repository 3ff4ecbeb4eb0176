//! The `failover` fault (issue 14 item 2): the server's primary dies and its replica takes
//! over, while the runtimes keep claiming and writing through a URL that names every node
//! (PostgreSQL `h1,h2?target_session_attrs=read-write`, a `redis+cluster://` URL).
//!
//! The controller runs `--failover-cmd` (a throwaway pair's or cluster's script, started by
//! `cargo xtask torture`) with the lag in ms as its one argument: the script first holds
//! the replica back for that long (as a slow link would), then kills the primary, promotes
//! the replica and rebuilds a new replica. What replication promises decides whether the
//! history checker finds anything:
//!
//! | `--replication` | PostgreSQL | expected |
//! |---|---|---|
//! | `sync` | `synchronous_standby_names = '*'`: a commit returns once the standby has it | 0 violations |
//! | `async` | `synchronous_standby_names = ''`: acknowledged commits of the lag are lost | NEGATIVE CONTROL: violations |
//!
//! The mode is set on the current primary (`ALTER SYSTEM`, `pg_reload_conf()`) at the start
//! and again after every failover (the promoted standby still has the pair's own setting).

use std::path::Path;
use std::time::Duration;

use crate::args::Flags;
use crate::backend::Kind;
use crate::faults::Fault;
use crate::nemesis;

/// What the replicas promise (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// A write is acknowledged once a replica has it.
    Sync,
    /// A write is acknowledged before any replica has it (negative control).
    Async,
}

impl Replication {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Replication::Sync => "sync",
            Replication::Async => "async",
        }
    }

    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "sync" => Ok(Replication::Sync),
            "async" => Ok(Replication::Async),
            other => Err(format!("--replication {other:?}: sync or async")),
        }
    }
}

/// The failover options of a run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The script that fails the server over (`None`: the fault is skipped).
    pub cmd: Option<String>,
    /// What the replicas promise.
    pub replication: Replication,
    /// Whether the replica is held back for the fault's drawn lag before the primary dies.
    pub lag: bool,
}

impl Options {
    /// Reads `--failover-cmd`, `--replication`, `--failover-lag`.
    pub fn parse(f: &mut Flags) -> Result<Self, String> {
        let lag = match f.take("failover-lag").as_deref() {
            None | Some("on") => true,
            Some("off") => false,
            Some(v) => return Err(format!("--failover-lag {v:?}: on or off")),
        };
        Ok(Options {
            cmd: f.take("failover-cmd"),
            replication: Replication::parse(
                &f.take("replication").unwrap_or_else(|| "sync".into()),
            )?,
            lag,
        })
    }
}

/// Usage lines of the failover options.
pub const USAGE: &str = "\
  --failover-cmd CMD   fails the server over; run with the lag (ms) as its argument (needed
                       for `failover`; cargo xtask torture starts a pair / cluster with one)
  --replication MODE   sync (default): a write is acknowledged once a replica has it;
                       async: NEGATIVE CONTROL, acknowledged writes of the lag are lost
  --failover-lag on|off  hold the replica back for up to one lease before the primary dies
                       (on, default) or fail over at once";

/// Sets the replication mode on the current primary and waits until new sessions see it.
pub async fn apply(o: &Options, url: &str, kind: Kind, namespace: &str) -> Result<(), String> {
    match kind {
        Kind::Postgres => postgres_mode(url, namespace, o.replication).await,
        _ => Ok(()),
    }
}

async fn postgres_mode(url: &str, namespace: &str, mode: Replication) -> Result<(), String> {
    let names = match mode {
        Replication::Sync => "*",
        Replication::Async => "",
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
    let took = nemesis::restart(&format!("{cmd} {lag}"), &dir.join("failover.log")).await?;
    apply(o, url, kind, namespace).await?;
    Ok(took)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_with_defaults() {
        let args: Vec<String> = ["--replication", "async", "--failover-cmd", "sh f"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let mut f = Flags::new(&args).expect("flags");
        let o = Options::parse(&mut f).expect("parse");
        assert_eq!(o.replication, Replication::Async);
        assert_eq!(o.cmd.as_deref(), Some("sh f"));
        assert!(o.lag);
        let mut f = Flags::new(&["--replication".to_owned(), "maybe".to_owned()]).expect("flags");
        assert!(Options::parse(&mut f).is_err());
    }
}
