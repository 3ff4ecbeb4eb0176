//! Hardening of the PostgreSQL backend against what an outside review broke. Each test
//! damages its own schema the way an operational fault would (the token sequence reset or
//! used up, rows written by hand, a constraint dropped), then checks the backend refuses
//! with a typed error and changes nothing, or reports honestly what it committed.
//!
//! - (3) a claim never issues a token that is not above the execution's stored token;
//! - (4) lease tokens above `i64::MAX` are refused before any statement, and an exhausted
//!   sequence is `TokenCounter`;
//! - (6) a row the backend cannot decode is never claimed (so no lease is issued to nobody)
//!   and is listed by `list_corrupt`;
//! - (7) `acknowledge_batch` never reports an error other than `OutcomeUnknown` once its
//!   statement committed.

mod common;

use std::time::Duration;

use lease_core::{
    Acknowledgement, Admission, ClaimBatch, ClaimRequest, ExecutionClient, ExecutionId,
    ExecutionLease, ExecutionRecord, ExecutionStatus, FencingToken, HeapClient, Json, LeaseError,
    ManualClock, RedeliveryPolicy, StepKey, StepWrite, Timestamp, WorkflowRunOutcome,
};
use lease_postgres::PostgresBackend;
use sqlx::{AssertSqlSafe, Connection, PgConnection};

const LEASE: Duration = Duration::from_secs(30);

/// A fresh schema over a manual clock, and an admin connection to damage it with.
struct World {
    backend: PostgresBackend,
    clock: ManualClock,
    schema: String,
    admin: PgConnection,
}

impl World {
    async fn new() -> World {
        let clock = ManualClock::starting_now();
        let config = common::config(clock.clone(), RedeliveryPolicy::default());
        let schema = config.schema_name().to_owned();
        let backend = PostgresBackend::connect(config).await.expect("connect");
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

    /// Runs SQL on the admin connection with `{s}` replaced by the quoted schema.
    async fn exec(&mut self, sql: &str) {
        let sql = sql.replace("{s}", &format!("\"{}\"", self.schema));
        sqlx::raw_sql(AssertSqlSafe(sql))
            .execute(&mut self.admin)
            .await
            .expect("admin sql");
    }

    fn now(&self) -> Timestamp {
        lease_core::Clock::now(&self.clock)
    }

    async fn admit(&self, name: &str) {
        self.backend
            .admit(&Admission::new(id(name)))
            .await
            .expect("admit");
    }

    async fn claim(&self, limit: usize) -> lease_core::Result<ClaimBatch> {
        self.backend
            .claim_due_with_horizon(ClaimRequest {
                now: self.now(),
                limit,
                duration: LEASE,
            })
            .await
    }

    async fn get(&self, name: &str) -> ExecutionRecord {
        self.backend
            .get(&id(name))
            .await
            .expect("get")
            .expect("exists")
    }
}

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Runs `body` on a fresh [`World`]; the schema is dropped afterwards, pass or fail.
fn scenario<F, Fut>(body: F)
where
    F: FnOnce(World) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    runtime().block_on(async move {
        let w = World::new().await;
        let schema = w.schema.clone();
        common::cleaning_up(schema, body(w)).await;
    });
}

fn completed() -> WorkflowRunOutcome {
    WorkflowRunOutcome::Completed(Json::parse("outcome", "1").expect("json"))
}

