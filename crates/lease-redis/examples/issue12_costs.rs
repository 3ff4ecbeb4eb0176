//! What issue 12 costs and saves on Redis: `acknowledge_and_claim` against `acknowledge` +
//! `claim_due_with_horizon` at concurrency 1 (round trips per second), `purge_terminal`
//! throughput in batches of 1000, and the memory of a completed execution and of a step
//! record (`MEMORY USAGE` per key kind and `INFO memory` deltas).
//!
//! `cargo run --release -p lease-redis --example issue12_costs -- [deliveries] [executions]`
//! (defaults 5000 and 10000), against `LEASE_REDIS_URL` or redis://127.0.0.1:6379. Uses
//! random namespaces and deletes them afterwards. Numbers, not assertions: benchmarks are not
//! tests. The `INFO memory` deltas are server-wide, so other clients of the server blur them.

use lease_core::ExecutionClientExt;
use std::time::{Duration, Instant};

use futures::future::try_join_all;
use lease_core::limits::MAX_ADMIT_BATCH;
use lease_core::{
    Acknowledgement, Admission, ClaimRequest, ExecutionClient, ExecutionId, ExecutionLease,
    HeapClient, Json, Result, StepKey, StepWrite, Timestamp, WorkflowRunOutcome,
};
use lease_redis::{RedisBackend, RedisConfig};

fn url() -> String {
    lease_testserver::redis_url()
}

async fn fresh(what: &str) -> Result<RedisBackend> {
    let namespace = format!("issue12-{what}-{}", uuid::Uuid::new_v4().simple());
    RedisBackend::connect(RedisConfig::new(url()).namespace(namespace)).await
}

fn request(limit: usize) -> ClaimRequest {
    ClaimRequest {
        now: Timestamp::MAX,
        limit,
        duration: Duration::from_secs(300),
    }
}

