//! Retention throughput (issue 12): `purge_terminal` in batches of `batch` over `n` completed
//! executions with `steps` step records each; prints executions purged per second.
//!
//! `cargo run --release -p lease-sqlite --example purge -- [n] [batch] [steps]`

use lease_core::ExecutionClientExt;
use std::time::{Duration, Instant};

use lease_core::{
    Acknowledgement, Admission, ClaimRequest, ExecutionClient, ExecutionId, HeapClient, Json,
    StepKey, StepWrite, Timestamp, WorkflowRunOutcome,
};
use lease_sqlite::{SqliteBackend, SqliteConfig};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Admits, claims, optionally writes steps and completes `n` executions, 1000 at a time.
async fn completed(b: &SqliteBackend, n: usize, steps: usize) -> Result<(), Error> {
    for start in (0..n).step_by(1000) {
        let batch = (start..(start + 1000).min(n))
            .map(|i| Ok(Admission::new(ExecutionId::new(format!("wf-{i:08}"))?)))
            .collect::<Result<Vec<_>, lease_core::LeaseError>>()?;
        b.admit_batch(&batch).await?;
        let leases = b
            .claim_due(ClaimRequest {
                now: Timestamp::MAX,
                limit: batch.len(),
                duration: Duration::from_secs(3600),
            })
            .await?;
        for lease in &leases {
            for s in 0..steps {
                let write = StepWrite {
                    step_key: StepKey::new(format!("s{s}"))?,
                    step_attempt: 1,
                    done: true,
                    response: Json::null(),
                };
                assert!(!b.write_step(lease, &write).await?.is_lost());
            }
        }
        let acks: Vec<Acknowledgement> = leases
            .into_iter()
            .map(|lease| Acknowledgement {
                lease,
                outcome: WorkflowRunOutcome::Completed(Json::null()),
            })
            .collect();
        b.acknowledge_batch(&acks).await?;
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let mut arg = |default: usize| -> Result<usize, Error> {
        Ok(args
            .next()
            .map(|a| a.parse())
            .transpose()?
            .unwrap_or(default))
    };
    let (n, batch, steps) = (arg(100_000)?, arg(1000)?, arg(1)?);
    let dir = tempfile::tempdir()?;
    let b = SqliteBackend::open(SqliteConfig::file(dir.path().join("purge.db"))).await?;
    let setup = Instant::now();
    completed(&b, n, steps).await?;
    println!(
        "setup: {n} completed executions, {steps} steps each, in {:.1}s",
        setup.elapsed().as_secs_f64()
    );
    let cutoff = Timestamp::from_millis(b.now().await?.as_millis() + 1);
    let started = Instant::now();
    let (mut purged, mut calls) = (0, 0);
    loop {
        let got = b.purge_terminal(cutoff, batch).await?.ids.len();
        purged += got;
        calls += 1;
        if got < batch {
            break;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(purged, n);
    println!(
        "purge_terminal: {purged} executions in {calls} calls of up to {batch}, {secs:.2}s = \
         {:.0} executions/s",
        purged as f64 / secs
    );
    Ok(())
}
