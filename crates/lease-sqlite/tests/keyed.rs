//! Ordered keys, start rates and browsing on SQLite beyond the conformance cases: the
//! claim's horizon with held-back keys, a large held-back backlog not stopping other work,
//! the rate's recorded instants, the admission order kept by transactional admission and by
//! a migration, and cursors.

use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, AttemptLimit, AttemptScope, ClaimRequest, ConcurrencyKey, ExecutionClient,
    ExecutionFilter, ExecutionId, ExecutionStatus, Json, LeaseError, LimitScope, ListCursor,
    ManualClock, RateLimit, RedeliveryPolicy, Release, Timestamp, WorkflowName, WorkflowRunOutcome,
};
use lease_sqlite::{SqliteBackend, SqliteConfig};

const START: i64 = 1_000_000;
const LEASE: Duration = Duration::from_secs(10);
const LEASE_MS: i64 = 10_000;
/// The first redelivery delay of [`policy`].
const DELAY_MS: i64 = 100;

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("valid id")
}

fn key(s: &str) -> ConcurrencyKey {
    ConcurrencyKey::new(s).expect("valid key")
}

fn at(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms)
}

fn policy() -> RedeliveryPolicy {
    RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_millis(1600))
        .expect("policy")
}

async fn open() -> (SqliteBackend, ManualClock) {
    let clock = ManualClock::new(at(START));
    let config = SqliteConfig::in_memory()
        .clock(Arc::new(clock.clone()))
        .policy(policy());
    (SqliteBackend::open(config).await.expect("open"), clock)
}

async fn admit_keyed(b: &SqliteBackend, name: &str, k: &str) {
    b.admit(&Admission::new(id(name)).concurrency_key(key(k)))
        .await
        .expect("admit");
}

/// A claim of up to `limit` at the backend clock: the claimed leases' ids and the horizon.
async fn claim(
    b: &SqliteBackend,
    limit: usize,
) -> (
    Vec<String>,
    Option<Timestamp>,
    Vec<lease_core::ExecutionLease>,
) {
    let batch = b
        .claim_due_with_horizon(ClaimRequest {
            now: Timestamp::MAX,
            limit,
            duration: LEASE,
        })
        .await
        .expect("claim");
    let leases: Vec<_> = batch.claimed.iter().map(|c| c.lease.clone()).collect();
    let ids = leases
        .iter()
        .map(|l| l.execution_id.as_str().to_owned())
        .collect();
    (ids, batch.next_claimable_at, leases)
}

async fn complete(b: &SqliteBackend, lease: &lease_core::ExecutionLease) {
    let acked = b
        .acknowledge(lease, &WorkflowRunOutcome::Completed(Json::null()))
        .await
        .expect("acknowledge");
    assert!(!acked.is_lost());
}

#[tokio::test]
async fn an_ordered_key_runs_one_at_a_time_and_a_redelivery_keeps_its_place() {
    let (b, clock) = open().await;
    b.set_key_ordering(&LimitScope::Key(key("k")), true)
        .await
        .expect("order");
    for name in ["a1", "a2", "a3"] {
        admit_keyed(&b, name, "k").await;
    }
    let (ids, horizon, leases) = claim(&b, 10).await;
    assert_eq!(ids, ["a1"]);
    // Held back a2 and a3 are not in the horizon; a1's redelivery instant is.
    assert_eq!(horizon, Some(at(START + LEASE_MS + DELAY_MS)));
    let released = b
        .release_with(&leases[0], &Release::Retry)
        .await
        .expect("release");
    assert!(!released.is_lost());
    let (ids, horizon, _) = claim(&b, 10).await;
    assert!(ids.is_empty(), "{ids:?}: a2 overtook a1's redelivery");
    assert_eq!(horizon, Some(at(START + DELAY_MS)));
    clock.advance(Duration::from_millis(100));
    let (ids, _, leases) = claim(&b, 10).await;
    assert_eq!(ids, ["a1"]);
    complete(&b, &leases[0]).await;
    let (ids, _, _) = claim(&b, 10).await;
    assert_eq!(ids, ["a2"]);
}

