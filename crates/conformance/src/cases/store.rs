//! Stores (RFC 005, reduced: idempotent by identity and by receipt) and starts (RFC 003,
//! reduced: idempotent by request id), as the execution model fixes them for every backend.

use std::collections::BTreeMap;
use std::sync::Arc;

use lease_core::{
    ExecutionStatus, Json, LeaseError, RequestId, StartClient, StartRequest, StoreClient, StoreId,
    StoreKey, StoreOp, StoreOutcome, StoreReceipt, StoreUpdate, WorkflowName,
};

use crate::context::{Ctx, json, key};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __store_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, store, [
            get_or_create_idempotent_by_identity, store_put, store_delete,
            store_compare_and_set_match, store_compare_and_set_mismatch,
            store_compare_and_set_expected_absent, store_take_if_matches_match,
            store_take_if_matches_mismatch, store_repeated_receipt_replays_outcome,
            store_receipt_is_store_execution_step, store_update_unknown_store,
            start_idempotent_by_request_id, store_concurrent_same_receipt_applies_once,
            start_concurrent_same_request_one_target,
            get_or_create_concurrent_one_initial_state,
        ] }
    };
}

fn store_id(s: &str) -> StoreId {
    StoreId::new(s).expect("valid store id")
}

fn skey(s: &str) -> StoreKey {
    StoreKey::new(s).expect("valid store key")
}

/// Creates the store "cart" holding `entries`.
async fn cart<H: Harness>(ctx: &Ctx<H>, entries: &[(&str, &str)]) -> StoreId {
    let store = store_id("cart");
    let initial: Vec<(StoreKey, Json)> = entries.iter().map(|(k, v)| (skey(k), json(v))).collect();
    let snap = ctx
        .backend()
        .get_or_create(&store, &initial)
        .await
        .expect("get_or_create");
    assert!(snap.created);
    store
}

/// The receipt of execution "order-42", step `step_key`, in `store`.
fn receipt<H: Harness>(ctx: &Ctx<H>, store: &StoreId, step_key: &str) -> StoreReceipt {
    StoreReceipt {
        store: store.clone(),
        execution_id: ctx.id("order-42"),
        step_key: key(step_key),
    }
}

async fn entry<H: Harness>(ctx: &Ctx<H>, store: &StoreId, k: &str) -> Option<Json> {
    ctx.backend()
        .read_entry(store, &skey(k))
        .await
        .expect("read_entry")
}

async fn update<H: Harness>(ctx: &Ctx<H>, r: &StoreReceipt, op: &StoreOp) -> StoreUpdate {
    ctx.backend().update(r, op).await.expect("update")
}

fn fresh(applied: bool, previous: Option<&str>) -> StoreUpdate {
    StoreUpdate {
        outcome: StoreOutcome {
            applied,
            previous: previous.map(json),
        },
        replayed: false,
    }
}

/// Rule "get_or_create is idempotent by identity": a second call with other initial
/// entries returns the first state with `created: false`, also after updates.
pub async fn get_or_create_idempotent_by_identity<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    let store = store_id("cart");
    let first = b
        .get_or_create(
            &store,
            &[(skey("apples"), json("3")), (skey("pears"), json("1"))],
        )
        .await
        .expect("get_or_create");
    assert!(first.created);
    assert_eq!(first.store, store);
    let expected: BTreeMap<StoreKey, Json> =
        [(skey("apples"), json("3")), (skey("pears"), json("1"))].into();
    assert_eq!(first.entries, expected);
    let second = ctx
        .peer()
        .await
        .get_or_create(&store, &[(skey("plums"), json("9"))])
        .await
        .expect("get_or_create");
    assert!(!second.created);
    assert_eq!(
        second.entries, expected,
        "the first state, not the new initial entries"
    );
    assert_eq!(entry(&ctx, &store, "plums").await, None);
    let r = receipt(&ctx, &store, "eat");
    let op = StoreOp::Delete { key: skey("pears") };
    assert_eq!(update(&ctx, &r, &op).await, fresh(true, Some("1")));
    let third = b.get_or_create(&store, &[]).await.expect("get_or_create");
    assert!(!third.created);
    assert_eq!(third.entries, [(skey("apples"), json("3"))].into());
    // An empty initial state is a state too.
    let empty = b
        .get_or_create(&store_id("empty"), &[])
        .await
        .expect("get_or_create");
    assert!(empty.created && empty.entries.is_empty());
    let again = b
        .get_or_create(&store_id("empty"), &[(skey("x"), json("1"))])
        .await
        .expect("get_or_create");
    assert!(!again.created && again.entries.is_empty());
}

