//! Fenced application transactions and `step_in_tx`: the application's own rows, in its own
//! schema, commit only while the lease's token is current, checked atomically with the
//! commit.
//!
//! The race test runs a stale holder A and a current holder B on separate pools (separate
//! connections, as two processes would have), both writing the application's `charges`
//! table around a reclaim. `LEASE_RACE_ROUNDS` overrides the number of rounds (default 500).

mod common;

use lease_core::ExecutionClientExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, Claimed, ExecutionClient, ExecutionId, ExecutionLease, Fenced,
    FencingToken, HeapClient, Json, LeaseError, ManualClock, RedeliveryPolicy, StepKey, StepWrite,
    Timestamp, WorkflowRunOutcome,
};
use lease_postgres::{FencedTx, MIN_STALL_BOUND_MS, PostgresBackend, stall_bound_ms};
use lease_runtime::{Delivery, DeliveryError};
use sqlx::PgConnection;
use tokio::sync::Barrier;
use tokio_util::sync::CancellationToken;

const LEASE: Duration = Duration::from_secs(30);

fn rounds() -> usize {
    std::env::var("LEASE_RACE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500)
}

/// Two handles on one fresh lease schema (separate pools) and the application's own schema
/// with a `charges` table: one charge per order.
struct Fixture {
    clock: ManualClock,
    policy: RedeliveryPolicy,
    a: PostgresBackend,
    b: PostgresBackend,
    app: String,
}

impl Fixture {
    async fn new(lease_schema: String, app: String, clock: ManualClock) -> Self {
        let policy = RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_secs(2))
            .expect("policy");
        let config = common::config(clock.clone(), policy).schema(lease_schema);
        let a = PostgresBackend::connect(config).await.expect("connect A");
        let b = a.peer().await.expect("connect peer B");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "CREATE SCHEMA \"{app}\";
             CREATE TABLE \"{app}\".charges (
                 order_id text PRIMARY KEY,
                 token bigint NOT NULL,
                 holder text NOT NULL)"
        )))
        .execute(a.pool())
        .await
        .expect("application schema");
        Fixture {
            clock,
            policy,
            a,
            b,
            app,
        }
    }

    async fn admit_and_claim(&self, id: &str) -> Claimed {
        let id = ExecutionId::new(id).expect("id");
        self.a
            .admit(&Admission::new(id.clone()))
            .await
            .expect("admit");
        claim_one(&self.a, &self.clock, &id).await
    }

    /// Acknowledges `lease` (so its execution is never claimed again).
    async fn finish(&self, lease: &ExecutionLease) -> Fenced<()> {
        let outcome = WorkflowRunOutcome::Completed(Json::null());
        self.a
            .acknowledge(lease, &outcome)
            .await
            .expect("acknowledge")
            .map(|_| ())
    }

    /// Expires every lease and redelivery delay of the first delivery.
    fn expire(&self) {
        self.clock.advance(LEASE + self.policy.delay(1));
    }

    /// Inserts the charge of `order` (nothing when one exists): `true` when inserted.
    async fn charge(&self, conn: &mut PgConnection, order: &str, token: i64, holder: &str) -> bool {
        insert_charge(&self.app, conn, order, token, holder)
            .await
            .expect("insert charge")
    }

    /// The committed charge of `order`: (token, holder).
    async fn stored_charge(&self, order: &str) -> Option<(i64, String)> {
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT token, holder FROM \"{}\".charges WHERE order_id = $1",
            self.app
        )))
        .bind(order)
        .fetch_optional(self.b.pool())
        .await
        .expect("read charge")
    }

    fn delivery(&self, backend: &PostgresBackend, claimed: &Claimed) -> Delivery {
        Delivery::new(
            Arc::new(backend.clone()),
            claimed.lease.clone(),
            claimed.record.clone(),
            CancellationToken::new(),
        )
    }
}

async fn insert_charge(
    app: &str,
    conn: &mut PgConnection,
    order: &str,
    token: i64,
    holder: &str,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO \"{app}\".charges (order_id, token, holder) VALUES ($1, $2, $3) \
         ON CONFLICT (order_id) DO NOTHING"
    )))
    .bind(order)
    .bind(token)
    .bind(holder)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

