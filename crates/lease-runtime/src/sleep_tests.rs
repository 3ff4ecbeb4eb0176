//! Durable sleep, `Dispatcher::idle` and the delivery's log lines, on the memory backend and
//! its manual clock.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::Notify;

use super::*;
use crate::tests::{id, setup, wait_until};
use crate::typed_tests::{options, outcome, run_until_idle};
use lease_core::{Admission, ExecutionClient, ExecutionStatus, HeapClient, Timestamp};

const COOL_OFF: Duration = Duration::from_secs(60);

/// A workflow that charges, sleeps a minute (durably) and emails, counting each step's runs;
/// the second delivery asks to sleep an hour instead, which the recorded instant overrides.
#[tokio::test]
async fn a_durable_sleep_suspends_until_its_instant_then_replays_past_it() {
    let (clock, b) = setup();
    let start = b.now().await.expect("now");
    b.admit(&Admission::new(id("order-42")))
        .await
        .expect("admit");
    let charges = Arc::new(AtomicU32::new(0));
    let deliveries = Arc::new(AtomicU32::new(0));
    let (c, n) = (charges.clone(), deliveries.clone());
    let worker = move |d: Delivery| {
        let (c, n) = (c.clone(), n.clone());
        async move {
            let nth = n.fetch_add(1, Ordering::SeqCst);
            d.step("charge", || async {
                Ok::<_, DeliveryError>(c.fetch_add(1, Ordering::SeqCst))
            })
            .await?;
            let wait = if nth == 0 { COOL_OFF } else { COOL_OFF * 60 };
            d.sleep("cool-off", wait).await?;
            let out = lease_core::Json::to_json("out", &"emailed")?;
            Ok(Reply::Acknowledge(
                lease_core::WorkflowRunOutcome::Completed(out),
            ))
        }
    };
    let d = Dispatcher::start(Arc::new(b.clone()), worker, options()).expect("start");
    d.idle().await;
    let r = b.get(&id("order-42")).await.expect("get").expect("record");
    assert_eq!(r.status, ExecutionStatus::Suspended);
    assert_eq!(
        r.due_at,
        Some(start.saturating_add(COOL_OFF)),
        "woken at the instant"
    );
    assert_eq!(
        r.unacknowledged_deliveries, 0,
        "a sleep is acknowledged, not released"
    );
    let steps = b.list_steps(&id("order-42")).await.expect("steps");
    let sleep = steps.iter().find(|s| s.step_key.as_str() == "cool-off");
    let recorded: Timestamp = sleep
        .expect("the sleep's step")
        .response
        .decode()
        .expect("at");
    assert_eq!(recorded, start.saturating_add(COOL_OFF));

    clock.advance(COOL_OFF);
    d.wake();
    wait_until("completed", || deliveries.load(Ordering::SeqCst) == 2).await;
    d.idle().await;
    let report = d.shutdown(Duration::from_secs(1)).await;
    let (status, value) = outcome(&b, "order-42").await;
    assert_eq!(
        (status, value),
        (ExecutionStatus::Completed, "emailed".into())
    );
    assert_eq!(
        charges.load(Ordering::SeqCst),
        1,
        "the charge step replayed"
    );
    assert_eq!(report.metrics.acknowledgements, 2);
    assert_eq!(report.metrics.releases, 0);
}

#[tokio::test]
async fn a_sleep_whose_instant_passed_does_not_suspend() {
    let (_clock, b) = setup();
    b.admit(&Admission::new(id("order-42")))
        .await
        .expect("admit");
    let worker = |d: Delivery| async move {
        d.sleep("none", Duration::ZERO).await?;
        d.sleep_until("past", Timestamp::from_millis(0)).await?;
        Ok(Reply::Acknowledge(
            lease_core::WorkflowRunOutcome::Completed(lease_core::Json::null()),
        ))
    };
    run_until_idle(&b, worker).await;
    let r = b.get(&id("order-42")).await.expect("get").expect("record");
    assert_eq!(r.status, ExecutionStatus::Completed);
}

/// `idle` waits for running deliveries and for work already due, and a second call sees
/// work admitted after the first returned.
#[tokio::test]
async fn idle_waits_for_running_and_due_work() {
    let (_clock, b) = setup();
    for i in 0..6 {
        b.admit(&Admission::new(id(&format!("e-{i}"))))
            .await
            .expect("admit");
    }
    let gate = Arc::new(Notify::new());
    let started = Arc::new(AtomicU32::new(0));
    let (g, s) = (gate.clone(), started.clone());
    let worker = move |d: Delivery| {
        let (g, s) = (g.clone(), s.clone());
        async move {
            if d.execution_id().as_str() == "e-0" {
                s.fetch_add(1, Ordering::SeqCst);
                g.notified().await;
            }
            Ok(Reply::Acknowledge(
                lease_core::WorkflowRunOutcome::Completed(lease_core::Json::null()),
            ))
        }
    };
    let d =
        Dispatcher::start(Arc::new(b.clone()), worker, options().concurrency(2)).expect("start");
    let m = d.metrics();
    wait_until("e-0 running", || started.load(Ordering::SeqCst) == 1).await;
    {
        let idle = d.idle();
        tokio::pin!(idle);
        assert!(idle.as_mut().now_or_never().is_none(), "e-0 still runs");
        gate.notify_one();
        idle.await;
    }
    assert_eq!(m.snapshot().acknowledgements, 6);
    b.admit(&Admission::new(id("late"))).await.expect("admit");
    d.idle().await;
    let r = b.get(&id("late")).await.expect("get").expect("record");
    assert_eq!(r.status, ExecutionStatus::Completed);
    d.shutdown(Duration::from_secs(1)).await;
}

/// A `Vec<u8>` writer the log subscriber formats into.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// With a subscriber showing only warnings and errors, a worker's failure and panic lines
/// name the execution and the token (the delivery span was `info` and filtered out there).
#[tokio::test]
async fn warn_and_error_lines_name_the_execution_and_token() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let (_clock, b) = setup();
    b.admit(&Admission::new(id("fails"))).await.expect("admit");
    b.admit(&Admission::new(id("panics"))).await.expect("admit");
    let worker = |d: Delivery| async move {
        if d.execution_id().as_str() == "panics" {
            panic!("worker crashed");
        }
        Err::<Reply, _>(DeliveryError::worker("boom"))
    };
    let d = Dispatcher::start(Arc::new(b.clone()), worker, options()).expect("start");
    let m = d.metrics();
    wait_until("two failures", || m.snapshot().worker_failures >= 2).await;
    d.shutdown(Duration::from_secs(1)).await;
    let text = String::from_utf8(captured.0.lock().expect("log").clone()).expect("utf-8");
    for (name, message) in [("fails", "worker failed"), ("panics", "worker panicked")] {
        let line = text
            .lines()
            .find(|l| l.contains(message) && l.contains(&format!("execution_id={name}")))
            .unwrap_or_else(|| panic!("no {message} line naming {name} in:\n{text}"));
        assert!(line.contains("token="), "{line}");
    }
}
