//! Dispatcher-style deliveries per second (issue 12 item 1): each of `concurrency` tasks
//! claims one execution, writes `steps` step records, then acknowledges it and claims the
//! next one, either in one call (`acknowledge_and_claim`) or in two (`acknowledge`, then
//! `claim_due_with_horizon`), until the backlog is done. The two ways run interleaved in
//! rounds on fresh files; prints each round and the median.
//!
//! `cargo run --release -p lease-sqlite --example deliveries -- [executions] [steps] [concurrency] [rounds]`

use std::time::{Duration, Instant};

use lease_core::{
    Acknowledgement, Admission, ClaimRequest, Claimed, ExecutionClient, ExecutionId,
    ExecutionLease, HeapClient, Json, StepKey, StepWrite, Timestamp, WorkflowRunOutcome,
};
use lease_sqlite::{SqliteBackend, SqliteConfig};

type Error = Box<dyn std::error::Error + Send + Sync>;

const LEASE: Duration = Duration::from_secs(30);

fn one() -> ClaimRequest {
    ClaimRequest {
        now: Timestamp::MAX,
        limit: 1,
        duration: LEASE,
    }
}

fn first(claimed: Vec<Claimed>) -> Option<ExecutionLease> {
    claimed.into_iter().next().map(|c| c.lease)
}

async fn backlog(n: usize) -> Result<(tempfile::TempDir, SqliteBackend), Error> {
    let dir = tempfile::tempdir()?;
    let backend = SqliteBackend::open(SqliteConfig::file(dir.path().join("d.db"))).await?;
    let ids: Vec<usize> = (0..n).collect();
    for chunk in ids.chunks(1000) {
        let batch = chunk
            .iter()
            .map(|i| Ok(Admission::new(ExecutionId::new(format!("wf-{i:08}"))?)))
            .collect::<Result<Vec<_>, lease_core::LeaseError>>()?;
        backend.admit_batch(&batch).await?;
    }
    Ok((dir, backend))
}

/// One task's deliveries until nothing is left to claim.
async fn worker(b: SqliteBackend, steps: usize, combined: bool) -> Result<usize, Error> {
    let done = WorkflowRunOutcome::Completed(Json::null());
    let mut lease = first(b.claim_due_with_horizon(one()).await?.claimed);
    let mut count = 0;
    while let Some(current) = lease {
        for s in 0..steps {
            let write = StepWrite {
                step_key: StepKey::new(format!("s{s}"))?,
                step_attempt: 1,
                done: true,
                response: Json::null(),
            };
            assert!(!b.write_step(&current, &write).await?.is_lost());
        }
        count += 1;
        lease = if combined {
            let ack = Acknowledgement {
                lease: current,
                outcome: done.clone(),
            };
            let r = b.acknowledge_and_claim(&ack, one()).await?;
            assert!(!r.acknowledged.is_lost());
            first(r.next.claimed)
        } else {
            assert!(!b.acknowledge(&current, &done).await?.is_lost());
            first(b.claim_due_with_horizon(one()).await?.claimed)
        };
    }
    Ok(count)
}

async fn round(n: usize, steps: usize, c: usize, combined: bool) -> Result<f64, Error> {
    let (_dir, backend) = backlog(n).await?;
    let started = Instant::now();
    let tasks: Vec<_> = (0..c)
        .map(|_| tokio::spawn(worker(backend.clone(), steps, combined)))
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await??;
    }
    assert_eq!(total, n);
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
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
    let (n, steps, c, rounds) = (arg(10_000)?, arg(0)?, arg(1)?, arg(3)?);
    let (mut combined, mut separate) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let a = round(n, steps, c, true).await?;
        let b = round(n, steps, c, false).await?;
        println!("round {r}: acknowledge_and_claim {a:.0}/s, acknowledge + claim {b:.0}/s");
        combined.push(a);
        separate.push(b);
    }
    let (a, b) = (median(combined), median(separate));
    println!(
        "{n} executions, {steps} steps, concurrency {c}: acknowledge_and_claim {a:.0}/s, \
         acknowledge + claim_due_with_horizon {b:.0}/s ({:.2}x)",
        a / b
    );
    Ok(())
}