async fn claim(b: &PostgresBackend, clock: &ManualClock) -> Vec<Claimed> {
    b.claim_due_with_records(ClaimRequest {
        now: lease_core::Clock::now(clock),
        limit: 1,
        duration: LEASE,
    })
    .await
    .expect("claim")
}

/// Claims exactly `id` (every other execution of a test is finished before).
async fn claim_one(b: &PostgresBackend, clock: &ManualClock, id: &ExecutionId) -> Claimed {
    let mut claimed = claim(b, clock).await;
    assert_eq!(claimed.len(), 1, "one claim");
    assert_eq!(
        &claimed[0].lease.execution_id, id,
        "the claim took another execution"
    );
    claimed.remove(0)
}

fn token(lease: &ExecutionLease) -> i64 {
    i64::try_from(lease.token.get()).expect("token")
}

/// Runs `body` with a fixture, then drops both schemas whatever happened.
fn with_fixture<F, Fut>(body: F)
where
    F: FnOnce(Fixture) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime");
    let lease_schema = common::fresh_schema();
    let app = format!("{lease_schema}_app");
    let (ls, ap) = (lease_schema.clone(), app.clone());
    rt.block_on(async move {
        let outcome = tokio::spawn(async move {
            let f = Fixture::new(ls, ap, ManualClock::starting_now()).await;
            body(f).await;
        })
        .await;
        common::drop_schema_named(&app).await;
        common::drop_schema_named(&lease_schema).await;
        if let Err(e) = outcome {
            std::panic::resume_unwind(e.into_panic());
        }
    });
}

// ---------------------------------------------------------------------------------------
// The race
// ---------------------------------------------------------------------------------------

/// How the stale holder commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Commit {
    /// `FencedTx::commit`: the fence locked in the commit's message.
    Fenced,
    /// The test-only unlocked check, then a separate COMMIT.
    UnlockedCheck,
}

#[derive(Debug, Default)]
struct Tally {
    /// A's commit accepted and B's claim came after it.
    stale_before_claim: usize,
    /// A refused (Lost) because B's claim came first.
    stale_lost: usize,
    /// B's claim found the row locked by A's commit and skipped it.
    claim_skipped: usize,
    violations: Vec<String>,
}

async fn commit_as(tx: FencedTx, how: Commit) -> Fenced<()> {
    match how {
        Commit::Fenced => tx.commit().await.expect("stale commit"),
        Commit::UnlockedCheck => tx
            .commit_with_unlocked_check_for_race_test()
            .await
            .expect("stale unlocked commit"),
    }
}

