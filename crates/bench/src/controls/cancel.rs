//! `controls cancel`: how long after `cancel(id, reason)` the
//! dispatcher running the execution cancels its worker, against the renewal interval.
//!
//! A dispatcher in this process (its own client of the store, concurrency [`BATCH`], leases
//! of 3 x [`RENEW`] renewed every [`RENEW`], no prefetch) runs workers that wait for their
//! delivery to be cancelled. In rounds of [`BATCH`] executions: admit them, wait until every
//! worker started, then cancel them one by one through another client, each at an offset
//! after its start spread evenly over one renewal interval (a golden-ratio sequence), so the
//! cancels fall at every phase of the renewal schedule. Measured per execution: from just
//! before the `cancel` call to the moment its worker saw the cancellation (its
//! `Delivery::cancelled` completed, or the dispatcher dropped its future, whichever came
//! first). Reported: p50, p99 and max over [`SAMPLES`], against the target of one renewal
//! interval. The dispatcher learns of the cancel when its next renewal comes back `Lost`,
//! so the expected latency is uniform over (0, interval] plus a renewal's round trip.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use lease_core::{CancelOutcome, CancelReason, ExecutionId, SharedBackend};
use lease_runtime::{Delivery, DeliveryError, Dispatcher, DispatcherOptions, Reply};
use serde::Serialize;
use tokio::sync::mpsc;

use super::cells::{two, verdict};
use crate::args::{Kind, Options};
use crate::error::{BenchError, Context, Result};
use crate::fill;
use crate::fixture::Fixture;

/// The row's name.
pub const NAME: &str = "controls cancel";

/// Cancellations measured per backend.
pub const SAMPLES: usize = 200;

/// Executions per round.
pub const BATCH: usize = 20;

/// The dispatcher's renewal interval (its lease: three of them).
pub const RENEW: Duration = Duration::from_millis(500);

/// The longest one round may take.
const ROUND_LIMIT: Duration = Duration::from_secs(30);

/// The cancel latency of one backend.
#[derive(Debug, Clone, Serialize)]
pub struct CancelRow {
    /// Backend.
    pub backend: &'static str,
    /// Cancellations measured.
    pub samples: usize,
    /// The renewal interval, ms (the target).
    pub renew_ms: f64,
    /// Median latency, ms.
    pub p50_ms: Option<f64>,
    /// 99th percentile, ms.
    pub p99_ms: Option<f64>,
    /// Largest, ms.
    pub max_ms: Option<f64>,
    /// Median time of the `cancel` call itself, ms.
    pub call_p50_ms: Option<f64>,
    /// 1-minute load average before the row.
    pub load: f64,
    /// Why it did not run.
    pub error: Option<String>,
}

/// The `q` quantile (0..=1) of sorted `v`: the smallest value with at least `q` of them at
/// or below it.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Measures `samples` cancellations with renewals every `renew`.
pub async fn row(kind: Kind, options: &Options, samples: usize, renew: Duration) -> CancelRow {
    let load = crate::load::one_minute();
    let made = measure(kind, options, samples, renew).await;
    let (mut latency, mut calls, error) = match made {
        Ok((l, c)) => (l, c, None),
        Err(e) => (Vec::new(), Vec::new(), Some(e.to_string())),
    };
    latency.sort_by(f64::total_cmp);
    calls.sort_by(f64::total_cmp);
    let row = CancelRow {
        backend: kind.name(),
        samples: latency.len(),
        renew_ms: renew.as_secs_f64() * 1e3,
        p50_ms: quantile(&latency, 0.5),
        p99_ms: quantile(&latency, 0.99),
        max_ms: latency.last().copied(),
        call_p50_ms: quantile(&calls, 0.5),
        load,
        error,
    };
    eprintln!(
        "lease-bench: {} {NAME}: p50 {} p99 {} max {} ms over {} (renewal {} ms){}",
        kind.name(),
        two(row.p50_ms),
        two(row.p99_ms),
        two(row.max_ms),
        row.samples,
        row.renew_ms,
        row.error
            .as_ref()
            .map_or_else(String::new, |e| format!(" ERROR {e}"))
    );
    row
}

/// What the workers report: an execution's worker started, or saw its cancellation.
enum Seen {
    Started(String, Instant),
    Cancelled(String, Instant),
}

/// Sends [`Seen::Cancelled`] once: when the worker's `cancelled()` completes or, failing
/// that, when the dispatcher drops the worker's future.
struct Watch {
    id: String,
    tx: mpsc::UnboundedSender<Seen>,
    sent: bool,
}

