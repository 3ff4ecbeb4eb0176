//! awa 0.6 beside this library: `<url> <default|tuned> <concurrency> <jobs> <budget secs>`.
//!
//! Installs awa's schema and its queue storage (the default worker engine of 0.6) in the
//! database the bench made for the run, enqueues the jobs into the queue storage in batches
//! of 1,000, prints `READY`, waits for a line on stdin, starts one client with
//! `max_workers = C` and an empty handler, and prints `ANCHOR {"jobs":N,"secs":S}` once
//! awa's own count of terminal jobs for the queue (`QueueStorage::queue_counts`, which
//! keeps the count when completed rows are pruned away) reached N; a run that passes the
//! budget prints the jobs done by then with `"partial":true`. Exits when stdin closes.
//!
//! Completion is counted twice: awa's `Completed` events (sent after the completion
//! committed) and, at the end, the terminal count in its tables; the result is the table's.
//! `default` is `QueueConfig::default()` with `max_workers = C`; `tuned` also polls every
//! 50 ms, as awa's own benchmark adapter runs it, with the claim batch left at its default
//! (512).

use std::io::BufRead as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use awa::{
    Client, InsertOpts, JobEvent, JobResult, QueueConfig, QueueStorage, QueueStorageConfig,
};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

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

fn client(pool: sqlx::PgPool, run: &Run, events: Arc<AtomicU64>, all: Arc<Notify>) -> Result<Client, Fail> {
    let mut config = QueueConfig {
        max_workers: run.concurrency,
        ..QueueConfig::default()
    };
    if run.tuned {
        config.poll_interval = Duration::from_millis(50);
    }
    let jobs = run.jobs;
    Ok(Client::builder(pool)
        .queue(QUEUE, config)
        .register::<Noop, _, _>(|_args, _ctx| async { Ok(JobResult::Completed) })
        .on_event::<Noop, _, _>(move |event| {
            let (events, all) = (events.clone(), all.clone());
            async move {
                if matches!(event, JobEvent::Completed { .. })
                    && events.fetch_add(1, Ordering::SeqCst) + 1 == jobs
                {
                    all.notify_one();
                }
            }
        })
        .build()?)
}

async fn terminal(store: &QueueStorage, pool: &sqlx::PgPool) -> Result<u64, Fail> {
    let counts = store.queue_counts(pool, QUEUE).await?;
    Ok(u64::try_from(counts.terminal)?)
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
    println!("READY");
    tokio::task::spawn_blocking(wait_for_line).await?;
    let events = Arc::new(AtomicU64::new(0));
    let all = Arc::new(Notify::new());
    let client = client(pool.clone(), &run, events.clone(), all.clone())?;
    let started = Instant::now();
    client.start().await?;
    let deadline = started + run.budget;
    let _ = tokio::time::timeout_at(deadline.into(), all.notified()).await;
    // The events say the completions committed; the table's count is the one reported.
    let (done, partial) = loop {
        let done = terminal(&store, &pool).await?;
        if done >= run.jobs {
            break (done, false);
        }
        if Instant::now() >= deadline {
            break (done, true);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let secs = started.elapsed().as_secs_f64();
    let seen = events.load(Ordering::SeqCst);
    println!("ANCHOR {{\"jobs\":{done},\"secs\":{secs},\"partial\":{partial},\"events\":{seen}}}");
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
