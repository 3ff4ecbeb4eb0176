//! What every bound run shares: the lease, the checks of each acknowledgement and of the
//! whole drain, and the timing of the clients.

use std::time::{Duration, Instant};

use crate::error::{BenchError, Result};

/// The lease every bound claim sets (the dispatcher's default, 30 s).
pub const LEASE_MS: i64 = 30_000;

/// One claimed job: its id and the token its claim issued.
pub type Claimed = (i64, i64);

/// The check every acknowledgement makes: it completed exactly the jobs it was given.
pub fn check_acknowledged(acknowledged: u64, claimed: usize) -> Result<()> {
    if acknowledged != claimed as u64 {
        return Err(BenchError::Setup(format!(
            "bound: an acknowledgement completed {acknowledged} of {claimed} claimed jobs \
             (a token did not match)"
        )));
    }
    Ok(())
}

/// The check at the end of a run: every job admitted was completed once.
pub fn check_drained(completed: u64, jobs: u64) -> Result<()> {
    if completed != jobs {
        return Err(BenchError::Setup(format!(
            "bound: {completed} of {jobs} jobs completed"
        )));
    }
    Ok(())
}

/// Runs `client` on `clients` tasks at once and times them from the start to the last one's
/// end; an error of any fails the run.
pub async fn timed<F, Fut>(clients: usize, client: F) -> Result<f64>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<()>> + Send + 'static,
{
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients).map(|i| tokio::spawn(client(i))).collect();
    for task in tasks {
        task.await
            .map_err(|e| BenchError::Setup(format!("bound client: {e}")))??;
    }
    Ok(started.elapsed().max(Duration::from_nanos(1)).as_secs_f64())
}