#[tokio::test]
async fn a_held_back_backlog_does_not_stop_other_keys_or_keyless_work() {
    let (b, _clock) = open().await;
    b.set_key_ordering(&LimitScope::Default, true)
        .await
        .expect("order");
    let backlog: Vec<Admission> = (0..300)
        .map(|i| Admission::new(id(&format!("b{i:03}"))).concurrency_key(key("big")))
        .collect();
    b.admit_batch(&backlog).await.expect("admit");
    admit_keyed(&b, "other", "small").await;
    b.admit(&Admission::new(id("free"))).await.expect("admit");
    let (mut ids, horizon, _) = claim(&b, 10).await;
    ids.sort();
    assert_eq!(ids, ["b000", "free", "other"]);
    assert_eq!(horizon, Some(at(START + LEASE_MS + DELAY_MS)));
}

#[tokio::test]
async fn a_dead_execution_leaves_the_line_and_a_retried_one_takes_its_place_back() {
    let (b, _clock) = open().await;
    b.set_key_ordering(&LimitScope::Key(key("k")), true)
        .await
        .expect("order");
    b.set_attempt_limit(
        &AttemptScope::Default,
        Some(AttemptLimit::new(1).expect("limit")),
    )
    .await
    .expect("attempt limit");
    for name in ["a1", "a2", "a3"] {
        admit_keyed(&b, name, "k").await;
    }
    let (_, _, leases) = claim(&b, 10).await;
    let released = b
        .release_with(&leases[0], &Release::Retry)
        .await
        .expect("release");
    assert!(!released.is_lost());
    assert_eq!(
        b.get(&id("a1")).await.expect("get").map(|r| r.status),
        Some(ExecutionStatus::Dead)
    );
    let (ids, _, leases) = claim(&b, 10).await;
    assert_eq!(ids, ["a2"]);
    b.retry_dead(&[id("a1")], None).await.expect("retry");
    let (ids, _, _) = claim(&b, 10).await;
    assert!(ids.is_empty(), "{ids:?}: taken while a2 holds a live lease");
    complete(&b, &leases[0]).await;
    let (ids, _, _) = claim(&b, 10).await;
    assert_eq!(ids, ["a1"], "the retried execution is the head again");
}

#[tokio::test]
async fn a_rate_counts_claims_in_a_sliding_window_and_the_horizon_says_when() {
    let (b, clock) = open().await;
    let rate = RateLimit::new(2, Duration::from_millis(1000)).expect("rate");
    b.set_rate_limit(&LimitScope::Key(key("k")), Some(rate))
        .await
        .expect("rate");
    for i in 0..6 {
        admit_keyed(&b, &format!("r{i}"), "k").await;
    }
    b.admit(&Admission::new(id("free"))).await.expect("admit");
    let (ids, horizon, _) = claim(&b, 10).await;
    assert_eq!(ids, ["free", "r0", "r1"]);
    assert_eq!(horizon, Some(at(START + 1000)));
    clock.advance(Duration::from_millis(600));
    let (ids, horizon, _) = claim(&b, 10).await;
    assert!(ids.is_empty(), "{ids:?}");
    assert_eq!(horizon, Some(at(START + 1000)));
    clock.advance(Duration::from_millis(400));
    let (ids, horizon, _) = claim(&b, 10).await;
    assert_eq!(ids, ["r2", "r3"]);
    assert_eq!(horizon, Some(at(START + 2000)));
    // A peer on the same store counts the same instants.
    let peer = b.peer().await.expect("peer");
    let (ids, _, _) = claim(&peer, 10).await;
    assert!(ids.is_empty(), "{ids:?}");
}