/// (3) After the sequence restarts below the stored tokens, a claim that would issue a
/// token not above an execution's stored token fails with `TokenCounter` and claims
/// nothing, not even the executions whose new token would have been fine.
#[test]
fn a_claim_refuses_a_token_not_above_the_stored_one() {
    scenario(|mut w| async move {
        w.admit("a").await;
        let first = w.claim(1).await.expect("claim");
        let lease = first.claimed[0].lease.clone();
        assert_eq!(lease.token, FencingToken::new(1));
        let ack = w
            .backend
            .acknowledge(&lease, &WorkflowRunOutcome::Suspended)
            .await
            .expect("acknowledge");
        assert!(!ack.is_lost());
        w.backend
            .request_wake(&id("a"), w.now())
            .await
            .expect("wake");
        w.clock.advance(Duration::from_millis(1));
        w.admit("b").await;
        // A partial restore / operator reset: the counter starts over.
        w.exec("ALTER SEQUENCE {s}.fencing_tokens RESTART WITH 1")
            .await;
        let (a, b) = (w.get("a").await, w.get("b").await);
        let err = w.claim(10).await.expect_err("token 1 again");
        match &err {
            LeaseError::TokenCounter { location, reason } => {
                assert!(location.contains(&w.schema), "{location}");
                assert!(reason.contains("execution a"), "{reason}");
            }
            other => panic!("expected TokenCounter, got {other}"),
        }
        assert_eq!(w.get("a").await, a, "a changed");
        assert_eq!(w.get("b").await, b, "b changed");
    });
}

/// (4) A lease token above `i64::MAX` was never issued (tokens are bigint): every fenced
/// write refuses it with `ForeignToken` before any statement, even when the execution's
/// token is `i64::MAX` (where saturating would make it look current).
#[test]
fn tokens_above_i64_max_are_foreign() {
    scenario(|mut w| async move {
        w.exec("SELECT setval('{s}.fencing_tokens', 9223372036854775806)")
            .await;
        w.admit("top").await;
        let claimed = w.claim(1).await.expect("claim").claimed;
        let real = claimed[0].lease.clone();
        assert_eq!(real.token.get(), u64::try_from(i64::MAX).expect("positive"));
        let forged = ExecutionLease {
            token: FencingToken::new(u64::MAX),
            ..real.clone()
        };
        let before = w.get("top").await;
        let foreign = |r: lease_core::Result<bool>, what: &str| match r {
            Err(LeaseError::ForeignToken { execution, token }) => {
                assert_eq!(execution.as_str(), "top", "{what}");
                assert_eq!(token, forged.token, "{what}");
            }
            other => panic!("{what}: expected ForeignToken, got {other:?}"),
        };
        let b = &w.backend;
        foreign(b.renew(&forged, LEASE).await.map(|f| f.is_lost()), "renew");
        foreign(b.release(&forged).await.map(|f| f.is_lost()), "release");
        foreign(
            b.acknowledge(&forged, &completed())
                .await
                .map(|f| f.is_lost()),
            "acknowledge",
        );
        let write = StepWrite {
            step_key: StepKey::new("s").expect("key"),
            step_attempt: 1,
            done: true,
            response: Json::parse("response", "1").expect("json"),
        };
        foreign(
            b.write_step(&forged, &write).await.map(|f| f.is_lost()),
            "write_step",
        );
        let batch = [Acknowledgement {
            lease: forged.clone(),
            outcome: completed(),
        }];
        foreign(
            b.acknowledge_batch(&batch).await.map(|r| r[0].is_lost()),
            "acknowledge_batch",
        );
        assert_eq!(
            w.get("top").await,
            before,
            "a refused write changed the record"
        );
        assert!(b.list_steps(&id("top")).await.expect("steps").is_empty());
        // The real holder is unaffected.
        assert!(!b.renew(&real, LEASE).await.expect("renew").is_lost());
    });
}

/// (4) A used-up sequence: the claim fails with `TokenCounter` and claims nothing.
#[test]
fn an_exhausted_token_sequence_is_a_token_counter_error() {
    scenario(|mut w| async move {
        w.admit("last").await;
        w.exec("SELECT setval('{s}.fencing_tokens', 9223372036854775807)")
            .await;
        let before = w.get("last").await;
        match w.claim(1).await {
            Err(LeaseError::TokenCounter { location, reason }) => {
                assert!(location.contains(&w.schema), "{location}");
                assert!(!reason.is_empty());
            }
            other => panic!("expected TokenCounter, got {other:?}"),
        }
        assert_eq!(w.get("last").await, before);
    });
}

