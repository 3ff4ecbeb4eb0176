//! Admission inside the application's own transaction (`admit_in_tx`, `admit_batch_in_tx`):
//! on the application's own connection (no session setting of the backend's pool, an empty
//! `search_path`), in a fenced transaction and in a `step_in_tx` body, the admitted
//! executions exist exactly when the transaction commits, and the notification that wakes a
//! dispatcher is delivered at that commit only.
//!
//! Absence of a wake-up is checked without waiting, as in `wakeups.rs`: a later probe
//! follows, and the receiver keeps the earliest instant signalled since it last looked, so
//! an unwanted earlier notification would show instead.

mod common;

use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, Claimed, ExecutionClient, ExecutionClientExt, ExecutionId,
    ExecutionLease, Fenced, LeaseError, ManualClock, RedeliveryPolicy, Timestamp, WakeReceiver,
    WorkflowName,
};
use lease_postgres::PostgresBackend;
use lease_runtime::{Delivery, DeliveryError};
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use tokio_util::sync::CancellationToken;

const LEASE: Duration = Duration::from_secs(30);
/// Past every lease and redelivery delay (the default policy caps at 5 minutes).
const PAST_EXPIRY: Duration = Duration::from_secs(3600);
const DEADLINE: Duration = Duration::from_secs(20);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

fn t(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms)
}

/// An admission due at the fixed past instant `at` ms (claimable at once; its wake-up
/// carries `at`, which tells the notifications apart).
fn due(name: &str, at: i64) -> Admission {
    Admission::new(id(name)).not_before(t(at))
}

async fn next_signal(rx: &WakeReceiver, what: &str) -> Timestamp {
    tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("{what}: no wake-up within {DEADLINE:?}"))
}

/// A backend on a fresh schema, its listening receiver, and the application's `users`
/// table (in that schema, so the test's cleanup drops it too).
struct Fixture {
    clock: ManualClock,
    backend: PostgresBackend,
    rx: WakeReceiver,
    users: String,
}

impl Fixture {
    async fn new(clock: ManualClock, backend: PostgresBackend) -> Self {
        let rx = backend.wakeups().expect("wake-ups inside a runtime");
        common::wait_until_listening(&backend).await;
        let users = format!("\"{}\".users", backend.schema());
        sqlx::raw_sql(AssertSqlSafe(format!(
            "CREATE TABLE {users} (name text PRIMARY KEY)"
        )))
        .execute(backend.pool())
        .await
        .expect("application table");
        Fixture {
            clock,
            backend,
            rx,
            users,
        }
    }

    /// The application's own connection: none of the backend's session settings, and a
    /// `search_path` that finds none of its objects.
    async fn app(&self) -> PgConnection {
        let mut conn = PgConnection::connect(&common::url())
            .await
            .expect("application connection");
        sqlx::raw_sql("SET search_path = ''")
            .execute(&mut conn)
            .await
            .expect("search_path");
        conn
    }

    async fn add_user(&self, conn: &mut PgConnection, name: &str) {
        sqlx::query(AssertSqlSafe(format!(
            "INSERT INTO {} VALUES ($1)",
            self.users
        )))
        .bind(name)
        .execute(conn)
        .await
        .expect("insert user");
    }

