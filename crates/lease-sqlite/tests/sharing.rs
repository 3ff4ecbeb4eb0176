//! Sharing one database: namespaces, durability across reopen, racing handles, in-memory
//! peers, and two OS processes on one file.

use lease_core::ExecutionClientExt;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Admission, ClaimRequest, ExecutionClient, ExecutionId, ExecutionLease, ExecutionStatus, Fenced,
    HeapClient, Json, LeaseBackend, ManualClock, RequestId, StartClient, StartRequest, StepKey,
    StepWrite, StoreClient, StoreId, StoreKey, StoreOp, StoreReceipt, WorkflowName,
    WorkflowRunOutcome,
};
use lease_sqlite::{SqliteBackend, SqliteConfig};

const LEASE: Duration = Duration::from_secs(60);

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("valid id")
}

async fn claim(b: &impl LeaseBackend, limit: usize) -> Vec<ExecutionLease> {
    let now = b.now().await.expect("now");
    b.claim_due(ClaimRequest {
        now,
        limit,
        duration: LEASE,
    })
    .await
    .expect("claim_due")
}

fn step(key: &str, value: &str) -> StepWrite {
    StepWrite {
        step_key: StepKey::new(key).expect("key"),
        step_attempt: 1,
        done: true,
        response: Json::parse("response", value).expect("json"),
    }
}

#[tokio::test]
async fn namespaces_in_one_file_never_see_each_other() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("shared.db");
    let clock = ManualClock::starting_now();
    let open = |ns: &'static str| {
        SqliteBackend::open(
            SqliteConfig::file(&path)
                .namespace(ns)
                .clock(Arc::new(clock.clone())),
        )
    };
    let a = open("app-a").await.expect("open a");
    let b = open("app-b").await.expect("open b");

    a.admit(&Admission::new(id("same"))).await.expect("admit a");
    assert!(b.get(&id("same")).await.expect("get").is_none());
    b.admit(&Admission::new(id("same"))).await.expect("admit b");

    // One token counter per namespace: both first claims get token 1.
    let la = claim(&a, 10).await;
    let lb = claim(&b, 10).await;
    assert_eq!(la.len(), 1);
    assert_eq!(lb.len(), 1);
    assert_eq!(la[0].token.get(), 1);
    assert_eq!(lb[0].token.get(), 1);

    // Steps: a's write is invisible to b.
    let written = a
        .write_step(&la[0], &step("charge", "\"a\""))
        .await
        .expect("write");
    assert!(matches!(written, Fenced::Accepted(_)));
    assert!(b.list_steps(&id("same")).await.expect("list").is_empty());

    // Stores and receipts.
    let store = StoreId::new("cart").expect("store");
    let key = StoreKey::new("k").expect("key");
    a.get_or_create(&store, &[(key.clone(), Json::null())])
        .await
        .expect("create in a");
    let err = b.read_entry(&store, &key).await.expect_err("unknown in b");
    assert!(
        matches!(err, lease_core::LeaseError::UnknownStore(_)),
        "{err:?}"
    );
    let snap = b.get_or_create(&store, &[]).await.expect("create in b");
    assert!(snap.created && snap.entries.is_empty());
    let receipt = StoreReceipt {
        store: store.clone(),
        execution_id: id("same"),
        step_key: StepKey::new("s").expect("key"),
    };
    let put = StoreOp::Put {
        key: key.clone(),
        value: Json::parse("v", "1").expect("json"),
    };
    assert!(!a.update(&receipt, &put).await.expect("a").replayed);
    assert!(!b.update(&receipt, &put).await.expect("b").replayed);

    // Starts.
    let req = |target: &str| StartRequest {
        request_id: RequestId::new("r1").expect("req"),
        workflow: WorkflowName::new("wf").expect("wf"),
        input: Json::null(),
        target: id(target),
    };
    assert!(a.start(&req("from-a")).await.expect("start a").created);
    let started_b = b.start(&req("from-b")).await.expect("start b");
    assert!(started_b.created);
    assert_eq!(started_b.target, id("from-b"));
    assert!(b.get(&id("from-a")).await.expect("get").is_none());

    // Acknowledging in a leaves b's execution running.
    let ack = a
        .acknowledge(&la[0], &WorkflowRunOutcome::Completed(Json::null()))
        .await
        .expect("ack");
    assert!(matches!(ack, Fenced::Accepted(_)));
    let rb = b.get(&id("same")).await.expect("get").expect("exists");
    assert_eq!(rb.status, ExecutionStatus::Running);
    assert_eq!(b.list_failing(0, 10).await.expect("list").len(), 0);
}

