//! Traces across processes (feature `otel`, docs/decisions/0041-traces-metrics-and-logs.md).
//!
//! A child process (this test binary, run again with [`CHILD_DB`] set) admits an execution
//! under its `request` span into a SQLite file, with `Admission::with_current_trace`, and
//! prints that span's trace and span ids as its own in-memory exporter saw them. This
//! process then opens the file, runs the execution through a dispatcher with an in-memory
//! exporter installed, and checks that the delivery's span is a child of the child's
//! `request` span (same trace, that parent, a link to it), that its step, claim, renew and
//! acknowledgement spans are there, and that a step write refused as `Lost` (the execution
//! was cancelled meanwhile) is an event on that step's span.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use lease::sqlite::{SqliteBackend, SqliteConfig};
use lease::{
    Admission, CancelReason, Delivery, DeliveryError, Dispatcher, DispatcherOptions,
    ExecutionClient, ExecutionId, Json, Reply, WorkflowName, WorkflowRunOutcome,
};
use opentelemetry::Value;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

/// Set in the child process: the SQLite file to admit into.
const CHILD_DB: &str = "LEASE_TRACES_CHILD_DB";
/// The child's output line: this prefix, then the trace id and the span id of its span.
const ADMITTED: &str = "admitted under span: ";
/// How long the parent waits for the deliveries to end.
const DEADLINE: Duration = Duration::from_secs(20);

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

/// A tracer provider exporting every ended span to `exporter` at once, and a subscriber
/// bridging `tracing` spans to it.
fn exporting(exporter: &InMemorySpanExporter) -> (SdkTracerProvider, impl tracing::Subscriber) {
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("lease-traces-test"));
    (provider, tracing_subscriber::registry().with(layer))
}

/// The child's part: admits `traced` under a `request` span, prints that span's ids.
#[test]
fn child_admits_under_a_span() {
    let Some(path) = std::env::var_os(CHILD_DB) else {
        return; // Only as the child of the test below.
    };
    let exporter = InMemorySpanExporter::default();
    let (provider, subscriber) = exporting(&exporter);
    tracing::subscriber::with_default(subscriber, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let admitted =
            runtime.block_on(admit(Path::new(&path)).instrument(tracing::info_span!("request")));
        assert!(admitted.trace_context.is_some(), "no context captured");
    });
    provider.force_flush().expect("flush");
    let spans = exporter.get_finished_spans().expect("spans");
    let request = named(&spans, "request");
    let c = &request.span_context;
    println!("{ADMITTED}{} {}", c.trace_id(), c.span_id());
}

async fn admit(path: &Path) -> lease::ExecutionRecord {
    let backend = SqliteBackend::open(SqliteConfig::file(path))
        .await
        .expect("open");
    let admission = Admission::new(id("traced"))
        .workflow(WorkflowName::new("order").expect("workflow"))
        .with_current_trace();
    backend.admit(&admission).await.expect("admit")
}

/// Runs the child; the trace id and span id it printed.
fn run_child(path: &Path) -> (String, String) {
    let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "child_admits_under_a_span", "--nocapture"])
        .env(CHILD_DB, path)
        .output()
        .expect("child runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.split_once(ADMITTED).map(|(_, ids)| ids.to_owned()))
        .unwrap_or_else(|| panic!("the child printed no ids: {stdout}"));
    let (trace, span) = line.split_once(' ').expect("two ids");
    (trace.to_owned(), span.to_owned())
}

/// The worker: `traced` writes one step, is cancelled by another connection, and writes a
/// second step (refused: `Lost`); `plain` waits for a renewal and completes.
async fn work(d: Delivery, other: Arc<SqliteBackend>) -> Result<Reply, DeliveryError> {
    if d.execution_id().as_str() == "plain" {
        let claimed = d.claimed_lease().expires_at;
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while d.lease().expires_at == claimed && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        return Ok(Reply::Acknowledge(WorkflowRunOutcome::Completed(
            Json::null(),
        )));
    }
    d.step("charge", || async { Ok::<_, std::io::Error>(1) })
        .await?;
    let reason = CancelReason::new("test").expect("reason");
    other.cancel(d.execution_id(), &reason).await?;
    d.step("ship", || async { Ok::<_, std::io::Error>(2) })
        .await?;
    Ok(Reply::Acknowledge(WorkflowRunOutcome::Completed(
        Json::null(),
    )))
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no {name} span among {:?}", names(spans)))
}