    async fn user_names(&self) -> Vec<String> {
        sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT name FROM {} ORDER BY name",
            self.users
        )))
        .fetch_all(self.backend.pool())
        .await
        .expect("users")
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

    /// Admits `name` at `at` in a committed application transaction and checks that it is
    /// the next wake-up (nothing earlier was signalled since the last look).
    async fn expect_next_wake(&self, name: &str, at: i64) {
        let mut conn = self.app().await;
        let mut tx = conn.begin().await.expect("begin");
        self.backend
            .admit_in_tx(&mut tx, &due(name, at))
            .await
            .expect("admit_in_tx");
        tx.commit().await.expect("commit");
        assert_eq!(next_signal(&self.rx, name).await, t(at), "only {name} woke");
    }

    /// Waits until every notification sent so far has arrived: a plain admit of `probe`
    /// at the early instant 1 ms comes after them (one listener connection delivers
    /// notifications in commit order), and its instant is the earliest of all.
    async fn settle(&self, probe: &str) {
        self.backend
            .admit(&due(probe, 1))
            .await
            .expect("admit the probe");
        while next_signal(&self.rx, probe).await != t(1) {}
    }

    fn delivery(&self, lease: ExecutionLease, claimed: &Claimed) -> Delivery {
        Delivery::new(
            Arc::new(self.backend.clone()),
            lease,
            claimed.record.clone(),
            CancellationToken::new(),
        )
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

/// Runs `body` on a fresh schema over a manual clock, dropping the schema afterwards.
async fn with_fixture<F>(body: impl FnOnce(Fixture) -> F + Send + 'static)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let clock = ManualClock::starting_now();
    let config = common::config(clock.clone(), RedeliveryPolicy::default());
    let schema = config.schema_name().to_owned();
    let backend = PostgresBackend::connect(config).await.expect("connect");
    common::cleaning_up(schema, async move {
        body(Fixture::new(clock, backend).await).await;
    })
    .await;
}

/// The newcomer's case: a `users` row and its workflow in one transaction of the
/// application's own connection. A commit admits it (claimable) and notifies; a rollback
/// admits nothing and notifies nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_application_s_commit_admits_and_wakes_and_its_rollback_does_neither() {
    with_fixture(|f| async move {
        let mut conn = f.app().await;
        let mut tx = conn.begin().await.expect("begin");
        f.add_user(&mut tx, "ann").await;
        f.backend
            .admit_in_tx(&mut tx, &due("welcome-ann", 300))
            .await
            .expect("admit_in_tx");
        tx.rollback().await.expect("rollback");

        let mut tx = conn.begin().await.expect("begin");
        f.add_user(&mut tx, "bob").await;
        let record = f
            .backend
            .admit_in_tx(&mut tx, &due("welcome-bob", 700))
            .await
            .expect("admit_in_tx");
        assert_eq!(record.id, id("welcome-bob"));
        assert!(
            !f.exists("welcome-bob").await,
            "invisible before the commit"
        );
        tx.commit().await.expect("commit");

        // Had the rolled-back admission notified, its earlier 300 would come out first.
        assert_eq!(next_signal(&f.rx, "bob's commit").await, t(700));
        assert_eq!(f.user_names().await, ["bob"]);
        assert!(!f.exists("welcome-ann").await, "rolled back with ann's row");
        assert_eq!(claimed_ids(&f.claim().await), ["welcome-bob"]);
    })
    .await;
}

/// An id that exists is returned as stored, whatever the new admission says, and notifies
/// nobody; a batch admits every new item and notifies once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_id_is_returned_unchanged_and_wakes_nobody() {
    with_fixture(|f| async move {
        let first = due("x", 500).workflow(WorkflowName::new("first").expect("name"));
        f.backend.admit(&first).await.expect("admit");
        assert_eq!(next_signal(&f.rx, "the plain admit").await, t(500));

        let mut conn = f.app().await;
        let mut tx = conn.begin().await.expect("begin");
        let again = due("x", 400).workflow(WorkflowName::new("second").expect("name"));
        let records = f
            .backend
            .admit_batch_in_tx(&mut tx, &[again, due("y", 800)])
            .await
            .expect("admit_batch_in_tx");
        tx.commit().await.expect("commit");
        assert_eq!(
            records[0].workflow.as_ref().map(|w| w.as_str()),
            Some("first")
        );
        assert_eq!(records[0].due_at, Some(t(500)), "x unchanged");
        assert_eq!(records[1].id, id("y"));
        assert_eq!(
            next_signal(&f.rx, "the batch").await,
            t(800),
            "x woke nobody"
        );
        assert_eq!(claimed_ids(&f.claim().await), ["x", "y"]);
    })
    .await;
}

