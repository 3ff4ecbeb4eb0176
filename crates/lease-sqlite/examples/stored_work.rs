//! Per-operation cost against the amount of stored work (issue 12 item 2): claim, renew,
//! write_step and acknowledge timed one call at a time on a store holding `n` executions in
//! one of three shapes:
//!
//! * `scheduled`: all admitted with `Admission::not_before` a day ahead;
//! * `running`: `min(n, 10000)` holding live leases (one hour), the rest completed;
//! * `terminal`: all completed.
//!
//! Each of `ops` rounds admits one due execution (untimed), then times its claim (limit 1),
//! a renew, a step write and its acknowledgement; prints microseconds per call (median).
//!
//! `cargo run --release -p lease-sqlite --example stored_work -- [n] [shape] [ops]`

use lease_core::ExecutionClientExt;
use std::time::{Duration, Instant};

use lease_core::{
    Acknowledgement, Admission, ClaimRequest, ExecutionClient, ExecutionId, HeapClient, Json,
    StepKey, StepWrite, Timestamp, WorkflowRunOutcome,
};
use lease_sqlite::{SqliteBackend, SqliteConfig};

type Error = Box<dyn std::error::Error + Send + Sync>;

const RUNNING: usize = 10_000;

fn claim(limit: usize, lease: Duration) -> ClaimRequest {
    ClaimRequest {
        now: Timestamp::MAX,
        limit,
        duration: lease,
    }
}

fn done() -> WorkflowRunOutcome {
    WorkflowRunOutcome::Completed(Json::null())
}

/// Admits `count` executions from `from` (1000 per batch), due now or a day ahead.
async fn admit(b: &SqliteBackend, from: usize, count: usize, later: bool) -> Result<(), Error> {
    let day_ahead = Timestamp::from_millis(b.now().await?.as_millis() + 86_400_000);
    for start in (from..from + count).step_by(1000) {
        let batch = (start..(start + 1000).min(from + count))
            .map(|i| {
                let a = Admission::new(ExecutionId::new(format!("old-{i:08}"))?);
                Ok(if later { a.not_before(day_ahead) } else { a })
            })
            .collect::<Result<Vec<_>, lease_core::LeaseError>>()?;
        b.admit_batch(&batch).await?;
    }
    Ok(())
}

/// Claims every due execution with `lease`, 1000 at a time; completes them when `finish`.
async fn claim_all(b: &SqliteBackend, lease: Duration, finish: bool) -> Result<(), Error> {
    loop {
        let leases = b.claim_due(claim(1000, lease)).await?;
        if leases.is_empty() {
            return Ok(());
        }
        if finish {
            let acks: Vec<Acknowledgement> = leases
                .into_iter()
                .map(|lease| Acknowledgement {
                    lease,
                    outcome: done(),
                })
                .collect();
            b.acknowledge_batch(&acks).await?;
        }
    }
}

async fn shape(b: &SqliteBackend, n: usize, shape: &str) -> Result<(), Error> {
    match shape {
        "scheduled" => admit(b, 0, n, true).await,
        "terminal" => {
            admit(b, 0, n, false).await?;
            claim_all(b, Duration::from_secs(3600), true).await
        }
        "running" => {
            let running = n.min(RUNNING);
            admit(b, 0, n - running, false).await?;
            claim_all(b, Duration::from_secs(3600), true).await?;
            admit(b, n - running, running, false).await?;
            claim_all(b, Duration::from_secs(3600), false).await
        }
        other => Err(format!("unknown shape {other:?}: scheduled, running or terminal").into()),
    }
}

fn median_us(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e6
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(1000);
    let which = args.next().unwrap_or_else(|| "running".to_owned());
    let ops: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(1000);
    let dir = tempfile::tempdir()?;
    let b = SqliteBackend::open(SqliteConfig::file(dir.path().join("work.db"))).await?;
    let setup = Instant::now();
    shape(&b, n, &which).await?;
    let setup = setup.elapsed().as_secs_f64();
    let step = StepWrite {
        step_key: StepKey::new("s")?,
        step_attempt: 1,
        done: true,
        response: Json::null(),
    };
    let mut times: [Vec<Duration>; 4] = Default::default();
    for i in 0..ops {
        b.admit(&Admission::new(ExecutionId::new(format!("new-{i:08}"))?))
            .await?;
        let t = Instant::now();
        let claimed = b
            .claim_due_with_horizon(claim(1, Duration::from_secs(30)))
            .await?;
        times[0].push(t.elapsed());
        let lease = claimed
            .claimed
            .into_iter()
            .next()
            .ok_or("nothing claimed")?
            .lease;
        let t = Instant::now();
        let lease = b
            .renew(&lease, Duration::from_secs(30))
            .await?
            .accepted()
            .ok_or("renew lost")?;
        times[1].push(t.elapsed());
        let t = Instant::now();
        assert!(!b.write_step(&lease, &step).await?.is_lost());
        times[2].push(t.elapsed());
        let t = Instant::now();
        assert!(!b.acknowledge(&lease, &done()).await?.is_lost());
        times[3].push(t.elapsed());
    }
    let [c, r, w, a] = times.map(median_us);
    println!(
        "{which:>9} n={n:>8} (setup {setup:.1}s): claim {c:.1} us, renew {r:.1} us, \
         write_step {w:.1} us, acknowledge {a:.1} us"
    );
    Ok(())
}
