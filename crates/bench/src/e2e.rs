//! End-to-end executions per second: through the library's dispatcher and step driver, and
//! through a raw pipeline issuing the same statements/scripts directly (the raw bound).
//!
//! Workflows have 0 steps (claim + acknowledge: what a job queue does) or 3 fenced steps.
//! The raw pipeline mirrors the dispatcher's shape: one claim loop asking for as many leases
//! as there are free slots (at most 32 per call), each delivery a task that writes its steps
//! and acknowledges. For SQLite the raw bound is one connection on one thread, each
//! operation its own `BEGIN IMMEDIATE` transaction (the fastest way to issue those
//! statements one operation at a time).

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lease_core::{Json, WorkflowRunOutcome};
use lease_runtime::{Delivery, DeliveryError, Dispatcher, DispatcherOptions, Reply};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::client::{OUTCOME, STEP_RESPONSE};
use crate::error::{BenchError, Context, Result};
use crate::fixture::Fixture;
use crate::measure::{PROBE, Sample, plan};
use crate::raw::sqlite::RawSqlite;
use crate::raw::{Raw, RawLease};

/// Step keys of the 3-step workflow.
const STEP_KEYS: [&str; 3] = ["load", "charge", "ship"];

/// The most leases one claim asks for (the dispatcher's default `claim_batch`).
const CLAIM_BATCH: usize = 32;

/// What runs the executions.
#[derive(Clone)]
pub enum Engine {
    /// The library: `Dispatcher` + `Delivery::step`.
    Library,
    /// The raw pipeline over an async raw client.
    Raw(Arc<dyn Raw>),
    /// The raw SQLite loop on one blocking thread.
    RawSqlite(Arc<RawSqlite>),
}

/// Measures `engine` at `concurrency` with `steps` steps per execution for `duration`.
pub async fn measure(
    engine: &Engine,
    fx: &mut Fixture,
    concurrency: usize,
    steps: usize,
    duration: Duration,
) -> Result<Sample> {
    let probe = (8 * concurrency as u64).max(256);
    fx.admit(probe).await?;
    let (first, finished) = run(engine, fx, concurrency, steps, probe, PROBE).await?;
    let waiting = fx.admitted().saturating_sub(finished);
    fx.admit(plan(fx.kind, first.rate(), duration, waiting))
        .await?;
    let target = fx.admitted().saturating_sub(finished);
    let (sample, _) = run(engine, fx, concurrency, steps, target, duration).await?;
    Ok(sample)
}

/// Runs until `target` executions completed or `limit` passed. Returns the sample taken
/// then, and how many executions had completed once every delivery in flight at that
/// moment had ended too.
pub(crate) async fn run(
    engine: &Engine,
    fx: &Fixture,
    concurrency: usize,
    steps: usize,
    target: u64,
    limit: Duration,
) -> Result<(Sample, u64)> {
    match engine {
        Engine::Library => library(fx, concurrency, steps, target, limit).await,
        Engine::Raw(raw) => pipeline(raw.clone(), concurrency, steps, target, limit).await,
        Engine::RawSqlite(raw) => {
            let raw = raw.clone();
            tokio::task::spawn_blocking(move || {
                sqlite_loop(&raw, concurrency, steps, target, limit)
            })
            .await
            .map_err(|e| BenchError::Setup(format!("raw sqlite thread: {e}")))?
        }
    }
}

