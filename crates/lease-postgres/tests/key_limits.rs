//! Concurrency limits on PostgreSQL beyond the conformance suite: the keyed claim under
//! many pools at once (each pool a process's view), its use by `acknowledge_and_claim` and
//! by the horizon, and the "now" wake-ups of the writes that free a place.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lease_core::{
    AckAndClaim, Acknowledgement, Admission, ClaimRequest, Clock, ConcurrencyKey, ConcurrencyLimit,
    ExecutionClient, ExecutionClientExt, ExecutionId, ExecutionLease, Json, LimitScope,
    ManualClock, Priority, RedeliveryPolicy, Timestamp, WakeReceiver, WorkflowRunOutcome,
};
use lease_postgres::PostgresBackend;
use sqlx::{AssertSqlSafe, Connection, PgConnection};

const LEASE: Duration = Duration::from_secs(30);
const DEADLINE: Duration = Duration::from_secs(60);

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

fn key(s: &str) -> ConcurrencyKey {
    ConcurrencyKey::new(s).expect("key")
}

fn limit(n: u32) -> Option<ConcurrencyLimit> {
    Some(ConcurrencyLimit::new(n).expect("limit"))
}

fn done() -> WorkflowRunOutcome {
    WorkflowRunOutcome::Completed(Json::parse("t", "1").expect("json"))
}

/// A fresh schema over a manual clock and a backend on it.
async fn setup() -> (PostgresBackend, ManualClock, String) {
    let clock = ManualClock::new(Timestamp::from_millis(1_000_000));
    let config = common::config(clock.clone(), RedeliveryPolicy::default());
    let schema = config.schema_name().to_owned();
    let backend = PostgresBackend::connect(config).await.expect("connect");
    (backend, clock, schema)
}

fn request(clock: &ManualClock, limit: usize) -> ClaimRequest {
    ClaimRequest {
        now: clock.now(),
        limit,
        duration: LEASE,
    }
}

fn names(leases: &[ExecutionLease]) -> Vec<&str> {
    leases.iter().map(|l| l.execution_id.as_str()).collect()
}

/// Key "k" limited to 1 and one execution "k1" under it.
async fn one_keyed_execution(b: &PostgresBackend) {
    b.set_concurrency_limit(&LimitScope::Key(key("k")), limit(1))
        .await
        .expect("limit");
    b.admit(&Admission::new(id("k1")).concurrency_key(key("k")))
        .await
        .expect("admit");
}

/// The next signal; panics after [`DEADLINE`].
async fn next_signal(rx: &WakeReceiver, what: &str) -> Timestamp {
    tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("{what}: no wake-up within {DEADLINE:?}"))
}

