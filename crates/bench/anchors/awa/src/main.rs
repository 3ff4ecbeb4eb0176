//! awa 0.6 beside this library: `<url> <default|tuned> <concurrency> <jobs> <budget secs>`.
//!
//! Installs awa's schema and its queue storage (the default worker engine of 0.6) in the
//! database the bench made for the run, enqueues the jobs into the queue storage in batches
//! of 1,000, prints `READY`, waits for a line on stdin, starts one client with
//! `max_workers = C` and an empty handler, and prints `ANCHOR {"jobs":N,"secs":S}` once
//! awa's own count of terminal jobs for the queue reached N; a run that passes the budget
//! prints the jobs done by then with `"partial":true`. Exits when stdin closes.
//!
//! Completion is what awa's tables say, read every 2 ms: the terminal count of
//! `QueueStorage::queue_counts`, the count awa's own benchmarks wait on, computed by the
//! terminal part of its query alone ([`TERMINAL`]). It sums committed rows only (the
//! receipt-plane completion batches, the terminal counters and their deltas, the rollups of
//! pruned segments), so a job it counts has its completion committed.
//!
//! An earlier version of this runner held awa to a few hundred jobs/s: it registered an
//! `on_event` hook to count `Completed` events, and with a hook awa reloads every completed
//! job (`load_job`, half a dozen queries, some scanning the claim batches) on the client's
//! pool before the event fires. It also read the full `queue_counts`, whose available and
//! running counts anti-join every claim (a second or more per call at 20,000 jobs), so its
//! final count came late and its events seemed to run ahead of the terminal count.
//!
//! `default` is `QueueConfig::default()` with `max_workers = C`. `tuned` is the queue
//! configuration of awa's own throughput benchmark for the queue storage
//! (`test_throughput_rust_workers_queue_storage` in its `tests/benchmark_test.rs`): a 50 ms
//! poll interval and `deadline_duration = 0`, so claims stay on the receipt plane instead of
//! writing a deadline per claim; the claim batch stays at its default (512).

use std::io::BufRead as _;
use std::time::{Duration, Instant};

use awa::{Client, InsertOpts, JobResult, QueueConfig, QueueStorage, QueueStorageConfig};
use serde::{Deserialize, Serialize};

type Fail = Box<dyn std::error::Error + Send + Sync>;

const QUEUE: &str = "anchor";

#[derive(Serialize, Deserialize, awa::JobArgs)]
struct Noop {
    n: u64,
}

struct Run {
    url: String,
    tuned: bool,
    concurrency: u32,
    jobs: u64,
    budget: Duration,
}

fn args() -> Result<Run, Fail> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let [url, mode, c, n, budget] = argv.as_slice() else {
        return Err("usage: <url> <default|tuned> <concurrency> <jobs> <budget secs>".into());
    };
    let tuned = match mode.as_str() {
        "default" => false,
        "tuned" => true,
        other => return Err(format!("unknown mode {other:?}").into()),
    };
    let concurrency: u32 = c.parse()?;
    let jobs: u64 = n.parse()?;
    let budget: f64 = budget.parse()?;
    if concurrency == 0 || jobs == 0 || !(budget > 0.0) {
        return Err("concurrency, jobs and budget must be positive".into());
    }
    Ok(Run {
        url: url.clone(),
        tuned,
        concurrency,
        jobs,
        budget: Duration::from_secs_f64(budget),
    })
}

/// Blocks until the bench writes a line (or closes stdin).
fn wait_for_line() {
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
}

async fn enqueue(store: &QueueStorage, pool: &sqlx::PgPool, jobs: u64) -> Result<(), Fail> {
    for start in (0..jobs).step_by(1000) {
        let batch = (start..(start + 1000).min(jobs))
            .map(|n| {
                let opts = InsertOpts {
                    queue: QUEUE.into(),
                    ..InsertOpts::default()
                };
                awa::insert::params_with(&Noop { n }, opts)
            })
            .collect::<Result<Vec<_>, _>>()?;
        store.enqueue_params_batch(pool, &batch).await?;
    }
    Ok(())
}

