//! Rough throughput of claim + acknowledge on empty workflows.
//!
//! `cargo run --release -p lease-postgres --example claim_ack -- [executions] [concurrency]`
//! against `LEASE_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/test`), in a
//! throwaway schema that is dropped afterwards. The real benchmark lives in xtask.

use lease_core::ExecutionClientExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lease_core::{Admission, ClaimRequest, ExecutionClient, ExecutionId, Json, WorkflowRunOutcome};
use lease_postgres::{PostgresBackend, PostgresConfig};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> lease_core::Result<()> {
    let mut args = std::env::args().skip(1);
    let total: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let concurrency: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(8);
    let url = lease_testserver::postgres_url();
    let schema = format!("lease_bench_{}", std::process::id());
    let backend = PostgresBackend::connect(
        PostgresConfig::new(url)
            .schema(schema)
            .max_connections(u32::try_from(concurrency).unwrap_or(8) + 2),
    )
    .await?;

    let admit_started = Instant::now();
    for i in 0..total {
        let id = ExecutionId::new(format!("wf-{i:08}"))?;
        backend.admit(&Admission::new(id)).await?;
    }
    println!("admitted {total} in {:?}", admit_started.elapsed());

    let done = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (backend, done) = (backend.clone(), done.clone());
            tokio::spawn(async move {
                let outcome = WorkflowRunOutcome::Completed(Json::null());
                loop {
                    let now = backend.now().await?;
                    let leases = backend
                        .claim_due(ClaimRequest {
                            now,
                            limit: 1,
                            duration: Duration::from_secs(30),
                        })
                        .await?;
                    let Some(lease) = leases.into_iter().next() else {
                        if done.load(Ordering::SeqCst) >= total {
                            return Ok::<_, lease_core::LeaseError>(());
                        }
                        continue;
                    };
                    let _ = backend.acknowledge(&lease, &outcome).await?;
                    done.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for w in workers {
        w.await
            .map_err(|e| lease_core::LeaseError::invalid("worker", e.to_string()))??;
    }
    let elapsed = started.elapsed();
    println!(
        "{total} claim+ack at concurrency {concurrency} in {elapsed:?}: {:.0}/s",
        total as f64 / elapsed.as_secs_f64()
    );
    backend.drop_schema().await?;
    Ok(())
}
