//! Failures are typed errors, retried only where retry is safe: an operation whose commit
//! outcome is unknown is reported as unknown (never as `Lost`, never as success by guess),
//! and a retried claim never issues two tokens.
//!
//! Faults are real: a refused port, a pool of one connection held by a blocked statement,
//! `pg_terminate_backend` on the backend's own connection, `statement_timeout`, a real
//! deadlock, and serialization failures / deadlocks / self-termination raised by a trigger
//! that the test installs in its own schema (counted with a sequence, which rollbacks do not
//! undo, so the test knows how many attempts ran).

mod common;

use lease_core::ExecutionClientExt;
use std::time::{Duration, Instant};

use lease_core::{
    Acknowledgement, Admission, ClaimRequest, ExecutionClient, ExecutionId, ExecutionLease,
    ExecutionStatus, Fenced, HeapClient, Json, LeaseError, ManualClock, RedeliveryPolicy, StepKey,
    StepWrite, WorkflowRunOutcome,
};
use lease_postgres::{PostgresBackend, PostgresConfig};
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use tokio::task::JoinHandle;

const LEASE: Duration = Duration::from_secs(30);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Runs `body` on a fresh [`World`]; the schema is dropped afterwards even when the body
/// panics (the panic is then re-raised).
fn scenario<F, Fut>(tune: fn(PostgresConfig) -> PostgresConfig, body: F)
where
    F: FnOnce(World) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    runtime().block_on(async move {
        let w = World::new(tune).await;
        let schema = w.schema.clone();
        let outcome = tokio::spawn(body(w)).await;
        common::drop_schema_named(&schema).await;
        if let Err(e) = outcome {
            std::panic::resume_unwind(e.into_panic());
        }
    });
}

/// A fresh schema with one admitted execution `e`, over a manual clock.
struct World {
    backend: PostgresBackend,
    clock: ManualClock,
    schema: String,
    admin: PgConnection,
}

impl World {
    async fn new(tune: fn(PostgresConfig) -> PostgresConfig) -> World {
        let clock = ManualClock::starting_now();
        let config = tune(common::config(clock.clone(), RedeliveryPolicy::default()));
        let schema = config.schema_name().to_owned();
        let backend = PostgresBackend::connect(config).await.expect("connect");
        backend.admit(&Admission::new(id())).await.expect("admit");
        let admin = PgConnection::connect(&common::url())
            .await
            .expect("admin connection");
        World {
            backend,
            clock,
            schema,
            admin,
        }
    }

    async fn claim(&self) -> Vec<ExecutionLease> {
        self.backend
            .claim_due(ClaimRequest {
                now: lease_core::Clock::now(&self.clock),
                limit: 10,
                duration: LEASE,
            })
            .await
            .expect("claim")
    }

