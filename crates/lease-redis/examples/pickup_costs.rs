//! What issue 10 costs on Redis: `admit_batch` throughput (batches of 1000) and the price of
//! the wake-up publish a claim makes (server-side `INFO commandstats` deltas).
//!
//! `cargo run --release -p lease-redis --example pickup_costs -- [executions] [claims]`
//! (defaults 100000 and 5000), against `LEASE_REDIS_URL` or redis://127.0.0.1:6379. Uses a
//! random namespace and deletes it afterwards. Numbers, not assertions: benchmarks are not
//! tests.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::future::try_join_all;
use lease_core::limits::MAX_ADMIT_BATCH;
use lease_core::{Admission, ClaimRequest, ExecutionClient, ExecutionId, Result, Timestamp};
use lease_redis::{RedisBackend, RedisConfig};

/// `cmdstat_<name>` -> (calls, usec) from `INFO commandstats`.
async fn commandstats(b: &RedisBackend) -> HashMap<String, (u64, u64)> {
    let mut conn = b.connection();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .unwrap_or_default();
    info.lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |f: &str| {
                rest.split(',')
                    .find_map(|kv| kv.strip_prefix(f))
                    .and_then(|v| v.parse::<u64>().ok())
            };
            Some((name.to_owned(), (field("calls=")?, field("usec=")?)))
        })
        .collect()
}

/// Calls and microseconds of `name` between two snapshots.
fn delta(
    before: &HashMap<String, (u64, u64)>,
    after: &HashMap<String, (u64, u64)>,
    name: &str,
) -> (u64, u64) {
    let (c0, u0) = before.get(name).copied().unwrap_or_default();
    let (c1, u1) = after.get(name).copied().unwrap_or_default();
    (c1.saturating_sub(c0), u1.saturating_sub(u0))
}

async fn admit_batches(b: &RedisBackend, from: usize, to: usize) -> Result<()> {
    let mut i = from;
    while i < to {
        let end = (i + MAX_ADMIT_BATCH).min(to);
        let batch: Vec<Admission> = (i..end)
            .map(|n| ExecutionId::new(format!("wf-{n:07}")).map(Admission::new))
            .collect::<Result<_>>()?;
        b.admit_batch(&batch).await?;
        i = end;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let total: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let claims: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5_000);
    let url = lease_testserver::redis_url();
    let namespace = format!("pickup-costs-{}", uuid::Uuid::new_v4().simple());
    let b = RedisBackend::connect(RedisConfig::new(url).namespace(namespace)).await?;
    let peer = b.peer().await?;

    // admit_batch, one caller, then two callers on two connections.
    let started = Instant::now();
    admit_batches(&b, 0, total).await?;
    let one = started.elapsed();
    let started = Instant::now();
    let half = total / 2;
    try_join_all([
        admit_batches(&b, total, total + half),
        admit_batches(&peer, total + half, 2 * total),
    ])
    .await?;
    let two = started.elapsed();
    println!(
        "admit_batch x{MAX_ADMIT_BATCH}: {:.0} executions/s (1 caller), {:.0}/s (2 callers)",
        total as f64 / one.as_secs_f64(),
        total as f64 / two.as_secs_f64()
    );

    // Claims with a listener subscribed (as an idle dispatcher elsewhere would be).
    let listener = peer.wakeups();
    let request = ClaimRequest {
        now: Timestamp::MAX,
        limit: 1,
        duration: Duration::from_secs(60),
    };
    let before = commandstats(&b).await;
    let started = Instant::now();
    for _ in 0..claims {
        b.claim_due_with_horizon(request).await?;
    }
    let wall = started.elapsed();
    let after = commandstats(&b).await;
    let (pub_calls, pub_usec) = delta(&before, &after, "spublish");
    let (pub_calls, pub_usec) = if pub_calls == 0 {
        delta(&before, &after, "publish")
    } else {
        (pub_calls, pub_usec)
    };
    let (eval_calls, eval_usec) = delta(&before, &after, "evalsha");
    println!(
        "claim_due_with_horizon (limit 1): {:.1} us/call wall; script {:.1} us/call on the \
         server, of which publish {:.2} us/call ({pub_calls} publishes, 1 subscriber)",
        wall.as_micros() as f64 / claims as f64,
        eval_usec as f64 / eval_calls.max(1) as f64,
        pub_usec as f64 / pub_calls.max(1) as f64,
    );
    drop(listener);
    b.delete_namespace().await
}