fn names(spans: &[SpanData]) -> Vec<&str> {
    spans.iter().map(|s| s.name.as_ref()).collect()
}

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

/// The spans whose `key` attribute is the string `value`.
fn with_attribute<'a>(spans: &'a [SpanData], key: &str, value: &str) -> Vec<&'a SpanData> {
    spans
        .iter()
        .filter(|s| attribute(s, key).is_some_and(|v| v.as_str() == value))
        .collect()
}

/// Runs both executions through a dispatcher until both deliveries' spans ended.
async fn deliver(path: &Path, exporter: &InMemorySpanExporter) {
    let open = || SqliteBackend::open(SqliteConfig::file(path));
    let backend = Arc::new(open().await.expect("open"));
    let other = Arc::new(open().await.expect("open"));
    backend
        .admit(&Admission::new(id("plain")))
        .await
        .expect("admit");
    let options = DispatcherOptions::new()
        .lease_duration(Duration::from_secs(2))
        .renew_every(Duration::from_millis(50));
    let worker = move |d: Delivery| work(d, other.clone());
    let dispatcher = Dispatcher::start(backend, worker, options).expect("start");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let spans = exporter.get_finished_spans().expect("spans");
        if spans.iter().filter(|s| s.name == "delivery").count() == 2 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "deliveries: {:?}",
            names(&spans)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    dispatcher.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_delivery_in_another_process_continues_the_admitting_trace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("traces.db");
    let (trace_id, span_id) = run_child(&path);
    let exporter = InMemorySpanExporter::default();
    let (provider, subscriber) = exporting(&exporter);
    let guard = tracing::subscriber::set_default(subscriber);
    deliver(&path, &exporter).await;
    drop(guard);
    provider.force_flush().expect("flush");
    let spans = exporter.get_finished_spans().expect("spans");

    let traced = with_attribute(&spans, "execution_id", "traced");
    let delivery = traced
        .iter()
        .find(|s| s.name == "delivery")
        .expect("traced delivery");
    assert_eq!(delivery.span_context.trace_id().to_string(), trace_id);
    assert_eq!(delivery.parent_span_id.to_string(), span_id);
    assert!(delivery.parent_span_is_remote);
    let linked: Vec<String> = delivery
        .links
        .links
        .iter()
        .map(|l| l.span_context.span_id().to_string())
        .collect();
    assert_eq!(linked, vec![span_id]);
    assert_eq!(
        attribute(delivery, "workflow")
            .map(Value::as_str)
            .as_deref(),
        Some("order")
    );

    let steps = with_attribute(&spans, "step", "ship");
    let ship = steps.first().expect("ship step span");
    assert_eq!(ship.parent_span_id, delivery.span_context.span_id());
    assert_eq!(ship.span_context.trace_id().to_string(), trace_id);
    let lost = ship
        .events
        .events
        .iter()
        .find(|e| e.name.starts_with("lost"))
        .expect("lost event");
    let operation = lost
        .attributes
        .iter()
        .find(|kv| kv.key.as_str() == "operation");
    assert_eq!(
        operation
            .map(|kv| kv.value.as_str().into_owned())
            .as_deref(),
        Some("write_step")
    );
    assert_eq!(with_attribute(&spans, "step", "charge").len(), 1);

    let plain = with_attribute(&spans, "execution_id", "plain");
    let plain_delivery = plain
        .iter()
        .find(|s| s.name == "delivery")
        .expect("plain delivery");
    assert_ne!(plain_delivery.span_context.trace_id().to_string(), trace_id);
    let children = |name: &str| {
        spans
            .iter()
            .filter(|s| s.name == name && s.parent_span_id == plain_delivery.span_context.span_id())
            .count()
    };
    assert!(children("renew") >= 1, "no renew span: {:?}", names(&spans));
    assert_eq!(children("acknowledge"), 1, "{:?}", names(&spans));
    assert!(spans.iter().any(|s| s.name == "claim"), "no claim span");
}