    /// Claims until something is claimed or 10 s pass.
    async fn poll_claim(&self) -> Vec<ExecutionLease> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let leases = self.claim().await;
            if !leases.is_empty() || Instant::now() > deadline {
                return leases;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Runs SQL on the admin connection with `{s}` replaced by the quoted schema.
    async fn exec(&mut self, sql: &str) {
        let sql = sql.replace("{s}", &format!("\"{}\"", self.schema));
        sqlx::raw_sql(AssertSqlSafe(sql))
            .execute(&mut self.admin)
            .await
            .expect("admin sql");
    }

    /// Installs a trigger on `executions` (`BEFORE UPDATE`) or `steps` (`BEFORE INSERT`)
    /// that runs `action` on its first `times` firings and counts every firing.
    async fn inject(&mut self, event: &str, table: &str, action: &str, times: i64) {
        let sql = format!(
            "CREATE SEQUENCE {{s}}.fault_firings; \
             CREATE FUNCTION {{s}}.fault() RETURNS trigger LANGUAGE plpgsql AS $f$ \
             BEGIN \
                 IF nextval('{{s}}.fault_firings') <= {times} THEN {action}; END IF; \
                 RETURN NEW; \
             END $f$; \
             CREATE TRIGGER fault BEFORE {event} ON {{s}}.{table} \
                 FOR EACH ROW EXECUTE FUNCTION {{s}}.fault();"
        );
        self.exec(&sql).await;
    }

    /// How often the injected trigger fired (one per attempt of a one-row statement).
    async fn firings(&mut self) -> i64 {
        let sql = format!(
            "SELECT CASE WHEN is_called THEN last_value ELSE 0 END \
             FROM \"{}\".fault_firings",
            self.schema
        );
        sqlx::query_scalar(AssertSqlSafe(sql))
            .fetch_one(&mut self.admin)
            .await
            .expect("firings")
    }

    /// The pid of a backend waiting for a lock that the admin connection holds, while `task`
    /// (the operation expected to wait) runs; polls with a deadline. Only this test's backend
    /// can wait on this test's admin connection.
    async fn blocked_pid<T: std::fmt::Debug>(&mut self, task: &mut JoinHandle<T>) -> i32 {
        self.blocked_pid_except(task, 0).await
    }

    /// [`World::blocked_pid`], ignoring backend `except` (one being terminated).
    async fn blocked_pid_except<T: std::fmt::Debug>(
        &mut self,
        task: &mut JoinHandle<T>,
        except: i32,
    ) -> i32 {
        // Generous: the database is shared with other engineers' builds and tests.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if task.is_finished() {
                panic!("the operation did not wait for the lock: {:?}", task.await);
            }
            // The admin connection is inside a transaction, and pg_stat_activity is a
            // snapshot taken once per transaction unless cleared: clear it on every poll.
            sqlx::query("SELECT pg_stat_clear_snapshot()")
                .execute(&mut self.admin)
                .await
                .expect("clear stats snapshot");
            let pid: Option<i32> = sqlx::query_scalar(
                "SELECT pid FROM pg_stat_activity \
                 WHERE pg_backend_pid() = ANY (pg_blocking_pids(pid)) AND pid <> $1 LIMIT 1",
            )
            .bind(except)
            .fetch_optional(&mut self.admin)
            .await
            .expect("pg_stat_activity");
            if let Some(pid) = pid {
                return pid;
            }
            assert!(
                Instant::now() < deadline,
                "no backend ever waited for the test's lock"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Holds execution `e`'s row, runs `op` on the backend in a task (it waits for the row),
    /// terminates that task's server process, releases the row and returns `op`'s result.
    async fn terminated_while_blocked<T, F, Fut>(&mut self, op: F) -> lease_core::Result<T>
    where
        F: FnOnce(PostgresBackend) -> Fut,
        Fut: std::future::Future<Output = lease_core::Result<T>> + Send + 'static,
        T: std::fmt::Debug + Send + 'static,
    {
        self.exec("BEGIN; SELECT 1 FROM {s}.executions WHERE id = 'e' FOR UPDATE")
            .await;
        let mut task = tokio::spawn(op(self.backend.clone()));
        let pid = self.blocked_pid(&mut task).await;
        self.exec(&format!("SELECT pg_terminate_backend({pid})"))
            .await;
        let result = task.await.expect("task");
        self.exec("COMMIT").await;
        result
    }

    async fn finish(self) {
        // The schema holds the test's fault sequence and function: forced.
        self.backend
            .drop_schema_forced()
            .await
            .expect("drop schema");
        self.backend.close().await;
    }
}

fn id() -> ExecutionId {
    ExecutionId::new("e").expect("id")
}

fn step(response: &str) -> StepWrite {
    StepWrite {
        step_key: StepKey::new("charge").expect("key"),
        step_attempt: 0,
        done: true,
        response: Json::parse("response", response).expect("json"),
    }
}

fn completed() -> WorkflowRunOutcome {
    WorkflowRunOutcome::Completed(Json::parse("outcome", "1").expect("json"))
}

/// A port nothing listens on: bound, then closed.
fn refused_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    lease_testserver::postgres_url_on(port)
}

#[test]
fn connection_refused_is_unavailable() {
    runtime().block_on(async {
        let config = PostgresConfig::new(refused_url())
            .schema(common::fresh_schema())
            .acquire_timeout(Duration::from_millis(300));
        let err = PostgresBackend::connect(config)
            .await
            .expect_err("nothing listens");
        assert!(matches!(err, LeaseError::Unavailable { .. }), "{err:?}");
        assert!(err.is_retryable());
    });
}

#[test]
fn bad_url_and_schema_are_invalid_input() {
    runtime().block_on(async {
        let err = PostgresBackend::connect(PostgresConfig::new("mysql://nope"))
            .await
            .expect_err("not a postgres url");
        assert!(matches!(err, LeaseError::InvalidInput { .. }), "{err:?}");
        let err = PostgresBackend::connect(PostgresConfig::new(common::url()).schema("a;b"))
            .await
            .expect_err("bad schema name");
        assert!(matches!(err, LeaseError::InvalidInput { .. }), "{err:?}");
    });
}

#[test]
fn pool_exhausted_is_unavailable() {
    scenario(
        |c| {
            c.max_connections(1)
                .acquire_timeout(Duration::from_millis(200))
        },
        |mut w| async move {
            let lease = w.claim().await.remove(0);
            // Hold the execution row so the step write waits, keeping the only connection.
            w.exec("BEGIN; SELECT 1 FROM {s}.executions WHERE id = 'e' FOR UPDATE")
                .await;
            let mut writer = {
                let (b, lease) = (w.backend.clone(), lease.clone());
                tokio::spawn(async move { b.write_step(&lease, &step("1")).await })
            };
            w.blocked_pid(&mut writer).await;
            let err = w.backend.get(&id()).await.expect_err("no free connection");
            assert!(matches!(err, LeaseError::Unavailable { .. }), "{err:?}");
            w.exec("COMMIT").await;
            let written = writer.await.expect("task").expect("write_step");
            assert!(matches!(written, Fenced::Accepted(_)), "{written:?}");
            w.finish().await;
        },
    );
}

#[test]
fn terminated_acknowledge_is_outcome_unknown_and_changed_nothing() {
    scenario(
        |c| c,
        |mut w| async move {
            let lease = w.claim().await.remove(0);
            let held = lease.clone();
            let err = w
                .terminated_while_blocked(
                    |b| async move { b.acknowledge(&held, &completed()).await },
                )
                .await
                .expect_err("connection was killed");
            assert!(matches!(err, LeaseError::OutcomeUnknown { .. }), "{err:?}");
            // Reading back resolves the unknown: it did not commit, the lease is still current.
            let record = w.backend.get(&id()).await.expect("get").expect("record");
            assert_eq!(record.status, ExecutionStatus::Running);
            assert_eq!(record.token, lease.token);
            let again = w
                .backend
                .acknowledge(&lease, &completed())
                .await
                .expect("ack");
            assert!(matches!(again, Fenced::Accepted(_)), "{again:?}");
            w.finish().await;
        },
    );
}

#[test]
fn terminated_step_write_is_outcome_unknown() {
    scenario(
        |c| c,
        |mut w| async move {
            let lease = w.claim().await.remove(0);
            let err = w
                .terminated_while_blocked(|b| async move { b.write_step(&lease, &step("1")).await })
                .await
                .expect_err("connection was killed");
            assert!(matches!(err, LeaseError::OutcomeUnknown { .. }), "{err:?}");
            let key = StepKey::new("charge").expect("key");
            assert_eq!(
                w.backend.read_step(&id(), &key, 0).await.expect("read"),
                None
            );
            w.finish().await;
        },
    );
}

#[test]
fn terminated_read_is_retried_on_a_fresh_connection() {
    scenario(
        |c| c,
        |mut w| async move {
            w.exec("BEGIN; LOCK TABLE {s}.executions IN ACCESS EXCLUSIVE MODE")
                .await;
            let mut get = {
                let b = w.backend.clone();
                tokio::spawn(async move { b.get(&id()).await })
            };
            let pid = w.blocked_pid(&mut get).await;
            w.exec(&format!("SELECT pg_terminate_backend({pid})")).await;
            // The retry blocks on the same lock from a new connection; let it through.
            let retry_pid = w.blocked_pid_except(&mut get, pid).await;
            assert_ne!(retry_pid, pid, "the retry runs on a new connection");
            w.exec("COMMIT").await;
            let record = get
                .await
                .expect("task")
                .expect("read retried")
                .expect("record");
            assert_eq!(record.status, ExecutionStatus::Admitted);
            w.finish().await;
        },
    );
}

#[test]
fn claim_killed_mid_statement_is_outcome_unknown_and_not_retried() {
    scenario(
        |c| c,
        |mut w| async move {
            w.inject(
                "UPDATE",
                "executions",
                "PERFORM pg_terminate_backend(pg_backend_pid())",
                1,
            )
            .await;
            let err = w
                .backend
                .claim_due(ClaimRequest {
                    now: lease_core::Clock::now(&w.clock),
                    limit: 10,
                    duration: LEASE,
                })
                .await
                .expect_err("connection killed during the claim");
            assert!(matches!(err, LeaseError::OutcomeUnknown { .. }), "{err:?}");
            assert_eq!(
                w.firings().await,
                1,
                "a claim with an unknown outcome is never re-run"
            );
            // The FATAL may arrive after the commit (the server processes the termination at
            // its next interrupt check, which can come after the statement committed): this is
            // why the outcome is unknown. Reading back resolves it, and either way the execution
            // gets exactly one token.
            let record = w.backend.get(&id()).await.expect("get").expect("record");
            if record.token.get() > 0 {
                assert_eq!(
                    record.status,
                    ExecutionStatus::Running,
                    "the claim committed"
                );
                assert!(
                    w.claim().await.is_empty(),
                    "no second token while it is leased"
                );
            } else {
                assert_eq!(
                    record.status,
                    ExecutionStatus::Admitted,
                    "the claim rolled back"
                );
                // The killed backend may still hold the row lock while it exits, and SKIP LOCKED
                // skips the row meanwhile: poll.
                let leases = w.poll_claim().await;
                assert_eq!(leases.len(), 1);
                let record = w.backend.get(&id()).await.expect("get").expect("record");
                assert_eq!(record.token, leases[0].token);
            }
            w.finish().await;
        },
    );
}

fn claim_retried_once_per_transient_error(sqlstate: &'static str) {
    scenario(
        |c| c,
        move |mut w| async move {
            let raise = format!("RAISE EXCEPTION 'injected' USING ERRCODE = '{sqlstate}'");
            w.inject("UPDATE", "executions", &raise, 2).await;
            // The third attempt claims. (A retry can find the row still locked by the attempt
            // the server is rolling back, and SKIP LOCKED then returns nothing: claims are polls,
            // so poll until the lease comes.)
            let leases = w.poll_claim().await;
            assert_eq!(leases.len(), 1, "the execution is claimed");
            assert_eq!(
                w.firings().await,
                3,
                "two rolled-back attempts, then one that committed"
            );
            let record = w.backend.get(&id()).await.expect("get").expect("record");
            assert_eq!(record.token, leases[0].token, "one token issued");
            assert_eq!(record.unacknowledged_deliveries, 0, "claimed once");
            // The rolled-back attempts consumed sequence values but issued no token: a second
            // claim finds nothing to claim.
            assert!(w.claim().await.is_empty());
            w.finish().await;
        },
    );
}

#[test]
fn claim_serialization_failure_is_retried_without_a_second_token() {
    claim_retried_once_per_transient_error("40001");
}

#[test]
fn claim_deadlock_error_is_retried_without_a_second_token() {
    claim_retried_once_per_transient_error("40P01");
}

#[test]
fn persistent_serialization_failure_gives_up_as_unavailable() {
    scenario(
        |c| c,
        |mut w| async move {
            let lease = w.claim().await.remove(0);
            w.inject(
                "UPDATE",
                "executions",
                "RAISE EXCEPTION 'injected' USING ERRCODE = '40001'",
                1000,
            )
            .await;
            let err = w.backend.release(&lease).await.expect_err("always fails");
            assert!(matches!(err, LeaseError::Unavailable { .. }), "{err:?}");
            assert_eq!(w.firings().await, 5, "bounded retries");
            w.finish().await;
        },
    );
}

#[test]
fn statement_timeout_is_unavailable_and_changes_nothing() {
    scenario(
        |c| c.statement_timeout(Duration::from_millis(300)),
        |mut w| async move {
            let lease = w.claim().await.remove(0);
            w.exec("BEGIN; SELECT 1 FROM {s}.executions WHERE id = 'e' FOR UPDATE")
                .await;
            let started = Instant::now();
            let err = w
                .backend
                .acknowledge(&lease, &completed())
                .await
                .expect_err("times out");
            assert!(matches!(err, LeaseError::Unavailable { .. }), "{err:?}");
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "not retried into a long wait"
            );
            w.exec("COMMIT").await;
            let record = w.backend.get(&id()).await.expect("get").expect("record");
            assert_eq!(record.status, ExecutionStatus::Running);
            w.finish().await;
        },
    );
}