async fn library(
    fx: &Fixture,
    concurrency: usize,
    steps: usize,
    target: u64,
    limit: Duration,
) -> Result<(Sample, u64)> {
    let outcome =
        WorkflowRunOutcome::Completed(Json::parse("outcome", OUTCOME).context(|| "json".into())?);
    let worker = move |d: Delivery| {
        let outcome = outcome.clone();
        async move {
            for key in &STEP_KEYS[..steps] {
                let _: serde_json::Value = d
                    .step(key, || async {
                        Ok::<_, Infallible>(serde_json::json!({"ok": true}))
                    })
                    .await?;
            }
            Ok::<_, DeliveryError>(Reply::Acknowledge(outcome))
        }
    };
    let dispatcher = Dispatcher::start(
        fx.lib.clone(),
        worker,
        DispatcherOptions::new().concurrency(concurrency),
    )
    .context(|| "start dispatcher".into())?;
    let started = Instant::now();
    let sample = loop {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let done = dispatcher.snapshot().acknowledgements;
        if done >= target || started.elapsed() >= limit {
            break Sample {
                count: done,
                secs: started.elapsed().as_secs_f64(),
            };
        }
    };
    let report = dispatcher.shutdown(Duration::from_secs(30)).await;
    let m = report.metrics;
    if m.lost > 0 || m.worker_failures > 0 || m.backend_errors > 0 || report.cancelled > 0 {
        return Err(BenchError::Setup(format!(
            "dispatcher run was not clean: {m:?}, {} cancelled",
            report.cancelled
        )));
    }
    Ok((sample, m.acknowledgements))
}

async fn deliver(raw: Arc<dyn Raw>, lease: RawLease, steps: usize) -> Result<()> {
    for key in &STEP_KEYS[..steps] {
        raw.write_step(&lease, key, STEP_RESPONSE).await?;
    }
    raw.acknowledge(&lease, OUTCOME).await
}

async fn pipeline(
    raw: Arc<dyn Raw>,
    concurrency: usize,
    steps: usize,
    target: u64,
    limit: Duration,
) -> Result<(Sample, u64)> {
    let slots = Arc::new(Semaphore::new(concurrency));
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks: JoinSet<Result<()>> = JoinSet::new();
    let started = Instant::now();
    let mut sample = None;
    loop {
        while let Some(r) = tasks.try_join_next() {
            r.map_err(|e| BenchError::Setup(format!("raw delivery task: {e}")))??;
        }
        let n = done.load(Ordering::SeqCst);
        if n >= target || started.elapsed() >= limit {
            sample = Some(Sample {
                count: n,
                secs: started.elapsed().as_secs_f64(),
            });
            break;
        }
        let first = slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| BenchError::Setup(e.to_string()))?;
        let mut permits = vec![first];
        while permits.len() < concurrency.min(CLAIM_BATCH) {
            match slots.clone().try_acquire_owned() {
                Ok(p) => permits.push(p),
                Err(_) => break,
            }
        }
        let leases = raw.claim(permits.len()).await?;
        if leases.is_empty() {
            break;
        }
        for (lease, permit) in leases.into_iter().zip(permits) {
            let raw = raw.clone();
            let done = done.clone();
            tasks.spawn(async move {
                deliver(raw, lease, steps).await?;
                done.fetch_add(1, Ordering::SeqCst);
                drop(permit);
                Ok(())
            });
        }
    }
    while let Some(r) = tasks.join_next().await {
        r.map_err(|e| BenchError::Setup(format!("raw delivery task: {e}")))??;
    }
    let finished = done.load(Ordering::SeqCst);
    let sample = sample.unwrap_or(Sample {
        count: finished,
        secs: started.elapsed().as_secs_f64(),
    });
    Ok((sample, finished))
}

fn sqlite_loop(
    raw: &RawSqlite,
    concurrency: usize,
    steps: usize,
    target: u64,
    limit: Duration,
) -> Result<(Sample, u64)> {
    let started = Instant::now();
    let mut done = 0;
    while done < target && started.elapsed() < limit {
        let leases = raw.claim_sync(concurrency.min(CLAIM_BATCH))?;
        if leases.is_empty() {
            break;
        }
        for lease in leases {
            for key in &STEP_KEYS[..steps] {
                raw.write_step_sync(&lease, key, STEP_RESPONSE)?;
            }
            raw.acknowledge_sync(&lease, OUTCOME)?;
            done += 1;
        }
    }
    let sample = Sample {
        count: done,
        secs: started.elapsed().as_secs_f64(),
    };
    Ok((sample, done))
}