#[tokio::test]
async fn a_removed_rate_forgets_its_instants_and_a_new_one_counts_from_then() {
    let (b, _clock) = open().await;
    let one = RateLimit::new(1, Duration::from_secs(60)).expect("rate");
    b.set_rate_limit(&LimitScope::Default, Some(one))
        .await
        .expect("rate");
    for i in 0..4 {
        admit_keyed(&b, &format!("r{i}"), "k").await;
    }
    assert_eq!(claim(&b, 10).await.0, ["r0"]);
    b.set_rate_limit(&LimitScope::Default, None)
        .await
        .expect("remove");
    assert_eq!(claim(&b, 1).await.0, ["r1"]);
    b.set_rate_limit(&LimitScope::Default, Some(one))
        .await
        .expect("rate");
    assert_eq!(
        claim(&b, 10).await.0,
        ["r2"],
        "r0's and r1's claims were forgotten"
    );
    let limits = b.rate_limits().await.expect("limits");
    assert_eq!(limits.default, Some(one));
    assert!(limits.keys.is_empty());
}

#[tokio::test]
async fn settings_read_back_sorted() {
    let (b, _clock) = open().await;
    let rate = RateLimit::new(3, Duration::from_secs(1)).expect("rate");
    for k in ["b", "a"] {
        b.set_rate_limit(&LimitScope::Key(key(k)), Some(rate))
            .await
            .expect("rate");
        b.set_key_ordering(&LimitScope::Key(key(k)), true)
            .await
            .expect("order");
    }
    b.set_key_ordering(&LimitScope::Key(key("b")), false)
        .await
        .expect("unorder");
    let limits = b.rate_limits().await.expect("limits");
    assert_eq!(limits.keys, [(key("a"), rate), (key("b"), rate)]);
    let ordering = b.key_ordering().await.expect("ordering");
    assert_eq!(ordering.keys, [key("a")]);
    assert!(!ordering.default);
}

/// Admits `n` executions: workflow `w{i % 2}`, key `k{i % 3}`.
async fn admit_mixed(b: &SqliteBackend, n: usize) {
    for i in 0..n {
        let workflow = WorkflowName::new(format!("w{}", i % 2)).expect("workflow");
        b.admit(
            &Admission::new(id(&format!("e{i:02}")))
                .workflow(workflow)
                .concurrency_key(key(&format!("k{}", i % 3))),
        )
        .await
        .expect("admit");
    }
}

/// Every page of `filter` at `limit` a page: the ids, newest first.
async fn all_pages(b: &SqliteBackend, filter: &ExecutionFilter, limit: usize) -> Vec<String> {
    let mut ids = Vec::new();
    let mut after: Option<ListCursor> = None;
    for _ in 0..100 {
        let page = b
            .list_executions(filter, after.as_ref(), limit)
            .await
            .expect("list");
        assert!(page.records.len() <= limit);
        ids.extend(page.records.iter().map(|r| r.id.as_str().to_owned()));
        match page.next {
            Some(next) => after = Some(next),
            None => return ids,
        }
    }
    panic!("pages never ended: {ids:?}");
}