/// Acknowledging or releasing a keyed lease frees a place of its key, and a changed limit
/// may free places: each notifies "claimable now" (the claim's own notification, its
/// lease's later instant, comes first and is read off).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn freeing_a_place_notifies_now() {
    let (b, clock, schema) = setup().await;
    common::cleaning_up(schema, async move {
        let rx = b.wakeups().expect("wake-ups inside a runtime");
        common::wait_until_listening(&b).await;
        let now = clock.now();
        b.set_concurrency_limit(&LimitScope::Key(key("k")), limit(1))
            .await
            .expect("limit");
        assert_eq!(next_signal(&rx, "set a limit").await, now);
        b.set_concurrency_limit(&LimitScope::Default, limit(4))
            .await
            .expect("default");
        assert_eq!(next_signal(&rx, "set the default").await, now);
        for name in ["k1", "k2"] {
            b.admit(&Admission::new(id(name)).concurrency_key(key("k")))
                .await
                .expect("admit");
            assert_eq!(next_signal(&rx, "admit").await, now);
        }
        let first = b.claim_due(request(&clock, 5)).await.expect("claim");
        assert_eq!(names(&first), ["k1"], "limit 1");
        assert!(next_signal(&rx, "claim").await > now);
        assert!(!b.release(&first[0]).await.expect("release").is_lost());
        assert_eq!(next_signal(&rx, "release of a keyed lease").await, now);
        clock.advance(Duration::from_secs(60));
        let now = clock.now();
        let second = b.claim_due(request(&clock, 5)).await.expect("claim");
        assert_eq!(second.len(), 1, "limit 1");
        assert!(next_signal(&rx, "claim").await > now);
        assert!(
            !b.acknowledge(&second[0], &done())
                .await
                .expect("ack")
                .is_lost()
        );
        assert_eq!(
            next_signal(&rx, "acknowledgement of a keyed lease").await,
            now
        );
        b.set_concurrency_limit(&LimitScope::Key(key("k")), None)
            .await
            .expect("remove");
        assert_eq!(next_signal(&rx, "removed limit").await, now);
        // Unchanged: no notification (the admission's shows next).
        b.set_concurrency_limit(&LimitScope::Default, limit(4))
            .await
            .expect("same default");
        b.admit(
            &Admission::new(id("probe")).not_before(Timestamp::from_millis(now.as_millis() + 7)),
        )
        .await
        .expect("admit");
        assert_eq!(
            next_signal(&rx, "probe").await,
            Timestamp::from_millis(now.as_millis() + 7)
        );
        b.close().await;
    })
    .await;
}

/// `acknowledge_and_claim` whose claim meets a limited key goes through the key gate after
/// the acknowledgement: the freed place is taken by the key's next execution, with the
/// unkeyed one behind it. A claim held back only by a full key reports a horizon after now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledge_and_claim_and_the_horizon_go_through_the_gate() {
    let (b, clock, schema) = setup().await;
    common::cleaning_up(schema, async move {
        b.set_concurrency_limit(&LimitScope::Key(key("k")), limit(1))
            .await
            .expect("limit");
        for name in ["k1", "k2", "k3"] {
            b.admit(&Admission::new(id(name)).concurrency_key(key("k")))
                .await
                .expect("admit");
            clock.advance(Duration::from_millis(1));
        }
        b.admit(&Admission::new(id("free"))).await.expect("admit");
        let first = b.claim_due(request(&clock, 1)).await.expect("claim");
        assert_eq!(names(&first), ["k1"]);
        let AckAndClaim { acknowledged, next } = b
            .acknowledge_and_claim(
                &Acknowledgement {
                    lease: first[0].clone(),
                    outcome: done(),
                },
                request(&clock, 10),
            )
            .await
            .expect("ack and claim");
        assert!(!acknowledged.is_lost());
        let next: Vec<&str> = next
            .claimed
            .iter()
            .map(|c| c.lease.execution_id.as_str())
            .collect();
        assert_eq!(next, ["k2", "free"], "one place of k, then the unkeyed one");
        let held = b
            .claim_due_with_horizon(request(&clock, 10))
            .await
            .expect("claim");
        assert!(held.claimed.is_empty(), "k3 waits for k2's place");
        let horizon = held.next_claimable_at.expect("leases are live");
        assert!(
            horizon > clock.now(),
            "k3 is held back, not due: {horizon:?}"
        );
        b.close().await;
    })
    .await;
}

/// The id prefix of the unkeyed executions of the race.
const FREE: &str = "free";

/// The key of a race execution named `<key>-<n>`; `None` for the unkeyed ones.
fn key_of(name: &str) -> Option<&str> {
    name.split_once('-').map(|(k, _)| k).filter(|k| *k != FREE)
}

/// The limit of each key: "one" 1, "three" 3, others the default 2.
fn cap(k: &str) -> i64 {
    match k {
        "one" => 1,
        "three" => 3,
        _ => 2,
    }
}