/// Store op "put": always applied; records the previous value; the entry holds the new one.
pub async fn store_put<H: Harness>(ctx: Arc<Ctx<H>>) {
    let store = cart(&ctx, &[("apples", "3")]).await;
    let op = StoreOp::Put {
        key: skey("apples"),
        value: json(r#"{"n":4}"#),
    };
    assert_eq!(
        update(&ctx, &receipt(&ctx, &store, "s1"), &op).await,
        fresh(true, Some("3"))
    );
    assert_eq!(
        entry(&ctx, &store, "apples").await,
        Some(json(r#"{"n":4}"#))
    );
    let op = StoreOp::Put {
        key: skey("pears"),
        value: json("1"),
    };
    assert_eq!(
        update(&ctx, &receipt(&ctx, &store, "s2"), &op).await,
        fresh(true, None)
    );
    assert_eq!(entry(&ctx, &store, "pears").await, Some(json("1")));
}

/// Store op "delete": applied when the key existed (entry removed), not applied otherwise.
pub async fn store_delete<H: Harness>(ctx: Arc<Ctx<H>>) {
    let store = cart(&ctx, &[("apples", "3"), ("pears", "1")]).await;
    let op = StoreOp::Delete {
        key: skey("apples"),
    };
    assert_eq!(
        update(&ctx, &receipt(&ctx, &store, "s1"), &op).await,
        fresh(true, Some("3"))
    );
    assert_eq!(entry(&ctx, &store, "apples").await, None);
    assert_eq!(
        entry(&ctx, &store, "pears").await,
        Some(json("1")),
        "other keys untouched"
    );
    let op = StoreOp::Delete { key: skey("plums") };
    assert_eq!(
        update(&ctx, &receipt(&ctx, &store, "s2"), &op).await,
        fresh(false, None)
    );
    assert_eq!(entry(&ctx, &store, "plums").await, None);
}

/// Store op "compare-and-set", matching: the entry takes the new value.
pub async fn store_compare_and_set_match<H: Harness>(ctx: Arc<Ctx<H>>) {
    let store = cart(&ctx, &[("apples", r#"{"a":1,"b":2}"#)]).await;
    // Canonical JSON: the same document written differently matches byte for byte.
    let op = StoreOp::CompareAndSet {
        key: skey("apples"),
        expected: Some(json(r#"{ "b": 2, "a": 1 }"#)),
        new: json("7"),
    };
    let got = update(&ctx, &receipt(&ctx, &store, "s1"), &op).await;
    assert_eq!(got, fresh(true, Some(r#"{"a":1,"b":2}"#)));
    assert_eq!(entry(&ctx, &store, "apples").await, Some(json("7")));
}

/// Store op "compare-and-set", mismatching: not applied, the entry is unchanged; an absent
/// entry does not match an expected value.
pub async fn store_compare_and_set_mismatch<H: Harness>(ctx: Arc<Ctx<H>>) {
    let store = cart(&ctx, &[("apples", "3")]).await;
    let op = StoreOp::CompareAndSet {
        key: skey("apples"),
        expected: Some(json("4")),
        new: json("5"),
    };
    assert_eq!(
        update(&ctx, &receipt(&ctx, &store, "s1"), &op).await,
        fresh(false, Some("3"))
    );
    assert_eq!(entry(&ctx, &store, "apples").await, Some(json("3")));
    let op = StoreOp::CompareAndSet {
        key: skey("pears"),
        expected: Some(json("null")),
        new: json("5"),
    };
    assert_eq!(
        update(&ctx, &receipt(&ctx, &store, "s2"), &op).await,
        fresh(false, None),
        "absent is not JSON null"
    );
    assert_eq!(entry(&ctx, &store, "pears").await, None);
}

/// Store op "compare-and-set" with `expected: None`: applied only when the key is absent.
pub async fn store_compare_and_set_expected_absent<H: Harness>(ctx: Arc<Ctx<H>>) {
    let store = cart(&ctx, &[("apples", "3")]).await;
    let op = StoreOp::CompareAndSet {
        key: skey("pears"),
        expected: None,
        new: json("1"),
    };
    assert_eq!(
        update(&ctx, &receipt(&ctx, &store, "s1"), &op).await,
        fresh(true, None)
    );
    assert_eq!(entry(&ctx, &store, "pears").await, Some(json("1")));
    let op = StoreOp::CompareAndSet {
        key: skey("apples"),
        expected: None,
        new: json("9"),
    };
    assert_eq!(
        update(&ctx, &receipt(&ctx, &store, "s2"), &op).await,
        fresh(false, Some("3"))
    );
    assert_eq!(entry(&ctx, &store, "apples").await, Some(json("3")));
}

/// Store op "take-if-matches" (a matched take), matching: applied, the entry is removed.
pub async fn store_take_if_matches_match<H: Harness>(ctx: Arc<Ctx<H>>) {
    let store = cart(&ctx, &[("token", r#""t-1""#), ("other", "1")]).await;
    let op = StoreOp::TakeIfMatches {
        key: skey("token"),
        expected: json(r#""t-1""#),
    };
    let got = update(&ctx, &receipt(&ctx, &store, "s1"), &op).await;
    assert_eq!(got, fresh(true, Some(r#""t-1""#)));
    assert_eq!(entry(&ctx, &store, "token").await, None);
    assert_eq!(entry(&ctx, &store, "other").await, Some(json("1")));
}

/// Store op "take-if-matches", mismatching (other value, or absent): not applied, the entry
/// stays.
pub async fn store_take_if_matches_mismatch<H: Harness>(ctx: Arc<Ctx<H>>) {
    let store = cart(&ctx, &[("token", r#""t-1""#)]).await;
    let op = StoreOp::TakeIfMatches {
        key: skey("token"),
        expected: json(r#""t-2""#),
    };
    let got = update(&ctx, &receipt(&ctx, &store, "s1"), &op).await;
    assert_eq!(got, fresh(false, Some(r#""t-1""#)));
    assert_eq!(entry(&ctx, &store, "token").await, Some(json(r#""t-1""#)));
    let op = StoreOp::TakeIfMatches {
        key: skey("missing"),
        expected: json("null"),
    };
    let got = update(&ctx, &receipt(&ctx, &store, "s2"), &op).await;
    assert_eq!(got, fresh(false, None));
}

/// Rule "a repeated receipt returns the recorded outcome and applies nothing", even with a
/// different operation and from another connection.
pub async fn store_repeated_receipt_replays_outcome<H: Harness>(ctx: Arc<Ctx<H>>) {
    let store = cart(&ctx, &[("apples", "3")]).await;
    let r = receipt(&ctx, &store, "take-one");
    let op = StoreOp::CompareAndSet {
        key: skey("apples"),
        expected: Some(json("3")),
        new: json("2"),
    };
    let first = update(&ctx, &r, &op).await;
    assert_eq!(first, fresh(true, Some("3")));
    let replay = StoreUpdate {
        outcome: first.outcome.clone(),
        replayed: true,
    };
    let peer = ctx.peer().await;
    assert_eq!(peer.update(&r, &op).await.expect("update"), replay);
    let different = StoreOp::Put {
        key: skey("apples"),
        value: json("100"),
    };
    assert_eq!(peer.update(&r, &different).await.expect("update"), replay);
    let elsewhere = StoreOp::Delete { key: skey("pears") };
    assert_eq!(update(&ctx, &r, &elsewhere).await, replay);
    assert_eq!(
        entry(&ctx, &store, "apples").await,
        Some(json("2")),
        "applied once"
    );
}

/// Rule "the receipt is (store, execution, step key)": changing any part is a new receipt
/// that applies its own operation.
pub async fn store_receipt_is_store_execution_step<H: Harness>(ctx: Arc<Ctx<H>>) {
    let store = cart(&ctx, &[("n", "0")]).await;
    let other_store = store_id("ledger");
    ctx.backend()
        .get_or_create(&other_store, &[])
        .await
        .expect("get_or_create");
    let put = |v: &str| StoreOp::Put {
        key: skey("n"),
        value: json(v),
    };
    let base = receipt(&ctx, &store, "step");
    assert_eq!(update(&ctx, &base, &put("1")).await, fresh(true, Some("0")));
    let other_step = receipt(&ctx, &store, "step-2");
    assert_eq!(
        update(&ctx, &other_step, &put("2")).await,
        fresh(true, Some("1"))
    );
    let other_exec = StoreReceipt {
        execution_id: ctx.id("order-43"),
        ..base.clone()
    };
    assert_eq!(
        update(&ctx, &other_exec, &put("3")).await,
        fresh(true, Some("2"))
    );
    let in_other_store = StoreReceipt {
        store: other_store.clone(),
        ..base.clone()
    };
    assert_eq!(
        update(&ctx, &in_other_store, &put("4")).await,
        fresh(true, None)
    );
    assert_eq!(entry(&ctx, &store, "n").await, Some(json("3")));
    assert_eq!(entry(&ctx, &other_store, "n").await, Some(json("4")));
}

/// Rule "update on an unknown store is UnknownStore" (call get_or_create first), and it
/// creates nothing: no store, no receipt.
pub async fn store_update_unknown_store<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    let store = store_id("nowhere");
    let r = receipt(&ctx, &store, "s1");
    let op = StoreOp::Put {
        key: skey("k"),
        value: json("1"),
    };
    let err = b.update(&r, &op).await.expect_err("unknown store");
    assert!(
        matches!(err, LeaseError::UnknownStore(ref s) if s == "nowhere"),
        "{err:?}"
    );
    let err = b
        .read_entry(&store, &skey("k"))
        .await
        .expect_err("unknown store");
    assert!(matches!(err, LeaseError::UnknownStore(_)), "{err:?}");
    let snap = b.get_or_create(&store, &[]).await.expect("get_or_create");
    assert!(snap.created, "the failed update created nothing");
    assert!(snap.entries.is_empty());
    assert_eq!(
        update(&ctx, &r, &op).await,
        fresh(true, None),
        "no receipt was recorded"
    );
}

/// Rule "start is idempotent by request id": the first call admits the target (with its
/// workflow and input) and records the mapping; repeats (any target, any connection)
/// return the first target with `created: false` and start nothing.
pub async fn start_idempotent_by_request_id<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    let rid = RequestId::new("req-1").expect("request id");
    let workflow = WorkflowName::new("shipping").expect("workflow");
    let mut first = StartRequest::new(rid.clone(), workflow.clone(), json(r#"{"order":42}"#));
    first.target = ctx.id("ship-1");
    let started = b.start(&first).await.expect("start");
    assert_eq!(started.target, ctx.id("ship-1"));
    assert!(started.created);
    let record = ctx.get("ship-1").await;
    assert_eq!(record.status, ExecutionStatus::Admitted);
    assert_eq!(record.workflow, Some(workflow.clone()));
    assert_eq!(record.input, Some(json(r#"{"order":42}"#)));
    assert_eq!(
        record.due_at,
        Some(ctx.now()),
        "started executions are due now"
    );
    let again = ctx.peer().await.start(&first).await.expect("start");
    assert_eq!((again.target, again.created), (ctx.id("ship-1"), false));
    let mut other_target = StartRequest::new(rid, workflow.clone(), json("0"));
    other_target.target = ctx.id("ship-2");
    let again = b.start(&other_target).await.expect("start");
    assert_eq!((again.target, again.created), (ctx.id("ship-1"), false));
    assert_eq!(ctx.try_get("ship-2").await, None);
    assert_eq!(
        ctx.get("ship-1").await,
        record,
        "the repeat changed nothing"
    );
    // A random target (the constructor's default) works, and another request id starts
    // another execution.
    let fresh = StartRequest::new(
        RequestId::new("req-2").expect("request id"),
        workflow,
        json("null"),
    );
    let started = b.start(&fresh).await.expect("start");
    assert!(started.created);
    assert_eq!(started.target, fresh.target);
    assert_eq!(
        ctx.get(fresh.target.as_str()).await.status,
        ExecutionStatus::Admitted
    );
    let leases = ctx.claim(&b, 10).await;
    assert_eq!(
        leases.len(),
        2,
        "both started executions are due: {leases:?}"
    );
}

/// Rounds of each concurrent idempotency race.
const IDEMPOTENCY_ROUNDS: usize = 25;
/// Peers in each concurrent idempotency race.
const RACERS: usize = 4;

/// Opens [`RACERS`] peers.
async fn racers<H: Harness>(ctx: &Ctx<H>) -> Vec<H::Backend> {
    let mut out = Vec::new();
    for _ in 0..RACERS {
        out.push(ctx.peer().await);
    }
    out
}

/// Runs `f(peer, i)` on every racer at once (tasks released by one barrier) and returns the
/// results in racer order.
async fn race<B, T, F, Fut>(peers: &[B], f: F) -> Vec<T>
where
    B: Clone + Send + 'static,
    T: Send + 'static,
    F: Fn(B, usize) -> Fut,
    Fut: std::future::Future<Output = T> + Send + 'static,
{
    let barrier = Arc::new(tokio::sync::Barrier::new(peers.len()));
    let tasks: Vec<_> = peers
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let (barrier, fut) = (barrier.clone(), f(p.clone(), i));
            tokio::spawn(async move {
                barrier.wait().await;
                fut.await
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(crate::context::join(t).await);
    }
    out
}

/// RFC 002 fencing table, "Store update ... Idempotent (receipt)": the receipt commits
/// atomically with the mutation. Peers commit one receipt at once, each with its own
/// compare-and-set: exactly one applies (`replayed: false`), all get its recorded result,
/// and the entry holds its value.
pub async fn store_concurrent_same_receipt_applies_once<H: Harness>(ctx: Arc<Ctx<H>>) {
    let store = cart(&ctx, &[]).await;
    let peers = racers(&ctx).await;
    for round in 0..IDEMPOTENCY_ROUNDS {
        let r = receipt(&ctx, &store, &format!("s-{round}"));
        let k = skey(&format!("k-{round}"));
        let results = race(&peers, |p, i| {
            let (r, k) = (r.clone(), k.clone());
            async move {
                let op = StoreOp::CompareAndSet {
                    key: k,
                    expected: None,
                    new: json(&i.to_string()),
                };
                p.update(&r, &op).await.expect("update")
            }
        })
        .await;
        let winners: Vec<usize> = (0..RACERS).filter(|&i| !results[i].replayed).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let expected = StoreOutcome {
            applied: true,
            previous: None,
        };
        assert!(
            results.iter().all(|u| u.outcome == expected),
            "round {round}: {results:?}"
        );
        let value = json(&winners[0].to_string());
        assert_eq!(
            entry(&ctx, &store, &format!("k-{round}")).await,
            Some(value)
        );
    }
}

/// RFC 002 fencing table, "WorkflowStartClient.start ... Idempotent (receipt)": peers start
/// one request id at once, each with its own target: exactly one is created, every peer
/// gets that target, and no other target exists.
pub async fn start_concurrent_same_request_one_target<H: Harness>(ctx: Arc<Ctx<H>>) {
    let peers = racers(&ctx).await;
    let workflow = WorkflowName::new("shipping").expect("workflow");
    for round in 0..IDEMPOTENCY_ROUNDS {
        let rid = RequestId::new(format!("req-{round}")).expect("request id");
        let targets: Vec<String> = (0..RACERS).map(|i| format!("t-{round}-{i}")).collect();
        let requests: Vec<StartRequest> = targets
            .iter()
            .map(|t| {
                let mut r = StartRequest::new(rid.clone(), workflow.clone(), json("1"));
                r.target = ctx.id(t);
                r
            })
            .collect();
        let results = race(&peers, |p, i| {
            let request = requests[i].clone();
            async move { p.start(&request).await.expect("start") }
        })
        .await;
        let created: Vec<_> = results.iter().filter(|s| s.created).collect();
        assert_eq!(created.len(), 1, "round {round}: {results:?}");
        let target = created[0].target.clone();
        assert!(
            results.iter().all(|s| s.target == target),
            "round {round}: {results:?}"
        );
        for t in &targets {
            let exists = ctx.try_get(t).await.is_some();
            assert_eq!(exists, t.as_str() == target.as_str(), "round {round}: {t}");
        }
    }
}

/// Rule "get_or_create is idempotent by identity" under concurrency (RFC 002 fencing table,
/// "Store getOrCreate ... Idempotent (identity)"): peers create one store at once, each
/// with its own initial state: exactly one is created and everyone sees its state.
pub async fn get_or_create_concurrent_one_initial_state<H: Harness>(ctx: Arc<Ctx<H>>) {
    let peers = racers(&ctx).await;
    for round in 0..IDEMPOTENCY_ROUNDS {
        let store = store_id(&format!("s-{round}"));
        let results = race(&peers, |p, i| {
            let store = store.clone();
            async move {
                let initial = [(skey("who"), json(&i.to_string()))];
                p.get_or_create(&store, &initial)
                    .await
                    .expect("get_or_create")
            }
        })
        .await;
        let winners: Vec<usize> = (0..RACERS).filter(|&i| results[i].created).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let state: BTreeMap<StoreKey, Json> = [(skey("who"), json(&winners[0].to_string()))].into();
        assert!(
            results.iter().all(|s| s.entries == state),
            "round {round}: {results:?}"
        );
    }
}
