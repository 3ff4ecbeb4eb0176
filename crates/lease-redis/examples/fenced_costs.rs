//! What issue 13's fenced application writes cost on Redis, in calls per second at
//! concurrency 1 and 8 over one handle (one multiplexed connection):
//!
//! - `fenced_script` against the same body run unfenced (`EVALSHA` of the bare body on the
//!   same connection): the price of the fence (one `HMGET` and the prelude inside the script);
//! - `step_in_script` (the fence, the body and the step record in one script) against
//!   the unfenced body followed by `write_step` (two round trips, and not atomic).
//!
//! `cargo run --release -p lease-redis --example fenced_costs -- [calls] [trials]` (defaults
//! 10000 and 3; the median trial is printed), against `LEASE_REDIS_URL` or
//! redis://127.0.0.1:6379. Uses a random namespace and deletes it, and its application keys,
//! afterwards. Numbers, not assertions: benchmarks are not tests.

use lease_core::ExecutionClientExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::try_join_all;
use lease_core::{
    Admission, ClaimRequest, Delivery, ExecutionClient, ExecutionId, ExecutionLease, HeapClient,
    Json, LeaseError, Result, StepKey, StepWrite, Timestamp,
};
use lease_redis::{FencedScript, RedisBackend, RedisConfig};
use redis::Value;
use tokio_util::sync::CancellationToken;

/// The application's write: count the call and store a value.
const BODY: &str = "redis.call('INCR', KEYS[1]) return redis.call('SET', KEYS[2], ARGV[1])";

/// The same as a step: its response is JSON text.
const STEP_BODY: &str = "redis.call('INCR', KEYS[1]) redis.call('SET', KEYS[2], ARGV[1]) \
                         return '{\"ok\":true}'";

fn url() -> String {
    lease_testserver::redis_url()
}

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

struct Bench {
    backend: RedisBackend,
    keys: [String; 2],
    fenced: FencedScript,
    bare: redis::Script,
    step: FencedScript,
    bare_step: redis::Script,
}

impl Bench {
    fn keys(&self) -> [&str; 2] {
        [self.keys[0].as_str(), self.keys[1].as_str()]
    }

    /// A new execution, claimed for 10 minutes, with the record right after the claim.
    async fn claim(&self, id: String) -> Result<(ExecutionLease, Delivery)> {
        let b = &self.backend;
        b.admit(&Admission::new(ExecutionId::new(id)?)).await?;
        let claimed = b
            .claim_due_with_records(ClaimRequest {
                now: Timestamp::MAX,
                limit: 1,
                duration: Duration::from_secs(600),
            })
            .await?
            .remove(0);
        let delivery = Delivery::new(
            Arc::new(b.clone()),
            claimed.lease.clone(),
            claimed.record,
            CancellationToken::new(),
        );
        Ok((claimed.lease, delivery))
    }

    async fn fenced_call(&self, lease: &ExecutionLease) -> Result<()> {
        let r = self
            .backend
            .fenced_script(lease, &self.fenced, &self.keys(), &["v"])
            .await?;
        assert!(!r.is_lost());
        Ok(())
    }

    async fn unfenced_call(&self, script: &redis::Script) -> Result<()> {
        let mut invocation = script.prepare_invoke();
        invocation.key(&self.keys[0]).key(&self.keys[1]).arg("v");
        let _: Value = invocation
            .invoke_async(&mut self.backend.connection())
            .await
            .map_err(|e| LeaseError::invalid("bench", e.to_string()))?;
        Ok(())
    }

    async fn step_call(&self, delivery: &Delivery, key: &str) -> Result<()> {
        self.backend
            .step_in_script(delivery, key, &self.step, &self.keys(), &["v"])
            .await
            .map_err(|e| LeaseError::invalid("bench step", e.to_string()))?;
        Ok(())
    }

    async fn separate_step(&self, lease: &ExecutionLease, key: &str) -> Result<()> {
        self.unfenced_call(&self.bare_step).await?;
        let write = StepWrite {
            step_key: StepKey::new(key)?,
            step_attempt: 1,
            done: true,
            response: Json::parse("response", "{\"ok\":true}")?,
        };
        assert!(!self.backend.write_step(lease, &write).await?.is_lost());
        Ok(())
    }
}

#[derive(Clone, Copy, Debug)]
enum Case {
    Fenced,
    Unfenced,
    Step,
    Separate,
}

/// Calls per second of `case`: `calls` calls split over `concurrency` tasks.
async fn rate(
    bench: &Arc<Bench>,
    case: Case,
    concurrency: usize,
    calls: usize,
    trial: usize,
) -> Result<f64> {
    let (lease, delivery) = bench
        .claim(format!("{case:?}-{concurrency}-{trial}"))
        .await?;
    let per_task = calls / concurrency;
    let started = Instant::now();
    try_join_all((0..concurrency).map(|task| {
        let (bench, lease, delivery) = (bench.clone(), lease.clone(), delivery.clone());
        async move {
            for i in 0..per_task {
                let key = format!("s-{task}-{i}");
                match case {
                    Case::Fenced => bench.fenced_call(&lease).await?,
                    Case::Unfenced => bench.unfenced_call(&bench.bare).await?,
                    Case::Step => bench.step_call(&delivery, &key).await?,
                    Case::Separate => bench.separate_step(&lease, &key).await?,
                }
            }
            Ok::<_, LeaseError>(())
        }
    }))
    .await?;
    Ok((per_task * concurrency) as f64 / started.elapsed().as_secs_f64())
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

#[tokio::main]
async fn main() -> Result<()> {
    let (calls, trials) = (arg(1, 10_000), arg(2, 3).max(1));
    let namespace = format!("fenced-costs-{}", uuid::Uuid::new_v4().simple());
    let backend = RedisBackend::connect(RedisConfig::new(url()).namespace(namespace)).await?;
    let tag = backend.hash_tag();
    let bench = Arc::new(Bench {
        keys: [format!("app:{tag}:count"), format!("app:{tag}:value")],
        fenced: FencedScript::new(BODY),
        bare: redis::Script::new(BODY),
        step: FencedScript::new(STEP_BODY),
        bare_step: redis::Script::new(STEP_BODY),
        backend,
    });
    println!("{calls} calls per measurement, median of {trials} trials (calls/s)");
    for concurrency in [1, 8] {
        let pairs = [(Case::Fenced, Case::Unfenced), (Case::Step, Case::Separate)];
        for (ours, theirs) in pairs {
            // Alternate the two cases so drift on a shared machine hits both alike.
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for trial in 0..trials {
                a.push(rate(&bench, ours, concurrency, calls, trial).await?);
                b.push(rate(&bench, theirs, concurrency, calls, trial).await?);
            }
            let (a, b) = (median(a), median(b));
            println!(
                "concurrency {concurrency}: {ours:?} {a:>9.0}  {theirs:?} {b:>9.0}  ratio {:.2}",
                a / b
            );
        }
    }
    let mut conn = bench.backend.connection();
    let _: Value = redis::cmd("DEL")
        .arg(&bench.keys[0])
        .arg(&bench.keys[1])
        .query_async(&mut conn)
        .await
        .map_err(|e| LeaseError::invalid("cleanup", e.to_string()))?;
    bench.backend.delete_namespace().await
}
