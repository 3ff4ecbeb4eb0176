//! Admission inside the application's own transaction (`admit_in_tx`, `admit_batch_in_tx`):
//! on the application's connection and inside a fenced closure, the admitted executions
//! exist exactly when the transaction commits, and only a commit wakes a dispatcher.

use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, Claimed, ExecutionClient, ExecutionClientExt, ExecutionId, Fenced,
    LeaseError, ManualClock, Timestamp, WakeReceiver, WorkflowName,
};
use lease_runtime::{Delivery, DeliveryError};
use lease_sqlite::{FencedError, SqliteBackend, SqliteConfig};
use rusqlite::{Connection, TransactionBehavior};
use tokio_util::sync::CancellationToken;

const LEASE: Duration = Duration::from_secs(30);
/// Past every lease and redelivery delay (the default policy caps at 5 minutes).
const PAST_EXPIRY: Duration = Duration::from_secs(3600);
const USERS: &str = "CREATE TABLE users (name TEXT PRIMARY KEY)";

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

fn t(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms)
}

/// An admission due at the fixed past instant `at` ms (claimable at once; its wake-up
/// carries `at`, which tells the signals apart).
fn due(name: &str, at: i64) -> Admission {
    Admission::new(id(name)).not_before(t(at))
}

async fn recv(rx: &WakeReceiver, what: &str) -> Timestamp {
    match tokio::time::timeout(Duration::from_secs(20), rx.recv()).await {
        Ok(at) => at,
        Err(_) => panic!("{what}: no wake-up within 20 s"),
    }
}

struct Fixture {
    dir: tempfile::TempDir,
    clock: ManualClock,
    backend: SqliteBackend,
    rx: WakeReceiver,
}

impl Fixture {
    /// A backend on a file with the application's `users` table, and a receiver of its
    /// wake-ups whose watcher has connected.
    async fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = ManualClock::starting_now();
        let config = SqliteConfig::file(dir.path().join("app.db")).clock(Arc::new(clock.clone()));
        let backend = SqliteBackend::open(config).await.expect("open");
        let rx = backend.wakeups().expect("SQLite sends wake-ups");
        assert_eq!(recv(&rx, "the watcher connecting").await, Timestamp::MIN);
        let f = Fixture {
            dir,
            clock,
            backend,
            rx,
        };
        f.app().execute_batch(USERS).expect("application schema");
        f
    }

    /// The application's own connection to the database file.
    fn app(&self) -> Connection {
        Connection::open(self.dir.path().join("app.db")).expect("app connection")
    }

    fn users(&self) -> Vec<String> {
        let conn = self.app();
        let mut stmt = conn
            .prepare("SELECT name FROM users ORDER BY name")
            .expect("prepare");
        stmt.query_map([], |r| r.get(0))
            .expect("query")
            .collect::<rusqlite::Result<_>>()
            .expect("rows")
    }

    async fn exists(&self, name: &str) -> bool {
        self.backend.get(&id(name)).await.expect("get").is_some()
    }

    async fn claim(&self) -> Vec<Claimed> {
        let now = self.backend.now().await.expect("now");
        self.backend
            .claim_due_with_records(ClaimRequest {
                now,
                limit: 10,
                duration: LEASE,
            })
            .await
            .expect("claim")
    }

    /// Admits `at` in the application's own committed transaction and checks that it is
    /// the next wake-up: any signal of something earlier since the last look (a rolled
    /// back or existing admission) would come out instead.
    async fn expect_next_wake(&self, name: &str, at: i64) {
        let mut conn = self.app();
        let tx = conn.transaction().expect("begin");
        self.backend
            .admit_in_tx(&tx, &due(name, at))
            .expect("admit_in_tx");
        tx.commit().expect("commit");
        assert_eq!(recv(&self.rx, name).await, t(at), "only {name} woke");
    }
}

fn claimed_ids(claimed: &[Claimed]) -> Vec<&str> {
    let mut ids: Vec<&str> = claimed
        .iter()
        .map(|c| c.lease.execution_id.as_str())
        .collect();
    ids.sort_unstable();
    ids
}

