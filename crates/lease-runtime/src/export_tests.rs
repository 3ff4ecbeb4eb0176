//! The `metrics` feature: a dispatcher runs a few executions on the memory
//! backend and the values are read back through `metrics-util`'s debugging recorder.

use std::sync::Arc;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::{CompositeKey, MetricKind};

use super::metric_names::*;
use super::*;
use lease_core::{
    Admission, ExecutionClient, ExecutionStatus, Json, ManualClock, MemoryBackend,
    RedeliveryPolicy, WorkflowRunOutcome,
};

type Entries = Vec<(CompositeKey, DebugValue)>;

fn entries(snapshotter: &Snapshotter) -> Entries {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _unit, _description, value)| (key, value))
        .collect()
}

fn labels(key: &CompositeKey) -> Vec<(String, String)> {
    key.key()
        .labels()
        .map(|l| (l.key().to_owned(), l.value().to_owned()))
        .collect()
}

fn counter(entries: &Entries, name: &str) -> u64 {
    let found: Vec<u64> = entries
        .iter()
        .filter(|(k, _)| k.kind() == MetricKind::Counter && k.key().name() == name)
        .map(|(k, v)| {
            assert_eq!(labels(k), [("backend".to_owned(), "memory".to_owned())]);
            match v {
                DebugValue::Counter(n) => *n,
                other => panic!("{name}: {other:?}"),
            }
        })
        .collect();
    assert_eq!(found.len(), 1, "{name} registered once: {found:?}");
    found[0]
}

/// The latencies recorded for `operation` with `outcome`.
fn latencies(entries: &Entries, operation: &str, outcome: &str) -> Vec<f64> {
    entries
        .iter()
        .filter(|(k, _)| k.kind() == MetricKind::Histogram && k.key().name() == CALL_DURATION)
        .filter(|(k, _)| {
            let l = labels(k);
            l.contains(&("operation".to_owned(), operation.to_owned()))
                && l.contains(&("outcome".to_owned(), outcome.to_owned()))
        })
        .flat_map(|(_, v)| match v {
            DebugValue::Histogram(values) => {
                values.iter().map(|f| f.into_inner()).collect::<Vec<f64>>()
            }
            other => panic!("{operation}: {other:?}"),
        })
        .collect::<Vec<f64>>()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispatcher_values_are_read_back_through_a_recorder() {
    let clock = ManualClock::starting_now();
    let policy =
        RedeliveryPolicy::new(Duration::from_secs(60), 2, Duration::from_secs(60)).expect("policy");
    let backend = MemoryBackend::with_clock(Arc::new(clock)).with_policy(policy);
    for name in ["order-1", "order-2", "order-3", "fails"] {
        let id = lease_core::ExecutionId::new(name).expect("id");
        backend.admit(&Admission::new(id)).await.expect("admit");
    }
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let worker = |d: Delivery| async move {
        if d.execution_id().as_str() == "fails" {
            return Err(DeliveryError::worker("boom"));
        }
        let receipt: String = d
            .step("charge", || async {
                Ok::<_, DeliveryError>("r-1".to_owned())
            })
            .await?;
        Ok(Reply::Acknowledge(WorkflowRunOutcome::Completed(
            Json::to_json("result", &receipt)?,
        )))
    };
    // Handles are registered at start, with the recorder current then (here a local one,
    // so this test needs no process-wide recorder).
    let dispatcher = ::metrics::with_local_recorder(&recorder, || {
        Dispatcher::start(
            Arc::new(backend.clone()),
            worker,
            DispatcherOptions::new()
                .concurrency(4)
                .poll_interval(Duration::from_millis(5)),
        )
    })
    .expect("start");
    let live = dispatcher.metrics();
    super::tests::wait_until("three acknowledgements and a release", || {
        let s = live.snapshot();
        s.acknowledgements == 3 && s.releases == 1
    })
    .await;
    let report = dispatcher.shutdown(Duration::from_secs(5)).await;
    let s = report.metrics;
    for name in ["order-1", "order-2", "order-3"] {
        let id = lease_core::ExecutionId::new(name).expect("id");
        let record = backend.get(&id).await.expect("get").expect("record");
        assert_eq!(record.status, ExecutionStatus::Completed, "{name}");
    }

    let e = entries(&snapshotter);
    // Every counter exports exactly what the dispatcher counted.
    assert_eq!(counter(&e, CLAIMS), s.claims);
    assert_eq!(counter(&e, CLAIM_CALLS), s.claim_calls);
    assert_eq!(counter(&e, EMPTY_CLAIMS), s.empty_claims);
    assert_eq!(counter(&e, WAKEUPS), s.wakeups);
    assert_eq!(counter(&e, PURGED), s.purged);
    assert_eq!(counter(&e, RENEWALS), s.renewals);
    assert_eq!(counter(&e, LOST), s.lost);
    assert_eq!(counter(&e, ACKNOWLEDGEMENTS), 3);
    assert_eq!(counter(&e, RELEASES), 1);
    assert_eq!(counter(&e, WORKER_FAILURES), 1);
    assert_eq!(counter(&e, BACKEND_ERRORS), 0);
    assert_eq!(s.claims, 4, "{s:?}");
    let in_flight: Vec<_> = e
        .iter()
        .filter(|(k, _)| k.kind() == MetricKind::Gauge && k.key().name() == IN_FLIGHT)
        .map(|(_, v)| v)
        .collect();
    assert_eq!(in_flight, [&DebugValue::Gauge(0.0.into())], "all ended");

    // One latency per call: a step write per completed execution, one release, and each
    // acknowledgement on one of the three acknowledging calls.
    let written = latencies(&e, "write_step", "ok");
    assert_eq!(written.len(), 3, "{written:?}");
    assert!(
        written.iter().all(|s| s.is_finite() && *s >= 0.0),
        "{written:?}"
    );
    assert_eq!(latencies(&e, "release", "ok").len(), 1);
    assert!(
        latencies(&e, "read_step", "ok").is_empty(),
        "first deliveries read no steps"
    );
    let acknowledging: usize = ["acknowledge", "acknowledge_and_claim", "acknowledge_batch"]
        .iter()
        .map(|op| latencies(&e, op, "ok").len())
        .sum();
    assert!((1..=3).contains(&acknowledging), "{acknowledging}");
    let claims = latencies(&e, "claim_due", "ok").len() as u64
        + latencies(&e, "acknowledge_and_claim", "ok").len() as u64;
    assert!(claims >= s.claim_calls, "{claims} < {}", s.claim_calls);
    for op in OPERATIONS {
        assert!(latencies(&e, op, "error").is_empty(), "{op} failed");
    }
}
