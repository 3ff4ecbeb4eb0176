//! Real runtime processes (the `lease-worker` binary) sharing one backend (RFC 002:
//! "Several runtime processes sharing one backend will follow these semantics"). Real OS
//! processes, killed (SIGKILL) and frozen (SIGSTOP), because a crash or a pause takes a
//! whole process: peers inside one process share its runtime and cannot die or stall alone.
//!
//! - SIGKILL of a process holding leases: its executions are delivered again after the
//!   leases expire, and no fenced write of it is accepted afterwards.
//! - SIGSTOP past expiry, then SIGCONT: every fenced write it tries returns Lost, and it
//!   stops.
//! - Several processes run 500 executions to completion; the log of claims shows no
//!   execution ever had two live leases.
//! - A process frozen (SIGSTOP) in its charge step, whose `charges` row goes through the
//!   backend's fenced `step_in_tx`, wakes to Lost, and the table ends with exactly one row
//!   for the order: the new holder's (SQLite, PostgreSQL). The payment provider, which
//!   honours idempotency keys (the charge step's effect id), charged once: a
//!   process frozen after its provider call and before its settle makes both processes call
//!   it (2 calls, 1 charge); one frozen inside its charge transaction had settled, so the
//!   new holder does not call again (1 call, 1 charge).
//!
//! Each test runs on SQLite (one temp file) and, with the facade's `postgres` / `redis`
//! features, on the servers named by `LEASE_POSTGRES_URL` / `LEASE_REDIS_URL` (falling back
//! to the local defaults; an unreachable server fails the test). The tests run one at a
//! time: each one already runs several processes.

#[path = "../src/args.rs"]
#[allow(dead_code)]
mod args;
#[path = "../src/backend.rs"]
#[allow(dead_code)]
mod backend;
#[path = "../src/charges.rs"]
#[allow(dead_code)]
mod charges;
#[path = "../src/cluster.rs"]
#[allow(dead_code)]
mod cluster;
#[path = "../src/events.rs"]
#[allow(dead_code)]
mod events;
#[path = "../src/provider.rs"]
#[allow(dead_code)]
mod provider;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lease::{
    Admission, EffectId, ExecutionId, ExecutionOutcome, ExecutionStatus, HeapRecord, Json,
    SharedBackend, StepKey,
};
use serde_json::json;

use crate::args::WorkerArgs;
use crate::cluster::{Cluster, Event};
use crate::provider::Provider;

/// One process test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const PATIENCE: Duration = Duration::from_secs(60);

/// Where a test's processes meet: a backend URL and a namespace nobody else uses.
struct Target {
    url: String,
    namespace: String,
    _dir: Option<tempfile::TempDir>,
    /// The run's payment provider (its own temp dir, on every backend).
    provider: Provider,
    _provider_dir: tempfile::TempDir,
}

impl Target {
    fn new(url: String, test: &str, dir: Option<tempfile::TempDir>) -> Target {
        let provider_dir = tempfile::tempdir().expect("provider temp dir");
        Target {
            url,
            namespace: unique(test),
            _dir: dir,
            provider: Provider::open(provider_dir.path()).expect("provider"),
            _provider_dir: provider_dir,
        }
    }

    fn sqlite(test: &str) -> Target {
        let dir = tempfile::tempdir().expect("temp dir");
        Target::new(
            format!("sqlite:{}", dir.path().join("leases.db").display()),
            test,
            Some(dir),
        )
    }

    /// A fresh schema on the server named by `LEASE_POSTGRES_URL` (apis.md fallback).
    #[cfg(feature = "postgres")]
    fn postgres(test: &str) -> Target {
        Target::new(lease_testserver::postgres_url(), test, None)
    }

    /// A fresh key namespace on the server named by `LEASE_REDIS_URL` (apis.md fallback).
    #[cfg(feature = "redis")]
    fn redis(test: &str) -> Target {
        Target::new(lease_testserver::redis_url(), test, None)
    }

    fn args(&self, name: &str, concurrency: usize) -> WorkerArgs {
        WorkerArgs {
            url: self.url.clone(),
            namespace: self.namespace.clone(),
            name: name.to_owned(),
            concurrency,
            lease: Duration::from_millis(1500),
            renew_every: Duration::from_millis(500),
            poll: Duration::from_millis(20),
            redelivery_base: Duration::from_millis(100),
            provider: self.provider.dir().to_path_buf(),
        }
    }