/// One round: A holds t1 and has written its charge in an open fenced transaction; the
/// lease expires; released together, A commits while B claims (t2), reads the charges right
/// after its claim returned, and writes its own charge fenced by t2. The claim is
/// serialised against the fence's lock, so if A's commit was accepted and B claimed, A's
/// commit came before the claim and B's read must see A's charge; a charge carrying t1
/// must mean A's commit was accepted; B's commit with the newest token must be accepted.
async fn round(f: &Fixture, i: usize, how: Commit, tally: &mut Tally) {
    let order = format!("race-{i}");
    let stale = f.admit_and_claim(&order).await.lease;
    let t1 = token(&stale);
    let mut tx = f.a.begin_fenced(&stale).await.expect("begin A");
    assert!(f.charge(&mut tx, &order, t1, "A").await, "A's charge");
    f.expire();

    let barrier = Arc::new(Barrier::new(2));
    let a_commit = {
        let barrier = barrier.clone();
        tokio::spawn(async move {
            barrier.wait().await;
            commit_as(tx, how).await
        })
    };
    let b_side = {
        let (b, clock, app, order) = (f.b.clone(), f.clock.clone(), f.app.clone(), order.clone());
        tokio::spawn(async move {
            barrier.wait().await;
            let lease = claim(&b, &clock).await.into_iter().next()?.lease;
            let seen: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT token FROM \"{app}\".charges WHERE order_id = $1"
            )))
            .bind(&order)
            .fetch_optional(b.pool())
            .await
            .expect("read after claim");
            let mut tx = b.begin_fenced(&lease).await.expect("begin B");
            insert_charge(&app, &mut tx, &order, token(&lease), "B")
                .await
                .expect("B's charge");
            let committed = tx.commit().await.expect("B commit");
            let outcome = WorkflowRunOutcome::Completed(Json::null());
            let acked = b.acknowledge(&lease, &outcome).await.expect("B ack");
            assert!(
                !acked.is_lost(),
                "B's acknowledgement with the newest token"
            );
            Some((lease, seen, committed))
        })
    };
    let a_result = a_commit.await.expect("A task");
    let b_result = b_side.await.expect("B task");
    if b_result.is_none() {
        // Nobody reclaimed: A still holds the lease and finishes the execution.
        assert!(
            !f.finish(&stale).await.is_lost(),
            "round {i}: A's acknowledgement"
        );
    }
    let stored = f.stored_charge(&order).await;
    let mut violation = |what: String| tally.violations.push(format!("round {i}: {what}"));

    let a_row = stored.as_ref().is_some_and(|(t, h)| *t == t1 && h == "A");
    match (&a_result, a_row) {
        (Fenced::Accepted(()), false) => violation("A's accepted charge is missing".into()),
        (Fenced::Lost, true) => violation("A was Lost but its charge committed".into()),
        _ => {}
    }
    match &b_result {
        None => tally.claim_skipped += 1,
        Some((lease, seen, committed)) => {
            if committed.is_lost() {
                violation(format!(
                    "B's commit with the newest {:?} was Lost",
                    lease.token
                ));
            }
            if a_result == Fenced::Accepted(()) {
                if *seen == Some(t1) {
                    tally.stale_before_claim += 1;
                } else {
                    violation(format!(
                        "A's commit with #{t1} was accepted after {:?} was issued \
                         (absent from B's read right after its claim)",
                        lease.token
                    ));
                }
            } else {
                tally.stale_lost += 1;
            }
        }
    }
    if b_result.is_none() && a_result.is_lost() {
        violation("A was Lost although nobody claimed".into());
    }
}

/// Runs up to `rounds` rounds (stopping at the first violation when `stop_early`).
async fn race(f: &Fixture, how: Commit, rounds: usize, stop_early: bool) -> (usize, Tally) {
    let mut tally = Tally::default();
    let mut n = 0;
    while n < rounds {
        round(f, n, how, &mut tally).await;
        n += 1;
        if (stop_early && !tally.violations.is_empty()) || tally.violations.len() >= 20 {
            break;
        }
    }
    eprintln!(
        "{how:?}: {n} rounds: A committed before the claim {}, A lost {}, claim skipped a \
         locked row {}, violations {}",
        tally.stale_before_claim,
        tally.stale_lost,
        tally.claim_skipped,
        tally.violations.len()
    );
    (n, tally)
}

#[test]
fn stale_fenced_commit_never_lands_after_a_reclaim() {
    with_fixture(|f| async move {
        let (_, tally) = race(&f, Commit::Fenced, rounds(), false).await;
        assert!(
            tally.violations.is_empty(),
            "fencing violated:\n{}",
            tally.violations.join("\n")
        );
        assert!(
            tally.stale_before_claim > 0 && tally.stale_lost > 0,
            "the commit and the claim never raced both ways: {tally:?}"
        );
    });
}

#[test]
fn the_race_test_catches_an_unlocked_check() {
    with_fixture(|f| async move {
        let (n, tally) = race(&f, Commit::UnlockedCheck, rounds(), true).await;
        assert!(
            !tally.violations.is_empty(),
            "the unlocked check went unnoticed for {n} rounds: {tally:?}"
        );
        eprintln!("caught after {n} rounds: {}", tally.violations[0]);
    });
}

// ---------------------------------------------------------------------------------------
// FencedTx: results and bad input
// ---------------------------------------------------------------------------------------

