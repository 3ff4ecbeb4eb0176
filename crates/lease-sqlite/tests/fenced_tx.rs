//! Fenced application transactions and `step_in_tx`: the application's own rows are written
//! in the same transaction as the fencing check, so a stale holder's writes never commit
//! once a higher token exists.

use lease_core::ExecutionClientExt;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Waker};
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, Claimed, ExecutionClient, ExecutionId, ExecutionLease, Fenced,
    FencingToken, HeapClient, Json, LeaseError, ManualClock, StepKey, StepWrite,
    WorkflowRunOutcome,
};
use lease_runtime::{Delivery, DeliveryError};
use lease_sqlite::{FencedError, SqliteBackend, SqliteConfig};
use rusqlite::{Connection, Transaction, params};
use tokio_util::sync::CancellationToken;

const LEASE: Duration = Duration::from_secs(30);
/// Past every lease and redelivery delay (the default policy caps at 5 minutes).
const PAST_EXPIRY: Duration = Duration::from_secs(3600);
const ROUNDS: usize = 500;

struct Fixture {
    dir: tempfile::TempDir,
    clock: ManualClock,
    /// The stale holder's handle (its own connection, as another process would have).
    a: SqliteBackend,
    /// The current holder's handle.
    b: SqliteBackend,
}

impl Fixture {
    async fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = ManualClock::starting_now();
        let config = SqliteConfig::file(dir.path().join("app.db")).clock(Arc::new(clock.clone()));
        let a = SqliteBackend::open(config).await.expect("open");
        let b = a.peer().await.expect("peer");
        let f = Fixture { dir, clock, a, b };
        f.app()
            .execute_batch(
                "CREATE TABLE app_charges (
                     seq INTEGER PRIMARY KEY,
                     round INTEGER NOT NULL,
                     token INTEGER NOT NULL,
                     token_at_commit INTEGER NOT NULL);",
            )
            .expect("application schema");
        f
    }

    /// The application's own connection (to read its table).
    fn app(&self) -> Connection {
        Connection::open(self.dir.path().join("app.db")).expect("app connection")
    }

    async fn claim(&self, on: &SqliteBackend) -> Vec<Claimed> {
        let now = on.now().await.expect("now");
        on.claim_due_with_records(ClaimRequest {
            now,
            limit: 10,
            duration: LEASE,
        })
        .await
        .expect("claim")
    }

    /// Admits `name` and claims it on `on`.
    async fn admit_and_claim(&self, on: &SqliteBackend, name: &str) -> Claimed {
        on.admit(&Admission::new(id(name))).await.expect("admit");
        let mut claimed = self.claim(on).await;
        assert_eq!(claimed.len(), 1, "one claimable execution");
        claimed.remove(0)
    }

    /// Lets every lease expire, then reclaims the one claimable execution on `on`.
    async fn reclaim(&self, on: &SqliteBackend) -> Claimed {
        self.clock.advance(PAST_EXPIRY);
        let mut claimed = self.claim(on).await;
        assert_eq!(claimed.len(), 1, "the expired execution");
        claimed.remove(0)
    }

    fn delivery(&self, on: &SqliteBackend, claimed: Claimed) -> Delivery {
        Delivery::new(
            Arc::new(on.clone()),
            claimed.lease,
            claimed.record,
            CancellationToken::new(),
        )
    }

    /// The `round` column of every charge, in commit order.
    fn charged(&self) -> String {
        self.app()
            .query_row(
                "SELECT coalesce(group_concat(round, ','), '') FROM
                     (SELECT round FROM app_charges ORDER BY seq)",
                [],
                |r| r.get(0),
            )
            .expect("charges")
    }

    fn count(&self, sql: &str) -> i64 {
        self.app()
            .query_row(sql, [], |r| r.get(0))
            .expect("count query")
    }
}

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

fn token_sql(lease: &ExecutionLease) -> i64 {
    i64::try_from(lease.token.get()).expect("token fits")
}

// ---------------------------------------------------------------------------------------
// The race: a stale and a current holder write app_charges around a reclaim.
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq)]
enum Variant {
    /// `SqliteBackend::fenced`.
    Atomic,
    /// The check in its own transaction before the application's (test support).
    NonAtomic,
}

