//! One runtime process: a dispatcher running the order workflow on a shared backend until
//! its stdin closes, then a graceful shutdown. Its events go to stdout as JSON lines.
//!
//! Closing stdin (rather than a signal) as the stop request means an orchestrator that
//! dies takes its workers down with it, and SIGKILL/SIGSTOP stay free for the tests.

use std::io::Read;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use lease::{Delivery, Dispatcher, DispatcherOptions};

use crate::args::WorkerArgs;
use crate::backend::{self, OpenResult};
use crate::events::{self, TARGET};
use crate::provider::Provider;
use crate::workflow::OrderWorkflow;

/// How long a graceful shutdown lets deliveries finish before releasing them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Runs a runtime process with command-line `args` (without the program name).
pub fn main_with(args: impl IntoIterator<Item = String>) -> ExitCode {
    let args = match WorkerArgs::parse(args) {
        Ok(args) => args,
        Err(e) => {
            // Help and version on stdout with status 0; bad arguments on stderr with 2.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    events::install(&args.name);
    // One thread: timers fire in deadline order and tasks run in wake order, which keeps a
    // resumed (SIGCONT) process's story readable; the dispatcher needs nothing more.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lease-worker: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(target: TARGET, error = %e, "failed");
            eprintln!("lease-worker: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: WorkerArgs) -> OpenResult<()> {
    let policy = backend::policy(args.redelivery_base)?;
    let opened = backend::open_store(&args.url, &args.namespace, policy).await?;
    opened.store.create_charges().await?;
    let shared = opened.shared;
    let workflow = OrderWorkflow {
        backend: shared.clone(),
        store: opened.store,
        name: Arc::from(args.name.as_str()),
        lease: args.lease,
        provider: Provider::open(&args.provider)?,
    };
    let options = DispatcherOptions::new()
        .concurrency(args.concurrency)
        .lease_duration(args.lease)
        .renew_every(args.renew_every)
        .poll_interval(args.poll);
    let dispatcher =
        Dispatcher::start(shared, move |d: Delivery| workflow.clone().run(d), options)?;
    tracing::info!(
        target: TARGET,
        concurrency = args.concurrency,
        lease_ms = u64::try_from(args.lease.as_millis()).unwrap_or(u64::MAX),
        renew_ms = u64::try_from(args.renew_every.as_millis()).unwrap_or(u64::MAX),
        "ready"
    );
    stdin_closed().await;
    let report = dispatcher.shutdown(SHUTDOWN_GRACE).await;
    let m = report.metrics;
    tracing::info!(
        target: TARGET,
        claims = m.claims,
        renewals = m.renewals,
        lost = m.lost,
        acknowledgements = m.acknowledgements,
        releases = m.releases,
        worker_failures = m.worker_failures,
        backend_errors = m.backend_errors,
        max_in_flight = m.max_in_flight,
        finished = report.finished,
        cancelled = report.cancelled,
        "exit"
    );
    Ok(())
}

/// Completes when stdin reaches end of file (or fails).
async fn stdin_closed() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut sink = [0u8; 256];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        let _ = tx.send(());
    });
    let _ = rx.await;
}
