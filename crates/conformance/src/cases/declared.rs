//! The backend's declaration of what it can do ([`lease_core::ExecutionClient::capabilities`]),
//! the one place the suite learns it from: it holds for every handle on the store, names the
//! backend as `backend_name` does, and every capability it declares absent is refused with a
//! typed `Unsupported` naming the backend (or, for wake-ups and effects, is absent). The other
//! modules check each declared capability's rules.

use std::sync::Arc;

use lease_core::{
    Admission, AttemptScope, CancelReason, ConcurrencyKey, ExecutionClient, ExecutionFilter,
    LimitScope, PauseScope, Priority, Timestamp, WorkflowName,
};

use crate::cases::priority::key_refusal;
use crate::context::Ctx;
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __declared_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, declared, [
            declaration_is_the_store_s_and_names_the_backend,
            every_capability_declared_absent_is_refused,
        ] }
    };
}

/// Every handle on the store declares the same, under the name `backend_name` reports; a
/// backend without wake-ups or effects hands out neither.
pub async fn declaration_is_the_store_s_and_names_the_backend<H: Harness>(ctx: Arc<Ctx<H>>) {
    let caps = ctx.caps();
    let (b, peer) = (ctx.backend(), ctx.peer().await);
    assert_eq!(b.capabilities(), caps, "one declaration per handle");
    assert_eq!(peer.capabilities(), caps, "a peer declares the same");
    assert_eq!(
        b.backend_name(),
        caps.backend,
        "backend_name is the declared name"
    );
    assert!(
        !caps.backend.is_empty(),
        "the declaration names the backend"
    );
    if !caps.wakeups {
        assert!(b.wakeups().is_none(), "wake-ups handed out, none declared");
    }
    assert_eq!(b.effects().is_some(), caps.effects, "effects as declared");
}

/// One call of each capability the backend declares absent: refused with `Unsupported`
/// naming it, and nothing admitted.
pub async fn every_capability_declared_absent_is_refused<H: Harness>(ctx: Arc<Ctx<H>>) {
    let caps = ctx.caps();
    if caps.list().iter().all(|(_, has)| *has) {
        return;
    }
    refuse_reads(&ctx).await;
    refuse_controls(&ctx).await;
    refuse_admissions(&ctx).await;
}

/// Asserts `result` is the declared refusal.
fn refused<H: Harness, T: std::fmt::Debug>(ctx: &Ctx<H>, result: lease_core::Result<T>) {
    ctx.assert_unsupported(&result.expect_err("declared absent, so refused"));
}

/// The reads and listings: counts, live leases, browsing, dead letters, history.
async fn refuse_reads<H: Harness>(ctx: &Ctx<H>) {
    let (caps, b) = (ctx.caps(), ctx.backend());
    ctx.admit("plain").await;
    if !caps.status_counts {
        refused(ctx, b.status_counts().await);
    }
    if !caps.live_leases {
        refused(ctx, b.list_live_leases(10).await);
    }
    if !caps.browse {
        refused(
            ctx,
            b.list_executions(&ExecutionFilter::default(), None, 10)
                .await,
        );
    }
    if !caps.attempts {
        refused(ctx, b.list_dead(None, 10).await);
        refused(ctx, b.attempt_limits().await);
    }
    if !caps.delivery_history {
        refused(ctx, b.deliveries(&ctx.id("plain")).await);
    }
    if !caps.workflow_redelivery {
        refused(ctx, b.redelivery_policies().await);
    }
}

/// The controls: retention, cancel, pause, attempt limits, redelivery policies, and the
/// per-key settings.
async fn refuse_controls<H: Harness>(ctx: &Ctx<H>) {
    let (caps, b) = (ctx.caps(), ctx.backend());
    if !caps.retention {
        refused(ctx, b.purge_terminal(Timestamp::MAX, 10).await);
    }
    if !caps.cancel {
        let reason = CancelReason::new("no").expect("reason");
        refused(ctx, b.cancel(&ctx.id("plain"), &reason).await);
    }
    if !caps.pause {
        refused(ctx, b.pause(&PauseScope::Namespace).await);
        refused(ctx, b.list_paused().await);
    }
    if !caps.attempts {
        refused(ctx, b.set_attempt_limit(&AttemptScope::Default, None).await);
    }
    if !caps.workflow_redelivery {
        let workflow = WorkflowName::new("w").expect("workflow");
        refused(ctx, b.set_redelivery_policy(&workflow, None).await);
    }
    let key_setting = |result: lease_core::Result<()>| {
        let err = result.expect_err("declared absent, so refused");
        assert!(key_refusal(ctx, &err), "{err}");
    };
    if !caps.concurrency_limits {
        key_setting(b.set_concurrency_limit(&LimitScope::Default, None).await);
    }
    if !caps.rate_limits {
        key_setting(b.set_rate_limit(&LimitScope::Default, None).await);
    }
    if !caps.ordered_keys {
        key_setting(b.set_key_ordering(&LimitScope::Default, true).await);
    }
}

/// Admissions using a priority or a concurrency key the backend does not declare: refused,
/// and nothing admitted.
async fn refuse_admissions<H: Harness>(ctx: &Ctx<H>) {
    let (caps, b) = (ctx.caps(), ctx.backend());
    if !caps.priorities {
        let urgent = Admission::new(ctx.id("urgent")).priority(Priority::new(5).expect("priority"));
        refused(ctx, b.admit(&urgent).await);
        assert!(b.get(&urgent.id).await.expect("get").is_none());
    }
    if !caps.concurrency_limits {
        let keyed = Admission::new(ctx.id("keyed"))
            .concurrency_key(ConcurrencyKey::new("tenant").expect("key"));
        let err = b.admit(&keyed).await.expect_err("keys refused");
        assert!(key_refusal(ctx, &err), "{err}");
        assert!(b.get(&keyed.id).await.expect("get").is_none());
    }
}