/// One charge: inserts (round, token, the execution's token as this transaction sees it).
/// The transaction holds the write lock, so the token it reads is the token at its COMMIT:
/// a row whose two tokens differ committed after a newer claim did.
async fn charge(
    on: &SqliteBackend,
    variant: Variant,
    lease: &ExecutionLease,
    round: usize,
) -> Fenced<()> {
    let execution = lease.execution_id.as_str().to_owned();
    let token = token_sql(lease);
    let round = i64::try_from(round).expect("round");
    let write = move |tx: &Transaction<'_>| -> rusqlite::Result<()> {
        let at_commit: i64 = tx.query_row(
            "SELECT token FROM lease_executions WHERE namespace = 'default' AND id = ?1",
            [&execution],
            |r| r.get(0),
        )?;
        tx.execute(
            "INSERT INTO app_charges (round, token, token_at_commit) VALUES (?1, ?2, ?3)",
            params![round, token, at_commit],
        )?;
        Ok(())
    };
    let result = match variant {
        Variant::Atomic => on.fenced(lease, write).await,
        Variant::NonAtomic => on.fenced_non_atomic_for_tests(lease, write).await,
    };
    result.expect("a charge either commits or is Lost")
}

/// Most charges the stale holder tries in one round (it stops at its first `Lost`).
const MAX_STALE_CHARGES: usize = 100_000;

/// What one round showed.
struct Round {
    /// Rows committed after the higher token existed (the violation).
    late: i64,
}

/// One round: `a` holds round's execution with an expired lease and keeps charging until
/// it is told `Lost`, while `b` reclaims it and charges once. Checks every result against
/// the table: each `Accepted` is exactly one row, a `Lost` call applied nothing, the
/// current holder's charge committed after every stale row.
async fn race_round(f: &Fixture, variant: Variant, round: usize) -> Round {
    let name = format!("order-{round}");
    let stale = f.admit_and_claim(&f.a, &name).await.lease;
    f.clock.advance(PAST_EXPIRY);

    let a = f.a.clone();
    let stale_lease = stale.clone();
    let stale_task = tokio::spawn(async move {
        for accepted in 0..MAX_STALE_CHARGES {
            if charge(&a, variant, &stale_lease, round).await.is_lost() {
                return accepted;
            }
        }
        panic!("the stale holder was never told Lost");
    });
    let b = f.b.clone();
    let current_task = tokio::spawn(async move {
        let now = b.now().await.expect("now");
        let leases = b
            .claim_due(ClaimRequest {
                now,
                limit: 10,
                duration: LEASE,
            })
            .await
            .expect("reclaim");
        assert_eq!(leases.len(), 1, "the round's execution");
        let lease = leases[0].clone();
        assert!(
            !charge(&b, variant, &lease, round).await.is_lost(),
            "the current holder is refused"
        );
        lease
    });
    let (stale_accepted, current) = (
        stale_task.await.expect("stale task"),
        current_task.await.expect("current task"),
    );
    assert!(current.token > stale.token);
    let done = WorkflowRunOutcome::Completed(Json::null());
    assert!(
        !f.b.acknowledge(&current, &done)
            .await
            .expect("ack")
            .is_lost()
    );

    let (stale_t, current_t) = (token_sql(&stale), token_sql(&current));
    let rows = |filter: &str| {
        f.count(&format!(
            "SELECT count(*) FROM app_charges WHERE round = {round} AND {filter}"
        ))
    };
    assert_eq!(
        rows(&format!("token = {stale_t}")),
        i64::try_from(stale_accepted).expect("count"),
        "every Accepted is one row, a Lost call left none"
    );
    assert_eq!(rows(&format!("token = {current_t}")), 1);
    assert_eq!(rows(&format!("token NOT IN ({stale_t}, {current_t})")), 0);
    let late = rows("token <> token_at_commit");
    if late == 0 {
        let current_seq = f.count(&format!(
            "SELECT seq FROM app_charges WHERE round = {round} AND token = {current_t}"
        ));
        assert_eq!(
            rows(&format!("token = {stale_t} AND seq > {current_seq}")),
            0,
            "in commit order, every stale row precedes the current holder's"
        );
    }
    Round { late }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_holder_never_commits_after_the_reclaim() {
    let f = Fixture::new().await;
    for round in 0..ROUNDS {
        let r = race_round(&f, Variant::Atomic, round).await;
        assert_eq!(
            r.late, 0,
            "round {round}: a stale charge committed after the reclaim"
        );
    }
    let stale_rows = f.count("SELECT count(*) FROM app_charges") - ROUNDS as i64;
    println!("{ROUNDS} rounds, {stale_rows} stale charges accepted before their reclaim");
}

/// The same rounds and checks catch a fence that checks in a separate transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_race_check_catches_a_non_atomic_fence() {
    let f = Fixture::new().await;
    let caught = {
        let mut caught = None;
        for round in 0..ROUNDS {
            if race_round(&f, Variant::NonAtomic, round).await.late > 0 {
                caught = Some(round + 1);
                break;
            }
        }
        caught
    };
    let rounds = caught.expect("the non-atomic fence was not caught in 500 rounds");
    println!("non-atomic fence caught after {rounds} round(s)");
}

