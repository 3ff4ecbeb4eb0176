//! Runtime mode: one runtime process of a torture run. It opens the backend, wraps it in
//! the [`Recorder`], and runs a [`Dispatcher`] with short leases over the torture workflow
//! (whose application steps write through the same handle, [`AppSteps`]) until its
//! standard input closes. Control lines on standard input: `slow <ms>` delays
//! every renewal by that long (the slow-renew fault), `fast` ends the delay.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clap::builder::RangedU64ValueParser;
use lease_core::LeaseBackend;
use lease_runtime::{Delivery, Dispatcher, DispatcherOptions};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::app::AppWrite;
use crate::appstep::AppSteps;
use crate::backend;
use crate::effects::{self, EffectLog, EffectMode, EffectSteps, RecordedEffects};
use crate::mutant::{Broken, Mutant};
use crate::oplog::OpLog;
use crate::recorder::Recorder;
use crate::schedules;
use crate::skew;
use crate::values;
use crate::workflow;

/// The environment variable the controller passes the backend URL in: never on the command
/// line, where `ps` shows it with its password.
pub const RUNTIME_URL_ENV: &str = "LEASE_TORTURE_URL";

/// Options of a runtime process (set by the controller).
#[derive(Debug, Clone, clap::Args)]
pub struct RuntimeArgs {
    /// Backend URL (the controller sets it in the environment, not on the command line).
    #[arg(long, value_name = "URL", env = RUNTIME_URL_ENV, hide_env_values = true)]
    pub url: String,
    /// Namespace / schema of the run.
    #[arg(long)]
    pub namespace: String,
    /// Process number written into every logged operation.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub process: u32,
    /// The op log file.
    #[arg(long, value_name = "FILE")]
    pub log: PathBuf,
    /// Dispatcher concurrency.
    #[arg(long, value_name = "N", default_value_t = 8,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..))]
    pub concurrency: usize,
    /// Lease duration, ms (renewed every third).
    #[arg(long = "lease-ms", value_name = "MS", default_value = "1500", value_parser = values::lease_ms)]
    pub lease_ms: u64,
    /// How the application rows are written (`fenced`; `unfenced` is the negative control).
    #[arg(long, value_name = "MODE", default_value = "fenced", value_parser = AppWrite::parse)]
    pub app_write: AppWrite,
    /// How the effect step calls its provider (`helper`; `unfenced` is the negative control).
    #[arg(long, value_name = "MODE", default_value = "helper", value_parser = EffectMode::parse)]
    pub effects: EffectMode,
    /// Tick the run's schedule until the backend clock reaches this instant (ms; history
    /// rule 10).
    #[arg(long, value_name = "MS")]
    pub schedule_until_ms: Option<i64>,
    /// NEGATIVE CONTROL: the scheduler drops every fourth occurrence's admission.
    #[arg(long)]
    pub break_schedule: bool,
    /// Percent of the executions whose worker fails every delivery after its first step
    /// (history rule 11; the controller's `--failing-percent`).
    #[arg(long, value_name = "PCT", default_value_t = 0,
          value_parser = RangedU64ValueParser::<u32>::new().range(0..=100))]
    pub failing_percent: u32,
}

/// Runs the runtime until standard input closes.
pub async fn main(a: RuntimeArgs) -> ExitCode {
    skew::sample_clock(a.process);
    let log = match OpLog::create(&a.log) {
        Ok(l) => Arc::new(l),
        Err(e) => {
            eprintln!(
                "runtime {}: cannot open {}: {e}",
                a.process,
                a.log.display()
            );
            return ExitCode::FAILURE;
        }
    };
    let pool = u32::try_from(a.concurrency / 2 + 2).unwrap_or(8);
    let (inner, store) =
        match backend::open_retrying(&a.url, &a.namespace, pool, Duration::from_secs(120)).await {
            Ok(b) => b,
            Err(e) => {
                eprintln!("runtime {}: cannot open the backend: {e}", a.process);
                return ExitCode::FAILURE;
            }
        };
    let app = Arc::new(AppSteps::new(store, log.clone(), a.process, a.app_write));
    let effect_log = match EffectLog::create(&effects::log_path(&a.log)) {
        Ok(l) => Arc::new(l),
        Err(e) => {
            eprintln!("runtime {}: cannot open the effect log: {e}", a.process);
            return ExitCode::FAILURE;
        }
    };
    let fx = Arc::new(EffectSteps::new(effect_log.clone(), a.process, a.effects));
    let recorded_effects = RecordedEffects::new(inner.clone(), effect_log, a.process);
    let slow = Arc::new(AtomicU64::new(0));
    let recorder: Arc<dyn LeaseBackend> =
        Arc::new(Recorder::new(inner, log, a.process, slow.clone()).with_effects(recorded_effects));
    if let Some(until_ms) = a.schedule_until_ms {
        let scheduling = if a.break_schedule {
            Mutant::wrap(recorder.clone(), &[Broken::Schedule])
        } else {
            recorder.clone()
        };
        tokio::spawn(schedules::run(scheduling, until_ms));
    }
    let (lease_ms, failing) = (a.lease_ms, a.failing_percent);
    let options = DispatcherOptions::new()
        .concurrency(a.concurrency)
        .lease_duration(Duration::from_millis(lease_ms))
        .poll_interval(Duration::from_millis(50))
        .claim_batch(a.concurrency.min(1000));
    let for_worker = recorder.clone();
    let dispatcher = match Dispatcher::start(
        recorder,
        move |d: Delivery| {
            let steps = workflow::Steps {
                backend: for_worker.clone(),
                app: app.clone(),
                fx: fx.clone(),
            };
            workflow::run(d, steps, lease_ms, failing)
        },
        options,
    ) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("runtime {}: cannot start the dispatcher: {e}", a.process);
            return ExitCode::FAILURE;
        }
    };
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let mut words = line.split_whitespace();
        match (words.next(), words.next().map(str::parse::<u64>)) {
            (Some("slow"), Some(Ok(ms))) => slow.store(ms, Ordering::SeqCst),
            (Some("fast"), None) => slow.store(0, Ordering::SeqCst),
            _ => eprintln!("runtime {}: unknown control line {line:?}", a.process),
        }
    }
    slow.store(0, Ordering::SeqCst);
    let report = dispatcher.shutdown(Duration::from_secs(2)).await;
    eprintln!("runtime {}: stopped: {:?}", a.process, report.metrics);
    ExitCode::SUCCESS
}