    async fn backend(&self) -> SharedBackend {
        let policy = backend::policy(Duration::from_millis(100)).expect("policy");
        backend::open(&self.url, &self.namespace, policy)
            .await
            .expect("open the test backend")
    }
}

impl Drop for Target {
    /// Removes the run's Postgres schema or Redis keys, pass or fail.
    fn drop(&mut self) {
        if let Err(e) = runtime().block_on(backend::cleanup(&self.url, &self.namespace)) {
            eprintln!("cleanup of {} failed: {e}", self.namespace);
        }
    }
}

fn unique(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("proc_{test}_{}_{nanos}", std::process::id())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn cluster() -> Cluster {
    Cluster::new(env!("CARGO_BIN_EXE_lease-worker"), &[])
}

fn id(i: usize) -> ExecutionId {
    ExecutionId::new(format!("order-{i:04}")).expect("id")
}

async fn admit(b: &SharedBackend, i: usize, input: serde_json::Value) {
    let admission = Admission::new(id(i)).input(Json::from_value("input", &input).expect("json"));
    b.admit(&admission).await.expect("admit");
}

async fn steps(b: &SharedBackend, n: usize) -> Vec<HeapRecord> {
    let mut out = Vec::new();
    for i in 0..n {
        out.extend(b.list_steps(&id(i)).await.expect("list_steps"));
    }
    out
}

/// Polls until every one of the `n` executions is completed; panics after [`PATIENCE`].
async fn all_completed(b: &SharedBackend, n: usize) {
    let deadline = Instant::now() + PATIENCE;
    let mut i = 0;
    while i < n {
        let r = b.get(&id(i)).await.expect("get").expect("record");
        if r.status == ExecutionStatus::Completed {
            i += 1;
            continue;
        }
        assert!(Instant::now() < deadline, "{} not completed: {r:?}", id(i));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn by(events: &[Event], worker: &str, msg: &str) -> Vec<Event> {
    events
        .iter()
        .filter(|e| e.worker == worker && e.msg() == msg)
        .cloned()
        .collect()
}

/// The highest lease expiry a process reported for each (execution, token): a lower bound
/// of when that lease ended unless it was acknowledged or released.
fn observed_expiry(events: &[Event], worker: &str) -> BTreeMap<(String, u64), i64> {
    let mut out = BTreeMap::new();
    for e in events.iter().filter(|e| e.worker == worker) {
        if !matches!(e.msg(), "claim" | "renew") {
            continue;
        }
        if let (Some(t), Some(x)) = (e.token(), e.int("expires_at")) {
            let slot = out.entry((e.execution().to_owned(), t)).or_insert(x);
            *slot = (*slot).max(x);
        }
    }
    out
}

/// One delivery as the log of claims tells it.
#[derive(Debug)]
struct Claim {
    worker: String,
    token: u64,
    claimed_at: i64,
    /// A time the lease certainly lasted until (a lower bound of its end).
    held_until: i64,
}

/// Checks, from every process's log of claims, that no execution ever had two live leases:
/// tokens are unique and rise with claim time, and each claim comes no earlier than the
/// previous lease of its execution certainly ended. Returns the claims per execution.
fn check_no_two_live_leases(events: &[Event]) -> BTreeMap<String, Vec<Claim>> {
    let mut claims: BTreeMap<String, Vec<Claim>> = BTreeMap::new();
    let mut tokens = BTreeSet::new();
    let mut done: BTreeMap<(String, u64), i64> = BTreeMap::new();
    let mut stopped_unlost: BTreeSet<(String, u64)> = BTreeSet::new();
    let mut expiry: BTreeMap<(String, u64), i64> = BTreeMap::new();
    for e in events {
        let (Some(token), exec) = (e.token(), e.execution().to_owned()) else {
            continue;
        };
        match e.msg() {
            "done" => {
                let now = e.int("now").expect("done.now");
                let expires = e.int("expires_at").expect("done.expires_at");
                done.insert((exec, token), now.min(expires));
            }
            "stopped" if e.json["lost"] == false => {
                stopped_unlost.insert((exec, token));
            }
            "claim" | "renew" => {
                let x = e.int("expires_at").expect("expires_at");
                let slot = expiry.entry((exec, token)).or_insert(x);
                *slot = (*slot).max(x);
            }
            _ => {}
        }
    }
    for e in events.iter().filter(|e| e.msg() == "delivery") {
        let token = e.token().expect("delivery token");
        let exec = e.execution().to_owned();
        assert!(tokens.insert(token), "token #{token} issued twice");
        let claimed_at = e.int("claimed_at").expect("claimed_at");
        let key = (exec.clone(), token);
        let held_until = match done.get(&key) {
            Some(t) => *t,
            // Cancelled by a shutdown deadline and released: the end is unknown.
            None if stopped_unlost.contains(&key) => claimed_at,
            // Killed, frozen or lost: no release, no acknowledgement; the lease lasted at
            // least until its last expiry the process saw.
            None => expiry.get(&key).copied().unwrap_or(claimed_at),
        };
        claims.entry(exec).or_default().push(Claim {
            worker: e.worker.clone(),
            token,
            claimed_at,
            held_until,
        });
    }
    for (exec, list) in &mut claims {
        list.sort_by_key(|c| c.token);
        for pair in list.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            assert!(
                b.claimed_at >= a.claimed_at,
                "{exec}: token #{} claimed before #{}",
                b.token,
                a.token
            );
            assert!(
                b.claimed_at >= a.held_until,
                "{exec}: two live leases: #{} ({}) claimed at {} while #{} ({}) held it until {}",
                b.token,
                b.worker,
                b.claimed_at,
                a.token,
                a.worker,
                a.held_until
            );
        }
    }
    claims
}

/// Spawns P1 and admits `n` executions whose first delivery stalls `stall_ms` before its
/// charge; returns once P1 holds every one of them.
fn p1_holds_all(
    c: &mut Cluster,
    rt: &tokio::runtime::Runtime,
    b: &SharedBackend,
    target: &Target,
    n: usize,
    stall_ms: u64,
) {
    c.spawn(&target.args("P1", 8)).expect("spawn P1");
    rt.block_on(async {
        for i in 0..n {
            let input = json!({ "order": i, "stall_first_ms": stall_ms, "charge_ms": 5 });
            admit(b, i, input).await;
        }
    });
    c.wait_for(PATIENCE, |ev| {
        ev.iter().filter(|e| e.msg() == "stalling").count() == n
    })
    .expect("P1 holds every execution");
}

/// SIGKILL of a process holding leases: its executions are delivered again after the
/// leases expire, and no fenced write of it is accepted afterwards.
fn sigkill_holder(target: Target) {
    const N: usize = 6;
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let rt = runtime();
    let b = rt.block_on(target.backend());
    let mut c = cluster();
    p1_holds_all(&mut c, &rt, &b, &target, N, 60_000);
    let before = rt.block_on(steps(&b, N));
    c.kill("P1").expect("SIGKILL P1");
    let killed = c.events();
    let p1_expiry = observed_expiry(&killed, "P1");
    assert_eq!(p1_expiry.len(), N);

    c.spawn(&target.args("P2", 8)).expect("spawn P2");
    rt.block_on(all_completed(&b, N));
    c.stop_all().expect("stop P2");
    let events = c.events();
    check_no_two_live_leases(&events);

    for ((exec, p1_token), p1_expires) in &p1_expiry {
        let p2 = by(&events, "P2", "delivery")
            .into_iter()
            .find(|e| e.execution() == exec)
            .unwrap_or_else(|| panic!("{exec} not delivered again"));
        assert!(p2.token() > Some(*p1_token));
        let claimed_at = p2.int("claimed_at").expect("claimed_at");
        assert!(
            claimed_at >= *p1_expires,
            "{exec} redelivered at {claimed_at}, before P1's lease expired at {p1_expires}"
        );
    }
    let after = rt.block_on(steps(&b, N));
    let p1_tokens: BTreeSet<u64> = p1_expiry.keys().map(|(_, t)| *t).collect();
    let p1_before: Vec<&HeapRecord> = before
        .iter()
        .filter(|r| p1_tokens.contains(&r.token.get()))
        .collect();
    let p1_after: Vec<&HeapRecord> = after
        .iter()
        .filter(|r| p1_tokens.contains(&r.token.get()))
        .collect();
    assert_eq!(
        p1_before, p1_after,
        "a write of the killed process was accepted"
    );
    assert!(p1_after.iter().all(|r| r.step_key.as_str() == "load"));
    rt.block_on(async {
        for i in 0..N {
            let r = b.get(&id(i)).await.expect("get").expect("record");
            assert_eq!(r.status, ExecutionStatus::Completed);
            assert!(
                !p1_tokens.contains(&r.token.get()),
                "acknowledged by the killed process"
            );
            // The expiry counted as an unacknowledged delivery; the acknowledgement reset it.
            assert_eq!(r.unacknowledged_deliveries, 0);
        }
    });
    let replayed = by(&events, "P2", "step")
        .iter()
        .filter(|e| e.str("step") == "load" && e.json["replayed"] == true)
        .count();
    assert_eq!(replayed, N, "P2 skipped the steps P1 recorded");
}

/// SIGSTOP past expiry, then SIGCONT: every fenced write the frozen process tries returns
/// Lost, and it stops (no acknowledgement, no release, no accepted renewal or step).
fn sigstop_holder(target: Target) {
    const N: usize = 4;
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let rt = runtime();
    let b = rt.block_on(target.backend());
    let mut c = cluster();
    p1_holds_all(&mut c, &rt, &b, &target, N, 3000);
    c.freeze("P1").expect("SIGSTOP P1");
    let frozen_at = events::wall_ms();
    let before = rt.block_on(steps(&b, N));
    let p1_tokens: BTreeSet<u64> = by(&c.events(), "P1", "delivery")
        .iter()
        .filter_map(Event::token)
        .collect();
    assert_eq!(p1_tokens.len(), N);

    c.spawn(&target.args("P2", 8)).expect("spawn P2");
    rt.block_on(all_completed(&b, N));
    let resumed_at = events::wall_ms();
    c.resume("P1").expect("SIGCONT P1");
    c.wait_for(PATIENCE, |ev| {
        let ended: BTreeSet<u64> = ev
            .iter()
            .filter(|e| e.worker == "P1" && matches!(e.msg(), "done" | "stopped"))
            .filter_map(Event::token)
            .collect();
        ended.len() == N
    })
    .expect("every delivery of P1 ends after it resumes");
    c.stop_all().expect("stop the processes");
    let events = c.events();
    check_no_two_live_leases(&events);

    let exit = by(&events, "P1", "exit").pop().expect("P1 exit report");
    assert_eq!(
        exit.json["lost"], N,
        "every delivery of P1 saw Lost: {:?}",
        exit.json
    );
    assert_eq!(exit.json["acknowledgements"], 0);
    assert_eq!(exit.json["releases"], 0);
    let late_renewals = events
        .iter()
        .filter(|e| e.worker == "P1" && e.msg() == "renew" && e.ts() >= resumed_at)
        .count();
    assert_eq!(
        late_renewals, 0,
        "a renewal of the frozen process was accepted"
    );
    let late_steps = events
        .iter()
        .filter(|e| e.worker == "P1" && e.msg() == "step" && e.ts() >= frozen_at)
        .count();
    assert_eq!(late_steps, 0, "a step of the frozen process was recorded");
    let after = rt.block_on(steps(&b, N));
    let mine = |rs: &[HeapRecord]| -> Vec<HeapRecord> {
        rs.iter()
            .filter(|r| p1_tokens.contains(&r.token.get()))
            .cloned()
            .collect()
    };
    assert_eq!(
        mine(&before),
        mine(&after),
        "a write of the frozen process was accepted"
    );
    rt.block_on(async {
        for i in 0..N {
            let r = b.get(&id(i)).await.expect("get").expect("record");
            assert_eq!(r.status, ExecutionStatus::Completed);
            assert!(!p1_tokens.contains(&r.token.get()));
            let Some(ExecutionOutcome::Completed(v)) = r.outcome else {
                panic!("no outcome")
            };
            assert_eq!(
                v.to_value().expect("outcome")["receipt"]["charged_by"],
                "P2"
            );
        }
    });
    let lost_events = events
        .iter()
        .filter(|e| e.worker == "P1" && e.ts() >= resumed_at)
        .filter(|e| e.msg() == "refused" || e.msg().starts_with("lost"))
        .count();
    assert!(lost_events >= N, "each delivery reported its Lost write");
}

/// Several processes run 500 executions to completion (some reply retry once, some charge
/// for longer than a lease and renew) with no execution ever holding two live leases,
/// checked from the log of claims.
fn many_processes(target: Target) {
    const N: usize = 500;
    const PROCESSES: usize = 4;
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let rt = runtime();
    let b = rt.block_on(target.backend());
    let started = Instant::now();
    let mut c = cluster();
    for p in 0..PROCESSES {
        c.spawn(&target.args(&format!("P{p}"), 16)).expect("spawn");
    }
    rt.block_on(async {
        for i in 0..N {
            let charge_ms = if i % 100 == 7 {
                2000
            } else {
                (i % 5) as u64 * 2
            };
            admit(
                &b,
                i,
                json!({ "order": i, "charge_ms": charge_ms, "retry_first": i % 10 == 3 }),
            )
            .await;
        }
    });
    c.wait_for(Duration::from_secs(180), |ev| {
        ev.iter()
            .filter(|e| e.msg() == "acknowledge")
            .map(Event::execution)
            .collect::<BTreeSet<_>>()
            .len()
            == N
    })
    .expect("every execution acknowledged");
    c.stop_all().expect("stop the processes");
    let elapsed = started.elapsed();
    let events = c.events();
    let claims = check_no_two_live_leases(&events);
    assert_eq!(claims.len(), N);

    let acks: Vec<&Event> = events.iter().filter(|e| e.msg() == "acknowledge").collect();
    assert_eq!(acks.len(), N, "each execution acknowledged exactly once");
    let exits: Vec<&Event> = events.iter().filter(|e| e.msg() == "exit").collect();
    assert_eq!(exits.len(), PROCESSES);
    let total = |k: &str| {
        exits
            .iter()
            .map(|e| e.json[k].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    let deliveries: usize = claims.values().map(Vec::len).sum();
    assert_eq!(
        total("claims"),
        deliveries as u64,
        "every claim is in the log"
    );
    assert_eq!(total("lost"), 0);
    assert_eq!(
        total("releases"),
        (N / 10) as u64,
        "one retry per tenth execution"
    );
    assert!(
        total("renewals") >= 5 * 3,
        "long charges renewed their leases"
    );
    let workers: BTreeSet<&str> = acks.iter().map(|e| e.worker.as_str()).collect();
    assert_eq!(
        workers.len(),
        PROCESSES,
        "every process delivered some executions"
    );
    rt.block_on(async {
        for i in 0..N {
            let r = b.get(&id(i)).await.expect("get").expect("record");
            assert_eq!(r.status, ExecutionStatus::Completed, "{}", id(i));
            assert_eq!(r.unacknowledged_deliveries, 0);
            let steps = b.list_steps(&id(i)).await.expect("steps");
            assert_eq!(steps.len(), 2, "load and charge recorded once each");
        }
        // SQLite and PostgreSQL: the charge step's charges row, written with its record in
        // one fenced step_in_tx transaction, exists exactly once per execution.
        let policy = backend::policy(Duration::from_millis(100)).expect("policy");
        let store = backend::open_store(&target.url, &target.namespace, policy)
            .await
            .expect("open")
            .store;
        // The provider: one charge per execution (a call repeated after a failed
        // delivery would carry the same key).
        let made = target.provider.charges().expect("provider charges");
        assert_eq!(made.len(), N, "one provider charge per execution");
        assert!(target.provider.calls().expect("provider calls").len() >= N);
        if store.has_charges() {
            for i in 0..N {
                let rows = store
                    .charges(i as i64)
                    .await
                    .expect("charges")
                    .expect("table");
                assert_eq!(rows.len(), 1, "{}: {rows:?}", id(i));
                assert_eq!(rows[0].execution_id, id(i).as_str());
            }
        }
    });
    eprintln!(
        "{}: {N} executions, {PROCESSES} processes x 16, {deliveries} deliveries, {} renewals, \
         {} releases, {:.1} s",
        target.url.split(':').next().unwrap_or("?"),
        total("renewals"),
        total("releases"),
        elapsed.as_secs_f64()
    );
}

/// Where the frozen process of [`frozen_in_charge_step`] stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Freeze {
    /// Inside its charge transaction, its `charges` row inserted and not committed
    /// (PostgreSQL: the token is checked at commit, so a frozen client holds no lock).
    InsideTransaction,
    /// After the provider charged, before its settle and its charge transaction (SQLite
    /// cannot freeze inside: its fenced transaction takes the write lock and checks the
    /// token first, so a process frozen inside it would hold every writer off, the reclaim
    /// included).
    BeforeTransaction,
}

/// A process frozen (SIGSTOP) in its charge step, whose `charges` row is
/// written through the backend's fenced `step_in_tx`, wakes to Lost after another process
/// reclaimed the order with a higher token and committed its own row; the table ends with
/// exactly one row for the order, the new holder's, and a step record of the same token.
fn frozen_in_charge_step(target: Target, freeze: Freeze) {
    const ORDER: usize = 42;
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let rt = runtime();
    let policy = backend::policy(Duration::from_millis(100)).expect("policy");
    let opened = rt
        .block_on(backend::open_store(&target.url, &target.namespace, policy))
        .expect("open the test backend");
    assert!(
        opened.store.has_charges(),
        "{}: no charges table",
        target.url
    );
    rt.block_on(opened.store.create_charges())
        .expect("charges table");
    let b = opened.shared.clone();
    let charges = || {
        rt.block_on(opened.store.charges(ORDER as i64))
            .expect("read charges")
            .expect("a charges table")
    };
    // Leases long enough that the stalls below cannot run past P1's local deadline: P1
    // loses its lease only because it is frozen.
    let args = |name: &str| WorkerArgs {
        lease: Duration::from_secs(3),
        renew_every: Duration::from_secs(1),
        ..target.args(name, 4)
    };
    let (input, frozen_on) = match freeze {
        Freeze::InsideTransaction => (
            json!({ "order": ORDER, "charge_ms": 5, "stall_in_charge_tx_ms": 2000 }),
            "stalling in the charge transaction",
        ),
        Freeze::BeforeTransaction => (
            json!({ "order": ORDER, "charge_ms": 5, "receipt_ms": 1000 }),
            "charged",
        ),
    };
    let mut c = cluster();
    c.spawn(&args("P1")).expect("spawn P1");
    rt.block_on(admit(&b, ORDER, input));
    c.wait_event(PATIENCE, |e| e.worker == "P1" && e.msg() == frozen_on)
        .expect("P1 reaches the freeze point");
    c.freeze("P1").expect("SIGSTOP P1");
    let p1_token = by(&c.events(), "P1", "delivery")
        .first()
        .and_then(Event::token)
        .expect("P1's token");
    assert_eq!(
        by(&c.events(), "P1", "charge row inserted").len(),
        usize::from(freeze == Freeze::InsideTransaction),
        "P1 froze where the test put it"
    );
    assert!(charges().is_empty(), "P1's row is not committed");

    c.spawn(&args("P2")).expect("spawn P2");
    rt.block_on(async {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let r = b.get(&id(ORDER)).await.expect("get").expect("record");
            if r.status == ExecutionStatus::Completed {
                break;
            }
            assert!(Instant::now() < deadline, "not completed: {r:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let while_frozen = charges();
    c.resume("P1").expect("SIGCONT P1");
    c.wait_for(PATIENCE, |ev| {
        ev.iter()
            .any(|e| e.worker == "P1" && matches!(e.msg(), "done" | "stopped"))
    })
    .expect("P1's delivery ends after it resumes");
    c.stop_all().expect("stop the processes");
    let events = c.events();
    check_no_two_live_leases(&events);

    let p2_token = by(&events, "P2", "delivery")
        .first()
        .and_then(Event::token)
        .expect("P2's token");
    assert!(p2_token > p1_token);
    let refused = by(&events, "P1", "refused");
    assert_eq!(refused.len(), 1, "P1's charge transaction was refused");
    assert_eq!(refused[0].json["in_tx"], true);
    assert_eq!(refused[0].token(), Some(p1_token));
    let exit = by(&events, "P1", "exit").pop().expect("P1 exit report");
    assert_eq!(exit.json["lost"], 1, "P1 got Lost: {:?}", exit.json);
    assert_eq!(exit.json["acknowledgements"], 0);
    assert!(by(&events, "P1", "acknowledge").is_empty());
    assert_eq!(
        by(&events, "P1", "charged").len(),
        1,
        "P1 called the provider before it froze"
    );

    let rows = charges();
    assert_eq!(rows, while_frozen, "P1 committed nothing after it woke");
    assert_eq!(
        rows.len(),
        1,
        "exactly one charges row for order {ORDER}: {rows:?}"
    );
    assert_eq!(rows[0].worker, "P2");
    assert_eq!(rows[0].token, p2_token);
    assert_eq!(rows[0].execution_id, id(ORDER).as_str());
    let steps = rt.block_on(b.list_steps(&id(ORDER))).expect("steps");
    let charge = steps
        .iter()
        .find(|s| s.step_key.as_str() == "charge")
        .expect("charge step recorded");
    assert_eq!(
        charge.token.get(),
        p2_token,
        "the row and its step record agree"
    );
    assert_eq!(
        charge.response.to_value().expect("receipt")["receipt"],
        rows[0].receipt.as_str()
    );

    // The provider deduplicates by the charge step's effect id, so it charged
    // once. Frozen before its settle, P1 left the effect pending and P2 called again (with
    // the same key); frozen inside its transaction, P1 had settled, so P2 used the result.
    let key =
        EffectId::for_step(&id(ORDER), &StepKey::new("charge").expect("key")).expect("effect id");
    let calls = target.provider.calls().expect("provider calls");
    let made = target.provider.charges().expect("provider charges");
    let callers: Vec<&str> = calls.iter().map(|c| c.caller.as_str()).collect();
    let expected: &[&str] = match freeze {
        Freeze::BeforeTransaction => &["P1", "P2"],
        Freeze::InsideTransaction => &["P1"],
    };
    assert_eq!(callers, expected, "who called the provider: {calls:?}");
    assert!(calls.iter().all(|c| c.key == key.as_str()), "{calls:?}");
    assert_eq!(
        calls.iter().filter(|c| c.new).count(),
        1,
        "one call charged: {calls:?}"
    );
    assert_eq!(made.len(), 1, "the provider charged once: {made:?}");
    assert_eq!(made[0].response["receipt"], rows[0].receipt.as_str());
    assert_eq!(made[0].response["charged_by"], "P1");
}

#[test]
fn sqlite_frozen_in_charge_step_one_charges_row() {
    frozen_in_charge_step(Target::sqlite("charge"), Freeze::BeforeTransaction);
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_frozen_in_charge_transaction_one_charges_row() {
    frozen_in_charge_step(Target::postgres("charge"), Freeze::InsideTransaction);
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_frozen_before_settle_one_provider_charge() {
    frozen_in_charge_step(Target::postgres("settle"), Freeze::BeforeTransaction);
}

#[test]
fn sqlite_sigkill_holder_redelivered_after_expiry() {
    sigkill_holder(Target::sqlite("kill"));
}

#[test]
fn sqlite_sigstop_holder_every_fenced_write_lost() {
    sigstop_holder(Target::sqlite("stop"));
}

#[test]
fn sqlite_500_executions_across_processes_one_live_lease() {
    many_processes(Target::sqlite("many"));
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_sigkill_holder_redelivered_after_expiry() {
    sigkill_holder(Target::postgres("kill"));
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_sigstop_holder_every_fenced_write_lost() {
    sigstop_holder(Target::postgres("stop"));
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_500_executions_across_processes_one_live_lease() {
    many_processes(Target::postgres("many"));
}

#[cfg(feature = "redis")]
#[test]
fn redis_sigkill_holder_redelivered_after_expiry() {
    sigkill_holder(Target::redis("kill"));
}

#[cfg(feature = "redis")]
#[test]
fn redis_sigstop_holder_every_fenced_write_lost() {
    sigstop_holder(Target::redis("stop"));
}

#[cfg(feature = "redis")]
#[test]
fn redis_500_executions_across_processes_one_live_lease() {
    many_processes(Target::redis("many"));
}