#[test]
fn real_deadlock_in_step_write_is_retried() {
    scenario(
        |c| c,
        |mut w| async move {
            let lease = w.claim().await.remove(0);
            // T inserts the step row (uncommitted): the backend's write waits on it while holding
            // its FOR SHARE lock on the execution row. T then asks for FOR UPDATE on that row:
            // a cycle. T checks for deadlocks only after 10 s, so the backend's statement (1 s)
            // is the victim, is rolled back, and must be retried.
            w.exec(&format!(
                "BEGIN; SET LOCAL deadlock_timeout = '10s'; \
             INSERT INTO {{s}}.steps VALUES ('e', 'charge', 0, true, '\"T\"', {})",
                lease.token.get()
            ))
            .await;
            let mut write = {
                let (b, lease) = (w.backend.clone(), lease.clone());
                tokio::spawn(async move { b.write_step(&lease, &step("\"mine\"")).await })
            };
            w.blocked_pid(&mut write).await;
            w.exec("SELECT 1 FROM {s}.executions WHERE id = 'e' FOR UPDATE")
                .await;
            w.exec("ROLLBACK").await;
            let written = write.await.expect("task").expect("write_step retried");
            let Fenced::Accepted(record) = written else {
                panic!("the retry must be accepted: {written:?}");
            };
            assert_eq!(record.response.as_str(), "\"mine\"");
            w.finish().await;
        },
    );
}