impl Watch {
    fn fire(&mut self) {
        if !self.sent {
            self.sent = true;
            let _ = self
                .tx
                .send(Seen::Cancelled(self.id.clone(), Instant::now()));
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.fire();
    }
}

fn start(
    backend: SharedBackend,
    renew: Duration,
    tx: mpsc::UnboundedSender<Seen>,
) -> Result<Dispatcher> {
    let worker = move |d: Delivery| {
        let tx = tx.clone();
        async move {
            let id = d.execution_id().as_str().to_owned();
            let _ = tx.send(Seen::Started(id.clone(), Instant::now()));
            let mut watch = Watch {
                id,
                tx,
                sent: false,
            };
            d.cancelled().await;
            watch.fire();
            Err::<Reply, _>(DeliveryError::Cancelled)
        }
    };
    let options = DispatcherOptions::new()
        .concurrency(BATCH)
        .lease_duration(renew * 3)
        .renew_every(renew)
        .prefetch(0);
    Dispatcher::start(backend, worker, options).context(|| "start dispatcher".into())
}

async fn measure(
    kind: Kind,
    options: &Options,
    samples: usize,
    renew: Duration,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let fx = Fixture::new(kind, options).await?;
    let result = async {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let dispatcher = start(fx.peer().await?, renew, tx)?;
        let mut out = (Vec::new(), Vec::new());
        let mut round = 0;
        let run = async {
            while out.0.len() < samples {
                let n = BATCH.min(samples - out.0.len());
                let (l, c) = cancel_round(&fx.lib, &mut rx, round, n, renew).await?;
                out.0.extend(l);
                out.1.extend(c);
                round += 1;
            }
            Ok::<_, BenchError>(())
        }
        .await;
        let report = dispatcher.shutdown(Duration::from_secs(5)).await;
        run?;
        if report.metrics.lost < out.0.len() as u64 {
            return Err(BenchError::Setup(format!(
                "the dispatcher saw {} leases lost for {} cancels",
                report.metrics.lost,
                out.0.len()
            )));
        }
        Ok(out)
    }
    .await;
    fx.remove_after(result).await
}

/// The offset of cancel `k` after its worker's start: the fractional part of `k` times the
/// golden ratio, of one renewal interval.
fn offset(k: usize, renew: Duration) -> Duration {
    let phase = (k as f64 * 0.618_033_988_75).fract();
    renew.mul_f64(phase)
}

/// One round: `n` executions admitted, started, cancelled; their latencies and cancel call
/// times in ms.
async fn cancel_round(
    lib: &SharedBackend,
    rx: &mut mpsc::UnboundedReceiver<Seen>,
    round: usize,
    n: usize,
    renew: Duration,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let deadline = tokio::time::Instant::now() + ROUND_LIMIT;
    fill::admit(lib, &format!("x{round}-"), 0, n as u64, None).await?;
    let mut started = HashMap::new();
    let mut seen = HashMap::new();
    while started.len() < n {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(Seen::Started(id, at))) => {
                started.insert(id, at);
            }
            Ok(Some(Seen::Cancelled(id, at))) => {
                seen.insert(id, at);
            }
            _ => {
                return Err(BenchError::Setup(format!(
                    "{} of {n} started",
                    started.len()
                )));
            }
        }
    }
    let mut plan: Vec<(Instant, String)> = started
        .iter()
        .enumerate()
        .map(|(k, (id, at))| (*at + offset(round * BATCH + k, renew), id.clone()))
        .collect();
    plan.sort();
    let reason = CancelReason::new("bench").context(|| "reason".into())?;
    let mut called = HashMap::new();
    let mut calls = Vec::new();
    for (at, id) in plan {
        tokio::time::sleep_until(at.into()).await;
        let eid = ExecutionId::new(id.clone()).context(|| "id".into())?;
        let t0 = Instant::now();
        let outcome = lib
            .cancel(&eid, &reason)
            .await
            .context(|| "cancel".into())?;
        calls.push(t0.elapsed().as_secs_f64() * 1e3);
        if !matches!(outcome, CancelOutcome::Cancelled { ended_lease: true }) {
            return Err(BenchError::Setup(format!("cancel {id}: {outcome:?}")));
        }
        called.insert(id, t0);
    }
    while seen.len() < n {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(Seen::Cancelled(id, at))) => {
                seen.insert(id, at);
            }
            Ok(Some(Seen::Started(id, _))) => {
                return Err(BenchError::Setup(format!(
                    "{id} started again after cancel"
                )));
            }
            _ => {
                return Err(BenchError::Setup(format!(
                    "{} of {n} saw the cancel",
                    seen.len()
                )));
            }
        }
    }
    let latency = called
        .iter()
        .map(|(id, t0)| {
            seen.get(id)
                .map(|at| at.saturating_duration_since(*t0).as_secs_f64() * 1e3)
                .ok_or_else(|| BenchError::Setup(format!("{id}: no cancel seen")))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((latency, calls))
}

/// The markdown table of the cancel rows.
pub fn markdown(rows: &[CancelRow]) -> String {
    let mut out = String::from(
        "| backend | cancels | renewal interval (ms) | p50 (ms) | p99 (ms) | max (ms) | cancel call p50 (ms) | target | met | load |\n\
         |---|---:|---:|---:|---:|---:|---:|---|---|---:|\n",
    );
    for r in rows {
        let met = r.p99_ms.map(|p| p <= r.renew_ms);
        out.push_str(&format!(
            "| {} | {} | {:.0} | {} | {} | {} | {} | p99 <= 1 renewal interval | {} | {:.2} |\n",
            r.backend,
            r.samples,
            r.renew_ms,
            two(r.p50_ms),
            two(r.p99_ms),
            two(r.max_ms),
            two(r.call_p50_ms),
            verdict(&r.error, met),
            r.load,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_offsets() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.99), Some(99.0));
        assert_eq!(quantile(&v, 0.5), Some(50.0));
        assert_eq!(quantile(&v, 1.0), Some(100.0));
        assert_eq!(quantile(&[], 0.5), None);
        let d = Duration::from_millis(1000);
        assert!((0..50).all(|k| offset(k, d) < d));
        assert_ne!(offset(1, d), offset(2, d));
    }

    /// The row's code on SQLite, few cancels, short renewals: every cancel was seen.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancel_row_runs_on_sqlite() {
        let options = crate::args::parse(&[]).expect("options");
        let r = row(Kind::Sqlite, &options, 25, Duration::from_millis(100)).await;
        assert_eq!(r.error, None);
        assert_eq!(r.samples, 25);
        assert!(r.p99_ms.is_some() && r.call_p50_ms.is_some());
        assert!(markdown(&[r]).contains("| sqlite | 25 | 100 |"));
    }
}
