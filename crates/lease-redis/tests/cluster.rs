//! lease-redis on a Redis Cluster: a partitioned namespace spreads over the
//! primaries, and a partition's slot migrated to another primary while deliveries run
//! (`CLUSTER SETSLOT IMPORTING/MIGRATING`, `MIGRATE` key by key, the target's scripts
//! flushed, `SETSLOT NODE`) loses nothing and keeps fencing: every execution completes,
//! each with at most one accepted acknowledgement, whose outcome is the stored one, and no
//! claim of an execution repeats a token.
//!
//! Needs `LEASE_REDIS_CLUSTER_URL` (`cargo xtask test-all` starts a throwaway cluster for
//! its `redis-cluster` row); without it, each test fails saying so.

mod common;

use lease_core::ExecutionClientExt;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lease_core::{
    Admission, ClaimRequest, Clock, ExecutionClient, ExecutionId, ExecutionOutcome,
    ExecutionStatus, Fenced, HeapClient, Json, StepKey, StepWrite, SystemClock, WorkflowRunOutcome,
};
use lease_redis::RedisBackend;
use redis::aio::MultiplexedConnection;

/// Executions of the migration test.
const EXECUTIONS: usize = 300;
/// Concurrent workers, each on its own connection.
const WORKERS: usize = 3;
/// How long the migration test may take before it reports what did not complete.
const DEADLINE: Duration = Duration::from_secs(90);

fn cluster_or_fail() -> String {
    common::cluster_url().expect(
        "LEASE_REDIS_CLUSTER_URL is not set: these tests need a Redis Cluster \
         (cargo xtask test-all --backend redis-cluster starts one)",
    )
}

/// A primary of the cluster: address and node id.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Primary {
    addr: (String, u16),
    id: String,
}

async fn node(addr: &(String, u16)) -> MultiplexedConnection {
    redis::Client::open(format!("redis://{}:{}", addr.0, addr.1))
        .expect("node url")
        .get_multiplexed_async_connection()
        .await
        .expect("node connection")
}

/// The primaries and the slot ranges each owns, from `CLUSTER NODES`.
async fn primaries() -> Vec<(Primary, Vec<(u16, u16)>)> {
    let nodes = common::cluster_nodes().await;
    nodes
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            if fields.len() < 8 || !fields[2].contains("master") {
                return None;
            }
            let hostport = fields[1].split('@').next()?;
            let (host, port) = hostport.rsplit_once(':')?;
            let ranges = fields[8..]
                .iter()
                .filter(|r| !r.starts_with('['))
                .filter_map(|r| match r.split_once('-') {
                    Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                    None => r.parse().ok().map(|s| (s, s)),
                })
                .collect();
            Some((
                Primary {
                    addr: (host.to_owned(), port.parse().ok()?),
                    id: fields[0].to_owned(),
                },
                ranges,
            ))
        })
        .collect()
}

async fn key_slot(conn: &mut MultiplexedConnection, key: &str) -> u16 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query_async(conn)
        .await
        .expect("keyslot")
}

fn owner(primaries: &[(Primary, Vec<(u16, u16)>)], slot: u16) -> Primary {
    primaries
        .iter()
        .find(|(_, ranges)| ranges.iter().any(|&(a, b)| (a..=b).contains(&slot)))
        .map(|(p, _)| p.clone())
        .expect("every slot has an owner")
}

/// A fresh 4-partition namespace whose partitions lie on every primary (namespaces are
/// tried until one does, so the test never depends on where hashing happens to fall).
async fn spread_namespace() -> (String, Vec<Primary>) {
    let all = primaries().await;
    let mut conn = node(&all[0].0.addr).await;
    for _ in 0..1000 {
        let ns = common::random_namespace();
        let mut owners = Vec::new();
        for i in 0..4 {
            let slot = key_slot(&mut conn, &format!("lease:{{{ns}#{i}}}:")).await;
            owners.push(owner(&all, slot));
        }
        let distinct: BTreeSet<&str> = owners.iter().map(|p| p.id.as_str()).collect();
        if distinct.len() == all.len() {
            return (ns, owners);
        }
    }
    panic!("no namespace out of 1000 spreads over every primary");
}

