//! Typed workflows on the memory backend: the registry, typed input and output, and the
//! executions no redelivery can cure (bad input, unknown workflow), which fail once with a
//! typed outcome.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::*;
use crate::tests::{id, setup};
use lease_core::{
    Admission, ExecutionClient, ExecutionOutcome, ExecutionStatus, Json, MemoryBackend,
    WorkflowName, WorkflowRunOutcome,
};

#[derive(Debug, Serialize, Deserialize)]
struct Signup {
    user_id: u64,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Welcome {
    greeted: u64,
}

pub(super) fn options() -> DispatcherOptions {
    DispatcherOptions::new()
        .concurrency(4)
        .lease_duration(Duration::from_secs(30))
        .renew_every(Duration::from_secs(15))
        .poll_interval(Duration::from_millis(5))
}

/// A registry with `signup` (typed: greets the user) and `refund` (fails on purpose).
fn workflows(runs: Arc<AtomicU32>) -> Workflows {
    let mut workflows = Workflows::new();
    workflows
        .register("signup", move |d: Delivery, signup: Signup| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                let greeted: u64 = d
                    .step(
                        "greet",
                        || async move { Ok::<_, DeliveryError>(signup.user_id) },
                    )
                    .await?;
                Ok(Welcome { greeted })
            }
        })
        .expect("signup")
        .register("refund", |_d: Delivery, (): ()| async move {
            Err::<(), _>(DeliveryError::fail(
                &serde_json::json!({"declined": "card"}),
            ))
        })
        .expect("refund");
    workflows
}

/// Runs `worker` on `b` until the dispatcher is idle, then shuts it down.
pub(super) async fn run_until_idle(b: &MemoryBackend, worker: impl Worker) -> ShutdownReport {
    let d = Dispatcher::start(Arc::new(b.clone()), worker, options()).expect("start");
    d.idle().await;
    d.shutdown(Duration::from_secs(1)).await
}

/// The decoded outcome of a terminal execution, with its status.
pub(super) async fn outcome(b: &MemoryBackend, name: &str) -> (ExecutionStatus, serde_json::Value) {
    let r = b.get(&id(name)).await.expect("get").expect("record");
    let json = match &r.outcome {
        Some(ExecutionOutcome::Completed(j) | ExecutionOutcome::Failed(j)) => j,
        _ => panic!("{name} has no outcome: {r:?}"),
    };
    (r.status, json.decode().expect("outcome"))
}

fn admission(name: &str, workflow: &str, input: &str) -> Admission {
    Admission::new(id(name))
        .workflow(WorkflowName::new(workflow).expect("workflow"))
        .input(Json::parse("input", input).expect("input"))
}