#[test]
fn current_lease_commits_and_stale_or_ended_commits_nothing() {
    with_fixture(|f| async move {
        let current = f.admit_and_claim("o-current").await.lease;
        let mut tx = f.a.begin_fenced(&current).await.expect("begin");
        f.charge(&mut tx, "o-current", token(&current), "A").await;
        assert_eq!(tx.commit().await.expect("commit"), Fenced::Accepted(()));
        assert!(f.stored_charge("o-current").await.is_some());
        assert!(!f.finish(&current).await.is_lost());

        // Stale: reclaimed with a higher token while the transaction was open.
        let stale = f.admit_and_claim("o-stale").await.lease;
        let mut tx = f.a.begin_fenced(&stale).await.expect("begin");
        f.charge(&mut tx, "o-stale", token(&stale), "A").await;
        f.expire();
        let newer = claim_one(&f.b, &f.clock, &stale.execution_id).await;
        assert_eq!(tx.commit().await.expect("commit"), Fenced::Lost);
        assert_eq!(f.stored_charge("o-stale").await, None);

        // Ended: the holder's own delivery was acknowledged.
        let ended = newer.lease.clone();
        let outcome = WorkflowRunOutcome::Completed(Json::null());
        assert!(
            !f.b.acknowledge(&ended, &outcome)
                .await
                .expect("ack")
                .is_lost()
        );
        let mut tx = f.b.begin_fenced(&ended).await.expect("begin");
        f.charge(&mut tx, "o-stale", token(&ended), "B").await;
        assert_eq!(tx.commit().await.expect("commit"), Fenced::Lost);
        assert_eq!(f.stored_charge("o-stale").await, None);
    });
}

#[test]
fn bad_leases_are_typed_errors_with_nothing_applied() {
    with_fixture(|f| async move {
        let lease = f.admit_and_claim("o-bad").await.lease;
        let with = |id: &str, t: u64| ExecutionLease {
            execution_id: ExecutionId::new(id).expect("id"),
            token: FencingToken::new(t),
            expires_at: lease.expires_at,
        };
        // Refused before anything is sent.
        let zero = f.a.begin_fenced(&with("o-bad", 0)).await;
        assert!(
            matches!(zero, Err(LeaseError::InvalidInput { .. })),
            "{zero:?}"
        );
        let huge = f.a.begin_fenced(&with("o-bad", u64::MAX)).await;
        assert!(
            matches!(huge, Err(LeaseError::ForeignToken { .. })),
            "{huge:?}"
        );
        // Refused at commit, with the application's writes rolled back.
        let cases = [
            (with("o-missing", lease.token.get()), "unknown execution"),
            (with("o-bad", lease.token.get() + 1000), "foreign token"),
        ];
        for (bad, what) in cases {
            let mut tx = f.a.begin_fenced(&bad).await.expect("begin");
            f.charge(&mut tx, "o-bad", 1, "A").await;
            let r = tx.commit().await;
            let typed = match what {
                "unknown execution" => matches!(r, Err(LeaseError::UnknownExecution(_))),
                _ => matches!(r, Err(LeaseError::ForeignToken { .. })),
            };
            assert!(typed, "{what}: {r:?}");
            assert_eq!(
                f.stored_charge("o-bad").await,
                None,
                "{what}: nothing applied"
            );
        }
        // The good lease still works.
        let mut tx = f.a.begin_fenced(&lease).await.expect("begin");
        f.charge(&mut tx, "o-bad", token(&lease), "A").await;
        assert_eq!(tx.commit().await.expect("commit"), Fenced::Accepted(()));
    });
}

#[test]
fn failed_statement_rollback_and_drop_apply_nothing() {
    with_fixture(|f| async move {
        let lease = f.admit_and_claim("o-fail").await.lease;
        // An application statement fails: the transaction is aborted and commit says so.
        let mut tx = f.a.begin_fenced(&lease).await.expect("begin");
        f.charge(&mut tx, "o-fail", token(&lease), "A").await;
        let bad = sqlx::query("SELECT 1 / 0").execute(tx.conn()).await;
        assert!(bad.is_err());
        let r = tx.commit().await;
        assert!(matches!(r, Err(LeaseError::Backend { .. })), "{r:?}");
        assert_eq!(f.stored_charge("o-fail").await, None);

        let mut tx = f.a.begin_fenced(&lease).await.expect("begin");
        f.charge(&mut tx, "o-fail", token(&lease), "A").await;
        tx.rollback().await.expect("rollback");
        assert_eq!(f.stored_charge("o-fail").await, None);

        let mut tx = f.a.begin_fenced(&lease).await.expect("begin");
        f.charge(&mut tx, "o-fail", token(&lease), "A").await;
        drop(tx);
        assert_eq!(f.stored_charge("o-fail").await, None);

        // A savepoint of the application's (nested begin) stays inside the fence.
        let mut tx = f.a.begin_fenced(&lease).await.expect("begin");
        {
            use sqlx::Acquire;
            let mut inner = tx.conn().begin().await.expect("savepoint");
            f.charge(&mut inner, "o-fail", token(&lease), "A").await;
            inner.commit().await.expect("release savepoint");
        }
        f.expire();
        claim_one(&f.b, &f.clock, &lease.execution_id).await;
        assert_eq!(tx.commit().await.expect("commit"), Fenced::Lost);
        assert_eq!(f.stored_charge("o-fail").await, None);
    });
}