fn done(lease: &ExecutionLease) -> Acknowledgement {
    Acknowledgement {
        lease: lease.clone(),
        outcome: WorkflowRunOutcome::Completed(Json::parse("t", r#"{"ok":true}"#).expect("json")),
    }
}

async fn admit(b: &RedisBackend, n: usize) -> Result<()> {
    for start in (0..n).step_by(MAX_ADMIT_BATCH) {
        let batch: Vec<Admission> = (start..(start + MAX_ADMIT_BATCH).min(n))
            .map(|i| ExecutionId::new(format!("wf-{i:07}")).map(Admission::new))
            .collect::<Result<_>>()?;
        b.admit_batch(&batch).await?;
    }
    Ok(())
}

/// Deliveries per second at concurrency 1: each acknowledgement claims the next execution.
async fn combined(n: usize) -> Result<f64> {
    let b = fresh("combined").await?;
    admit(&b, n + 1).await?;
    let mut lease = b.claim_due(request(1)).await?.remove(0);
    let started = Instant::now();
    for _ in 0..n {
        let r = b.acknowledge_and_claim(&done(&lease), request(1)).await?;
        lease = r.next.claimed[0].lease.clone();
    }
    let rate = n as f64 / started.elapsed().as_secs_f64();
    b.delete_namespace().await?;
    Ok(rate)
}

/// The same with an acknowledgement and a claim per delivery.
async fn separate(n: usize) -> Result<f64> {
    let b = fresh("separate").await?;
    admit(&b, n + 1).await?;
    let mut lease = b.claim_due(request(1)).await?.remove(0);
    let started = Instant::now();
    for _ in 0..n {
        let acked = b.acknowledge(&lease, &done(&lease).outcome).await?;
        assert!(!acked.is_lost());
        lease = b.claim_due_with_horizon(request(1)).await?.claimed[0]
            .lease
            .clone();
    }
    let rate = n as f64 / started.elapsed().as_secs_f64();
    b.delete_namespace().await?;
    Ok(rate)
}

/// `n` completed executions with `steps` step records each (1000 in flight at a time).
async fn completed(b: &RedisBackend, n: usize, steps: u32) -> Result<()> {
    admit(b, n).await?;
    loop {
        let leases = b.claim_due(request(1000)).await?;
        if leases.is_empty() {
            return Ok(());
        }
        try_join_all(leases.iter().map(|lease| async move {
            for attempt in 0..steps {
                let write = StepWrite {
                    step_key: StepKey::new(format!("step-{attempt}"))?,
                    step_attempt: 0,
                    done: true,
                    response: Json::parse("t", r#"{"charged":1999,"currency":"EUR"}"#)?,
                };
                let written = b.write_step(lease, &write).await?;
                assert!(!written.is_lost());
            }
            b.acknowledge(lease, &done(lease).outcome).await
        }))
        .await?;
    }
}

async fn used_memory(b: &RedisBackend) -> i64 {
    let mut conn = b.connection();
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn)
        .await
        .unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Mean `MEMORY USAGE` (all samples) of `keys`.
async fn usage(b: &RedisBackend, keys: &[String]) -> f64 {
    let mut conn = b.connection();
    let mut total = 0i64;
    for key in keys {
        let n: Option<i64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(0)
            .query_async(&mut conn)
            .await
            .unwrap_or(None);
        total += n.unwrap_or(0);
    }
    total as f64 / keys.len().max(1) as f64
}

async fn unlink(b: &RedisBackend, keys: &[String]) {
    let mut conn = b.connection();
    for chunk in keys.chunks(1000) {
        let _: redis::RedisResult<i64> =
            redis::cmd("UNLINK").arg(chunk).query_async(&mut conn).await;
    }
}

/// Memory of `n` completed executions with three step records each.
async fn memory(n: usize) -> Result<()> {
    let b = fresh("memory").await?;
    let p = b.key_prefix().to_owned();
    let base = used_memory(&b).await;
    completed(&b, n, 3).await?;
    let full = used_memory(&b).await;
    let ids: Vec<String> = (0..n).map(|i| format!("wf-{i:07}")).collect();
    let exec: Vec<String> = ids.iter().map(|id| format!("{p}exec:{id}")).collect();
    let steps: Vec<String> = ids.iter().map(|id| format!("{p}steps:{id}")).collect();
    let exec_key = usage(&b, &exec).await;
    let steps_key = usage(&b, &steps).await;
    let done = usage(&b, &[format!("{p}done")]).await;
    unlink(&b, &steps).await;
    let without_steps = used_memory(&b).await;
    println!(
        "memory, {n} completed executions x 3 step records (INFO used_memory deltas): \
         {:.0} B/execution in all, of which the step records {:.0} B each ({:.0} B per \
         execution); without them {:.0} B/execution",
        (full - base) as f64 / n as f64,
        (full - without_steps) as f64 / (3 * n) as f64,
        (full - without_steps) as f64 / n as f64,
        (without_steps - base) as f64 / n as f64,
    );
    println!(
        "memory, MEMORY USAGE: exec:<id> hash {exec_key:.0} B, steps:<id> hash (3 records) \
         {steps_key:.0} B = {:.0} B/step record, done zset {:.0} B/member",
        steps_key / 3.0,
        done / n as f64,
    );
    b.delete_namespace().await
}

/// `purge_terminal` executions per second, batches of 1000, over `n` completed executions
/// with three step records each.
async fn purge(n: usize) -> Result<f64> {
    let b = fresh("purge").await?;
    completed(&b, n, 3).await?;
    let started = Instant::now();
    let mut purged = 0;
    loop {
        let batch = b.purge_terminal(Timestamp::MAX, 1000).await?;
        purged += batch.ids.len();
        if batch.ids.len() < 1000 {
            break;
        }
    }
    let rate = purged as f64 / started.elapsed().as_secs_f64();
    assert_eq!(purged, n);
    b.delete_namespace().await?;
    Ok(rate)
}

#[tokio::main]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let deliveries: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5_000);
    let executions: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let one = combined(deliveries).await?;
    let two = separate(deliveries).await?;
    println!(
        "concurrency 1: acknowledge_and_claim {one:.0} deliveries/s; acknowledge + \
         claim_due_with_horizon {two:.0} deliveries/s ({:.2}x)",
        one / two
    );
    let rate = purge(executions).await?;
    println!("purge_terminal x1000: {rate:.0} executions/s (3 step records each)");
    memory(executions).await
}
