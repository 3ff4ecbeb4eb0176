//! The keyed claim and PostgreSQL's shared lock table: every advisory lock a claim holds
//! takes an entry of one table sized for the whole server (`max_locks_per_transaction`
//! per connection); when it is full, every session on the server fails with "out of shared
//! memory". A keyed claim takes a bounded number of advisory locks however many distinct
//! limited keys its candidates hold (docs/decisions/0021-concurrency-limits.md), and keys
//! that share a lock still keep their limits.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, Clock, ConcurrencyKey, ConcurrencyLimit, ExecutionClient,
    ExecutionClientExt, ExecutionId, LimitScope, ManualClock, RedeliveryPolicy, Timestamp,
};
use lease_postgres::PostgresBackend;
use sqlx::AssertSqlSafe;

const LEASE: Duration = Duration::from_secs(30);

/// The most advisory locks one keyed claim statement may hold (its lock buckets).
const MOST_ADVISORY_LOCKS: i64 = 64;

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

fn key(s: &str) -> ConcurrencyKey {
    ConcurrencyKey::new(s).expect("key")
}

fn request(clock: &ManualClock, limit: usize) -> ClaimRequest {
    ClaimRequest {
        now: clock.now(),
        limit,
        duration: LEASE,
    }
}

/// A fresh schema over a manual clock, a backend on it, and every key limited to 1 (a
/// namespace default, as a limit per tenant would be).
async fn setup() -> (PostgresBackend, ManualClock, String) {
    let clock = ManualClock::new(Timestamp::from_millis(1_000_000));
    let config = common::config(clock.clone(), RedeliveryPolicy::default());
    let schema = config.schema_name().to_owned();
    let b = PostgresBackend::connect(config).await.expect("connect");
    let one = ConcurrencyLimit::new(1).expect("limit");
    b.set_concurrency_limit(&LimitScope::Default, Some(one))
        .await
        .expect("default limit");
    (b, clock, schema)
}

/// Admits `count` executions `e-<i>` (from `first`), each under its own key `tenant-<i>`
/// when `keys` is `None`, else under key `tenant-<i % keys>`.
async fn admit(b: &PostgresBackend, first: usize, count: usize, keys: Option<usize>) {
    let all: Vec<Admission> = (first..first + count)
        .map(|i| {
            let k = keys.map_or(i, |n| i % n);
            Admission::new(id(&format!("e-{i}"))).concurrency_key(key(&format!("tenant-{k}")))
        })
        .collect();
    for chunk in all.chunks(lease_core::limits::MAX_ADMIT_BATCH) {
        b.admit_batch(chunk).await.expect("admit");
    }
}

/// Installs, in the test's schema, a statement trigger on the executions table recording
/// how many advisory locks (and locks in all) the updating transaction holds once its
/// statement has run: a claim takes its advisory locks inside its statement and keeps them
/// to its commit, so the count after the statement is its peak. Install after every pool
/// on the schema is connected (the schema then holds an object the library did not make).
async fn record_lock_peaks(b: &PostgresBackend, schema: &str) {
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE TABLE \"{schema}\".lock_peaks (advisory bigint, total bigint);
         CREATE FUNCTION \"{schema}\".record_lock_peak() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             INSERT INTO \"{schema}\".lock_peaks
             SELECT count(*) FILTER (WHERE locktype = 'advisory'), count(*)
             FROM pg_locks WHERE pid = pg_backend_pid();
             RETURN NULL;
         END $$;
         CREATE TRIGGER record_lock_peak AFTER UPDATE ON \"{schema}\".executions
         FOR EACH STATEMENT EXECUTE FUNCTION \"{schema}\".record_lock_peak();"
    )))
    .execute(b.pool())
    .await
    .expect("install the lock probe");
}

/// The most advisory locks, and locks in all, any recorded statement's transaction held.
async fn lock_peaks(b: &PostgresBackend, schema: &str) -> (i64, i64) {
    sqlx::query_as(AssertSqlSafe(format!(
        "SELECT COALESCE(max(advisory), 0), COALESCE(max(total), 0) FROM \"{schema}\".lock_peaks"
    )))
    .fetch_one(b.pool())
    .await
    .expect("lock peaks")
}

/// A claim of 1,000 whose candidates are 2,000 executions of distinct limited keys (1,000
/// due for the first time, 1,000 expired leases) claims 1,000 while holding at most
/// [`MOST_ADVISORY_LOCKS`] advisory locks: one per key it would be 2,000, and a few such
/// claims at once would fill the server's lock table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_over_thousands_of_limited_keys_holds_a_bounded_number_of_locks() {
    let (b, clock, schema) = setup().await;
    common::cleaning_up(schema.clone(), async move {
        admit(&b, 0, 3_000, None).await;
        record_lock_peaks(&b, &schema).await;
        let first = b.claim_due(request(&clock, 1_000)).await.expect("claim");
        assert_eq!(first.len(), 1_000, "one lease per key, each key free");
        clock.advance(Duration::from_secs(3_600));
        let second = b.claim_due(request(&clock, 1_000)).await.expect("claim");
        assert_eq!(second.len(), 1_000, "1,000 of the 2,000 candidates");
        let (advisory, total) = lock_peaks(&b, &schema).await;
        assert!(advisory > 0, "the probe saw no keyed claim");
        assert!(
            advisory <= MOST_ADVISORY_LOCKS,
            "one claim held {advisory} advisory locks ({total} locks in all)"
        );
        b.close().await;
    })
    .await;
}

/// Far more keys than locks, so keys share locks: 200 keys limited to 1, three
/// executions each, claimed by four pools at once, 60 at a time, until each came back
/// empty, then by one last claim of all that is left. Exactly one lease per key.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keys_sharing_a_lock_keep_their_limits_under_racing_claims() {
    const KEYS: usize = 200;
    let (b, clock, schema) = setup().await;
    common::cleaning_up(schema, async move {
        admit(&b, 0, 3 * KEYS, Some(KEYS)).await;
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let peer = b.peer().await.expect("peer");
            let clock = clock.clone();
            tasks.push(tokio::spawn(async move {
                let mut claimed = Vec::new();
                loop {
                    let leases = peer.claim_due(request(&clock, 60)).await.expect("claim");
                    if leases.is_empty() {
                        break;
                    }
                    claimed.extend(leases.into_iter().map(|l| l.execution_id));
                }
                peer.close().await;
                claimed
            }));
        }
        let mut claimed = Vec::new();
        for t in tasks {
            claimed.extend(t.await.expect("claimer"));
        }
        let rest = b.claim_due(request(&clock, 3 * KEYS)).await.expect("claim");
        claimed.extend(rest.into_iter().map(|l| l.execution_id));
        let mut keys = HashSet::new();
        let mut total = 0;
        for execution in claimed {
            let record = b.get(&execution).await.expect("get").expect("record");
            let k = record.concurrency_key.expect("keyed");
            assert!(keys.insert(k.clone()), "key {k:?} leased twice");
            total += 1;
        }
        assert_eq!((total, keys.len()), (KEYS, KEYS), "one lease per key");
        b.close().await;
    })
    .await;
}
