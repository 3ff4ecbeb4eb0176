//! The admitting request's W3C trace context (docs/decisions/0041-traces-metrics-and-logs.md): stored
//! with the execution by `admit` and `admit_batch`, returned by `get`, by the claim's
//! records and by a peer's reads; an existing execution keeps the context it was first
//! admitted with, as it keeps the rest of its admission.

use std::sync::Arc;

use lease_core::{
    Admission, ClaimRequest, ExecutionClient, ExecutionClientExt, ExecutionRecord, LeaseBackend,
    TraceContext, WorkflowRunOutcome,
};

use crate::context::{Ctx, LEASE, json};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __traces_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, traces, [
            trace_context_round_trips_through_claim_and_get,
            trace_context_of_a_readmission_is_the_first,
            trace_context_is_stored_by_admit_batch,
        ] }
    };
}

/// A valid context whose trace id ends in `n`, with a `tracestate` when `state`.
pub(crate) fn context(n: u8, state: bool) -> TraceContext {
    let parent = format!("00-4bf92f3577b34da6a3ce929d0e0e47{n:02x}-00f067aa0ba902b7-01");
    let state = state.then(|| "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE".to_owned());
    TraceContext::new(parent, state).expect("valid trace context")
}

async fn claim_all(b: &impl LeaseBackend) -> Vec<lease_core::Claimed> {
    let now = b.now().await.expect("now");
    b.claim_due_with_records(ClaimRequest {
        now,
        limit: 100,
        duration: LEASE,
    })
    .await
    .expect("claim")
}

fn find<'a>(claims: &'a [lease_core::Claimed], id: &str) -> &'a ExecutionRecord {
    claims
        .iter()
        .map(|c| &c.record)
        .find(|r| r.id.as_str() == id)
        .unwrap_or_else(|| panic!("{id} was not claimed"))
}

/// Admitted with a context (and a tracestate): `admit`, `get` (on a peer too) and the
/// claim's record carry it, and it outlives the acknowledgement; admitted without: none.
pub async fn trace_context_round_trips_through_claim_and_get<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    let traced = context(1, true);
    let admitted = b
        .admit(&Admission::new(ctx.id("traced")).trace_context(traced.clone()))
        .await
        .expect("admit");
    assert_eq!(admitted.trace_context.as_ref(), Some(&traced));
    assert_eq!(ctx.admit("plain").await.trace_context, None);
    let peer = ctx.peer().await;
    let read = peer
        .get(&ctx.id("traced"))
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(read.trace_context.as_ref(), Some(&traced));
    let claims = claim_all(&peer).await;
    assert_eq!(
        find(&claims, "traced").trace_context.as_ref(),
        Some(&traced)
    );
    assert_eq!(find(&claims, "plain").trace_context, None);
    for claim in &claims {
        let done = WorkflowRunOutcome::Completed(json("1"));
        let acked = peer.acknowledge(&claim.lease, &done).await.expect("ack");
        assert!(!acked.is_lost());
    }
    assert_eq!(
        ctx.get("traced").await.trace_context.as_ref(),
        Some(&traced)
    );
    assert_eq!(ctx.get("plain").await.trace_context, None);
}

/// A second `admit` of an existing id changes nothing, its trace context included: the
/// first context stays, a context given later to one admitted without is not added.
pub async fn trace_context_of_a_readmission_is_the_first<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    let first = context(2, false);
    let again = |id: &str, c: Option<TraceContext>| {
        let a = Admission::new(ctx.id(id));
        match c {
            Some(c) => a.trace_context(c),
            None => a,
        }
    };
    b.admit(&again("a", Some(first.clone())))
        .await
        .expect("admit");
    for second in [Some(context(3, true)), None] {
        let r = b.admit(&again("a", second)).await.expect("readmit");
        assert_eq!(r.trace_context.as_ref(), Some(&first));
    }
    ctx.admit("b").await;
    let r = b.admit(&again("b", Some(first))).await.expect("readmit");
    assert_eq!(r.trace_context, None);
    assert_eq!(ctx.get("b").await.trace_context, None);
}

/// `admit_batch` stores each item's context, returns an existing item's first one, and
/// every claimed record carries what its admission stored.
pub async fn trace_context_is_stored_by_admit_batch<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    let old = context(4, false);
    b.admit(&Admission::new(ctx.id("old")).trace_context(old.clone()))
        .await
        .expect("admit");
    let traced = context(5, true);
    let batch = [
        Admission::new(ctx.id("traced")).trace_context(traced.clone()),
        Admission::new(ctx.id("plain")),
        Admission::new(ctx.id("old")).trace_context(context(6, false)),
    ];
    let records = b.admit_batch(&batch).await.expect("admit_batch");
    let contexts: Vec<_> = records.iter().map(|r| r.trace_context.clone()).collect();
    let want = vec![Some(traced.clone()), None, Some(old.clone())];
    assert_eq!(contexts, want);
    let claims = claim_all(&b).await;
    for (id, want) in [
        ("traced", Some(&traced)),
        ("plain", None),
        ("old", Some(&old)),
    ] {
        assert_eq!(find(&claims, id).trace_context.as_ref(), want, "{id}");
    }
}
