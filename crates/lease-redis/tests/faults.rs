//! Fault injection against real Redis: `SCRIPT FLUSH` in the middle of a run, and
//! connections killed with `CLIENT KILL` while idle, with a command in flight, and
//! repeatedly during a concurrent workload.

mod common;

use lease_core::ExecutionClientExt;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lease_core::{
    Admission, ClaimRequest, Clock, ExecutionClient, ExecutionId, ExecutionStatus, Fenced,
    HeapClient, Json, LeaseError, ManualClock, RedeliveryPolicy, StepKey, StepWrite,
    WorkflowRunOutcome,
};
use lease_redis::RedisBackend;

const LEASE: Duration = Duration::from_secs(30);
const DEADLINE: Duration = Duration::from_secs(60);

fn policy() -> RedeliveryPolicy {
    RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_millis(1600))
        .expect("policy")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime")
}

fn id(i: usize) -> ExecutionId {
    ExecutionId::new(format!("exec-{i:04}")).expect("id")
}

fn step() -> StepKey {
    StepKey::new("work").expect("key")
}

/// True for the two errors a lost connection may produce.
fn is_connection_error(e: &LeaseError) -> bool {
    matches!(
        e,
        LeaseError::Unavailable { .. } | LeaseError::OutcomeUnknown { .. }
    )
}