/// How often the node at `addr` answered with error `code` (`INFO errorstats`).
async fn errorstat(addr: &(String, u16), code: &str) -> u64 {
    let mut conn = node(addr).await;
    let info: String = redis::cmd("INFO")
        .arg("errorstats")
        .query_async(&mut conn)
        .await
        .expect("info errorstats");
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("errorstat_{code}:count=")))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

fn json(text: &str) -> Json {
    Json::to_json("v", &text).expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a Redis Cluster (LEASE_REDIS_CLUSTER_URL): run by test-all's redis-cluster row"]
async fn a_partitioned_namespace_spreads_over_every_primary() {
    cluster_or_fail();
    let (ns, owners) = spread_namespace().await;
    let b = RedisBackend::connect(common::config(&ns).partitions(4))
        .await
        .expect("connect");
    let _cleanup = common::Cleanup::of(&b);
    assert!(b.is_cluster());
    assert_eq!(b.partitions(), 4);
    let ids: Vec<ExecutionId> = (0..40)
        .map(|i| ExecutionId::new(format!("e{i}")).expect("id"))
        .collect();
    for id in &ids {
        b.admit(&Admission::new(id.clone())).await.expect("admit");
    }
    // Each execution's record lies on its partition's primary.
    let mut per_primary: BTreeMap<String, usize> = BTreeMap::new();
    for id in &ids {
        let tag = b.hash_tag_for(id);
        let i: usize = tag
            .trim_matches(|c| c == '{' || c == '}')
            .rsplit('#')
            .next()
            .and_then(|i| i.parse().ok())
            .expect("partition tag");
        let mut conn = node(&owners[i].addr).await;
        let key = format!("lease:{tag}:exec:{id}");
        let exists: bool = redis::cmd("EXISTS")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .expect("exists");
        assert!(exists, "{key} not on {:?}", owners[i].addr);
        *per_primary.entry(owners[i].id.clone()).or_default() += 1;
    }
    eprintln!("executions per primary: {per_primary:?}");
    assert_eq!(per_primary.len(), 3, "{per_primary:?}");
    // Claims reach every partition: all 40 are claimed by repeated small claims.
    let mut claimed = BTreeSet::new();
    for _ in 0..40 {
        let leases = b
            .claim_due(ClaimRequest {
                now: SystemClock.now(),
                limit: 3,
                duration: Duration::from_secs(30),
            })
            .await
            .expect("claim");
        claimed.extend(leases.into_iter().map(|l| l.execution_id));
        if claimed.len() == ids.len() {
            break;
        }
    }
    assert_eq!(claimed.len(), ids.len());
    b.delete_namespace().await.expect("delete");
}

/// What the workers observed.
#[derive(Debug, Default)]
struct Log {
    /// Every claim: (execution, token).
    claims: Vec<(ExecutionId, u64)>,
    /// Accepted acknowledgements: execution -> the outcomes' texts.
    acked: BTreeMap<ExecutionId, Vec<String>>,
    /// Acknowledgements that failed with an error, so may or may not have applied:
    /// execution -> the outcomes' texts.
    unknown: BTreeMap<ExecutionId, Vec<String>>,
    /// Errors the workers saw (transient during the migration), by kind.
    errors: BTreeMap<String, usize>,
}

/// Records an error of kind `what`.
fn error(log: &Mutex<Log>, what: &str, e: &lease_core::LeaseError) {
    let kind = format!("{what}: {}", e.to_string().split(':').next().unwrap_or(""));
    *log.lock().expect("log").errors.entry(kind).or_default() += 1;
}

async fn worker(b: RedisBackend, name: String, log: Arc<Mutex<Log>>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        let request = ClaimRequest {
            now: SystemClock.now(),
            limit: 4,
            duration: Duration::from_secs(3),
        };
        let leases = match b.claim_due(request).await {
            Ok(leases) => leases,
            Err(e) => {
                error(&log, "claim", &e);
                continue;
            }
        };
        if leases.is_empty() {
            tokio::task::yield_now().await;
        }
        for lease in leases {
            log.lock()
                .expect("log")
                .claims
                .push((lease.execution_id.clone(), lease.token.get()));
            let write = StepWrite {
                step_key: StepKey::new("step").expect("key"),
                step_attempt: 1,
                done: true,
                response: json(&name),
            };
            if let Err(e) = b.write_step(&lease, &write).await {
                error(&log, "write_step", &e);
                continue;
            }
            let text = format!("{name}:{}", lease.token.get());
            let outcome = WorkflowRunOutcome::Completed(json(&text));
            let id = lease.execution_id.clone();
            match b.acknowledge(&lease, &outcome).await {
                Ok(Fenced::Accepted(_)) => log
                    .lock()
                    .expect("log")
                    .acked
                    .entry(id)
                    .or_default()
                    .push(text),
                Ok(Fenced::Lost) => {}
                Err(e) => {
                    error(&log, "acknowledge", &e);
                    log.lock()
                        .expect("log")
                        .unknown
                        .entry(id)
                        .or_default()
                        .push(text);
                }
            }
        }
    }
}

