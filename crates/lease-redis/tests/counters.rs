//! `status_counts` reads each partition's counters (`counts`, `running_es`), which
//! the transition scripts keep. After every step of a mix of operations (admission, claim,
//! each acknowledgement outcome, release, renewal, wake, cancel, lease expiry, purge, two
//! records set aside as corrupt) the counters must equal both a full recount (every
//! prefix's `counts` deleted, as an operator forces one: SCAN pages) and the effective
//! statuses `get` reads, so a script that forgets its counter update is caught.
//!
//! On one server (admin edits by hand), with one and with three partitions.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use lease_core::{
    Admission, AttemptLimit, AttemptScope, CancelReason, Clock, ErrorNote, ExecutionClient,
    ExecutionId, ExecutionLease, Json, ManualClock, RedeliveryPolicy, Release, StatusCounts,
    Timestamp, WorkflowRunOutcome,
};
use lease_redis::RedisBackend;

const LEASE: Duration = Duration::from_secs(30);

fn policy() -> RedeliveryPolicy {
    RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_millis(1600))
        .expect("policy")
}

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

async fn redis_cmd(args: &[&str]) -> redis::Value {
    let mut admin = common::admin().await;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(&mut admin).await.expect("admin command")
}

/// The hash of execution `name`, under its partition's prefix.
fn exec_key(b: &RedisBackend, name: &str) -> String {
    format!("lease:{}:exec:{name}", b.hash_tag_for(&id(name)))
}

/// The mix's state: the backend, its clock, the leases held by id, and the ids that are
/// neither purged nor set aside (what `get` is asked about).
struct Mix {
    b: RedisBackend,
    clock: ManualClock,
    leases: HashMap<String, ExecutionLease>,
    known: Vec<String>,
    corrupt: u64,
}

impl Mix {
    async fn claim(&mut self, limit: usize) -> Vec<String> {
        let leases = common::claim(&self.b, &self.clock, limit, LEASE).await;
        let ids: Vec<String> = leases.iter().map(|l| l.execution_id.to_string()).collect();
        for lease in leases {
            self.leases.insert(lease.execution_id.to_string(), lease);
        }
        ids
    }

    async fn ack(&mut self, name: &str, outcome: WorkflowRunOutcome) {
        let lease = self.leases.remove(name).expect("a held lease");
        let acked = self.b.acknowledge(&lease, &outcome).await.expect("ack");
        assert!(!acked.is_lost(), "{name}");
    }

    /// The counters' counts, which must equal those `get` implies.
    async fn check_kept(&self, stage: &str) -> StatusCounts {
        let kept = self.b.status_counts().await.expect("counts");
        let mut records = Vec::new();
        for name in &self.known {
            records.push(self.b.get(&id(name)).await.expect("get").expect(name));
        }
        let mut want = StatusCounts::of_records(&records, self.clock.now());
        want.corrupt = self.corrupt;
        // Records do not tell past takeovers; `check` holds them against the recount.
        want.takeovers = kept.takeovers;
        assert_eq!(kept, want, "{stage}: the counters against get");
        kept
    }

    /// The counters' counts, which must equal those `get` implies and a full recount's
    /// (which also rebuilds `running_es`, as for a namespace from before it, and leaves the
    /// takeover counter as it was).
    async fn check(&self, stage: &str) -> StatusCounts {
        let kept = self.check_kept(stage).await;
        for prefix in self.b.key_prefixes() {
            redis_cmd(&["DEL", &format!("{prefix}counts")]).await;
        }
        let recounted = self.b.status_counts().await.expect("recount");
        assert_eq!(
            kept, recounted,
            "{stage}: the counters against a full recount"
        );
        assert_eq!(
            self.b.status_counts().await.expect("counts"),
            kept,
            "{stage}"
        );
        kept
    }
}

fn completed() -> WorkflowRunOutcome {
    WorkflowRunOutcome::Completed(Json::parse("t", "1").expect("json"))
}

fn failed() -> WorkflowRunOutcome {
    WorkflowRunOutcome::Failed(Json::parse("t", "2").expect("json"))
}

/// Admits e00..e11 and claims e00..e07; then acknowledges each outcome, releases, renews,
/// wakes, cancels and claims again.
async fn transitions(m: &mut Mix) {
    let batch: Vec<Admission> = (0..10)
        .map(|i| Admission::new(id(&format!("e{i:02}"))))
        .collect();
    m.b.admit_batch(&batch).await.expect("admit batch");
    for name in ["e10", "e11"] {
        m.b.admit(&Admission::new(id(name))).await.expect("admit");
    }
    m.known = (0..12).map(|i| format!("e{i:02}")).collect();
    assert_eq!(m.check("admitted").await.admitted, 12);
    assert_eq!(m.claim(8).await.len(), 8);
    assert_eq!(m.check("claimed").await.running, 8);
    m.clock.advance(Duration::from_millis(10));
    m.ack("e00", completed()).await;
    m.ack("e01", failed()).await;
    m.ack("e02", WorkflowRunOutcome::Suspended).await;
    m.ack("e03", WorkflowRunOutcome::Suspended).await;
    let e04 = m.leases.remove("e04").expect("e04");
    assert!(!m.b.release(&e04).await.expect("release").is_lost());
    let e05 = m.leases.get("e05").expect("e05").clone();
    let renewed = m.b.renew(&e05, LEASE).await.expect("renew");
    assert!(!renewed.is_lost());
    m.check("acknowledged, released, renewed").await;
    // e03 is due again (at admission time, so it is claimed first) and claimed: a running
    // execution once suspended.
    let admitted_at = m.clock.now().as_millis() - 10;
    let wake = Timestamp::from_millis(admitted_at);
    m.b.request_wake(&id("e03"), wake).await.expect("wake");
    let reason = CancelReason::new("counters").expect("reason");
    m.b.cancel(&id("e10"), &reason).await.expect("cancel");
    m.b.cancel(&id("e06"), &reason).await.expect("cancel");
    m.leases.remove("e06");
    m.check("woken, cancelled").await;
    assert_eq!(m.claim(1).await, ["e03"]);
    // No recount until its lease expired: the claim alone must have put e03 in `running_es`.
    let counts = m.check_kept("claimed once suspended").await;
    assert_eq!((counts.running, counts.suspended), (3, 1), "{counts:?}");
}

