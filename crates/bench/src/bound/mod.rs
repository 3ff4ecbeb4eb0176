//! The database's own bound of the drain (the anchors row's "database bound"): the same
//! batched, fenced claim / acknowledge protocol the dispatcher runs, with no client work and
//! no library code, on a table or keys of its own. Each claim is one statement / script /
//! transaction that takes up to `batch` due jobs in order, skipping those another client
//! holds, raising each one's fencing token and setting its lease; each acknowledgement is
//! one statement / script / transaction that completes the claimed jobs whose token still
//! matches (and fails the run if one does not). `clients` connections loop claim ->
//! acknowledge until a claim comes back empty.
//!
//! Timed from the first claim to the last acknowledgement, in the bench process (no process
//! start, no connect), so it is the server's limit for this protocol at this batch and
//! client count, not a job queue: [`clients`] caps the connections at 8 (more only add
//! contention on this 2-core machine), SQLite runs one (a single writer).

mod postgres;
mod protocol;
mod redis;
mod sqlite;

use crate::anchors::{Cost, Probe};
use crate::args::{Kind, Options};
use crate::error::{BenchError, Result};
#[cfg(test)]
use protocol::{check_acknowledged, check_drained, timed};

/// The most client connections a bound run uses.
pub const MAX_CLIENTS: usize = 8;

/// The client connections of a bound run at concurrency `c` on `kind`.
pub fn clients(kind: Kind, c: usize) -> usize {
    match kind {
        Kind::Sqlite | Kind::Memory => 1,
        Kind::Postgres | Kind::Redis => c.clamp(1, MAX_CLIENTS),
    }
}

/// One bound run on `kind`: `jobs` admitted, drained at `batch` by [`clients`] connections;
/// jobs/s and the cost per job the probe read around the drain.
pub async fn run(
    kind: Kind,
    batch: usize,
    c: usize,
    jobs: u64,
    options: &Options,
    probe: &Probe,
) -> Result<(f64, Cost)> {
    let clients = clients(kind, c);
    let (secs, before, after) = match kind {
        Kind::Postgres => postgres::run(&options.postgres_url, batch, clients, jobs, probe).await?,
        Kind::Redis => redis::run(&options.redis_url, batch, clients, jobs, probe).await?,
        Kind::Sqlite => sqlite::run(batch, jobs).await?,
        Kind::Memory => {
            return Err(BenchError::Setup("no database bound on memory".into()));
        }
    };
    let cost = Cost::between(before, after, jobs)?;
    Ok((jobs as f64 / secs.max(1e-9), cost))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_capped_and_sqlite_has_one_writer() {
        assert_eq!(clients(Kind::Postgres, 1), 1);
        assert_eq!(clients(Kind::Postgres, 8), 8);
        assert_eq!(clients(Kind::Redis, 64), MAX_CLIENTS);
        assert_eq!(clients(Kind::Sqlite, 64), 1);
    }

    #[test]
    fn a_mismatched_acknowledgement_or_a_short_drain_fails_the_run() {
        assert!(check_acknowledged(32, 32).is_ok());
        let e = check_acknowledged(31, 32).expect_err("one token did not match");
        assert!(e.to_string().contains("31 of 32"), "{e}");
        assert!(check_drained(20_000, 20_000).is_ok());
        assert!(check_drained(19_999, 20_000).is_err());
    }

    #[tokio::test]
    async fn timed_waits_for_every_client_and_passes_on_an_error() {
        let secs = timed(3, |_| async { Ok(()) }).await.expect("ran");
        assert!(secs > 0.0);
        let failed = timed(3, |i| async move {
            if i == 2 {
                Err(BenchError::Setup("client 2".into()))
            } else {
                Ok(())
            }
        })
        .await;
        assert!(failed.is_err());
    }
}
