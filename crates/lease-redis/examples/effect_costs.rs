//! What an effect record costs in Redis memory (a measurement docs/BENCHMARKS.md quotes, not a
//! usage example): `n` executions each begin one effect and settle it with a 32-byte
//! result; prints the mean `MEMORY USAGE` of the `effect:<id>` hash and of the execution's
//! `effects:<execution>` index set, pending and settled.
//!
//! `cargo run --release -p lease-redis --example effect_costs -- [n]` (default 1000), against
//! `LEASE_REDIS_URL` or redis://127.0.0.1:6379, on a random namespace deleted afterwards.
//! Numbers, not assertions.

use lease_core::{Admission, EffectId, ExecutionClient, ExecutionId, Json, Result};
use lease_redis::{RedisBackend, RedisConfig};

/// Mean `MEMORY USAGE key SAMPLES 0` over `keys`, in one pipeline.
async fn mean_usage(b: &RedisBackend, keys: &[String]) -> f64 {
    let mut pipe = redis::pipe();
    for key in keys {
        pipe.cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(0);
    }
    let sizes: Vec<Option<i64>> = pipe
        .query_async(&mut b.connection())
        .await
        .unwrap_or_default();
    let total: i64 = sizes.into_iter().flatten().sum();
    total as f64 / keys.len().max(1) as f64
}

#[tokio::main]
async fn main() -> Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let url = lease_testserver::redis_url();
    let namespace = format!("effect-costs-{}", uuid::Uuid::new_v4().simple());
    let b = RedisBackend::connect(RedisConfig::new(url).namespace(namespace)).await?;
    let p = b.key_prefix().to_owned();
    let effects = b.effects().expect("the Redis backend has effects");
    let result = Json::parse("result", r#"{"charge":"ch_0123456789abcdef"}"#)?;
    let (mut records, mut indexes) = (Vec::new(), Vec::new());
    let mut ids = Vec::new();
    for i in 0..n {
        let x = ExecutionId::new(format!("order-{i:07}"))?;
        b.admit(&Admission::new(x.clone())).await?;
        let e = EffectId::new(format!("charge-{i:07}"))?;
        effects.begin_effect(&e, &x).await?;
        records.push(format!("{p}effect:{e}"));
        indexes.push(format!("{p}effects:{x}"));
        ids.push((e, x));
    }
    let pending = mean_usage(&b, &records).await;
    for (e, x) in &ids {
        let _ = effects.settle_effect(e, x, &result).await?;
    }
    let settled = mean_usage(&b, &records).await;
    let index = mean_usage(&b, &indexes).await;
    println!(
        "{n} effects, MEMORY USAGE: effect:<id> hash {pending:.0} B pending, {settled:.0} B \
         settled ({} B result); effects:<execution> set with one member {index:.0} B",
        result.as_str().len()
    );
    b.delete_namespace().await
}