/// The newcomer's case: a `users` row and its workflow in one transaction of the
/// application's own connection. A commit admits it (claimable) and wakes the dispatcher;
/// a rollback admits nothing and wakes nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_application_s_commit_admits_and_wakes_and_its_rollback_does_neither() {
    let f = Fixture::new().await;
    let mut conn = f.app();

    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .expect("begin");
    tx.execute("INSERT INTO users VALUES ('ann')", [])
        .expect("insert");
    f.backend
        .admit_in_tx(&tx, &due("welcome-ann", 300))
        .expect("admit_in_tx");
    tx.rollback().expect("rollback");

    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .expect("begin");
    tx.execute("INSERT INTO users VALUES ('bob')", [])
        .expect("insert");
    let record = f
        .backend
        .admit_in_tx(&tx, &due("welcome-bob", 700))
        .expect("admit_in_tx");
    assert_eq!(record.id, id("welcome-bob"));
    assert!(
        !f.exists("welcome-bob").await,
        "invisible before the commit"
    );
    tx.commit().expect("commit");

    // Had the rolled-back admission signalled, its earlier 300 would come out first.
    assert_eq!(recv(&f.rx, "bob's commit").await, t(700));
    assert_eq!(f.users(), ["bob"]);
    assert!(!f.exists("welcome-ann").await, "rolled back with ann's row");
    assert_eq!(claimed_ids(&f.claim().await), ["welcome-bob"]);
}

/// An id that exists is returned as stored, whatever the new admission says, and wakes
/// nobody; a batch admits every new item and wakes once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_id_is_returned_unchanged_and_wakes_nobody() {
    let f = Fixture::new().await;
    let first = due("x", 500).workflow(WorkflowName::new("first").expect("name"));
    f.backend.admit(&first).await.expect("admit");
    assert_eq!(recv(&f.rx, "the plain admit").await, t(500));

    let mut conn = f.app();
    let tx = conn.transaction().expect("begin");
    let again = due("x", 400).workflow(WorkflowName::new("second").expect("name"));
    let records = f
        .backend
        .admit_batch_in_tx(&tx, &[again, due("y", 800)])
        .expect("admit_batch_in_tx");
    tx.commit().expect("commit");
    assert_eq!(
        records[0].workflow.as_ref().map(|w| w.as_str()),
        Some("first")
    );
    assert_eq!(records[0].due_at, Some(t(500)), "x unchanged");
    assert_eq!(records[1].id, id("y"));
    assert_eq!(recv(&f.rx, "the batch").await, t(800), "x woke nobody");
    assert_eq!(claimed_ids(&f.claim().await), ["x", "y"]);
}

/// Bad input is a typed error before any write, a failure half-way through a batch rolls
/// back only the batch, and either way the caller's transaction can still commit its own
/// rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_admission_leaves_the_application_s_transaction_as_it_was() {
    let f = Fixture::new().await;
    // An application trigger that refuses one id: the batch fails after its first item.
    f.app()
        .execute_batch(
            "CREATE TRIGGER refuse_boom BEFORE INSERT ON lease_executions
             WHEN NEW.id = 'boom' BEGIN SELECT RAISE(ABORT, 'boom refused'); END;",
        )
        .expect("trigger");
    let other = Connection::open(f.dir.path().join("other.db")).expect("other file");

    let mut conn = f.app();
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .expect("begin");
    tx.execute("INSERT INTO users VALUES ('cat')", [])
        .expect("insert");
    let twice = f
        .backend
        .admit_batch_in_tx(&tx, &[due("a", 1), due("a", 2)])
        .expect_err("an id twice");
    assert!(matches!(twice, LeaseError::InvalidInput { .. }), "{twice}");
    let half_way = f
        .backend
        .admit_batch_in_tx(&tx, &[due("before-boom", 1), due("boom", 2)])
        .expect_err("the trigger refuses boom");
    assert!(matches!(half_way, LeaseError::Backend { .. }), "{half_way}");
    tx.commit().expect("the application's rows still commit");

    let mut other = other;
    let foreign = other.transaction().expect("begin");
    let refused = f
        .backend
        .admit_in_tx(&foreign, &due("elsewhere", 1))
        .expect_err("another database file");
    assert!(
        matches!(refused, LeaseError::InvalidInput { .. }),
        "{refused}"
    );
    drop(foreign);

    assert_eq!(f.users(), ["cat"]);
    for name in ["a", "before-boom", "boom", "elsewhere"] {
        assert!(!f.exists(name).await, "{name} was not admitted");
    }
    f.expect_next_wake("after", 900).await;
}