#[test]
fn fenced_with_commits_the_body_or_nothing() {
    with_fixture(|f| async move {
        let lease = f.admit_and_claim("o-with").await.lease;
        let app = f.app.clone();
        let t = token(&lease);
        let r: Result<Fenced<u32>, DeliveryError> =
            f.a.fenced_with(&lease, async |conn: &mut PgConnection| {
                insert_charge(&app, conn, "o-with-1", t, "A")
                    .await
                    .map_err(DeliveryError::worker)?;
                Ok(7)
            })
            .await;
        assert_eq!(r.expect("fenced_with").accepted(), Some(7));
        assert!(f.stored_charge("o-with-1").await.is_some());

        let r: Result<Fenced<u32>, DeliveryError> =
            f.a.fenced_with(&lease, async |conn: &mut PgConnection| {
                insert_charge(&app, conn, "o-with-2", t, "A")
                    .await
                    .map_err(DeliveryError::worker)?;
                Err(DeliveryError::worker("the application gave up"))
            })
            .await;
        assert!(matches!(r, Err(DeliveryError::Worker(_))), "{r:?}");
        assert_eq!(f.stored_charge("o-with-2").await, None);
    });
}

#[test]
fn transaction_limits_come_from_the_lease() {
    with_fixture(|f| async move {
        let lease = f.admit_and_claim("o-limits").await.lease;
        let now = lease_core::Clock::now(&f.clock);
        let expected = stall_bound_ms(&lease, now);
        assert_eq!(expected, i64::try_from(LEASE.as_millis()).expect("ms"));
        let mut tx = f.a.begin_fenced(&lease).await.expect("begin");
        let settings: Vec<(String, String)> = sqlx::query_as(
            "SELECT name, setting FROM pg_settings \
             WHERE name IN ('enable_bitmapscan', 'enable_seqscan', \
                            'idle_in_transaction_session_timeout', 'lock_timeout', \
                            'plan_cache_mode', 'transaction_isolation') \
             ORDER BY name",
        )
        .fetch_all(tx.conn())
        .await
        .expect("settings");
        let ms = expected.to_string();
        assert_eq!(
            settings,
            [
                ("enable_bitmapscan".into(), "on".into()),
                ("enable_seqscan".into(), "on".into()),
                ("idle_in_transaction_session_timeout".into(), ms.clone()),
                ("lock_timeout".into(), ms),
                ("plan_cache_mode".into(), "auto".into()),
                ("transaction_isolation".into(), "read committed".into()),
            ]
        );
        tx.rollback().await.expect("rollback");
        // Outside the transaction the session's own settings are back.
        let after: String = sqlx::query_scalar("SHOW lock_timeout")
            .fetch_one(f.a.pool())
            .await
            .expect("show");
        assert_eq!(after, "0");
        // The library's own statements run with their generic plans, without JIT (backend.rs).
        let plans: String = sqlx::query_scalar("SHOW plan_cache_mode")
            .fetch_one(f.a.pool())
            .await
            .expect("show");
        assert_eq!(plans, "force_generic_plan");
        let jit: String = sqlx::query_scalar("SHOW jit")
            .fetch_one(f.a.pool())
            .await
            .expect("show");
        assert_eq!(jit, "off");
        let bitmaps: String = sqlx::query_scalar("SHOW enable_bitmapscan")
            .fetch_one(f.a.pool())
            .await
            .expect("show");
        assert_eq!(bitmaps, "off");
        let seqscans: String = sqlx::query_scalar("SHOW enable_seqscan")
            .fetch_one(f.a.pool())
            .await
            .expect("show");
        assert_eq!(seqscans, "off");
        // A lease that has run out still gets the floor.
        let late = Timestamp::from_millis(lease.expires_at.as_millis() + 5_000);
        assert_eq!(stall_bound_ms(&lease, late), MIN_STALL_BOUND_MS);
    });
}