/// Live leases per key in one snapshot of the table: never above the key's limit.
async fn check_snapshot(conn: &mut PgConnection, schema: &str, now: i64) {
    let rows: Vec<(String, i64)> = sqlx::query_as(AssertSqlSafe(format!(
        "SELECT concurrency_key, count(*) FROM \"{schema}\".executions \
         WHERE status = 'running' AND concurrency_key IS NOT NULL AND lease_expires_at > $1 \
         GROUP BY concurrency_key"
    )))
    .bind(now)
    .fetch_all(&mut *conn)
    .await
    .expect("live per key");
    for (k, live) in rows {
        let most = cap(&k);
        assert!(live <= most, "key {k}: {live} live leases, limit {most}");
    }
}

/// Six pools (as six processes) claim in a loop, over keyed executions of four keys (two
/// with their own limit, two under the default) and unkeyed ones at mixed priorities,
/// acknowledging what they took; a seventh connection checks snapshots of the live leases
/// meanwhile. No snapshot and no claimer's view ever shows a key above its limit, every
/// execution is claimed exactly once, and the run ends with all of them completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_pools_never_exceed_any_key_limit() {
    let (b, clock, schema) = setup().await;
    common::cleaning_up(schema.clone(), async move {
        b.set_concurrency_limit(&LimitScope::Default, limit(2))
            .await
            .expect("default");
        b.set_concurrency_limit(&LimitScope::Key(key("one")), limit(1))
            .await
            .expect("one");
        b.set_concurrency_limit(&LimitScope::Key(key("three")), limit(3))
            .await
            .expect("three");
        let mut admissions = Vec::new();
        for (k, n) in [("one", 12), ("three", 12), ("a", 12), ("b", 12), (FREE, 24)] {
            for i in 0..n {
                let mut a = Admission::new(id(&format!("{k}-{i}")))
                    .priority(Priority::new(i % 3).expect("priority"));
                if k != FREE {
                    a = a.concurrency_key(key(k));
                }
                admissions.push(a);
            }
        }
        let total = admissions.len();
        b.admit_batch(&admissions).await.expect("admit");
        // The claimers' view: leases counted from the claim's return to before their
        // acknowledgement is sent, a subset of what the database holds live.
        let view: Arc<Mutex<HashMap<String, i64>>> = Arc::default();
        let claimed: Arc<Mutex<Vec<String>>> = Arc::default();
        let mut tasks = Vec::new();
        for _ in 0..6 {
            let peer = b.peer().await.expect("peer");
            let (clock, view, claimed) = (clock.clone(), view.clone(), claimed.clone());
            tasks.push(tokio::spawn(async move {
                claim_until_done(&peer, &clock, &view, &claimed, total).await;
                peer.close().await;
            }));
        }
        let mut conn = PgConnection::connect(&common::url())
            .await
            .expect("checker");
        let now = clock.now().as_millis();
        while !tasks.iter().all(|t| t.is_finished()) {
            check_snapshot(&mut conn, &schema, now).await;
        }
        for t in tasks {
            t.await.expect("claimer");
        }
        let mut ids = claimed.lock().expect("ids").clone();
        ids.sort();
        let before = ids.len();
        ids.dedup();
        assert_eq!((before, ids.len()), (total, total), "each claimed once");
        let counts = b.status_counts().await.expect("counts");
        assert_eq!(counts.completed, total as u64, "{counts:?}");
        b.close().await;
    })
    .await;
}