// ---------------------------------------------------------------------------------------
// fenced: outcomes, bad input, closure errors, panics, the guard, group commit.
// ---------------------------------------------------------------------------------------

/// A counting closure that inserts one row.
fn insert_charge(
    runs: &Arc<AtomicUsize>,
    value: i64,
) -> impl FnOnce(&Transaction<'_>) -> rusqlite::Result<i64> + Send + 'static {
    let runs = runs.clone();
    move |tx| {
        runs.fetch_add(1, Ordering::SeqCst);
        tx.execute(
            "INSERT INTO app_charges (round, token, token_at_commit) VALUES (?1, 0, 0)",
            [value],
        )?;
        Ok(value)
    }
}

#[tokio::test]
async fn a_current_lease_commits_and_a_lost_one_runs_nothing() {
    let f = Fixture::new().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let first = f.admit_and_claim(&f.a, "order-1").await.lease;
    let got = f.a.fenced(&first, insert_charge(&runs, 7)).await;
    assert!(matches!(got, Ok(Fenced::Accepted(7))), "{got:?}");

    let second = f.reclaim(&f.b).await.lease;
    let got = f.a.fenced(&first, insert_charge(&runs, 8)).await;
    assert!(matches!(got, Ok(Fenced::Lost)), "{got:?}");
    // The delivery ended by acknowledgement: its own lease is lost too.
    let done = WorkflowRunOutcome::Completed(Json::null());
    assert!(
        !f.b.acknowledge(&second, &done)
            .await
            .expect("ack")
            .is_lost()
    );
    let got = f.b.fenced(&second, insert_charge(&runs, 9)).await;
    assert!(matches!(got, Ok(Fenced::Lost)), "{got:?}");

    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "lost calls never run the closure"
    );
    assert_eq!(f.charged(), "7");
}

