//! apalis 1.0 at its defaults: `<redis|postgres|sqlite> <url> <namespace> <concurrency>
//! <jobs> [budget secs]`. Enqueues the jobs (the namespace is the Redis queue name; on
//! PostgreSQL apalis keeps its own `apalis` schema in the database the bench made for the
//! run; on SQLite the URL names the file), prints `READY`, waits for a line on stdin, starts
//! one worker with `.concurrency(C)` and an empty handler, prints
//! `ANCHOR {"jobs":N,"secs":S}` once N tasks succeeded (or, once the budget ran out, the
//! tasks that succeeded by then with `"partial":true`), and exits when stdin closes (so the
//! bench reads the server's counters before the runner's own shutdown traffic).

use std::io::BufRead as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use apalis::prelude::*;
use tokio::sync::Notify;

type Fail = Box<dyn std::error::Error + Send + Sync>;

struct Run {
    kind: String,
    url: String,
    namespace: String,
    concurrency: usize,
    jobs: u64,
    budget: Option<std::time::Duration>,
}

fn args() -> Result<Run, Fail> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let (kind, url, namespace, c, n, budget) = match argv.as_slice() {
        [kind, url, namespace, c, n] => (kind, url, namespace, c, n, None),
        [kind, url, namespace, c, n, b] => (kind, url, namespace, c, n, Some(b.parse::<f64>()?)),
        _ => {
            return Err(
                "usage: <redis|postgres|sqlite> <url> <namespace> <concurrency> <jobs> [budget secs]"
                    .into(),
            );
        }
    };
    let concurrency: usize = c.parse()?;
    let jobs: u64 = n.parse()?;
    if concurrency == 0 || jobs == 0 || budget.is_some_and(|b| !(b > 0.0)) {
        return Err("concurrency, jobs and budget must be positive".into());
    }
    let budget = budget.map(std::time::Duration::from_secs_f64);
    Ok(Run {
        kind: kind.clone(),
        url: url.clone(),
        namespace: namespace.clone(),
        concurrency,
        jobs,
        budget,
    })
}

/// Blocks until the bench writes a line (or closes stdin).
fn wait_for_line() {
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
}

async fn noop(_job: u64) -> Result<(), BoxDynError> {
    Ok(())
}

/// Pushes `jobs` tasks, then runs one worker over the backend until they all succeeded
/// (a macro: apalis's worker bounds differ per backend type).
macro_rules! drain {
    ($backend:expr, $run:expr) => {
        drain!($backend, $run, |_b| async { Ok::<(), Fail>(()) })
    };
    ($backend:expr, $run:expr, |$b:ident| $after_push:expr) => {{
        let run: &Run = $run;
        let mut backend = $backend;
        for start in (0..run.jobs).step_by(1000) {
            let batch: Vec<u64> = (start..(start + 1000).min(run.jobs)).collect();
            backend.push_bulk(batch).await?;
        }
        {
            let $b = &mut backend;
            $after_push.await?;
        }
        println!("READY");
        tokio::task::spawn_blocking(wait_for_line).await?;
        let done = Arc::new(AtomicU64::new(0));
        let all = Arc::new(Notify::new());
        let (jobs, counter, finished) = (run.jobs, done.clone(), all.clone());
        let worker = WorkerBuilder::new("anchor")
            .backend(backend)
            .concurrency(run.concurrency)
            .on_event(move |_, event| {
                if matches!(event, Event::Success(_))
                    && counter.fetch_add(1, Ordering::SeqCst) + 1 == jobs
                {
                    finished.notify_one();
                }
            })
            .build(noop);
        let started = Instant::now();
        let budget = run.budget;
        let stop = async move {
            let partial = match budget {
                Some(b) => tokio::time::timeout(b, all.notified()).await.is_err(),
                None => {
                    all.notified().await;
                    false
                }
            };
            let secs = started.elapsed().as_secs_f64();
            let n = done.load(Ordering::SeqCst);
            println!("ANCHOR {{\"jobs\":{n},\"secs\":{secs},\"partial\":{partial}}}");
            tokio::task::spawn_blocking(wait_for_line)
                .await
                .map_err(std::io::Error::other)?;
            Ok::<(), std::io::Error>(())
        };
        worker.run_until(stop).await?;
        Ok(())
    }};
}

/// Moves every scheduled task id to the active list, 1,000 at a time: what apalis-redis
/// 1.0.0's `fetch_next.lua` does for due tasks, in one `unpack` of all of them, which fails
/// past Lua's ~8,000 unpack limit ("too many results to unpack"). Its `push_tasks` schedules
/// every task (`run_at` at least now), so a backlog of 20,000 pushed up front never drains
/// at its defaults; promoted here before `READY`, the drain measures apalis's worker.
async fn promote(
    conn: &mut apalis_redis::ConnectionManager,
    scheduled: &str,
    active: &str,
) -> Result<(), Fail> {
    loop {
        let ids: Vec<String> = redis::cmd("ZRANGE")
            .arg(scheduled)
            .arg(0)
            .arg(999)
            .query_async(conn)
            .await?;
        if ids.is_empty() {
            return Ok(());
        }
        let () = redis::pipe()
            .atomic()
            .cmd("RPUSH")
            .arg(active)
            .arg(&ids)
            .ignore()
            .cmd("ZREM")
            .arg(scheduled)
            .arg(&ids)
            .ignore()
            .query_async(conn)
            .await?;
    }
}

async fn main_with(run: Run) -> Result<(), Fail> {
    match run.kind.as_str() {
        "redis" => {
            let conn = apalis_redis::connect(run.url.as_str()).await?;
            let config = apalis_redis::Config::default().queue(&run.namespace);
            let (scheduled, active) = (config.scheduled_jobs_set(), config.active_jobs_list());
            drain!(
                apalis_redis::RedisStorage::new(conn).with_config(config),
                &run,
                |b| promote(b.get_connection(), &scheduled, &active)
            )
        }
        "postgres" => {
            let pool = apalis_postgres::PgPool::connect(&run.url).await?;
            apalis_postgres::PostgresStorage::setup(&pool).await?;
            let config = apalis_postgres::Config::default().queue(&run.namespace);
            drain!(
                apalis_postgres::PostgresStorage::new(&pool).with_config(config),
                &run
            )
        }
        "sqlite" => {
            let pool = apalis_sqlite::SqlitePool::connect(&run.url).await?;
            apalis_sqlite::SqliteStorage::setup(&pool).await?;
            let config = apalis_sqlite::Config::default().queue(&run.namespace);
            drain!(
                apalis_sqlite::SqliteStorage::new(&pool).with_config(config),
                &run
            )
        }
        other => Err(format!("unknown backend {other:?}").into()),
    }
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
            eprintln!("apalis anchor: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