fn client(pool: sqlx::PgPool, run: &Run) -> Result<Client, Fail> {
    let mut config = QueueConfig {
        max_workers: run.concurrency,
        ..QueueConfig::default()
    };
    if run.tuned {
        config.poll_interval = Duration::from_millis(50);
        config.deadline_duration = Duration::ZERO;
    }
    Ok(Client::builder(pool)
        .queue(QUEUE, config)
        .register::<Noop, _, _>(|_args, _ctx| async { Ok(JobResult::Completed) })
        .build()?)
}

/// awa's terminal count for the queue, as `queue_counts_exact` sums it when its terminal
/// counter is trusted: the rollups of pruned segments plus the live counters, their pending
/// deltas and the receipt-plane completion batches, less their tombstones. The same sum
/// without the available and running counts, whose anti-joins over every claim made the
/// full `queue_counts` take a second or more per call at 20,000 jobs.
const TERMINAL: &str = r#"
SELECT (
    (SELECT COALESCE(sum(GREATEST(COALESCE(lanes.pruned_completed_count, 0),
                                  COALESCE(rollups.pruned_completed_count, 0))), 0)
          + COALESCE(sum(COALESCE(rollups.pruned_failed_count, 0)), 0)
     FROM (SELECT queue, priority, pruned_completed_count
           FROM awa.queue_lanes WHERE queue = $1) AS lanes
     FULL OUTER JOIN (SELECT queue, priority, pruned_completed_count, pruned_failed_count
                      FROM awa.queue_terminal_rollups WHERE queue = $1) AS rollups
     USING (queue, priority))
    + GREATEST(0,
        COALESCE((SELECT sum(live_terminal_count)
                  FROM awa.queue_terminal_live_counts WHERE queue = $1), 0)
      + COALESCE((SELECT sum(terminal_delta)
                  FROM awa.queue_terminal_count_deltas WHERE queue = $1), 0)
      + COALESCE((SELECT sum(completed_count)
                  FROM awa.receipt_completion_batches WHERE queue = $1), 0)
      - COALESCE((SELECT count(*)
                  FROM awa.receipt_completion_tombstones WHERE queue = $1), 0))
)::bigint
"#;

/// The queue's terminal count: [`TERMINAL`] while awa trusts its counter (a fresh install
/// does), else the full `queue_counts`, which then scans the terminal rows.
async fn terminal(store: &QueueStorage, pool: &sqlx::PgPool, trusted: bool) -> Result<u64, Fail> {
    let count: i64 = if trusted {
        sqlx::query_scalar(TERMINAL)
            .bind(QUEUE)
            .fetch_one(pool)
            .await?
    } else {
        store.queue_counts(pool, QUEUE).await?.terminal
    };
    Ok(u64::try_from(count)?)
}

async fn main_with(run: Run) -> Result<(), Fail> {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(20)
        .connect(&run.url)
        .await?;
    awa::migrations::run(&pool).await?;
    let store = QueueStorage::new(QueueStorageConfig::default())?;
    store.install(&pool).await?;
    store.reset(&pool).await?;
    enqueue(&store, &pool, run.jobs).await?;
    let trusted = store.terminal_counter_trusted(&pool).await?;
    println!("READY");
    tokio::task::spawn_blocking(wait_for_line).await?;
    let client = client(pool.clone(), &run)?;
    let started = Instant::now();
    client.start().await?;
    let deadline = started + run.budget;
    let (done, partial) = loop {
        let done = terminal(&store, &pool, trusted).await?;
        if done >= run.jobs {
            break (done, false);
        }
        if Instant::now() >= deadline {
            break (done, true);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let secs = started.elapsed().as_secs_f64();
    println!("ANCHOR {{\"jobs\":{done},\"secs\":{secs},\"partial\":{partial}}}");
    tokio::task::spawn_blocking(wait_for_line).await?;
    client.shutdown(Duration::from_secs(5)).await;
    Ok(())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let result = match args() {
        Ok(run) => main_with(run).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("awa anchor: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