#[tokio::test]
async fn committed_state_survives_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("durable.db");
    let clock = ManualClock::starting_now();
    let config = SqliteConfig::file(&path).clock(Arc::new(clock.clone()));
    let first_token;
    {
        let b = SqliteBackend::open(config.clone()).await.expect("open");
        b.admit(&Admission::new(id("done"))).await.expect("admit");
        b.admit(&Admission::new(id("failing")))
            .await
            .expect("admit");
        let leases = claim(&b, 10).await;
        assert_eq!(leases.len(), 2);
        first_token = leases.iter().map(|l| l.token).max().expect("tokens");
        let done = leases
            .iter()
            .find(|l| l.execution_id == id("done"))
            .expect("lease");
        let failing = leases
            .iter()
            .find(|l| l.execution_id == id("failing"))
            .expect("lease");
        assert!(matches!(
            b.write_step(done, &step("charge", "{\"ok\":true}"))
                .await
                .expect("write"),
            Fenced::Accepted(_)
        ));
        let outcome = WorkflowRunOutcome::Completed(Json::parse("r", "42").expect("json"));
        assert!(matches!(
            b.acknowledge(done, &outcome).await.expect("ack"),
            Fenced::Accepted(_)
        ));
        assert!(matches!(
            b.release(failing).await.expect("release"),
            Fenced::Accepted(_)
        ));
    }
    let b = SqliteBackend::open(config).await.expect("reopen");
    let done = b.get(&id("done")).await.expect("get").expect("exists");
    assert_eq!(done.status, ExecutionStatus::Completed);
    assert_eq!(
        done.outcome,
        Some(lease_core::ExecutionOutcome::Completed(
            Json::parse("r", "42").expect("json")
        ))
    );
    let steps = b.list_steps(&id("done")).await.expect("steps");
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].response.as_str(), "{\"ok\":true}");
    let failing = b.list_failing(1, 10).await.expect("failing");
    assert_eq!(failing.len(), 1);
    assert_eq!(failing[0].id, id("failing"));
    // The token counter survived too: the next claim is above every earlier token.
    clock.advance(Duration::from_secs(3600));
    let again = claim(&b, 10).await;
    assert_eq!(again.len(), 1);
    assert!(again[0].token > first_token);
}

/// Admits `n` executions, then lets `handles` claim-and-acknowledge concurrently until
/// nothing is due; returns (execution -> tokens it was claimed with).
async fn race(handles: Vec<SqliteBackend>, n: usize) -> BTreeMap<String, Vec<u64>> {
    for i in 0..n {
        handles[0]
            .admit(&Admission::new(id(&format!("exec-{i:04}"))))
            .await
            .expect("admit");
    }
    let tasks: Vec<_> = handles
        .into_iter()
        .map(|b| {
            tokio::spawn(async move {
                let mut mine = Vec::new();
                loop {
                    let leases = claim(&b, 7).await;
                    if leases.is_empty() {
                        return mine;
                    }
                    for lease in leases {
                        let ack = b
                            .acknowledge(&lease, &WorkflowRunOutcome::Completed(Json::null()))
                            .await
                            .expect("ack");
                        assert!(matches!(ack, Fenced::Accepted(_)), "a fresh lease holds");
                        mine.push(lease);
                    }
                }
            })
        })
        .collect();
    let mut claimed: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for t in tasks {
        for lease in t.await.expect("join") {
            claimed
                .entry(lease.execution_id.to_string())
                .or_default()
                .push(lease.token.get());
        }
    }
    claimed
}