#[tokio::test]
async fn pages_list_newest_first_under_every_filter() {
    let (b, _clock) = open().await;
    admit_mixed(&b, 24).await;
    let (claimed, _, leases) = claim(&b, 4).await;
    for lease in &leases[..2] {
        complete(&b, lease).await;
    }
    let want = |keep: &dyn Fn(usize) -> bool| -> Vec<String> {
        (0..24)
            .rev()
            .filter(|&i| keep(i))
            .map(|i| format!("e{i:02}"))
            .collect()
    };
    let done: Vec<usize> = claimed[..2]
        .iter()
        .map(|s| s[1..].parse().expect("index"))
        .collect();
    let status_of = |i: usize| {
        if done.contains(&i) {
            ExecutionStatus::Completed
        } else if claimed.contains(&format!("e{i:02}")) {
            ExecutionStatus::Running
        } else {
            ExecutionStatus::Admitted
        }
    };
    let w1 = WorkflowName::new("w1").expect("workflow");
    let cases: Vec<(ExecutionFilter, Vec<String>)> = vec![
        (ExecutionFilter::default(), want(&|_| true)),
        (
            ExecutionFilter {
                status: Some(ExecutionStatus::Completed),
                ..Default::default()
            },
            want(&|i| status_of(i) == ExecutionStatus::Completed),
        ),
        (
            ExecutionFilter {
                workflow: Some(w1.clone()),
                ..Default::default()
            },
            want(&|i| i % 2 == 1),
        ),
        (
            ExecutionFilter {
                key: Some(key("k2")),
                ..Default::default()
            },
            want(&|i| i % 3 == 2),
        ),
        (
            ExecutionFilter {
                status: Some(ExecutionStatus::Admitted),
                workflow: Some(w1.clone()),
                key: Some(key("k0")),
            },
            want(&|i| i % 2 == 1 && i % 3 == 0 && status_of(i) == ExecutionStatus::Admitted),
        ),
        (
            ExecutionFilter {
                workflow: Some(w1),
                key: Some(key("k1")),
                ..Default::default()
            },
            want(&|i| i % 2 == 1 && i % 3 == 1),
        ),
    ];
    for (filter, expected) in cases {
        for limit in [1, 5, 100] {
            assert_eq!(
                all_pages(&b, &filter, limit).await,
                expected,
                "{filter:?} by {limit}"
            );
        }
    }
}

#[tokio::test]
async fn a_cursor_this_backend_did_not_write_is_invalid_input() {
    let (b, _clock) = open().await;
    admit_mixed(&b, 3).await;
    for text in ["x12", "12", "s0", "s-3"] {
        let cursor = ListCursor::new(text).expect("printable");
        let got = b
            .list_executions(&ExecutionFilter::default(), Some(&cursor), 10)
            .await;
        assert!(
            matches!(got, Err(LeaseError::InvalidInput { .. })),
            "{text}: {got:?}"
        );
    }
    let got = b
        .list_executions(&ExecutionFilter::default(), None, 0)
        .await;
    assert!(
        matches!(got, Err(LeaseError::InvalidInput { .. })),
        "{got:?}"
    );
}

#[tokio::test]
async fn transactional_admission_takes_its_place_in_the_admission_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("browse.db");
    let b = SqliteBackend::open(SqliteConfig::file(&path))
        .await
        .expect("open");
    b.admit(&Admission::new(id("first"))).await.expect("admit");
    let mut app = rusqlite::Connection::open(&path).expect("app connection");
    let tx = app
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .expect("begin");
    b.admit_batch_in_tx(
        &tx,
        &[Admission::new(id("second")), Admission::new(id("third"))],
    )
    .expect("admit");
    tx.commit().expect("commit");
    b.admit(&Admission::new(id("fourth"))).await.expect("admit");
    assert_eq!(
        all_pages(&b, &ExecutionFilter::default(), 10).await,
        ["fourth", "third", "second", "first"]
    );
}

#[tokio::test]
async fn a_head_on_its_last_attempt_opens_the_line_at_its_expiry() {
    let (b, clock) = open().await;
    b.set_key_ordering(&LimitScope::Key(key("k")), true)
        .await
        .expect("order");
    b.set_attempt_limit(
        &AttemptScope::Default,
        Some(AttemptLimit::new(1).expect("limit")),
    )
    .await
    .expect("attempt limit");
    for name in ["a1", "a2"] {
        admit_keyed(&b, name, "k").await;
    }
    assert_eq!(claim(&b, 10).await.0, ["a1"]);
    // a1's expiry ends it dead (no write signals that), so a2 leads from then: the horizon
    // says so rather than nothing.
    let (ids, horizon, _) = claim(&b, 10).await;
    assert!(ids.is_empty(), "{ids:?}");
    assert_eq!(horizon, Some(at(START + LEASE_MS)));
    clock.advance(LEASE);
    assert_eq!(claim(&b, 10).await.0, ["a2"]);
}
