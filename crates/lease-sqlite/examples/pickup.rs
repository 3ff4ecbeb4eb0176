//! Measures issue 10 on one file: how soon an idle dispatcher (backstop poll: one hour)
//! runs an execution admitted by another process and by another handle in this process,
//! the wake-up watcher's idle CPU, and `admit_batch` throughput. Prints numbers; asserts
//! nothing.
//!
//! `cargo run --release -p lease-sqlite --example pickup [samples] [wake_poll_ms]`

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lease_core::{
    Admission, Delivery, Dispatcher, DispatcherOptions, ExecutionClient, ExecutionId, Json, Reply,
    WorkflowRunOutcome,
};
use lease_sqlite::{SqliteBackend, SqliteConfig};

const CHILD_ENV: &str = "LEASE_SQLITE_PICKUP_CHILD";

type Error = Box<dyn std::error::Error + Send + Sync>;

fn micros_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Admits `n` executions named `{prefix}-{i}`, one every 10-20 ms, each carrying its
/// admission time (system clock, microseconds) as input.
async fn admit_paced(b: &SqliteBackend, prefix: &str, n: usize) -> Result<(), Error> {
    for i in 0..n {
        let pause = 10 + (i * 7) % 11;
        tokio::time::sleep(Duration::from_millis(pause as u64)).await;
        let input = Json::parse("input", &micros_now().to_string())?;
        b.admit(&Admission::new(ExecutionId::new(format!("{prefix}-{i}"))?).input(input))
            .await?;
    }
    Ok(())
}

/// A dispatcher whose worker records (now - admission time) for every execution it runs.
fn recording_dispatcher(b: SqliteBackend, seen: Arc<Mutex<Vec<u64>>>) -> Result<Dispatcher, Error> {
    Ok(Dispatcher::start(
        Arc::new(b),
        move |d: Delivery| {
            let seen = seen.clone();
            async move {
                let t0: u64 = d.input().map_or(0, |j| j.as_str().parse().unwrap_or(0));
                seen.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(micros_now().saturating_sub(t0));
                Ok(Reply::Acknowledge(WorkflowRunOutcome::Completed(
                    Json::null(),
                )))
            }
        },
        DispatcherOptions::new()
            .concurrency(4)
            .poll_interval(Duration::from_secs(3600)),
    )?)
}

async fn wait_for(seen: &Mutex<Vec<u64>>, n: usize) -> Vec<u64> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let got = seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if got.len() >= n || Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn report(what: &str, mut us: Vec<u64>) {
    us.sort_unstable();
    let at = |q: f64| us[((us.len() as f64 - 1.0) * q).round() as usize] as f64 / 1000.0;
    if us.is_empty() {
        println!("{what}: no samples");
        return;
    }
    println!(
        "{what}: n={} p50={:.2} ms p90={:.2} ms p99={:.2} ms max={:.2} ms",
        us.len(),
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0)
    );
}

/// utime + stime of this process, in clock ticks (Linux /proc/self/stat).
fn cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(300);
    let poll_ms: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(5);
    let config =
        |path: &std::path::Path| SqliteConfig::file(path).wake_poll(Duration::from_millis(poll_ms));
    if let Ok(path) = std::env::var(CHILD_ENV) {
        let b = SqliteBackend::open(config(path.as_ref())).await?;
        return admit_paced(&b, "child", n).await;
    }
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("pickup.db");
    let b = SqliteBackend::open(config(&path)).await?;
    println!("wake poll {poll_ms} ms");

    // Idle: a dispatcher waiting on wake-ups (the watcher polls), nothing happening.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let dispatcher = recording_dispatcher(b.clone(), seen.clone())?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (t0, c0) = (Instant::now(), cpu_ticks());
    tokio::time::sleep(Duration::from_secs(10)).await;
    if let (Some(c0), Some(c1)) = (c0, cpu_ticks()) {
        let secs = t0.elapsed().as_secs_f64();
        // Clock ticks are 1/100 s on Linux.
        println!(
            "idle process with a listening dispatcher: {} ticks in {secs:.1} s = {:.2}% of a core",
            c1 - c0,
            (c1 - c0) as f64 / secs
        );
    }

    // Another process admits.
    let child = std::process::Command::new(std::env::current_exe()?)
        .args([n.to_string(), poll_ms.to_string()])
        .env(CHILD_ENV, &path)
        .spawn()?;
    let got = wait_for(&seen, n).await;
    report("pickup across processes", got);
    let status = tokio::task::spawn_blocking(move || {
        let mut child = child;
        child.wait()
    })
    .await??;
    assert!(status.success(), "child failed");

    // Another handle in this process admits.
    seen.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clear();
    let peer = b.peer().await?;
    admit_paced(&peer, "peer", n).await?;
    report("pickup within the process", wait_for(&seen, n).await);
    dispatcher.shutdown(Duration::from_secs(5)).await;

    // admit_batch: 100 batches of 1000 on a fresh file.
    let fresh = SqliteBackend::open(SqliteConfig::file(dir.path().join("batch.db"))).await?;
    let batches: Vec<Vec<Admission>> = (0..100)
        .map(|b| {
            (0..1000)
                .map(|i| ExecutionId::new(format!("b{b:03}-{i:04}")).map(Admission::new))
                .collect::<Result<_, _>>()
        })
        .collect::<Result<_, _>>()?;
    let started = Instant::now();
    for batch in &batches {
        fresh.admit_batch(batch).await?;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "admit_batch: 100 x 1000 in {secs:.2} s = {:.0} executions/s",
        100_000.0 / secs
    );
    Ok(())
}