/// (6) Rows written by something else that no `ExecutionId`, `WorkflowName` or `u32` can
/// hold: the claim never takes them (a lease decoded after commit could reach nobody), claims
/// the good row, reports no horizon for them, and `list_corrupt` names each with its
/// problem, by id.
#[test]
fn undecodable_rows_are_never_claimed_and_are_listed() {
    scenario(|mut w| async move {
        let due = w.now().as_millis() - 10;
        let long = "x".repeat(300);
        w.exec(&format!(
            "INSERT INTO {{s}}.executions (id, workflow, status, due_at, claimable_at, \
                 unacknowledged_deliveries) VALUES \
             ('', NULL, 'admitted', {due}, {due}, 0), \
             ('{long}', NULL, 'admitted', {due}, {due}, 0), \
             (E'ctl\\x01', NULL, 'admitted', {due}, {due}, 0), \
             (E'c1\\u0085', NULL, 'admitted', {due}, {due}, 0), \
             ('bad-workflow', E'w\\x7f', 'admitted', {due}, {due}, 0), \
             ('empty-workflow', '', 'admitted', {due}, {due}, 0), \
             ('huge-unacked', NULL, 'admitted', {due}, {due}, 5000000000)"
        ))
        .await;
        w.admit("good").await;
        let batch = w.claim(10).await.expect("claim");
        let ids: Vec<&str> = batch
            .claimed
            .iter()
            .map(|c| c.lease.execution_id.as_str())
            .collect();
        assert_eq!(ids, ["good"]);
        assert!(
            batch.next_claimable_at.is_none_or(|t| t > w.now()),
            "a corrupt row in the horizon: {:?}",
            batch.next_claimable_at
        );
        let tokens: Vec<i64> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT token FROM \"{}\".executions WHERE id <> 'good'",
            w.schema
        )))
        .fetch_all(&mut w.admin)
        .await
        .expect("tokens");
        assert_eq!(tokens, [0; 7], "a corrupt row was claimed");
        let corrupt = w.backend.list_corrupt(100).await.expect("list_corrupt");
        let listed: Vec<&str> = corrupt.iter().map(|c| c.id.as_str()).collect();
        let mut expected = vec![
            "",
            long.as_str(),
            "bad-workflow",
            "c1\u{85}",
            "ctl\u{1}",
            "empty-workflow",
            "huge-unacked",
        ];
        expected.sort_unstable();
        assert_eq!(listed, expected);
        assert!(corrupt.iter().all(|c| !c.problem.is_empty()));
        assert_eq!(w.backend.list_corrupt(2).await.expect("limit").len(), 2);
        assert!(matches!(
            w.backend.list_corrupt(0).await,
            Err(LeaseError::InvalidInput { .. })
        ));
    });
}

/// (7) A batch that committed but whose reply cannot be decoded (a row whose status no
/// `ExecutionStatus` holds, after someone dropped the check constraint) is
/// `OutcomeUnknown`, never `Protocol`: items were applied.
#[test]
fn an_undecodable_batch_reply_after_commit_is_outcome_unknown() {
    scenario(|mut w| async move {
        w.admit("x").await;
        w.admit("y").await;
        let leases: Vec<ExecutionLease> = w
            .claim(2)
            .await
            .expect("claim")
            .claimed
            .into_iter()
            .map(|c| c.lease)
            .collect();
        assert_eq!(leases.len(), 2);
        w.exec(
            "ALTER TABLE {s}.executions DROP CONSTRAINT executions_status_check; \
             UPDATE {s}.executions SET status = 'bogus' WHERE id = 'y'",
        )
        .await;
        let batch: Vec<Acknowledgement> = leases
            .iter()
            .map(|lease| Acknowledgement {
                lease: lease.clone(),
                outcome: completed(),
            })
            .collect();
        match w.backend.acknowledge_batch(&batch).await {
            Err(LeaseError::OutcomeUnknown { .. }) => {}
            other => panic!("expected OutcomeUnknown, got {other:?}"),
        }
        // x was acknowledged: the error had to say "may have been applied".
        assert_eq!(w.get("x").await.status, ExecutionStatus::Completed);
    });
}