/// Lets every lease expire (e03 then counts as suspended, the others as admitted), claims
/// and completes one again, then purges the terminal executions.
async fn expiry_and_purge(m: &mut Mix) {
    m.clock.advance(LEASE + Duration::from_secs(1));
    let counts = m.check("expired").await;
    assert_eq!(counts.running, 0, "{counts:?}");
    assert_eq!(counts.suspended, 2, "e02 and the expired e03: {counts:?}");
    let again = m.claim(1).await;
    m.check("claimed after expiry").await;
    m.ack(&again[0], completed()).await;
    m.check("completed after expiry").await;
    m.clock.advance(Duration::from_secs(1));
    let purged = m.b.purge_terminal(m.clock.now(), 100).await.expect("purge");
    assert_eq!(purged.ids.len(), 5, "{purged:?}");
    let gone: Vec<String> = purged.ids.iter().map(ToString::to_string).collect();
    m.known.retain(|name| !gone.contains(name));
    let counts = m.check("purged").await;
    assert_eq!(counts.completed + counts.failed + counts.cancelled, 0);
}

/// Sets aside a record whose payload cannot be decoded (its status is known) and one whose
/// status cannot be read (which orders a recount).
async fn corrupt_records(m: &mut Mix) {
    m.clock.advance(Duration::from_secs(5));
    redis_cmd(&["HSET", &exec_key(&m.b, "e11"), "wf", "\u{1}"]).await;
    m.known.retain(|name| name != "e11");
    m.corrupt = 1;
    let claimed = m.claim(100).await;
    assert!(!claimed.contains(&"e11".to_owned()), "{claimed:?}");
    m.check("set aside, status known").await;
    m.b.admit(&Admission::new(id("e12"))).await.expect("admit");
    redis_cmd(&["HSET", &exec_key(&m.b, "e12"), "st", "bogus"]).await;
    m.corrupt = 2;
    assert!(m.claim(100).await.is_empty());
    let counts = m.check("set aside, status unknown").await;
    assert_eq!(counts.corrupt, 2);
}

async fn mix(partitions: u16) {
    let clock = ManualClock::starting_now();
    let b = common::fresh_with(&clock, policy(), partitions).await;
    let _cleanup = common::Cleanup::of(&b);
    let mut m = Mix {
        b,
        clock,
        leases: HashMap::new(),
        known: Vec::new(),
        corrupt: 0,
    };
    assert_eq!(m.check("fresh").await, StatusCounts::default());
    transitions(&mut m).await;
    expiry_and_purge(&mut m).await;
    corrupt_records(&mut m).await;
    dead_letters(&mut m).await;
}

/// With an attempt limit of 1: d0 dies by a failed release, d1 by its lease's expiry (dead
/// before any script wrote it: `running_last`), which a claim then stores as dead; d0 is
/// retried and d1 cancelled.
async fn dead_letters(m: &mut Mix) {
    let one = AttemptLimit::new(1).expect("limit");
    m.b.set_attempt_limit(&AttemptScope::Default, Some(one))
        .await
        .expect("limit");
    for name in ["d0", "d1"] {
        m.b.admit(&Admission::new(id(name))).await.expect("admit");
        m.known.push(name.to_owned());
    }
    let claimed = m.claim(10).await;
    assert_eq!(claimed.len(), 2, "{claimed:?}");
    let d0 = m.leases.remove("d0").expect("d0");
    let failed = Release::Failed(ErrorNote::new("error", "boom"));
    assert!(
        !m.b.release_with(&d0, &failed)
            .await
            .expect("release")
            .is_lost()
    );
    m.check("dead by release").await;
    m.clock.advance(LEASE);
    m.leases.remove("d1");
    let counts = m.check("dead by expiry").await;
    assert_eq!(counts.dead, 2, "{counts:?}");
    assert!(m.claim(10).await.is_empty());
    m.check("dead by expiry, stored by a claim").await;
    m.b.retry_dead(&[id("d0")], None).await.expect("retry");
    let reason = CancelReason::new("given up").expect("reason");
    m.b.cancel(&id("d1"), &reason).await.expect("cancel");
    let counts = m.check("retried and cancelled").await;
    assert_eq!(counts.dead, 0, "{counts:?}");
}

/// The counters follow every transition on one partition.
#[tokio::test]
async fn counters_equal_a_full_recount_after_every_transition() {
    mix(1).await;
}

/// The same on a namespace split into three partitions (each its own counters).
#[tokio::test]
async fn counters_equal_a_full_recount_on_partitions() {
    mix(3).await;
}