/// A fenced transaction whose opening message fails on the server (here: a forged lease whose
/// expiry overflows the stall bound's arithmetic) leaves no transaction open on its
/// connection: on a one-connection pool the next operation gets that connection and must not
/// meet an aborted transaction (SQLSTATE 25P02). The transaction is also READ COMMITTED
/// whatever the session's default isolation is.
#[test]
fn a_failed_begin_leaves_its_connection_clean() {
    with_fixture(|f| async move {
        let lease = f.admit_and_claim("o-begin").await.lease;
        let config = common::config(f.clock.clone(), f.policy)
            .schema(f.a.schema())
            .max_connections(1);
        let one = PostgresBackend::connect(config).await.expect("connect");
        let forged = ExecutionLease {
            expires_at: Timestamp::MIN,
            ..lease.clone()
        };
        let failed = one.begin_fenced(&forged).await;
        assert!(failed.is_err(), "{failed:?}");
        let record = one.get(&lease.execution_id).await;
        assert!(
            record.is_ok(),
            "the next user of the connection: {record:?}"
        );
        let mut tx = one
            .begin_fenced(&lease)
            .await
            .expect("begin after a failed begin");
        f.charge(&mut tx, "o-begin", token(&lease), "A").await;
        assert_eq!(tx.commit().await.expect("commit"), Fenced::Accepted(()));
        assert_eq!(
            f.stored_charge("o-begin").await,
            Some((token(&lease), "A".to_owned()))
        );
        // The isolation level is pinned even when the session defaults to another.
        sqlx::query("SET default_transaction_isolation = 'serializable'")
            .execute(one.pool())
            .await
            .expect("set");
        let mut tx = one.begin_fenced(&lease).await.expect("begin");
        let isolation: String = sqlx::query_scalar("SHOW transaction_isolation")
            .fetch_one(tx.conn())
            .await
            .expect("show");
        assert_eq!(isolation, "read committed");
        tx.rollback().await.expect("rollback");
        one.close().await;
    });
}

/// A stalled holder's application row locks block another holder only until the stalled
/// transaction's idle limit ends its session; the stalled commit then fails with nothing
/// applied. The waiting holder's statement simply waits (its own lock limit is longer).
#[test]
fn a_stalled_holder_is_ended_by_its_idle_limit() {
    with_fixture(|f| async move {
        let stalled = f.admit_and_claim("o-stall").await.lease;
        f.expire(); // the stalled holder's lease has run out: its limit is the floor
        let mut tx_a = f.a.begin_fenced(&stalled).await.expect("begin A");
        f.charge(&mut tx_a, "o-shared", token(&stalled), "A").await;
        // A's session went idle (its idle limit started) before this reply reached us; timed
        // from here, not from B's statement, so a slow claim and begin on a loaded machine
        // cannot eat into the bound checked below.
        let started = std::time::Instant::now();
        let fresh = claim_one(&f.b, &f.clock, &stalled.execution_id).await.lease; // 30 s limit
        let mut tx_b = f.b.begin_fenced(&fresh).await.expect("begin B");
        // Blocks on A's uncommitted row until the server ends A's idle session.
        let inserted = f.charge(&mut tx_b, "o-shared", token(&fresh), "B").await;
        let waited = started.elapsed();
        assert!(inserted, "A's row was rolled back");
        assert!(
            waited >= Duration::from_millis(200) && waited < Duration::from_secs(10),
            "waited {waited:?} for the stalled session's idle limit"
        );
        assert_eq!(tx_b.commit().await.expect("commit B"), Fenced::Accepted(()));
        // Unavailable when the driver reads the server's FATAL idle-timeout message;
        // OutcomeUnknown if the socket's reset arrives first. Either way nothing applied.
        let r = tx_a.commit().await;
        assert!(
            matches!(
                r,
                Err(LeaseError::Unavailable { .. } | LeaseError::OutcomeUnknown { .. })
            ),
            "{r:?}"
        );
        assert_eq!(
            f.stored_charge("o-shared").await,
            Some((token(&fresh), "B".into()))
        );
    });
}