/// One claimer: claims up to 3, checks its view, then acknowledges what it claimed the
/// time before (so it holds leases while claiming: keys fill up), until `total`
/// executions were claimed by all claimers together (panics after [`DEADLINE`]).
async fn claim_until_done(
    peer: &PostgresBackend,
    clock: &ManualClock,
    view: &Mutex<HashMap<String, i64>>,
    claimed: &Mutex<Vec<String>>,
    total: usize,
) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let mut held: Vec<ExecutionLease> = Vec::new();
    loop {
        let finished = claimed.lock().expect("ids").len() >= total;
        let leases = if finished {
            Vec::new()
        } else {
            assert!(tokio::time::Instant::now() < deadline, "claims stalled");
            peer.claim_due(request(clock, 3)).await.expect("claim")
        };
        for lease in &leases {
            let name = lease.execution_id.as_str();
            if let Some(k) = key_of(name) {
                let mut view = view.lock().expect("view");
                let live = view.entry(k.to_owned()).or_default();
                *live += 1;
                assert!(*live <= cap(k), "key {k}: {live} live");
            }
            claimed.lock().expect("ids").push(name.to_owned());
        }
        for lease in std::mem::replace(&mut held, leases) {
            if let Some(k) = key_of(lease.execution_id.as_str()) {
                *view.lock().expect("view").entry(k.to_owned()).or_default() -= 1;
            }
            let ack = peer.acknowledge(&lease, &done()).await.expect("ack");
            assert!(!ack.is_lost());
        }
        if finished && held.is_empty() {
            return;
        }
        tokio::task::yield_now().await;
    }
}

/// A session that holds a key's lock (its bucket's; the keyed claim holds it only inside
/// its statement; here a connection takes it in an open transaction and stalls, as a
/// claimer frozen between round trips once could): the claims waiting for it give up
/// after the stall bound (`lock_timeout`, here the 1 s lease) instead of queueing behind
/// it for as long as it stays, and claim once it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_key_lock_holder_stalls_keyed_claims_only_for_the_stall_bound() {
    let (b, clock, schema) = setup().await;
    common::cleaning_up(schema.clone(), async move {
        one_keyed_execution(&b).await;
        let mut frozen = PgConnection::connect(&common::url())
            .await
            .expect("connect");
        sqlx::raw_sql(AssertSqlSafe(format!(
            "BEGIN; SELECT pg_advisory_xact_lock(hashtext('\"{schema}\"'), hashtext('k') & 63)"
        )))
        .execute(&mut frozen)
        .await
        .expect("hold the key lock");
        let short = ClaimRequest {
            duration: Duration::from_secs(1),
            ..request(&clock, 1)
        };
        let stalled = tokio::time::timeout(Duration::from_secs(30), b.claim_due(short))
            .await
            .expect("the claim waited for the frozen key lock without a bound");
        assert!(
            stalled.as_ref().map_or(true, Vec::is_empty),
            "claimed under a held key lock: {stalled:?}"
        );
        frozen.close().await.expect("release");
        let claimed = b.claim_due(short).await.expect("claim");
        assert_eq!(names(&claimed), ["k1"]);
    })
    .await;
}

/// The keyed claim counts a key's leases in a snapshot taken after the key's lock, which
/// only READ COMMITTED gives: on sessions whose default isolation is REPEATABLE READ
/// (set through the URL) the count would read the transaction's older snapshot, so the
/// claim is refused with a typed error (`live_leases`' LT002) and claims nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_claim_outside_read_committed_is_refused_and_claims_nothing() {
    let clock = ManualClock::new(Timestamp::from_millis(1_000_000));
    let base = common::url();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url =
        format!("{base}{sep}options=-c%20default_transaction_isolation%3Drepeatable%5C%20read");
    let schema = common::fresh_schema();
    let config = lease_postgres::PostgresConfig::new(url)
        .schema(schema.clone())
        .clock(Arc::new(clock.clone()))
        .max_connections(2);
    common::cleaning_up(schema, async move {
        let b = PostgresBackend::connect(config).await.expect("connect");
        one_keyed_execution(&b).await;
        let refused = b.claim_due(request(&clock, 1)).await;
        match &refused {
            Err(lease_core::LeaseError::Backend { source, .. }) => {
                assert!(source.to_string().contains("READ COMMITTED"), "{source}");
            }
            other => panic!("claimed outside READ COMMITTED: {other:?}"),
        }
        let record = b.get(&id("k1")).await.expect("get").expect("record");
        assert_eq!(
            record.status,
            lease_core::ExecutionStatus::Admitted,
            "{record:?}"
        );
        b.close().await;
    })
    .await;
}
