//! What fencing the application's own writes costs: a fenced application transaction
//! against the same transaction unfenced, and `step_in_tx` against `write_step` plus a
//! separate application transaction. A measurement, not a usage example (docs/BENCHMARKS.md
//! quotes such figures; `cargo xtask bench --only fenced` is the maintained benchmark).
//!
//! `cargo run --release -p lease-postgres --example fenced_costs -- [URL] [n]`
//! (default `postgres://postgres@127.0.0.1:5432/test`, n = 2000 per variant). Sequential
//! (concurrency 1), one execution held for the whole run, the variants interleaved in blocks
//! of 100 so drift hits them alike; each operation inserts one `charges` row of the
//! application's own schema. Prints operations/s and the median and p99 latency.

use lease_core::ExecutionClientExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lease_core::{
    Admission, ClaimRequest, ExecutionClient, ExecutionId, ExecutionLease, HeapClient, Json,
    StepKey, StepWrite,
};
use lease_postgres::{PostgresBackend, PostgresConfig};
use lease_runtime::Delivery;
use sqlx::PgConnection;
use tokio_util::sync::CancellationToken;

const BLOCK: usize = 100;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Unfenced,
    Fenced,
    StepInTx,
    WriteStepThenTx,
}

const VARIANTS: [Variant; 4] = [
    Variant::Unfenced,
    Variant::Fenced,
    Variant::StepInTx,
    Variant::WriteStepThenTx,
];

struct Bench {
    backend: PostgresBackend,
    app: String,
    lease: ExecutionLease,
    delivery: Delivery,
    seq: usize,
}

async fn insert(app: &str, conn: &mut PgConnection, order: &str) -> Result<(), sqlx::Error> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO \"{app}\".charges (order_id, amount) VALUES ($1, 42)"
    )))
    .bind(order)
    .execute(conn)
    .await
    .map(|_| ())
}

impl Bench {
    async fn once(&mut self, v: Variant) -> Res<()> {
        self.seq += 1;
        let order = format!("{v:?}-{}", self.seq);
        let app = self.app.clone();
        match v {
            Variant::Unfenced => {
                let mut tx = self.backend.pool().begin().await?;
                insert(&app, &mut tx, &order).await?;
                tx.commit().await?;
            }
            Variant::Fenced => {
                let mut tx = self.backend.begin_fenced(&self.lease).await?;
                insert(&app, &mut tx, &order).await?;
                assert!(!tx.commit().await?.is_lost(), "the lease is current");
            }
            Variant::StepInTx => {
                let receipt: String = self
                    .backend
                    .step_in_tx(&self.delivery, &order, async |conn: &mut PgConnection| {
                        insert(&app, conn, &order).await?;
                        Ok::<_, sqlx::Error>(order.clone())
                    })
                    .await?;
                assert_eq!(receipt, order);
            }
            Variant::WriteStepThenTx => {
                let mut tx = self.backend.pool().begin().await?;
                insert(&app, &mut tx, &order).await?;
                tx.commit().await?;
                let write = StepWrite {
                    step_key: StepKey::new(order.clone())?,
                    step_attempt: 1,
                    done: true,
                    response: Json::to_json("receipt", &order)?,
                };
                assert!(
                    !self
                        .backend
                        .write_step(&self.lease, &write)
                        .await?
                        .is_lost()
                );
            }
        }
        Ok(())
    }
}

fn report(v: Variant, mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    let total: Duration = samples.iter().sum();
    let per_s = samples.len() as f64 / total.as_secs_f64();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    println!(
        "{:<18} {:>9.0} ops/s   median {:>7.1} us   p99 {:>7.1} us",
        format!("{v:?}"),
        per_s,
        at(0.5).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6
    );
    per_s
}

#[tokio::main]
async fn main() -> Res<()> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| lease_testserver::DEFAULT_POSTGRES_URL.to_owned());
    let n: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(2000);
    let schema = format!("lease_fenced_costs_{}", std::process::id());
    let app = format!("{schema}_app");
    let backend = PostgresBackend::connect(PostgresConfig::new(&url).schema(&schema)).await?;
    let result = run(&backend, &app, n).await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS \"{app}\" CASCADE"
    )))
    .execute(backend.pool())
    .await?;
    backend.drop_schema().await?;
    result
}

async fn run(backend: &PostgresBackend, app: &str, n: usize) -> Res<()> {
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE SCHEMA \"{app}\";
         CREATE TABLE \"{app}\".charges (order_id text PRIMARY KEY, amount bigint NOT NULL)"
    )))
    .execute(backend.pool())
    .await?;
    backend
        .admit(&Admission::new(ExecutionId::new("bench-order")?))
        .await?;
    let claimed = backend
        .claim_due_with_records(ClaimRequest {
            now: backend.now().await?,
            limit: 1,
            duration: Duration::from_secs(3600),
        })
        .await?
        .pop()
        .ok_or("nothing claimed")?;
    let delivery = Delivery::new(
        Arc::new(backend.clone()),
        claimed.lease.clone(),
        claimed.record.clone(),
        CancellationToken::new(),
    );
    let mut bench = Bench {
        backend: backend.clone(),
        app: app.to_owned(),
        lease: claimed.lease,
        delivery,
        seq: 0,
    };
    for v in VARIANTS {
        for _ in 0..BLOCK {
            bench.once(v).await?; // warm-up: connections, prepared statements
        }
    }
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(n); VARIANTS.len()];
    for _ in 0..n.div_ceil(BLOCK) {
        for (i, v) in VARIANTS.into_iter().enumerate() {
            for _ in 0..BLOCK {
                let t = Instant::now();
                bench.once(v).await?;
                samples[i].push(t.elapsed());
            }
        }
    }
    println!("{n} operations per variant, concurrency 1, one insert each");
    let rates: Vec<f64> = VARIANTS
        .into_iter()
        .zip(samples)
        .map(|(v, s)| report(v, s))
        .collect();
    println!(
        "fenced / unfenced: {:.2}x   step_in_tx / (write_step + tx): {:.2}x",
        rates[1] / rates[0],
        rates[2] / rates[3]
    );
    Ok(())
}