/// The single `acknowledge`, `renew` and `release` never report an error other than
/// `OutcomeUnknown` once their statement committed a change. A row written by hand as
/// running with token 0 (no claim ever issues token 0) accepts a lease with token 0: the
/// statement applies, and the reply ("token 0 was accepted") cannot be honoured. Before,
/// that was `Protocol`, which tells the caller nothing was applied.
#[test]
fn a_committed_fenced_write_with_an_unusable_reply_is_outcome_unknown() {
    scenario(|mut w| async move {
        for name in ["ack", "renew", "release"] {
            w.admit(name).await;
        }
        let far = w.now().as_millis() + 60_000;
        w.exec(&format!(
            "UPDATE {{s}}.executions SET status = 'running', token = 0, \
             lease_expires_at = {far}, claimable_at = {far}"
        ))
        .await;
        let lease = |name: &str| ExecutionLease {
            execution_id: id(name),
            token: FencingToken::NONE,
            expires_at: w.now(),
        };
        let b = &w.backend;
        let results = [
            (
                "acknowledge",
                b.acknowledge(&lease("ack"), &completed()).await.map(|_| ()),
            ),
            ("renew", b.renew(&lease("renew"), LEASE).await.map(|_| ())),
            ("release", b.release(&lease("release")).await.map(|_| ())),
        ];
        for (what, result) in results {
            assert!(
                matches!(result, Err(LeaseError::OutcomeUnknown { .. })),
                "{what}: expected OutcomeUnknown, got {result:?}"
            );
        }
        // Each statement did apply: the errors had to say "may have been applied".
        assert_eq!(w.get("ack").await.status, ExecutionStatus::Completed);
        assert_eq!(w.get("release").await.unacknowledged_deliveries, 1);
        assert_eq!(
            w.get("renew").await.lease_expires_at,
            Some(Timestamp::from_millis(
                w.now().as_millis() + i64::try_from(LEASE.as_millis()).expect("ms")
            ))
        );
    });
}

/// A token-counter failure of `acknowledge_and_claim`'s claim rolls its acknowledgement
/// back with it (one transaction); the acknowledgement is then applied alone, as
/// `acknowledge` would, and the claim reported empty (as the trait's default does), so a
/// broken counter does not also block acknowledgements.
#[test]
fn ack_and_claim_acknowledges_alone_when_the_claim_meets_a_broken_counter() {
    scenario(|mut w| async move {
        w.admit("a").await;
        let lease = w.claim(1).await.expect("claim").claimed[0].lease.clone();
        w.admit("b").await;
        // a is due again after its acknowledgement (suspended with a due wake), and first
        // in claim order: the restarted counter's token 1 is not above a's stored 1.
        w.backend
            .request_wake(&id("a"), w.now())
            .await
            .expect("wake");
        w.exec("ALTER SEQUENCE {s}.fencing_tokens RESTART WITH 1")
            .await;
        let b_before = w.get("b").await;
        let r = w
            .backend
            .acknowledge_and_claim(
                &Acknowledgement {
                    lease: lease.clone(),
                    outcome: WorkflowRunOutcome::Suspended,
                },
                ClaimRequest {
                    now: Timestamp::MAX,
                    limit: 2,
                    duration: LEASE,
                },
            )
            .await
            .expect("acknowledged alone");
        assert!(!r.acknowledged.is_lost(), "{r:?}");
        assert!(r.next.claimed.is_empty(), "{r:?}");
        let a = w.get("a").await;
        assert_eq!(a.status, ExecutionStatus::Suspended);
        assert_eq!(a.token, lease.token, "nothing claimed a");
        assert_eq!(w.get("b").await, b_before, "nothing claimed b");
    });
}