/// A step and the children it admits commit together in one fenced transaction
/// (`step_in_tx`), and the commit wakes the dispatcher at once, as a plain admit does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_and_the_children_it_admits_commit_together() {
    let f = Fixture::new().await;
    f.backend
        .admit(&Admission::new(id("parent")))
        .await
        .expect("admit");
    let claimed = f.claim().await.remove(0);
    recv(&f.rx, "the parent's admission and claim").await;
    let delivery = Delivery::new(
        Arc::new(f.backend.clone()),
        claimed.lease,
        claimed.record,
        CancellationToken::new(),
    );

    let b = f.backend.clone();
    let spawned: usize = f
        .backend
        .step_in_tx(&delivery, "spawn", move |tx| {
            tx.execute("INSERT INTO users VALUES ('dan')", [])?;
            let children = b.admit_batch_in_tx(tx, &[due("child-1", 650), due("child-2", 600)])?;
            Ok::<_, BoxError>(children.len())
        })
        .await
        .expect("step_in_tx");
    assert_eq!(spawned, 2);
    // Logged with this process's own origin, the commit reaches this receiver only through
    // the fenced transaction's own signal: the watcher skips it.
    assert_eq!(recv(&f.rx, "the step's commit").await, t(600));
    assert_eq!(f.users(), ["dan"]);
    assert_eq!(claimed_ids(&f.claim().await), ["child-1", "child-2"]);
}

/// A stale holder's fenced closure never runs, so its children are never admitted; a
/// closure that fails after admitting rolls its children back with its rows and wakes
/// nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_are_lost_with_their_fenced_transaction() {
    let f = Fixture::new().await;
    f.backend
        .admit(&Admission::new(id("parent")))
        .await
        .expect("admit");
    let stale = f.claim().await.remove(0).lease;
    f.clock.advance(PAST_EXPIRY);
    let current = f.claim().await.remove(0).lease;
    recv(&f.rx, "the admission and the claims").await;

    let b = f.backend.clone();
    let lost = f
        .backend
        .fenced(&stale, move |tx| {
            tx.execute("INSERT INTO users VALUES ('eve')", [])?;
            b.admit_in_tx(tx, &due("stale-child", 100))?;
            Ok::<_, BoxError>(())
        })
        .await
        .expect("fenced");
    assert!(matches!(lost, Fenced::Lost));

    let b = f.backend.clone();
    let failed = f
        .backend
        .fenced(&current, move |tx| {
            tx.execute("INSERT INTO users VALUES ('fay')", [])?;
            b.admit_in_tx(tx, &due("failed-child", 200))?;
            Err::<(), BoxError>("the application changed its mind".into())
        })
        .await;
    assert!(matches!(failed, Err(FencedError::App(_))));

    assert!(f.users().is_empty());
    assert!(!f.exists("stale-child").await);
    assert!(!f.exists("failed-child").await);
    f.expect_next_wake("after", 900).await;
    let lost_step = step_with_child(&f, &stale).await;
    assert!(
        matches!(lost_step, Err(DeliveryError::Lost)),
        "{lost_step:?}"
    );
    assert!(!f.exists("step-child").await);
}

/// `step_in_tx` on a stale delivery that would admit a child.
async fn step_with_child(
    f: &Fixture,
    stale: &lease_core::ExecutionLease,
) -> Result<(), DeliveryError> {
    let record = f
        .backend
        .get(&stale.execution_id)
        .await
        .expect("get")
        .expect("the parent");
    let delivery = Delivery::new(
        Arc::new(f.backend.clone()),
        stale.clone(),
        record,
        CancellationToken::new(),
    );
    let b = f.backend.clone();
    f.backend
        .step_in_tx(&delivery, "spawn", move |tx| {
            b.admit_in_tx(tx, &due("step-child", 100))?;
            Ok::<_, BoxError>(())
        })
        .await
}