/// Polls `cond` until it holds, failing after [`DEADLINE`].
async fn until<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !cond().await {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The server-side id of the backend's current connection (retrying across a reconnect).
async fn client_id(b: &RedisBackend) -> i64 {
    let start = Instant::now();
    loop {
        let mut conn = b.connection();
        match redis::cmd("CLIENT").arg("ID").query_async(&mut conn).await {
            Ok(id) => return id,
            Err(e) => assert!(start.elapsed() < DEADLINE, "CLIENT ID keeps failing: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn kill(client: i64) {
    let mut admin = common::admin().await;
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(client)
        .query_async(&mut admin)
        .await
        .expect("CLIENT KILL");
    assert_eq!(killed, 1, "client {client} was killed");
}

/// The `CLIENT LIST` line of one client, if connected.
async fn client_line(client: i64) -> Option<String> {
    let mut admin = common::admin().await;
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("ID")
        .arg(client)
        .query_async(&mut admin)
        .await
        .expect("CLIENT LIST");
    list.lines().next().map(str::to_owned)
}

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
}

/// Claims, writes a step and completes executions until every one of `ids` is completed,
/// tolerating (and counting) connection errors, which must be typed. Returns the number of
/// typed connection errors seen.
async fn work_until_done(
    b: RedisBackend,
    clock: ManualClock,
    total: usize,
    done: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) -> usize {
    let mut errors = 0;
    let start = Instant::now();
    let payload = Json::parse("t", r#"{"ok":true}"#).expect("json");
    while done.load(Ordering::SeqCst) < total && !stop.load(Ordering::SeqCst) {
        assert!(start.elapsed() < DEADLINE, "workload did not finish");
        let leases = match b
            .claim_due(ClaimRequest {
                now: clock.now(),
                limit: 5,
                duration: LEASE,
            })
            .await
        {
            Ok(l) => l,
            Err(e) if is_connection_error(&e) => {
                errors += 1;
                continue;
            }
            Err(e) => panic!("claim failed with {e:?}"),
        };
        if leases.is_empty() {
            // Leases issued by a claim whose reply was lost, or held by a worker that
            // errored, expire: move time on so they become claimable again.
            clock.advance(LEASE + Duration::from_secs(2));
            tokio::task::yield_now().await;
            continue;
        }
        for lease in leases {
            let write = StepWrite {
                step_key: step(),
                step_attempt: 0,
                done: true,
                response: payload.clone(),
            };
            match b.write_step(&lease, &write).await {
                Ok(Fenced::Accepted(_)) => {}
                Ok(Fenced::Lost) => continue,
                Err(e) if is_connection_error(&e) => {
                    errors += 1;
                    continue;
                }
                Err(e) => panic!("write_step failed with {e:?}"),
            }
            let outcome = WorkflowRunOutcome::Completed(Json::null());
            match b.acknowledge(&lease, &outcome).await {
                Ok(Fenced::Accepted(_)) => {
                    done.fetch_add(1, Ordering::SeqCst);
                }
                Ok(Fenced::Lost) => {}
                Err(e) if is_connection_error(&e) => {
                    errors += 1;
                    // The acknowledgement may have committed: read it back.
                    if let Ok(Some(r)) = b.get(&lease.execution_id).await
                        && r.status == ExecutionStatus::Completed
                        && r.token == lease.token
                    {
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                }
                Err(e) => panic!("acknowledge failed with {e:?}"),
            }
        }
    }
    errors
}

/// Every execution completed exactly once, with one step record written under the token
/// that completed it or an earlier one, and tokens unique across executions.
async fn check_all_completed(b: &RedisBackend, total: usize) {
    let mut tokens = BTreeSet::new();
    for i in 0..total {
        let r = b.get(&id(i)).await.expect("get").expect("record");
        assert_eq!(r.status, ExecutionStatus::Completed, "{}", r.id);
        assert!(tokens.insert(r.token), "token {:?} issued twice", r.token);
        let steps = b.list_steps(&id(i)).await.expect("list_steps");
        assert_eq!(steps.len(), 1, "{}: one step record", r.id);
        assert!(steps[0].token <= r.token);
    }
}

/// Claims up to 10 executions at `clock`'s now with [`LEASE`].
async fn claim_ten(
    b: &RedisBackend,
    clock: &ManualClock,
) -> lease_core::Result<Vec<lease_core::ExecutionLease>> {
    b.claim_due(ClaimRequest {
        now: clock.now(),
        limit: 10,
        duration: LEASE,
    })
    .await
}

async fn admit_all(b: &RedisBackend, total: usize) {
    for i in 0..total {
        b.admit(&Admission::new(id(i))).await.expect("admit");
    }
}

/// Two workers (a backend and its peer) completing `total` admitted executions.
struct Workload {
    done: Arc<AtomicUsize>,
    workers: Vec<tokio::task::JoinHandle<usize>>,
}

impl Workload {
    /// Admits `total` executions on `a` and starts [`work_until_done`] on `a` and on `b`.
    async fn start(a: &RedisBackend, b: &RedisBackend, clock: &ManualClock, total: usize) -> Self {
        admit_all(a, total).await;
        let done = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let workers = [a.clone(), b.clone()]
            .into_iter()
            .map(|w| {
                tokio::spawn(work_until_done(
                    w,
                    clock.clone(),
                    total,
                    done.clone(),
                    stop.clone(),
                ))
            })
            .collect();
        Workload { done, workers }
    }

    /// Waits until the workers completed at least `count` executions.
    async fn reached(&self, count: usize) {
        let done = self.done.clone();
        until("progress", || {
            let done = done.clone();
            async move { done.load(Ordering::SeqCst) >= count }
        })
        .await;
    }

    /// Waits for both workers: the typed connection errors they met.
    async fn finish(self) -> usize {
        let mut errors = 0;
        for w in self.workers {
            errors += w.await.expect("worker");
        }
        errors
    }
}

#[test]
fn script_flush_mid_run_reloads_scripts_and_loses_nothing() {
    runtime().block_on(async {
        const TOTAL: usize = 300;
        let clock = ManualClock::starting_now();
        let a = common::fresh(&clock, policy()).await;
        let _cleanup_a = common::Cleanup::of(&a);
        let b = a.peer().await.expect("peer");
        let workload = Workload::start(&a, &b, &clock, TOTAL).await;
        let mut admin = common::admin().await;
        for fraction in [4, 2] {
            workload.reached(TOTAL / fraction).await;
            let _: () = redis::cmd("SCRIPT")
                .arg("FLUSH")
                .arg("SYNC")
                .query_async(&mut admin)
                .await
                .expect("SCRIPT FLUSH");
        }
        let errors = workload.finish().await;
        assert_eq!(errors, 0, "a script flush must be invisible to callers");
        check_all_completed(&a, TOTAL).await;
        // The token counter survived: the next claim continues above every issued token.
        a.admit(&Admission::new(id(TOTAL))).await.expect("admit");
        let max = futures::future::join_all((0..TOTAL).map(|i| {
            let a = a.clone();
            async move { a.get(&id(i)).await.expect("get").expect("record").token }
        }))
        .await
        .into_iter()
        .max()
        .expect("tokens");
        let next = a
            .claim_due(ClaimRequest {
                now: clock.now(),
                limit: 1,
                duration: LEASE,
            })
            .await
            .expect("claim");
        assert_eq!(next.len(), 1);
        assert!(next[0].token > max);
        a.delete_namespace().await.expect("cleanup");
    });
}

#[test]
fn killed_idle_connection_gives_a_typed_error_then_recovers() {
    runtime().block_on(async {
        let clock = ManualClock::starting_now();
        let b = common::fresh(&clock, policy()).await;
        let _cleanup_b = common::Cleanup::of(&b);
        b.admit(&Admission::new(id(0))).await.expect("admit");
        kill(client_id(&b).await).await;
        // The next command finds the connection closed: a typed error, never a panic. (Over
        // RESP3 the server's disconnect is pushed to the connection manager, which may have
        // reconnected already: then the command simply succeeds.)
        match b.admit(&Admission::new(id(1))).await {
            Err(err) => assert!(is_connection_error(&err), "{err:?}"),
            Ok(_) => assert!(
                common::redis_url().contains("resp3"),
                "a command on the killed RESP2 connection succeeded"
            ),
        }
        let err = b.get(&id(0)).await;
        assert!(
            err.as_ref().map_or_else(is_connection_error, |_| true),
            "{err:?}"
        );
        // The manager reconnects; the state is intact and operations succeed again.
        until("reconnect", || {
            let b = b.clone();
            async move { b.get(&id(0)).await.is_ok() }
        })
        .await;
        let r = b.get(&id(0)).await.expect("get").expect("record");
        assert_eq!(r.status, ExecutionStatus::Admitted);
        // The failed admit may or may not have run (its error says so); repeating it is safe.
        b.admit(&Admission::new(id(1))).await.expect("admit again");
        let leases = claim_ten(&b, &clock).await.expect("claim");
        assert_eq!(leases.len(), 2);
        b.delete_namespace().await.expect("cleanup");
    });
}

#[test]
fn read_on_a_killed_connection_is_retried_on_a_fresh_one() {
    runtime().block_on(async {
        let clock = ManualClock::starting_now();
        let b = common::fresh(&clock, policy()).await;
        let _cleanup = common::Cleanup::of(&b);
        b.admit(&Admission::new(id(0))).await.expect("admit");
        for _ in 0..3 {
            kill(client_id(&b).await).await;
            // Reads change nothing, so a dropped connection is retried once, transparently.
            let r = b.get(&id(0)).await.expect("get retried").expect("record");
            assert_eq!(r.status, ExecutionStatus::Admitted);
            kill(client_id(&b).await).await;
            assert!(
                b.list_steps(&id(0))
                    .await
                    .expect("list_steps retried")
                    .is_empty()
            );
        }
    });
}

/// Parks `b`'s connection (server client `client`) on a blocking read of a namespace key
/// and waits until the server shows it blocked: what `b` sends next queues behind it, sent
/// but not yet run. The task ends when the connection does.
async fn park_connection(
    b: &RedisBackend,
    client: i64,
) -> tokio::task::JoinHandle<redis::RedisResult<redis::Value>> {
    let mut conn = b.connection();
    let key = format!("{}blocker", b.key_prefix());
    let blocker = tokio::spawn(async move {
        redis::cmd("BLPOP")
            .arg(key)
            .arg(30)
            .query_async::<redis::Value>(&mut conn)
            .await
    });
    until("the connection to block", || async move {
        client_line(client)
            .await
            .is_some_and(|l| field(&l, "cmd") == Some("blpop"))
    })
    .await;
    blocker
}

#[test]
fn killed_connection_with_a_claim_in_flight_is_outcome_unknown() {
    runtime().block_on(async {
        let clock = ManualClock::starting_now();
        let b = common::fresh(&clock, policy()).await;
        let _cleanup_b = common::Cleanup::of(&b);
        b.admit(&Admission::new(id(0))).await.expect("admit");
        let before = common::snapshot(&b).await;
        let client = client_id(&b).await;
        // Park the connection, so the claim queues behind it on the server.
        let blocker = park_connection(&b, client).await;
        let claim = {
            let (b, now) = (b.clone(), clock.now());
            tokio::spawn(async move {
                b.claim_due(ClaimRequest {
                    now,
                    limit: 10,
                    duration: LEASE,
                })
                .await
            })
        };
        until("the claim to reach the server", || async move {
            client_line(client)
                .await
                .and_then(|l| field(&l, "qbuf").map(|q| q != "0"))
                .unwrap_or(false)
        })
        .await;
        kill(client).await;
        let err = claim
            .await
            .expect("claim task")
            .expect_err("connection killed with the claim in flight");
        assert!(
            matches!(err, LeaseError::OutcomeUnknown { .. }),
            "a sent claim whose reply is lost may have run: {err:?}"
        );
        assert!(blocker.await.expect("blocker task").is_err());
        // Read back: here the claim never ran (it was queued behind the blocked read).
        until("reconnect", || {
            let b = b.clone();
            async move { b.get(&id(0)).await.is_ok() }
        })
        .await;
        assert_eq!(common::snapshot(&b).await, before, "the claim never ran");
        let leases = claim_ten(&b, &clock).await.expect("claim after recovery");
        assert_eq!(leases.len(), 1);
        b.delete_namespace().await.expect("cleanup");
    });
}

#[test]
fn timed_out_claim_is_outcome_unknown_and_may_still_run() {
    runtime().block_on(async {
        let clock = ManualClock::starting_now();
        let b = RedisBackend::connect(
            lease_redis::RedisConfig::new(common::redis_url())
                .namespace(common::random_namespace())
                .clock(Arc::new(clock.clone()))
                .policy(policy())
                .response_timeout(Some(Duration::from_millis(300))),
        )
        .await
        .expect("connect");
        let _cleanup = common::Cleanup::of(&b);
        b.admit(&Admission::new(id(0))).await.expect("admit");
        let client = client_id(&b).await;
        let blocker = park_connection(&b, client).await;
        let err = b
            .claim_due(ClaimRequest {
                now: clock.now(),
                limit: 10,
                duration: LEASE,
            })
            .await
            .expect_err("the claim waits behind the blocked read");
        assert!(matches!(err, LeaseError::OutcomeUnknown { .. }), "{err:?}");
        let err = b.get(&id(0)).await.expect_err("reads wait too");
        assert!(matches!(err, LeaseError::Unavailable { .. }), "{err:?}");
        assert!(blocker.await.expect("blocker task").is_err());
        // Unblock the connection: the queued claim now runs, although its caller was told
        // the outcome is unknown. Reading back shows it took effect.
        let mut admin = common::admin().await;
        let _: i64 = redis::cmd("CLIENT")
            .arg("UNBLOCK")
            .arg(client)
            .query_async(&mut admin)
            .await
            .expect("CLIENT UNBLOCK");
        until("the claim to run", || {
            let b = b.clone();
            async move {
                b.get(&id(0))
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|r| r.status == ExecutionStatus::Running)
            }
        })
        .await;
        assert!(
            b.claim_due(ClaimRequest {
                now: clock.now(),
                limit: 10,
                duration: LEASE,
            })
            .await
            .expect("claim")
            .is_empty(),
            "the lease the timed-out claim issued is live"
        );
        b.delete_namespace().await.expect("cleanup");
    });
}

#[test]
fn connections_killed_during_a_workload_recover_and_lose_nothing() {
    runtime().block_on(async {
        const TOTAL: usize = 200;
        let clock = ManualClock::starting_now();
        let a = common::fresh(&clock, policy()).await;
        let _cleanup_a = common::Cleanup::of(&a);
        let b = a.peer().await.expect("peer");
        let workload = Workload::start(&a, &b, &clock, TOTAL).await;
        for (round, target) in [(0, &a), (1, &b), (2, &a), (3, &b)] {
            workload.reached(TOTAL * (round + 1) / 6).await;
            kill(client_id(target).await).await;
        }
        let errors = workload.finish().await;
        eprintln!("typed connection errors during the workload: {errors}");
        check_all_completed(&a, TOTAL).await;
        a.delete_namespace().await.expect("cleanup");
    });
}

#[test]
fn unreachable_server_is_unavailable() {
    runtime().block_on(async {
        let started = Instant::now();
        let err = RedisBackend::connect(lease_redis::RedisConfig::new("redis://127.0.0.1:1"))
            .await
            .expect_err("nothing listens on port 1");
        assert!(matches!(err, LeaseError::Unavailable { .. }), "{err:?}");
        assert!(err.is_retryable());
        assert!(started.elapsed() < Duration::from_secs(30));
    });
}