#[tokio::test]
async fn a_typed_handler_gets_its_input_and_completes_with_its_output() {
    let (_clock, b) = setup();
    let runs = Arc::new(AtomicU32::new(0));
    let typed = Admission::typed(id("signup-7"), "signup", &Signup { user_id: 7 }).expect("typed");
    assert_eq!(
        typed.input.as_ref().map(Json::as_str),
        Some(r#"{"user_id":7}"#)
    );
    b.admit(&typed).await.expect("admit");
    b.admit(&admission("refund-1", "refund", "null"))
        .await
        .expect("admit");
    let report = run_until_idle(&b, workflows(runs.clone())).await;
    assert_eq!(
        outcome(&b, "signup-7").await,
        (
            ExecutionStatus::Completed,
            serde_json::json!({"greeted": 7})
        )
    );
    assert_eq!(
        outcome(&b, "refund-1").await,
        (
            ExecutionStatus::Failed,
            serde_json::json!({"declined": "card"})
        )
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(report.metrics.releases, 0, "{:?}", report.metrics);
    assert_eq!(
        report.metrics.worker_failures, 0,
        "a workflow's own failure is not one"
    );
}

#[test]
fn registering_a_name_twice_or_an_invalid_name_is_a_typed_error() {
    let mut workflows = workflows(Arc::default());
    let again = workflows
        .register("signup", |_d: Delivery, (): ()| async { Ok(()) })
        .expect_err("a second signup handler");
    assert!(
        matches!(&again, RegisterError::Duplicate(name) if name.as_str() == "signup"),
        "{again:?}"
    );
    let empty = workflows
        .register("", |_d: Delivery, (): ()| async { Ok(()) })
        .expect_err("an empty name");
    assert!(
        matches!(
            empty,
            RegisterError::InvalidName(lease_core::LeaseError::InvalidInput { .. })
        ),
        "{empty:?}"
    );
    let names: Vec<&str> = workflows.names().map(WorkflowName::as_str).collect();
    assert_eq!(names, ["refund", "signup"], "the registry is unchanged");
    assert!(
        Admission::typed(id("x"), "", &1).is_err(),
        "a typed admission checks the name"
    );
}

/// The newcomer's case: `{"user_id":"seven"}` is valid JSON of the wrong shape. It used to
/// be a backend error ("payload is not valid JSON") released and delivered again forever.
/// Now both the typed handler and `input_as` in a closure fail the execution once, saying
/// what did not fit.
#[tokio::test]
async fn an_input_of_the_wrong_shape_fails_the_execution_once() {
    let (_clock, b) = setup();
    let runs = Arc::new(AtomicU32::new(0));
    b.admit(&admission("typed", "signup", r#"{"user_id":"seven"}"#))
        .await
        .expect("admit");
    let report = run_until_idle(&b, workflows(runs.clone())).await;
    let (status, value) = outcome(&b, "typed").await;
    assert_eq!(status, ExecutionStatus::Failed);
    assert_eq!(value["error"], "bad_input");
    assert_eq!(value["workflow"], "signup");
    let reason = value["reason"].as_str().expect("reason");
    assert!(
        reason.contains(r#"invalid type: string "seven", expected u64"#),
        "{reason}"
    );
    assert!(!reason.contains("not valid JSON"), "{reason}");
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the handler never ran");
    assert_eq!(
        (report.metrics.releases, report.metrics.worker_failures),
        (0, 1)
    );

    // The closure form, with `input_as`.
    let (_clock, b) = setup();
    b.admit(&admission("closure", "signup", r#"{"user_id":"seven"}"#))
        .await
        .expect("admit");
    let worker = |d: Delivery| async move {
        let signup: Signup = d.input_as()?;
        let out = Json::to_json("out", &signup.user_id)?;
        Ok(Reply::Acknowledge(WorkflowRunOutcome::Completed(out)))
    };
    let report = run_until_idle(&b, worker).await;
    let (status, value) = outcome(&b, "closure").await;
    assert_eq!(
        (status, &value["error"]),
        (ExecutionStatus::Failed, &"bad_input".into())
    );
    assert_eq!(report.metrics.releases, 0);
}

/// An execution whose workflow has no handler here, or that names none, fails once with
/// `unknown_workflow` listing what the dispatcher knows, instead of retrying forever.
#[tokio::test]
async fn an_unknown_workflow_fails_the_execution_once() {
    let (_clock, b) = setup();
    b.admit(&admission("mystery", "newsletter", "{}"))
        .await
        .expect("admit");
    b.admit(&Admission::new(id("nameless")))
        .await
        .expect("admit");
    let report = run_until_idle(&b, workflows(Arc::default())).await;
    let (status, value) = outcome(&b, "mystery").await;
    assert_eq!(status, ExecutionStatus::Failed);
    assert_eq!(value["error"], "unknown_workflow");
    assert_eq!(value["workflow"], "newsletter");
    let reason = value["reason"].as_str().expect("reason");
    assert!(reason.contains("it knows: refund, signup"), "{reason}");
    let (status, value) = outcome(&b, "nameless").await;
    assert_eq!(status, ExecutionStatus::Failed);
    assert_eq!(value["workflow"], serde_json::Value::Null);
    assert_eq!(
        (report.metrics.releases, report.metrics.worker_failures),
        (0, 2)
    );
}

/// Absent input decodes as `null`, so a `()` or `Option` input needs none; any other type
/// is a typed `bad_input` naming the missing input.
#[tokio::test]
async fn absent_input_decodes_as_null() {
    let (_clock, b) = setup();
    b.admit(&Admission::new(id("x"))).await.expect("admit");
    let lease = lease_core::ExecutionClientExt::claim_due(
        &b,
        lease_core::ClaimRequest {
            now: b.now().await.expect("now"),
            limit: 1,
            duration: Duration::from_secs(30),
        },
    )
    .await
    .expect("claim")
    .pop()
    .expect("lease");
    let record = b.get(&id("x")).await.expect("get").expect("record");
    let d = Delivery::new(Arc::new(b), lease, record, Default::default());
    d.input_as::<()>().expect("unit");
    assert_eq!(d.input_as::<Option<u64>>().expect("option"), None);
    let err = d.input_as::<Signup>().expect_err("no input");
    assert!(matches!(err, DeliveryError::BadInput { .. }), "{err:?}");
    assert!(err.to_string().contains("admitted without input"), "{err}");
}
