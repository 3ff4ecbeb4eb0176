//! Rough throughput of empty workflows (admit, then claim + acknowledge) on one file.
//!
//! `cargo run --release -p lease-sqlite --example sqlite_throughput [executions] [concurrency]`

use lease_core::ExecutionClientExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lease_core::{
    Admission, ClaimRequest, ExecutionClient, ExecutionId, Fenced, Json, WorkflowRunOutcome,
};
use lease_sqlite::{SqliteBackend, SqliteConfig};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(30_000);
    let concurrency: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(8);
    let dir = tempfile::tempdir()?;
    let backend = SqliteBackend::open(SqliteConfig::file(dir.path().join("bench.db"))).await?;

    admit_all(&backend, n, concurrency).await?;

    // A dispatcher: claims up to the free slots in one batch; each delivery acknowledges.
    let started = Instant::now();
    let slots = Arc::new(tokio::sync::Semaphore::new(concurrency));
    let mut done = 0;
    let mut tasks = tokio::task::JoinSet::new();
    while done < n {
        let permit = slots.clone().acquire_many_owned(1).await?;
        let free = 1 + slots.available_permits();
        let extra = slots.clone().try_acquire_many_owned((free - 1) as u32).ok();
        let now = backend.now().await?;
        let leases = backend
            .claim_due(ClaimRequest {
                now,
                limit: free,
                duration: Duration::from_secs(30),
            })
            .await?;
        drop(extra);
        drop(permit);
        if leases.is_empty() {
            while tasks.join_next().await.is_some() {}
            continue;
        }
        done += leases.len();
        for lease in leases {
            let permit = slots.clone().acquire_owned().await?;
            let b = backend.clone();
            tasks.spawn(async move {
                let ack = b
                    .acknowledge(&lease, &WorkflowRunOutcome::Completed(Json::null()))
                    .await;
                drop(permit);
                matches!(ack, Ok(Fenced::Accepted(_)))
            });
        }
        while let Some(r) = tasks.try_join_next() {
            assert!(r?, "ack accepted");
        }
    }
    while let Some(r) = tasks.join_next().await {
        assert!(r?, "ack accepted");
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "claim+ack: {n} in {secs:.2}s = {:.0} workflows/s at concurrency {concurrency}",
        n as f64 / secs
    );
    Ok(())
}

/// Admits `n` executions from `concurrency` tasks and prints the rate.
async fn admit_all(
    backend: &SqliteBackend,
    n: usize,
    concurrency: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let admitters: Vec<_> = (0..concurrency)
        .map(|w| {
            let b = backend.clone();
            tokio::spawn(async move {
                for i in (w..n).step_by(concurrency) {
                    b.admit(&Admission::new(ExecutionId::new(format!("wf-{i:08}"))?))
                        .await?;
                }
                Ok::<_, lease_core::LeaseError>(())
            })
        })
        .collect();
    for a in admitters {
        a.await??;
    }
    let admit_secs = started.elapsed().as_secs_f64();
    println!(
        "admit: {n} in {admit_secs:.2}s = {:.0}/s",
        n as f64 / admit_secs
    );
    Ok(())
}