#[tokio::test]
async fn bad_input_is_a_typed_error_and_the_closure_does_not_run() {
    let f = Fixture::new().await;
    let lease = f.admit_and_claim(&f.a, "order-1").await.lease;
    let with = |execution: &str, token: u64| ExecutionLease {
        execution_id: id(execution),
        token: FencingToken::new(token),
        expires_at: lease.expires_at,
    };
    type Check = fn(&LeaseError) -> bool;
    let cases: [(&str, ExecutionLease, Check); 3] = [
        ("unknown execution", with("nobody", 1), |e| {
            matches!(e, LeaseError::UnknownExecution(_))
        }),
        ("token 0", with("order-1", 0), |e| {
            matches!(e, LeaseError::InvalidInput { .. })
        }),
        (
            "foreign token",
            with("order-1", lease.token.get() + 1),
            |e| matches!(e, LeaseError::ForeignToken { .. }),
        ),
    ];
    let runs = Arc::new(AtomicUsize::new(0));
    for (what, bad, expected) in cases {
        match f.a.fenced(&bad, insert_charge(&runs, 1)).await {
            Err(FencedError::Lease(e)) => assert!(expected(&e), "{what}: {e:?}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(f.count("SELECT count(*) FROM app_charges"), 0);
}

#[derive(Debug, PartialEq)]
struct Declined(&'static str);

#[tokio::test]
async fn a_closure_error_rolls_back_and_is_returned_typed() {
    let f = Fixture::new().await;
    let lease = f.admit_and_claim(&f.a, "order-1").await.lease;
    let got =
        f.a.fenced(&lease, |tx: &Transaction<'_>| {
            tx.execute(
                "INSERT INTO app_charges (round, token, token_at_commit) VALUES (1, 0, 0)",
                [],
            )
            .map_err(|_| Declined("insert"))?;
            Err::<(), _>(Declined("card declined"))
        })
        .await;
    match got {
        Err(FencedError::App(e)) => assert_eq!(e, Declined("card declined")),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        f.count("SELECT count(*) FROM app_charges"),
        0,
        "rolled back"
    );
    // The handle still works, and the lease still holds.
    let runs = Arc::new(AtomicUsize::new(0));
    let got = f.a.fenced(&lease, insert_charge(&runs, 2)).await;
    assert!(matches!(got, Ok(Fenced::Accepted(2))), "{got:?}");
}

#[tokio::test]
async fn a_panicking_closure_rolls_back_and_panics_in_the_caller() {
    let f = Fixture::new().await;
    let lease = f.admit_and_claim(&f.a, "order-1").await.lease;
    let (a, held) = (f.a.clone(), lease.clone());
    let joined = tokio::spawn(async move {
        a.fenced(&held, |tx: &Transaction<'_>| -> rusqlite::Result<()> {
            tx.execute(
                "INSERT INTO app_charges (round, token, token_at_commit) VALUES (1, 0, 0)",
                [],
            )?;
            panic!("the application's bug");
        })
        .await
    })
    .await;
    let panic = joined.expect_err("the caller panicked").into_panic();
    assert_eq!(
        panic.downcast_ref::<&str>(),
        Some(&"the application's bug"),
        "the closure's own panic"
    );
    assert_eq!(
        f.count("SELECT count(*) FROM app_charges"),
        0,
        "rolled back"
    );
    let runs = Arc::new(AtomicUsize::new(0));
    let got = f.a.fenced(&lease, insert_charge(&runs, 2)).await;
    assert!(matches!(got, Ok(Fenced::Accepted(2))), "{got:?}");
}

#[tokio::test]
async fn the_closure_cannot_end_the_transaction_or_write_lease_tables() {
    let f = Fixture::new().await;
    let lease = f.admit_and_claim(&f.a, "order-1").await.lease;
    let refused = [
        "COMMIT",
        "ROLLBACK",
        "BEGIN",
        "RELEASE lease_op",
        "ROLLBACK TO lease_op",
        "SAVEPOINT lease_op",
        "UPDATE lease_executions SET token = token + 1",
        "DELETE FROM lease_steps",
        "INSERT INTO lease_meta (key, value) VALUES ('x', 'y')",
        "DROP TABLE lease_steps",
        "CREATE INDEX app_bad ON lease_steps (done)",
        "CREATE TRIGGER app_bad AFTER UPDATE ON lease_steps BEGIN SELECT 1; END",
        // Fires the application's trigger below, whose body writes a lease table.
        "INSERT INTO app_audit VALUES (1)",
    ];
    f.app()
        .execute_batch(
            "CREATE TABLE app_audit (x INTEGER);
             CREATE TRIGGER app_audit_sneaks AFTER INSERT ON app_audit BEGIN
                 DELETE FROM lease_steps; END;",
        )
        .expect("an application trigger");
    for sql in refused {
        let got =
            f.a.fenced(&lease, move |tx: &Transaction<'_>| {
                tx.execute(
                    "INSERT INTO app_charges (round, token, token_at_commit) VALUES (1, 0, 0)",
                    [],
                )?;
                tx.execute_batch(sql)
            })
            .await;
        match got {
            Err(FencedError::App(e)) => assert_eq!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::AuthorizationForStatementDenied),
                "{sql}: {e}"
            ),
            other => panic!("{sql}: {other:?}"),
        }
    }
    assert_eq!(f.count("SELECT count(*) FROM app_charges"), 0);
    // Its own savepoints, reads of lease tables and its own schema are fine.
    let got =
        f.a.fenced(&lease, |tx: &Transaction<'_>| {
            tx.execute_batch(
                "CREATE TABLE app_notes (note TEXT);
                 SAVEPOINT mine;
                 INSERT INTO app_notes VALUES ('dropped');
                 ROLLBACK TO mine;
                 RELEASE mine;
                 INSERT INTO app_notes VALUES ('kept');",
            )?;
            tx.query_row("SELECT count(*) FROM lease_executions", [], |r| {
                r.get::<_, i64>(0)
            })
        })
        .await;
    assert!(matches!(got, Ok(Fenced::Accepted(1))), "{got:?}");
    assert_eq!(f.count("SELECT count(*) FROM app_notes"), 1);
    // The library's own statements are unaffected afterwards.
    let write = step("charge", 1);
    let got = f.a.write_step(&lease, &write).await.expect("write_step");
    assert!(!got.is_lost());
}