/// An application statement waiting on another holder's row lock gives up after its own
/// transaction's lock limit: the transaction is aborted and its commit is an error.
#[test]
fn a_blocked_application_statement_gives_up_at_the_lock_limit() {
    with_fixture(|f| async move {
        let holder = f.admit_and_claim("o-holder").await.lease;
        let mut tx_a = f.a.begin_fenced(&holder).await.expect("begin A");
        f.charge(&mut tx_a, "o-contended", token(&holder), "A")
            .await;
        let late = f.admit_and_claim("o-late").await.lease;
        // Run the late holder's lease out: its transaction gets the floor as lock limit.
        f.clock.advance(LEASE);
        let mut tx_b = f.b.begin_fenced(&late).await.expect("begin B");
        let blocked = insert_charge(&f.app, &mut tx_b, "o-contended", token(&late), "B").await;
        let code = blocked
            .as_ref()
            .err()
            .and_then(|e| e.as_database_error())
            .and_then(|d| d.code().map(|c| c.into_owned()));
        assert_eq!(code.as_deref(), Some("55P03"), "{blocked:?}");
        let r = tx_b.commit().await;
        assert!(matches!(r, Err(LeaseError::Backend { .. })), "{r:?}");
        assert_eq!(tx_a.commit().await.expect("commit A"), Fenced::Accepted(()));
    });
}

// ---------------------------------------------------------------------------------------
// step_in_tx
// ---------------------------------------------------------------------------------------

#[test]
fn step_in_tx_writes_effect_and_record_together_and_replays() {
    with_fixture(|f| async move {
        let claimed = f.admit_and_claim("o-step").await;
        let d = f.delivery(&f.a, &claimed);
        let runs = Arc::new(AtomicUsize::new(0));
        let step = |d: Delivery, runs: Arc<AtomicUsize>, holder: &'static str| {
            let (backend, app) = (f.a.clone(), f.app.clone());
            async move {
                let t = i64::try_from(d.token().get()).expect("token");
                backend
                    .step_in_tx(&d, "charge", async |conn: &mut PgConnection| {
                        runs.fetch_add(1, Ordering::SeqCst);
                        insert_charge(&app, conn, "o-step", t, holder).await?;
                        Ok::<_, sqlx::Error>(format!("receipt-{holder}"))
                    })
                    .await
            }
        };
        // Spawned: the future is Send, as a dispatcher's worker needs.
        let first = tokio::spawn(step(d.clone(), runs.clone(), "A"))
            .await
            .expect("task");
        assert_eq!(first.expect("step"), "receipt-A");
        let key = StepKey::new("charge").expect("key");
        let record = f.a.read_step(&claimed.lease.execution_id, &key, 1).await;
        let record = record.expect("read").expect("the record exists");
        assert!(record.done && record.token == claimed.lease.token);
        assert_eq!(
            f.stored_charge("o-step").await,
            Some((token(&claimed.lease), "A".into()))
        );

        // The same delivery again: remembered, the body does not run.
        assert_eq!(
            step(d.clone(), runs.clone(), "A2").await.expect("again"),
            "receipt-A"
        );
        // A redelivery finds the record and skips the body.
        f.expire();
        let redelivered = claim_one(&f.b, &f.clock, &claimed.lease.execution_id).await;
        let d2 = f.delivery(&f.b, &redelivered);
        assert_eq!(
            step(d2, runs.clone(), "B").await.expect("replay"),
            "receipt-A"
        );
        assert_eq!(runs.load(Ordering::SeqCst), 1, "the body ran once");
        assert_eq!(
            f.stored_charge("o-step").await,
            Some((token(&claimed.lease), "A".into()))
        );
    });
}