fn assert_each_claimed_once(claimed: &BTreeMap<String, Vec<u64>>, n: usize) {
    assert_eq!(claimed.len(), n, "every execution was claimed");
    let mut tokens = BTreeSet::new();
    for (exec, ts) in claimed {
        assert_eq!(ts.len(), 1, "{exec} claimed more than once: {ts:?}");
        assert!(tokens.insert(ts[0]), "token {} issued twice", ts[0]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_handles_on_one_file_claim_each_execution_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = SqliteBackend::open(SqliteConfig::file(dir.path().join("race.db")))
        .await
        .expect("open");
    let mut handles = vec![b.clone(), b.clone()];
    for _ in 0..3 {
        handles.push(b.peer().await.expect("peer"));
    }
    let n = 300;
    let claimed = race(handles, n).await;
    assert_each_claimed_once(&claimed, n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_memory_peers_share_and_race_safely() {
    let b = SqliteBackend::open(SqliteConfig::in_memory())
        .await
        .expect("open");
    let other = SqliteBackend::open(SqliteConfig::in_memory())
        .await
        .expect("open another");
    b.admit(&Admission::new(id("only-in-b")))
        .await
        .expect("admit");
    assert!(other.get(&id("only-in-b")).await.expect("get").is_none());
    let peer = b.peer().await.expect("peer");
    assert!(peer.get(&id("only-in-b")).await.expect("get").is_some());
    let leases = claim(&peer, 10).await;
    assert_eq!(leases.len(), 1);
    assert!(claim(&b, 10).await.is_empty(), "the peer holds the lease");
    assert!(matches!(
        b.acknowledge(&leases[0], &WorkflowRunOutcome::Suspended)
            .await
            .expect("ack"),
        Fenced::Accepted(_)
    ));

    let handles = vec![
        b.clone(),
        peer,
        b.peer().await.expect("peer"),
        b.peer().await.expect("peer"),
    ];
    let n = 200;
    let claimed = race(handles, n).await;
    assert_each_claimed_once(&claimed, n);
}

const CHILD_ENV: &str = "LEASE_SQLITE_TEST_CHILD_DB";
const CHILD_PREFIX: &str = "LEASE-CHILD-CLAIM";

/// The child role of `two_processes_share_one_file`: claim and complete until nothing is due.
async fn run_child(path: String) {
    let b = SqliteBackend::open(SqliteConfig::file(path))
        .await
        .expect("child open");
    loop {
        let leases = claim(&b, 5).await;
        if leases.is_empty() {
            return;
        }
        for lease in leases {
            let w = b
                .write_step(&lease, &step("work", "true"))
                .await
                .expect("write");
            assert!(matches!(w, Fenced::Accepted(_)));
            let ack = b
                .acknowledge(&lease, &WorkflowRunOutcome::Completed(Json::null()))
                .await
                .expect("ack");
            assert!(matches!(ack, Fenced::Accepted(_)));
            println!(
                "{CHILD_PREFIX} {} {}",
                lease.execution_id,
                lease.token.get()
            );
        }
    }
}

/// Two OS processes (this test binary re-executed with [`CHILD_ENV`] set) claim from one
/// file at once: every execution is claimed and completed exactly once, tokens unique.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_one_file() {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        run_child(path).await;
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("processes.db");
    let b = SqliteBackend::open(SqliteConfig::file(&path))
        .await
        .expect("open");
    let n = 400;
    for i in 0..n {
        b.admit(&Admission::new(id(&format!("p-{i:04}"))))
            .await
            .expect("admit");
    }
    let exe = std::env::current_exe().expect("test binary");
    let children: Vec<_> = (0..2)
        .map(|_| {
            std::process::Command::new(&exe)
                .args([
                    "two_processes_share_one_file",
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_ENV, &path)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn child")
        })
        .collect();
    let mut claimed: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut per_child = Vec::new();
    for child in children {
        let out = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .expect("join")
            .expect("child output");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "child failed: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let mut count = 0;
        for line in stdout.lines() {
            // libtest may print "test name ... " on the same line before our first one.
            let Some(at) = line.find(CHILD_PREFIX) else {
                continue;
            };
            let rest = &line[at + CHILD_PREFIX.len()..];
            let mut parts = rest.split_whitespace();
            let exec = parts.next().expect("execution id").to_owned();
            let token: u64 = parts.next().expect("token").parse().expect("number");
            claimed.entry(exec).or_default().push(token);
            count += 1;
        }
        per_child.push(count);
    }
    assert_each_claimed_once(&claimed, n);
    for i in 0..n {
        let r = b
            .get(&id(&format!("p-{i:04}")))
            .await
            .expect("get")
            .expect("exists");
        assert_eq!(r.status, ExecutionStatus::Completed);
        assert_eq!(b.list_steps(&r.id).await.expect("steps").len(), 1);
    }
    eprintln!("claims per child process: {per_child:?}");
}
