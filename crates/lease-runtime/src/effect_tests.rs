//! The driver's effect helpers on the memory backend.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::*;
use crate::tests::id;
use lease_core::ExecutionClientExt;
use lease_core::{
    Admission, ClaimRequest, EffectClient, EffectId, EffectWait, ExecutionClient, HeapClient, Json,
    ManualClock, MemoryBackend, StepKey, StoreClient, StoreId, StoreKey,
};

const LEASE: Duration = Duration::from_secs(30);

async fn delivery(b: &MemoryBackend, name: &str) -> Delivery {
    let now = b.now().await.expect("now");
    let request = ClaimRequest {
        now,
        limit: 1,
        duration: LEASE,
    };
    let lease = b
        .claim_due(request)
        .await
        .expect("claim")
        .pop()
        .expect("one");
    assert_eq!(lease.execution_id, id(name));
    let record = b.get(&id(name)).await.expect("get").expect("record");
    Delivery::new(Arc::new(b.clone()), lease, record, CancellationToken::new())
}

fn backend() -> (ManualClock, MemoryBackend) {
    let clock = ManualClock::starting_now();
    (clock.clone(), MemoryBackend::with_clock(Arc::new(clock)))
}

/// Runs `d.effect("charge", ...)` counting calls; the closure returns `"ch-<n>"` and checks
/// it was given the step's effect id.
async fn charge(d: &Delivery, calls: &Arc<AtomicU32>) -> Result<String, DeliveryError> {
    let expected =
        EffectId::for_step(d.execution_id(), &StepKey::new("charge").expect("key")).expect("id");
    let calls = calls.clone();
    d.effect("charge", |effect| async move {
        assert_eq!(effect, expected, "the step's stable effect id");
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        Ok::<_, DeliveryError>(format!("ch-{n}"))
    })
    .await
}

#[tokio::test]
async fn effect_runs_once_settles_and_records_the_step() {
    let (_clock, b) = backend();
    b.admit(&Admission::new(id("order-42")))
        .await
        .expect("admit");
    let d = delivery(&b, "order-42").await;
    let calls = Arc::new(AtomicU32::new(0));
    assert_eq!(charge(&d, &calls).await.expect("effect"), "ch-1");
    assert_eq!(charge(&d, &calls).await.expect("replay"), "ch-1");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let effect =
        EffectId::for_step(&id("order-42"), &StepKey::new("charge").expect("key")).expect("id");
    let record = b.read_effect(&effect).await.expect("read").expect("effect");
    assert_eq!(record.result().map(|j| j.as_str()), Some("\"ch-1\""));
    let steps = b.list_steps(&id("order-42")).await.expect("steps");
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].response.as_str(), "\"ch-1\"");
}

/// `effect_result` settles the step's effect and returns the kept result, calling once, and
/// writes no step record (its caller records the value in its own fenced transaction).
#[tokio::test]
async fn effect_result_settles_once_and_writes_no_step() {
    let (_clock, b) = backend();
    b.admit(&Admission::new(id("order-42")))
        .await
        .expect("admit");
    let d = delivery(&b, "order-42").await;
    let calls = Arc::new(AtomicU32::new(0));
    for _ in 0..2 {
        let calls = calls.clone();
        let got: String = d
            .effect_result("charge", |_| async move {
                let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
                Ok::<_, DeliveryError>(format!("ch-{n}"))
            })
            .await
            .expect("effect result");
        assert_eq!(got, "ch-1", "the settled result, also on the second call");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(
        b.list_steps(&id("order-42"))
            .await
            .expect("steps")
            .is_empty()
    );
}

/// A holder that settled the effect but lost its lease before the step write: the next
/// holder finds the settled effect and does not call the external system again.
#[tokio::test]
async fn a_settled_effect_without_its_step_is_not_called_again() {
    let (clock, b) = backend();
    b.admit(&Admission::new(id("order-42")))
        .await
        .expect("admit");
    let first = delivery(&b, "order-42").await;
    let effect =
        EffectId::for_step(&id("order-42"), &StepKey::new("charge").expect("key")).expect("id");
    b.begin_effect(&effect, &id("order-42"))
        .await
        .expect("begin");
    let settled = b
        .settle_effect(
            &effect,
            &id("order-42"),
            &Json::parse("r", "\"ch-1\"").expect("json"),
        )
        .await
        .expect("settle");
    assert!(matches!(settled, lease_core::Settlement::Recorded(_)));
    clock.advance(LEASE * 2);
    let second = delivery(&b, "order-42").await;
    let calls = Arc::new(AtomicU32::new(0));
    assert_eq!(charge(&second, &calls).await.expect("effect"), "ch-1");
    assert_eq!(calls.load(Ordering::SeqCst), 0, "not called again");
    // The first holder is stale: its step write is refused, and it never calls either.
    let stale = charge(&first, &calls).await.expect_err("stale");
    assert!(matches!(stale, DeliveryError::Lost), "{stale}");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

/// A conflicting result from a second call (an external system that broke its contract)
/// is not applied: the delivery continues with the first result.
#[tokio::test]
async fn a_conflicting_result_keeps_the_first() {
    let (clock, b) = backend();
    b.admit(&Admission::new(id("order-42")))
        .await
        .expect("admit");
    let first = delivery(&b, "order-42").await;
    clock.advance(LEASE * 2);
    let second = delivery(&b, "order-42").await;
    let calls = Arc::new(AtomicU32::new(0));
    // Both holders begin before either settles, so both call the system.
    let gate = Arc::new(tokio::sync::Barrier::new(2));
    let run = |d: Delivery, calls: Arc<AtomicU32>, gate: Arc<tokio::sync::Barrier>| async move {
        d.effect("charge", |_| async move {
            gate.wait().await;
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            Ok::<_, DeliveryError>(format!("ch-{n}"))
        })
        .await
    };
    let (a, c) = tokio::join!(
        run(first, calls.clone(), gate.clone()),
        run(second, calls.clone(), gate.clone())
    );
    assert!(matches!(a, Err(DeliveryError::Lost)), "{a:?}");
    let kept = c.expect("current holder");
    let effect =
        EffectId::for_step(&id("order-42"), &StepKey::new("charge").expect("key")).expect("id");
    let record = b.read_effect(&effect).await.expect("read").expect("effect");
    assert_eq!(
        record.result().map(|j| j.as_str().to_owned()),
        Some(format!("\"{kept}\""))
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn wait_effect_and_watch_entry_register_for_this_execution() {
    let (_clock, b) = backend();
    b.admit(&Admission::new(id("order-42")))
        .await
        .expect("admit");
    let d = delivery(&b, "order-42").await;
    let effect = EffectId::new("payment-callback").expect("id");
    b.begin_effect(&effect, &id("order-42"))
        .await
        .expect("begin");
    assert_eq!(
        d.wait_effect(&effect).await.expect("wait"),
        EffectWait::Registered
    );
    let store = StoreId::new("stock").expect("store");
    let key = StoreKey::new("sku").expect("key");
    b.get_or_create(&store, &[]).await.expect("store");
    assert_eq!(d.watch_entry(&store, &key).await.expect("watch"), None);
    d.mark_lost();
    assert!(matches!(
        d.wait_effect(&effect).await,
        Err(DeliveryError::Lost)
    ));
}