#[test]
fn stale_step_in_tx_applies_nothing_and_marks_the_delivery_lost() {
    with_fixture(|f| async move {
        let claimed = f.admit_and_claim("o-stale-step").await;
        let d = f.delivery(&f.a, &claimed);
        f.expire();
        claim_one(&f.b, &f.clock, &claimed.lease.execution_id).await;
        let app = f.app.clone();
        let t = token(&claimed.lease);
        let r =
            f.a.step_in_tx(&d, "charge", async |conn: &mut PgConnection| {
                insert_charge(&app, conn, "o-stale-step", t, "A").await?;
                Ok::<_, sqlx::Error>(1u8)
            })
            .await;
        assert!(matches!(r, Err(DeliveryError::Lost)), "{r:?}");
        assert!(d.is_lost() && d.is_cancelled());
        assert_eq!(f.stored_charge("o-stale-step").await, None);
        let steps =
            f.a.list_steps(&claimed.lease.execution_id)
                .await
                .expect("steps");
        assert!(steps.is_empty(), "{steps:?}");
    });
}

#[test]
fn failing_step_body_applies_nothing() {
    with_fixture(|f| async move {
        let claimed = f.admit_and_claim("o-body-fails").await;
        let d = f.delivery(&f.a, &claimed);
        let app = f.app.clone();
        let t = token(&claimed.lease);
        let r: Result<u8, DeliveryError> =
            f.a.step_in_tx(&d, "charge", async |conn: &mut PgConnection| {
                insert_charge(&app, conn, "o-body-fails", t, "A").await?;
                Err(sqlx::Error::Protocol("card declined".into()))
            })
            .await;
        assert!(matches!(r, Err(DeliveryError::Step { .. })), "{r:?}");
        assert!(!d.is_lost());
        assert_eq!(f.stored_charge("o-body-fails").await, None);
        let steps =
            f.a.list_steps(&claimed.lease.execution_id)
                .await
                .expect("steps");
        assert!(steps.is_empty(), "{steps:?}");
    });
}

/// A done record that appeared after the slot was read (here: written directly on a first
/// delivery, which reads no records) is returned, and the body's effect is rolled back
/// rather than applied a second time.
#[test]
fn step_in_tx_never_commits_an_effect_whose_record_exists() {
    with_fixture(|f| async move {
        let claimed = f.admit_and_claim("o-dup").await;
        let earlier = StepWrite {
            step_key: StepKey::new("charge").expect("key"),
            step_attempt: 1,
            done: true,
            response: Json::to_json("r", "receipt-earlier").expect("json"),
        };
        let written =
            f.a.write_step(&claimed.lease, &earlier)
                .await
                .expect("write");
        assert!(!written.is_lost());
        let d = f.delivery(&f.a, &claimed); // a first delivery: no record is read
        let app = f.app.clone();
        let t = token(&claimed.lease);
        let r =
            f.a.step_in_tx(&d, "charge", async |conn: &mut PgConnection| {
                insert_charge(&app, conn, "o-dup", t, "A").await?;
                Ok::<_, sqlx::Error>("receipt-again".to_owned())
            })
            .await;
        assert_eq!(r.expect("step"), "receipt-earlier");
        assert_eq!(
            f.stored_charge("o-dup").await,
            None,
            "the effect was not applied twice"
        );
        // Attempts recorded as not done are passed over inside the same transaction.
        let not_done = StepWrite {
            step_key: StepKey::new("refund").expect("key"),
            step_attempt: 1,
            done: false,
            response: Json::null(),
        };
        assert!(
            !f.a.write_step(&claimed.lease, &not_done)
                .await
                .expect("write")
                .is_lost()
        );
        let r =
            f.a.step_in_tx(&d, "refund", async |conn: &mut PgConnection| {
                insert_charge(&app, conn, "o-refund", t, "A").await?;
                Ok::<_, sqlx::Error>(2u8)
            })
            .await;
        assert_eq!(r.expect("refund"), 2);
        let key = StepKey::new("refund").expect("key");
        let second =
            f.a.read_step(&claimed.lease.execution_id, &key, 2)
                .await
                .expect("read");
        assert!(second.is_some_and(|r| r.done));
        assert!(f.stored_charge("o-refund").await.is_some());
    });
}