/// Admits `f` next to `e` and claims both: the batch tests' two leases, in id order.
async fn two_leases(w: &World) -> Vec<ExecutionLease> {
    let f = ExecutionId::new("f").expect("id");
    w.backend.admit(&Admission::new(f)).await.expect("admit f");
    let leases = w.claim().await;
    assert_eq!(leases.len(), 2);
    leases
}

fn batch(leases: &[ExecutionLease]) -> Vec<Acknowledgement> {
    leases
        .iter()
        .map(|lease| Acknowledgement {
            lease: lease.clone(),
            outcome: completed(),
        })
        .collect()
}

#[test]
fn ack_batch_serialization_failure_is_retried_as_a_whole() {
    scenario(
        |c| c,
        |mut w| async move {
            let leases = two_leases(&w).await;
            w.inject(
                "UPDATE",
                "executions",
                "RAISE EXCEPTION 'injected' USING ERRCODE = '40001'",
                1,
            )
            .await;
            let results = w
                .backend
                .acknowledge_batch(&batch(&leases))
                .await
                .expect("retried");
            assert!(results.iter().all(|r| !r.is_lost()), "{results:?}");
            assert_eq!(
                w.firings().await,
                3,
                "one row of the rolled-back attempt, then both rows"
            );
            for lease in &leases {
                let record = w.backend.get(&lease.execution_id).await.expect("get");
                assert_eq!(record.expect("record").status, ExecutionStatus::Completed);
            }
            w.finish().await;
        },
    );
}