/// Bad input is a typed error before any statement: the application's transaction goes on
/// and commits its own rows, with nothing admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_leaves_the_application_s_transaction_usable() {
    with_fixture(|f| async move {
        let mut conn = f.app().await;
        let mut tx = conn.begin().await.expect("begin");
        let twice = f
            .backend
            .admit_batch_in_tx(&mut tx, &[due("a", 1), due("a", 2)])
            .await
            .expect_err("an id twice");
        assert!(matches!(twice, LeaseError::InvalidInput { .. }), "{twice}");
        let far = Admission::new(id("far")).not_before(Timestamp::MAX);
        let out_of_range = f
            .backend
            .admit_in_tx(&mut tx, &far)
            .await
            .expect_err("an instant out of range");
        assert!(
            matches!(out_of_range, LeaseError::InvalidInput { .. }),
            "{out_of_range}"
        );
        f.add_user(&mut tx, "cat").await;
        tx.commit()
            .await
            .expect("the application's rows still commit");

        assert_eq!(f.user_names().await, ["cat"]);
        assert!(!f.exists("a").await && !f.exists("far").await);
        f.expect_next_wake("after", 900).await;
    })
    .await;
}

/// A step and the children it admits commit together in a `step_in_tx` body, and the
/// commit notifies the dispatcher.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_and_the_children_it_admits_commit_together() {
    with_fixture(|f| async move {
        f.backend
            .admit(&Admission::new(id("parent")))
            .await
            .expect("admit");
        let claimed = f.claim().await.remove(0);
        f.settle("probe").await;
        let delivery = f.delivery(claimed.lease.clone(), &claimed);

        let users = f.users.clone();
        let b = f.backend.clone();
        let spawned: usize = f
            .backend
            .step_in_tx(&delivery, "spawn", async |conn: &mut PgConnection| {
                sqlx::query(AssertSqlSafe(format!("INSERT INTO {users} VALUES ('dan')")))
                    .execute(&mut *conn)
                    .await?;
                let children = b
                    .admit_batch_in_tx(conn, &[due("child-1", 650), due("child-2", 600)])
                    .await?;
                Ok::<_, BoxError>(children.len())
            })
            .await
            .expect("step_in_tx");
        assert_eq!(spawned, 2);
        assert_eq!(next_signal(&f.rx, "the step's commit").await, t(600));
        assert_eq!(f.user_names().await, ["dan"]);
        assert_eq!(
            claimed_ids(&f.claim().await),
            ["child-1", "child-2", "probe"]
        );
    })
    .await;
}

/// A fenced transaction's children commit with it while the lease holds, and are lost
/// with it when the fence refuses the commit (`begin_fenced`, `step_in_tx`), notifying
/// nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_commit_and_are_lost_with_their_fenced_transaction() {
    with_fixture(|f| async move {
        f.backend
            .admit(&Admission::new(id("parent")))
            .await
            .expect("admit");
        let stale = f.claim().await.remove(0);
        f.clock.advance(PAST_EXPIRY);
        let current = f.claim().await.remove(0);
        f.settle("probe").await;

        let mut tx = f.backend.begin_fenced(&stale.lease).await.expect("begin");
        f.add_user(&mut tx, "eve").await;
        f.backend
            .admit_in_tx(&mut tx, &due("stale-child", 100))
            .await
            .expect("admit_in_tx");
        assert!(matches!(tx.commit().await.expect("commit"), Fenced::Lost));

        let delivery = f.delivery(stale.lease.clone(), &stale);
        let b = f.backend.clone();
        let lost = f
            .backend
            .step_in_tx(&delivery, "spawn", async |conn: &mut PgConnection| {
                b.admit_in_tx(conn, &due("step-child", 200)).await?;
                Ok::<_, BoxError>(())
            })
            .await;
        assert!(matches!(lost, Err(DeliveryError::Lost)), "{lost:?}");
        assert!(f.user_names().await.is_empty());
        assert!(!f.exists("stale-child").await && !f.exists("step-child").await);

        let mut tx = f.backend.begin_fenced(&current.lease).await.expect("begin");
        f.add_user(&mut tx, "fay").await;
        f.backend
            .admit_in_tx(&mut tx, &due("current-child", 800))
            .await
            .expect("admit_in_tx");
        assert!(matches!(
            tx.commit().await.expect("commit"),
            Fenced::Accepted(())
        ));
        // Had a lost transaction notified, its earlier instant would come out first.
        assert_eq!(next_signal(&f.rx, "the current commit").await, t(800));
        assert_eq!(f.user_names().await, ["fay"]);
        assert!(f.exists("current-child").await);
    })
    .await;
}