/// Polls `fut` once, so it submits its job (to the held connection's queue).
fn submit<F: Future>(fut: Pin<&mut F>) {
    let mut cx = Context::from_waker(Waker::noop());
    assert!(fut.poll(&mut cx).is_pending(), "queued behind the hold");
}

/// In one group commit, a failing fenced closure rolls back its own savepoint only.
#[tokio::test]
async fn in_a_group_a_failing_closure_rolls_back_only_its_savepoint() {
    let f = Fixture::new().await;
    let lease = f.admit_and_claim(&f.a, "order-1").await.lease;
    let runs = Arc::new(AtomicUsize::new(0));
    let write = step("charge", 1);
    let hold = f.a.hold_connection_for_tests();
    let mut ok = pin!(f.a.fenced(&lease, insert_charge(&runs, 1)));
    let mut failing = pin!(f.a.fenced(&lease, |tx: &Transaction<'_>| {
        tx.execute(
            "INSERT INTO app_charges (round, token, token_at_commit) VALUES (2, 0, 0)",
            [],
        )
        .map_err(|_| Declined("insert"))?;
        Err::<(), _>(Declined("no"))
    }));
    let mut recorded = pin!(f.a.write_step(&lease, &write));
    let mut after = pin!(f.a.fenced(&lease, insert_charge(&runs, 3)));
    submit(ok.as_mut());
    submit(failing.as_mut());
    submit(recorded.as_mut());
    submit(after.as_mut());
    assert_eq!(f.a.queued_operations_for_tests(), 4);
    drop(hold);
    assert!(matches!(ok.await, Ok(Fenced::Accepted(1))));
    assert!(matches!(
        failing.await,
        Err(FencedError::App(Declined("no")))
    ));
    assert!(!recorded.await.expect("write_step").is_lost());
    assert!(matches!(after.await, Ok(Fenced::Accepted(3))));
    assert_eq!(
        f.charged(),
        "1,3",
        "only the failing closure's row was rolled back"
    );
}

// ---------------------------------------------------------------------------------------
// step_in_tx
// ---------------------------------------------------------------------------------------

fn step(key: &str, value: i64) -> StepWrite {
    StepWrite {
        step_key: StepKey::new(key).expect("key"),
        step_attempt: 1,
        done: true,
        response: Json::to_json("response", &value).expect("json"),
    }
}

