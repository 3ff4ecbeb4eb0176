//! Pause and resume: while a scope is paused no connection claims what it covers; live
//! leases go on; resume wakes idle dispatchers. A harness without pause ([`lease_core::Capabilities::pause`]
//! `false`) checks only that it says so.

use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, ExecutionClient, PauseScope, WorkflowName, WorkflowRunOutcome,
};

use crate::context::{Ctx, LEASE, json};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __pause_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, pause, [
            pause_namespace_holds_back_every_claim,
            pause_workflow_holds_back_only_its_executions,
            pause_lets_live_leases_renew_and_acknowledge,
            paused_work_is_left_out_of_the_horizon, resume_signals_the_wakeup_path,
        ] }
    };
}

fn workflow(name: &str) -> WorkflowName {
    WorkflowName::new(name).expect("workflow")
}

/// Returns `true` (after checking the refusal) when the harness has no pause.
async fn unsupported<H: Harness>(ctx: &Ctx<H>) -> bool {
    if ctx.caps().pause {
        return false;
    }
    let b = ctx.backend();
    let err = b.pause(&PauseScope::Namespace).await.expect_err("no pause");
    ctx.assert_unsupported(&err);
    ctx.admit("free").await;
    ctx.claim_one("free").await;
    ctx.refusal_only()
}

async fn admit_as<H: Harness>(ctx: &Ctx<H>, id: &str, name: Option<&str>) {
    let mut admission = Admission::new(ctx.id(id));
    if let Some(name) = name {
        admission = admission.workflow(workflow(name));
    }
    ctx.backend().admit(&admission).await.expect("admit");
}

/// Pausing the namespace stops every claim on every connection (also one opened after the
/// pause); pause is idempotent; resume lets the held executions be claimed.
pub async fn pause_namespace_holds_back_every_claim<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    admit_as(&*ctx, "a", Some("mail")).await;
    admit_as(&*ctx, "b", None).await;
    assert!(b.pause(&PauseScope::Namespace).await.expect("pause"));
    assert!(!b.pause(&PauseScope::Namespace).await.expect("pause again"));
    assert_eq!(
        ctx.peer().await.list_paused().await.expect("list"),
        vec![PauseScope::Namespace]
    );
    ctx.assert_nothing_claimable("the namespace is paused")
        .await;
    let later = ctx.peer().await;
    assert!(
        ctx.claim(&later, 10).await.is_empty(),
        "a later connection obeys too"
    );
    assert!(later.resume(&PauseScope::Namespace).await.expect("resume"));
    assert!(
        !later
            .resume(&PauseScope::Namespace)
            .await
            .expect("resume again")
    );
    assert!(b.list_paused().await.expect("list").is_empty());
    assert_eq!(ctx.claim(&b, 10).await.len(), 2, "resumed: both claimable");
}

/// Pausing one workflow holds back only executions admitted with that name; the paused
/// list is the namespace first, then workflows by name.
pub async fn pause_workflow_holds_back_only_its_executions<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    admit_as(&*ctx, "m", Some("mail")).await;
    admit_as(&*ctx, "s", Some("sms")).await;
    admit_as(&*ctx, "n", None).await;
    b.pause(&PauseScope::Workflow(workflow("sms")))
        .await
        .expect("pause");
    b.pause(&PauseScope::Workflow(workflow("mail")))
        .await
        .expect("pause");
    assert_eq!(
        b.list_paused().await.expect("list"),
        vec![
            PauseScope::Workflow(workflow("mail")),
            PauseScope::Workflow(workflow("sms"))
        ]
    );
    b.resume(&PauseScope::Workflow(workflow("sms")))
        .await
        .expect("resume");
    let mut got: Vec<String> = ctx
        .claim(&b, 10)
        .await
        .into_iter()
        .map(|l| l.execution_id.as_str().to_owned())
        .collect();
    got.sort();
    assert_eq!(got, ["n", "s"], "mail stays held back");
    b.resume(&PauseScope::Workflow(workflow("mail")))
        .await
        .expect("resume");
    ctx.claim_only(&b, "m").await;
}

/// A pause ends no lease: the holder renews and acknowledges as before.
pub async fn pause_lets_live_leases_renew_and_acknowledge<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    admit_as(&*ctx, "job", Some("mail")).await;
    let lease = ctx.claim_one("job").await;
    b.pause(&PauseScope::Namespace).await.expect("pause");
    b.pause(&PauseScope::Workflow(workflow("mail")))
        .await
        .expect("pause");
    let renewed = b.renew(&lease, LEASE).await.expect("renew");
    assert!(!renewed.is_lost(), "a paused holder renews");
    assert!(!ctx.write(&b, &lease, "step", "1").await.is_lost());
    let ack = b
        .acknowledge(&lease, &WorkflowRunOutcome::Completed(json("1")))
        .await
        .expect("ack");
    assert!(!ack.is_lost(), "a paused holder acknowledges");
}

/// A claim while paused reports no horizon for what the pause holds back (the dispatcher
/// sleeps instead of spinning on it), and the same claim after resume takes it.
pub async fn paused_work_is_left_out_of_the_horizon<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    admit_as(&*ctx, "job", Some("mail")).await;
    b.pause(&PauseScope::Workflow(workflow("mail")))
        .await
        .expect("pause");
    let request = ClaimRequest {
        now: ctx.now(),
        limit: 10,
        duration: LEASE,
    };
    let batch = b.claim_due_with_horizon(request).await.expect("claim");
    assert!(batch.claimed.is_empty());
    assert_eq!(batch.next_claimable_at, None, "paused work is not pending");
    b.resume(&PauseScope::Workflow(workflow("mail")))
        .await
        .expect("resume");
    let batch = b.claim_due_with_horizon(request).await.expect("claim");
    assert_eq!(batch.claimed.len(), 1);
}

/// Resume signals every connection's wake-up receiver (when the backend sends wake-ups),
/// so an idle dispatcher claims at once. Without wake-ups there is nothing to signal.
pub async fn resume_signals_the_wakeup_path<H: Harness>(ctx: Arc<Ctx<H>>) {
    if unsupported(&*ctx).await {
        return;
    }
    let b = ctx.backend();
    let listener = ctx.peer().await;
    if !ctx.caps().wakeups {
        assert!(
            listener.wakeups().is_none(),
            "WAKEUPS must say the backend sends them"
        );
        assert!(b.resume(&PauseScope::Namespace).await.is_ok());
        return;
    }
    let wakeups = listener.wakeups().expect("wakeups");
    // A claim on the listening connection (nothing claimable) returns once its listener
    // listens, so the admission's signal below cannot be sent before anyone listens.
    assert!(
        ctx.claim(&listener, 10).await.is_empty(),
        "nothing admitted"
    );
    b.pause(&PauseScope::Namespace).await.expect("pause");
    admit_as(&*ctx, "job", None).await;
    // The admission signals as always (a pause is consulted by claims, not by admit): once
    // that signal is here, nothing else is in flight, so the next one is the resume's.
    tokio::time::timeout(Duration::from_secs(10), wakeups.recv())
        .await
        .expect("the admission's wake-up");
    while wakeups.try_recv().is_some() {}
    b.resume(&PauseScope::Namespace).await.expect("resume");
    let at = tokio::time::timeout(Duration::from_secs(10), wakeups.recv())
        .await
        .expect("a wake-up after resume");
    assert!(at <= ctx.now(), "resume signals claimable now");
}