/// Whether every execution of `ids` is completed.
async fn all_completed(b: &RedisBackend, ids: &[ExecutionId]) -> bool {
    for id in ids {
        match b.get(id).await {
            Ok(Some(r)) if r.status == ExecutionStatus::Completed => {}
            _ => return false,
        }
    }
    true
}

/// Moves `slot` from `from` to `to` the way `redis-cli --cluster reshard` does, one key per
/// `MIGRATE`, flushing `to`'s scripts first so the moved partition's scripts meet
/// `NOSCRIPT` there. Returns the number of keys moved.
async fn migrate_slot(slot: u16, from: &Primary, to: &Primary, others: &[Primary]) -> usize {
    let mut source = node(&from.addr).await;
    let mut target = node(&to.addr).await;
    let setslot = |state: &str, id: &str| {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SETSLOT").arg(slot).arg(state).arg(id);
        cmd
    };
    let _: () = setslot("IMPORTING", &from.id)
        .query_async(&mut target)
        .await
        .expect("importing");
    let _: () = setslot("MIGRATING", &to.id)
        .query_async(&mut source)
        .await
        .expect("migrating");
    let mut moved = 0;
    loop {
        let keys: Vec<String> = redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(1)
            .query_async(&mut source)
            .await
            .expect("getkeysinslot");
        let Some(key) = keys.first() else { break };
        let _: () = redis::cmd("MIGRATE")
            .arg(&to.addr.0)
            .arg(to.addr.1)
            .arg(key)
            .arg(0)
            .arg(5000)
            .query_async(&mut source)
            .await
            .expect("migrate");
        moved += 1;
    }
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut target)
        .await
        .expect("script flush");
    for (conn, _) in [(&mut target, ()), (&mut source, ())] {
        let _: () = setslot("NODE", &to.id)
            .query_async(conn)
            .await
            .expect("setslot node");
    }
    for other in others {
        let mut conn = node(&other.addr).await;
        let _: () = setslot("NODE", &to.id)
            .query_async(&mut conn)
            .await
            .expect("setslot node (other)");
    }
    moved
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a Redis Cluster (LEASE_REDIS_CLUSTER_URL): run by test-all's redis-cluster row"]
async fn a_slot_migrated_during_deliveries_keeps_fencing_and_loses_nothing() {
    cluster_or_fail();
    let (ns, owners) = spread_namespace().await;
    let first = RedisBackend::connect(common::config(&ns).partitions(4))
        .await
        .expect("connect");
    let _cleanup = common::Cleanup::of(&first);
    let admissions: Vec<Admission> = (0..EXECUTIONS)
        .map(|i| Admission::new(ExecutionId::new(format!("m{i}")).expect("id")))
        .collect();
    for chunk in admissions.chunks(100) {
        first.admit_batch(chunk).await.expect("admit");
    }
    let ids: Vec<ExecutionId> = admissions.iter().map(|a| a.id.clone()).collect();
    let log = Arc::new(Mutex::new(Log::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let b = first.peer().await.expect("peer");
        tasks.push(tokio::spawn(worker(
            b,
            format!("w{w}"),
            log.clone(),
            stop.clone(),
        )));
    }
    // Partition 0's slot moves to the primary after its owner, once deliveries are under way.
    let all: Vec<Primary> = primaries().await.into_iter().map(|(p, _)| p).collect();
    let from = owners[0].clone();
    let at = all
        .iter()
        .position(|p| *p == from)
        .expect("owner is a primary");
    let to = all[(at + 1) % all.len()].clone();
    let others: Vec<Primary> = all
        .iter()
        .filter(|p| **p != from && **p != to)
        .cloned()
        .collect();
    let mut conn = node(&from.addr).await;
    let slot = key_slot(&mut conn, &format!("lease:{{{ns}#0}}:")).await;
    while log.lock().expect("log").acked.len() < EXECUTIONS / 10 && started.elapsed() < DEADLINE {
        tokio::task::yield_now().await;
    }
    let stats = |a: &(String, u16), b: &(String, u16)| {
        let (a, b) = (a.clone(), b.clone());
        async move {
            [
                errorstat(&a, "TRYAGAIN").await,
                errorstat(&a, "ASK").await,
                errorstat(&b, "NOSCRIPT").await,
            ]
        }
    };
    let before = stats(&from.addr, &to.addr).await;
    let moved = migrate_slot(slot, &from, &to, &others).await;
    let progress_at_move = log.lock().expect("log").acked.len();
    while !all_completed(&first, &ids).await && started.elapsed() < DEADLINE {
        tokio::task::yield_now().await;
    }
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.expect("worker");
    }
    let after = stats(&from.addr, &to.addr).await;
    let [tryagain, ask, noscript] = [0, 1, 2].map(|i| after[i] - before[i]);
    eprintln!(
        "during the run: source answered TRYAGAIN {tryagain}x and ASK {ask}x, \
         the target NOSCRIPT {noscript}x"
    );
    assert!(noscript > 0, "no script met NOSCRIPT on the target");
    let log = std::mem::take(&mut *log.lock().expect("log"));
    eprintln!(
        "moved {moved} keys of slot {slot} with {progress_at_move} of {EXECUTIONS} acknowledged; \
         {} claims, errors seen: {:?}",
        log.claims.len(),
        log.errors
    );
    assert!(moved > 0, "the slot held no keys");
    assert!(
        progress_at_move < EXECUTIONS,
        "the migration ran after every delivery"
    );
    // Fencing: no execution's token issued twice, at most one accepted ack per execution.
    let mut tokens: BTreeMap<&ExecutionId, BTreeSet<u64>> = BTreeMap::new();
    for (id, token) in &log.claims {
        assert!(
            tokens.entry(id).or_default().insert(*token),
            "{id}: token {token} issued twice"
        );
    }
    for (id, acks) in &log.acked {
        assert_eq!(acks.len(), 1, "{id}: acknowledged by {acks:?}");
    }
    // Nothing lost: every execution completed, with the accepted ack's outcome.
    for admission in &admissions {
        let id = &admission.id;
        let record = first.get(id).await.expect("get").expect("record");
        assert_eq!(
            record.status,
            ExecutionStatus::Completed,
            "{id}: {record:?}"
        );
        // The stored outcome is the accepted acknowledgement's, or (none accepted) one whose
        // acknowledgement failed with an error after it may have applied.
        let candidates: Vec<&String> = match log.acked.get(id) {
            Some(acked) => acked.iter().collect(),
            None => log.unknown.get(id).into_iter().flatten().collect(),
        };
        assert!(
            candidates
                .iter()
                .any(|t| record.outcome == Some(ExecutionOutcome::Completed(json(t)))),
            "{id}: stored {:?}, acknowledged {candidates:?}",
            record.outcome
        );
    }
    first.delete_namespace().await.expect("delete");
    // The slot is back where it was, for the other tests on this cluster.
    let all_after: Vec<Primary> = primaries().await.into_iter().map(|(p, _)| p).collect();
    let others: Vec<Primary> = all_after
        .iter()
        .filter(|p| **p != from && **p != to)
        .cloned()
        .collect();
    migrate_slot(slot, &to, &from, &others).await;
}