/// A counting step closure: charges `amount` and returns a receipt.
fn charge_step(
    runs: &Arc<AtomicUsize>,
    amount: i64,
) -> impl FnOnce(&Transaction<'_>) -> rusqlite::Result<String> + Send + 'static {
    let runs = runs.clone();
    move |tx| {
        runs.fetch_add(1, Ordering::SeqCst);
        tx.execute(
            "INSERT INTO app_charges (round, token, token_at_commit) VALUES (?1, 0, 0)",
            [amount],
        )?;
        Ok(format!("receipt-{amount}"))
    }
}

async fn step_record(on: &SqliteBackend, name: &str, key: &str) -> Option<lease_core::HeapRecord> {
    on.read_step(&id(name), &StepKey::new(key).expect("key"), 1)
        .await
        .expect("read_step")
}

#[tokio::test]
async fn step_in_tx_writes_the_effect_and_its_record_together_and_replays() {
    let f = Fixture::new().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let first = f.delivery(&f.a, f.admit_and_claim(&f.a, "order-1").await);
    let receipt: String =
        f.a.step_in_tx(&first, "charge", charge_step(&runs, 42))
            .await
            .expect("step");
    assert_eq!(receipt, "receipt-42");
    let record = step_record(&f.a, "order-1", "charge")
        .await
        .expect("recorded");
    assert!(record.done);
    assert_eq!(record.token, first.token());
    assert_eq!(record.response.decode::<String>().expect("decode"), receipt);
    assert_eq!(
        f.count("SELECT count(*) FROM app_charges WHERE round = 42"),
        1
    );

    // The same delivery again: remembered, no read, no run.
    let again: String =
        f.a.step_in_tx(&first, "charge", charge_step(&runs, 43))
            .await
            .expect("again");
    assert_eq!(again, receipt);
    // A redelivery on another connection reads the record and skips the closure.
    let second = f.delivery(&f.b, f.reclaim(&f.b).await);
    let replayed: String =
        f.b.step_in_tx(&second, "charge", charge_step(&runs, 44))
            .await
            .expect("replay");
    assert_eq!(replayed, receipt);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the closure ran once");
    assert_eq!(f.count("SELECT count(*) FROM app_charges"), 1);
}

#[tokio::test]
async fn a_stale_step_in_tx_applies_nothing_and_marks_the_delivery_lost() {
    let f = Fixture::new().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let stale = f.delivery(&f.a, f.admit_and_claim(&f.a, "order-1").await);
    let _current = f.reclaim(&f.b).await;
    let got =
        f.a.step_in_tx(&stale, "charge", charge_step(&runs, 42))
            .await;
    assert!(matches!(got, Err(DeliveryError::Lost)), "{got:?}");
    assert!(stale.is_lost() && stale.is_cancelled());
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(step_record(&f.a, "order-1", "charge").await.is_none());
    assert_eq!(f.count("SELECT count(*) FROM app_charges"), 0);
    // Refused locally from then on.
    let got =
        f.a.step_in_tx(&stale, "refund", charge_step(&runs, 1))
            .await;
    assert!(matches!(got, Err(DeliveryError::Lost)), "{got:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_failing_step_in_tx_leaves_neither_effect_nor_record() {
    let f = Fixture::new().await;
    let delivery = f.delivery(&f.a, f.admit_and_claim(&f.a, "order-1").await);
    // The closure fails after writing.
    let got =
        f.a.step_in_tx(&delivery, "charge", |tx: &Transaction<'_>| {
            tx.execute(
                "INSERT INTO app_charges (round, token, token_at_commit) VALUES (1, 0, 0)",
                [],
            )
            .map_err(|e| Box::new(e) as lease_core::BoxError)?;
            Err::<String, lease_core::BoxError>("card declined".into())
        })
        .await;
    match got {
        Err(DeliveryError::Step { step, source }) => {
            assert_eq!(step.as_str(), "charge");
            assert_eq!(source.to_string(), "card declined");
        }
        other => panic!("{other:?}"),
    }
    // The value cannot be recorded (JSON keys must be strings): the effect is undone too.
    let got =
        f.a.step_in_tx(&delivery, "charge", |tx: &Transaction<'_>| {
            tx.execute(
                "INSERT INTO app_charges (round, token, token_at_commit) VALUES (2, 0, 0)",
                [],
            )?;
            Ok::<_, rusqlite::Error>(BTreeMap::from([((1, 2), 3)]))
        })
        .await;
    assert!(
        matches!(
            got,
            Err(DeliveryError::Backend(LeaseError::MalformedJson { .. }))
        ),
        "{got:?}"
    );
    assert!(step_record(&f.a, "order-1", "charge").await.is_none());
    assert_eq!(f.count("SELECT count(*) FROM app_charges"), 0);
    // A retry by the same delivery runs and records.
    let runs = Arc::new(AtomicUsize::new(0));
    let receipt: String =
        f.a.step_in_tx(&delivery, "charge", charge_step(&runs, 5))
            .await
            .expect("retry");
    assert_eq!(receipt, "receipt-5");
    assert_eq!(f.count("SELECT count(*) FROM app_charges"), 1);
}

/// A done record written behind the delivery's back (after its slot was chosen) wins:
/// the closure's writes are rolled back and the recorded value returned.
#[tokio::test]
async fn a_record_written_meanwhile_wins_and_the_effect_is_undone() {
    let f = Fixture::new().await;
    let claimed = f.admit_and_claim(&f.a, "order-1").await;
    let lease = claimed.lease.clone();
    let delivery = f.delivery(&f.a, claimed);
    let mut earlier = step("charge", 0);
    earlier.response = Json::to_json("response", "receipt-earlier").expect("json");
    assert!(
        !f.a.write_step(&lease, &earlier)
            .await
            .expect("write")
            .is_lost()
    );
    let runs = Arc::new(AtomicUsize::new(0));
    let got: String =
        f.a.step_in_tx(&delivery, "charge", charge_step(&runs, 9))
            .await
            .expect("step");
    assert_eq!(got, "receipt-earlier");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "ran on a first delivery (no read)"
    );
    assert_eq!(f.count("SELECT count(*) FROM app_charges"), 0, "undone");
}