#[test]
fn terminated_ack_batch_is_outcome_unknown_and_changed_nothing() {
    scenario(
        |c| c,
        |mut w| async move {
            let leases = two_leases(&w).await;
            // Hold the second row: the batch locks `e`, then waits for `f`.
            w.exec("BEGIN; SELECT 1 FROM {s}.executions WHERE id = 'f' FOR UPDATE")
                .await;
            let mut acked = {
                let (b, items) = (w.backend.clone(), batch(&leases));
                tokio::spawn(async move { b.acknowledge_batch(&items).await })
            };
            let pid = w.blocked_pid(&mut acked).await;
            w.exec(&format!("SELECT pg_terminate_backend({pid})")).await;
            let err = acked
                .await
                .expect("task")
                .expect_err("connection was killed");
            assert!(matches!(err, LeaseError::OutcomeUnknown { .. }), "{err:?}");
            w.exec("COMMIT").await;
            for lease in &leases {
                let record = w.backend.get(&lease.execution_id).await.expect("get");
                let record = record.expect("record");
                assert_eq!(record.status, ExecutionStatus::Running, "not applied");
                assert_eq!(record.token, lease.token);
            }
            let again = w
                .backend
                .acknowledge_batch(&batch(&leases))
                .await
                .expect("batch");
            assert!(again.iter().all(|r| !r.is_lost()), "{again:?}");
            w.finish().await;
        },
    );
}

#[test]
fn operations_on_a_dropped_schema_are_schema_errors() {
    scenario(
        |c| c,
        |w| async move {
            let other = w.backend.peer().await.expect("peer");
            w.backend.drop_schema().await.expect("drop");
            let err = other.get(&id()).await.expect_err("schema is gone");
            assert!(matches!(err, LeaseError::Schema { .. }), "{err:?}");
            other.close().await;
            w.backend.close().await;
        },
    );
}

#[test]
fn closed_pool_is_unavailable() {
    scenario(
        |c| c,
        |w| async move {
            let peer = w.backend.peer().await.expect("peer");
            peer.close().await;
            let err = peer.get(&id()).await.expect_err("closed");
            assert!(matches!(err, LeaseError::Unavailable { .. }), "{err:?}");
            w.finish().await;
        },
    );
}
