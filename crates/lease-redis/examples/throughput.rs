//! Empty-workflow throughput against a real Redis: admit, claim in batches, acknowledge.
//!
//! `cargo run --release -p lease-redis --example throughput -- [workflows] [tasks]`
//! (defaults 20000 and 16), against `LEASE_REDIS_URL` or redis://127.0.0.1:6379. Uses a
//! random namespace and deletes it afterwards.

use lease_core::ExecutionClientExt;
use std::time::{Duration, Instant};

use futures::future::try_join_all;
use lease_core::{
    Admission, ClaimRequest, ExecutionClient, ExecutionId, Json, Result, WorkflowRunOutcome,
};
use lease_redis::{RedisBackend, RedisConfig};

#[tokio::main]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let total: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let tasks: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(16);
    let url = lease_testserver::redis_url();
    let namespace = format!("throughput-{}", uuid::Uuid::new_v4().simple());
    let first = RedisBackend::connect(RedisConfig::new(url).namespace(namespace)).await?;
    let mut handles = vec![first.clone()];
    for _ in 1..tasks.min(4) {
        handles.push(first.peer().await?);
    }

    let started = Instant::now();
    try_join_all((0..tasks).map(|t| {
        let b = handles[t % handles.len()].clone();
        async move {
            for i in (t..total).step_by(tasks) {
                let id = ExecutionId::new(format!("wf-{i}"))?;
                b.admit(&Admission::new(id)).await?;
            }
            Result::Ok(())
        }
    }))
    .await?;
    let admitted = started.elapsed();

    let done = try_join_all((0..tasks).map(|t| {
        let b = handles[t % handles.len()].clone();
        async move {
            let mut done = 0usize;
            loop {
                let leases = b
                    .claim_due(ClaimRequest {
                        now: b.now().await?,
                        limit: 100,
                        duration: Duration::from_secs(30),
                    })
                    .await?;
                if leases.is_empty() {
                    return Result::Ok(done);
                }
                let outcome = WorkflowRunOutcome::Completed(Json::null());
                try_join_all(leases.iter().map(|l| b.acknowledge(l, &outcome))).await?;
                done += leases.len();
            }
        }
    }))
    .await?
    .into_iter()
    .sum::<usize>();
    let elapsed = started.elapsed();
    first.delete_namespace().await?;
    println!(
        "{done} of {total} empty workflows (admit + claim + acknowledge) in {elapsed:?} \
         ({:.0}/s; admit phase {admitted:?}) with {tasks} tasks on {} connections",
        done as f64 / elapsed.as_secs_f64(),
        handles.len()
    );
    Ok(())
}
