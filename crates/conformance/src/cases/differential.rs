//! Differential case: random operation sequences run against the in-memory reference
//! backend (the executable spec) and against the backend under test, on the case's shared
//! manual clock; every reply, every error kind and every effective record must be
//! identical. The operations include scheduled and batch admission,
//! `claim_due_with_records`, `claim_due_with_horizon` (compared whole when the backend
//! reports a horizon) and `acknowledge_batch` (current, stale, forged and repeated leases
//! mixed in one batch).
//!
//! Each case is one seed on one fresh store (the token counter is the store's, so seeds
//! cannot share a store); `LEASE_DIFF_OPS` (default 250) sets the operations per seed and
//! `LEASE_DIFF_SEED_BASE` (default 0) shifts the four seeds, to explore others by hand
//! (`LEASE_DIFF_SEED_BASE=100 cargo test -p <backend> differential`).

use lease_core::ExecutionClientExt;
use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Acknowledgement, Admission, ClaimBatch, ClaimRequest, Clock, ExecutionClient, ExecutionId,
    ExecutionLease, FencingToken, Json, LeaseBackend, LeaseError, ManualClock, MemoryBackend,
    RequestId, StartRequest, StepKey, StepWrite, StoreId, StoreKey, StoreOp, StoreReceipt,
    Timestamp, WorkflowName, WorkflowRunOutcome,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::context::Ctx;
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one rstest case per seed); an
/// implementation detail of that macro. A new seed is added here.
#[doc(hidden)]
#[macro_export]
macro_rules! __differential_cases {
    ($harness:ty) => {
        // One rstest case per seed (tests `differential::case_N_seed_N`), through the
        // re-exported rstest, so the adapter's crate needs no rstest dependency of its own.
        #[$crate::rstest::rstest]
        #[case::seed_1(1)]
        #[case::seed_2(2)]
        #[case::seed_3(3)]
        #[case::seed_4(4)]
        fn differential(#[case] seed: u64) {
            $crate::run_case::<$harness, _, _>(move |ctx| {
                $crate::cases::differential::differential_seed::<$harness>(ctx, seed)
            });
        }
    };
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// An error reduced to what callers can observe: its variant and the argument it names.
fn kind(e: &LeaseError) -> String {
    match e {
        LeaseError::InvalidInput { field, .. } => format!("InvalidInput({field})"),
        LeaseError::UnknownExecution(id) => format!("UnknownExecution({id})"),
        LeaseError::UnknownStore(s) => format!("UnknownStore({s})"),
        LeaseError::ForeignToken { execution, token } => {
            format!("ForeignToken({execution},{token})")
        }
        LeaseError::PayloadTooLarge { field, .. } => format!("PayloadTooLarge({field})"),
        other => panic!("unexpected backend failure: {other:?}"),
    }
}

fn norm<T: std::fmt::Debug>(r: lease_core::Result<T>) -> String {
    match r {
        Ok(v) => format!("Ok({v:?})"),
        Err(e) => format!("Err({})", kind(&e)),
    }
}

const IDS: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

struct World {
    rng: StdRng,
    clock: ManualClock,
    leases: Vec<ExecutionLease>,
    /// The backend lists live leases ([`lease_core::Capabilities::live_leases`]): compared after every
    /// operation too.
    live_leases: bool,
}

impl World {
    fn id(&mut self) -> ExecutionId {
        ExecutionId::new(IDS[self.rng.random_range(0..IDS.len())]).expect("id")
    }

    fn json(&mut self) -> Json {
        let n: u32 = self.rng.random_range(0..3);
        Json::parse("t", &format!("{{\"v\":{n}}}")).expect("json")
    }

    fn time(&mut self) -> Timestamp {
        let offset: i64 = self.rng.random_range(-5_000..60_000);
        Timestamp::from_millis(self.clock.now().as_millis() + offset)
    }

    fn duration(&mut self) -> Duration {
        match self.rng.random_range(0..10) {
            0 => Duration::ZERO,
            1 => Duration::from_secs(25 * 3600),
            _ => Duration::from_millis(self.rng.random_range(1..40_000)),
        }
    }

    /// An outcome to acknowledge with.
    fn outcome(&mut self) -> WorkflowRunOutcome {
        match self.rng.random_range(0..4) {
            0 | 1 => WorkflowRunOutcome::Suspended,
            2 => WorkflowRunOutcome::Completed(self.json()),
            _ => WorkflowRunOutcome::Failed(self.json()),
        }
    }

    /// A batch of up to four acknowledgements: half the time the latest leases issued
    /// (mostly current, distinct executions), otherwise any leases (stale, forged, token 0,
    /// or one execution twice).
    fn acks(&mut self) -> Vec<Acknowledgement> {
        let n = self.rng.random_range(0..=4);
        let leases: Vec<ExecutionLease> = if self.rng.random_bool(0.5) {
            self.leases.iter().rev().take(n).cloned().collect()
        } else {
            (0..n).map(|_| self.lease()).collect()
        };
        leases
            .into_iter()
            .map(|lease| Acknowledgement {
                lease,
                outcome: self.outcome(),
            })
            .collect()
    }

    /// A lease to use: one that was issued, a stale or forged variant, or token 0.
    fn lease(&mut self) -> ExecutionLease {
        let pick = self.rng.random_range(0..10);
        if self.leases.is_empty() || pick == 0 {
            let token = self.rng.random_range(0..30);
            return ExecutionLease {
                execution_id: self.id(),
                token: FencingToken::new(token),
                expires_at: self.clock.now(),
            };
        }
        let i = self.rng.random_range(0..self.leases.len());
        let mut lease = self.leases[i].clone();
        if pick == 1 {
            lease.execution_id = self.id();
        }
        lease
    }
}

/// What one operation ran and both replies: `(description, (reference, backend))`.
type Step = (String, (String, String));

/// Runs `f` on the reference, then on the backend under test; both replies normalized.
async fn both<T, F, Fut, B: LeaseBackend + Clone>(
    mem: &MemoryBackend,
    red: &B,
    f: F,
) -> (String, String)
where
    T: std::fmt::Debug,
    F: Fn(Arc<dyn LeaseBackend>) -> Fut,
    Fut: std::future::Future<Output = lease_core::Result<T>>,
{
    let a = norm(f(Arc::new(mem.clone())).await);
    let b = norm(f(Arc::new(red.clone())).await);
    (a, b)
}

/// Runs one random operation on both backends and compares the replies.
async fn step<B: LeaseBackend + Clone>(
    w: &mut World,
    mem: &MemoryBackend,
    red: &B,
    n: usize,
) -> String {
    let op = w.rng.random_range(0..130);
    let (what, (a, b)) = match op {
        0..=9 => admit(w, mem, red).await,
        110..=114 => admit_scheduled(w, mem, red, n).await,
        115..=119 => admit_batch(w, mem, red).await,
        120..=124 => claim_with_horizon(w, mem, red, n).await,
        125..=129 => acknowledge_and_claim(w, mem, red).await,
        10..=19 => request_wake(w, mem, red).await,
        20..=34 => claim(w, mem, red).await,
        35..=42 => renew(w, mem, red).await,
        43..=49 => release(w, mem, red).await,
        50..=59 => acknowledge(w, mem, red).await,
        60..=69 => write_step(w, mem, red).await,
        70..=74 => list_failing(w, mem, red).await,
        75..=79 => get_or_create(w, mem, red).await,
        80..=87 => update(w, mem, red).await,
        88..=91 => start(w, mem, red).await,
        100..=109 => acknowledge_batch(w, mem, red).await,
        _ => advance(w),
    };
    assert_eq!(a, b, "op {n}: {what}");
    compare_state(mem, red, n, &what).await;
    if w.live_leases {
        compare_live(mem, red, n, &what).await;
    }
    what
}

/// Every effective record, every step and the stores agree after operation `n` (`what`).
async fn compare_state<B: LeaseBackend + Clone>(
    mem: &MemoryBackend,
    red: &B,
    n: usize,
    what: &str,
) {
    for id in IDS {
        let id = ExecutionId::new(id).expect("id");
        let (ra, rb) = both(mem, red, |x| {
            let id = id.clone();
            async move { x.get(&id).await }
        })
        .await;
        assert_eq!(ra, rb, "op {n}: {what}: get {id}");
        let (sa, sb) = both(mem, red, |x| {
            let id = id.clone();
            async move { x.list_steps(&id).await }
        })
        .await;
        assert_eq!(sa, sb, "op {n}: {what}: steps of {id}");
    }
    for store in ["s", "t"] {
        let store = StoreId::new(store).expect("store");
        for key in ["k", "l"] {
            let key = StoreKey::new(key).expect("key");
            let (ea, eb) = both(mem, red, |x| {
                let (store, key) = (store.clone(), key.clone());
                async move { x.read_entry(&store, &key).await }
            })
            .await;
            assert_eq!(ea, eb, "op {n}: {what}: entry {store}/{key}");
        }
    }
}

/// The live leases agree after operation `n` (`what`): the whole list, and its first two
/// (the limit cuts the same order).
async fn compare_live<B: LeaseBackend + Clone>(mem: &MemoryBackend, red: &B, n: usize, what: &str) {
    for limit in [2, 1000] {
        let (la, lb) = both(mem, red, |x| async move { x.list_live_leases(limit).await }).await;
        assert_eq!(la, lb, "op {n}: {what}: list_live_leases {limit}");
    }
}

/// `admit`, with a workflow and input a third of the time.
async fn admit<B: LeaseBackend + Clone>(w: &mut World, mem: &MemoryBackend, red: &B) -> Step {
    let adm = Admission::new(w.id());
    let adm = if w.rng.random_bool(0.3) {
        adm.workflow(WorkflowName::new("wf").expect("name"))
            .input(w.json())
    } else {
        adm
    };
    (
        format!("admit {adm:?}"),
        both(mem, red, |x| {
            let adm = adm.clone();
            async move { x.admit(&adm).await }
        })
        .await,
    )
}

/// `admit` with `not_before` (half the time a fresh id, so the reply shows the new record).
async fn admit_scheduled<B: LeaseBackend + Clone>(
    w: &mut World,
    mem: &MemoryBackend,
    red: &B,
    n: usize,
) -> Step {
    // Half the time a fresh id, so the reply shows the new record.
    let id = if w.rng.random_bool(0.5) {
        w.id()
    } else {
        ExecutionId::new(format!("new-{n}")).expect("id")
    };
    let adm = Admission::new(id).not_before(w.time());
    (
        format!("admit scheduled {adm:?}"),
        both(mem, red, |x| {
            let adm = adm.clone();
            async move { x.admit(&adm).await }
        })
        .await,
    )
}

/// `admit_batch` of up to three admissions, half of them scheduled.
async fn admit_batch<B: LeaseBackend + Clone>(w: &mut World, mem: &MemoryBackend, red: &B) -> Step {
    let n = w.rng.random_range(0..4);
    let batch: Vec<Admission> = (0..n)
        .map(|_| {
            let adm = Admission::new(w.id());
            if w.rng.random_bool(0.5) {
                adm.not_before(w.time())
            } else {
                adm
            }
        })
        .collect();
    (
        format!("admit_batch {batch:?}"),
        both(mem, red, |x| {
            let batch = batch.clone();
            async move { x.admit_batch(&batch).await }
        })
        .await,
    )
}

/// `claim_due_with_horizon`: the claims and the clock must match; the horizon may be earlier than the reference's, never later.
async fn claim_with_horizon<B: LeaseBackend + Clone>(
    w: &mut World,
    mem: &MemoryBackend,
    red: &B,
    n: usize,
) -> Step {
    let req = ClaimRequest {
        now: w.time(),
        limit: w.rng.random_range(0..5),
        duration: w.duration(),
    };
    let (ra, rb) = (
        mem.claim_due_with_horizon(req).await,
        red.claim_due_with_horizon(req).await,
    );
    if let Ok(batch) = &ra {
        w.leases
            .extend(batch.claimed.iter().map(|c| c.lease.clone()));
    }
    // The claims and the clock must match; the horizon may be earlier than the
    // reference's (a safe lower bound costs one empty claim), never later. A
    // backend without it (the trait's default) reports neither clock nor instant.
    if let (Ok(a), Ok(b)) = (&ra, &rb) {
        let later = match (a.next_claimable_at, b.next_claimable_at) {
            (Some(a), Some(b)) => b > a,
            (Some(_), None) => b.now.is_some(),
            (None, _) => false,
        };
        assert!(
            !later,
            "op {n}: horizon {b:?} later than the reference's {a:?}"
        );
    }
    let reports = matches!(&rb, Ok(b) if b.now.is_some());
    let view = |r: lease_core::Result<ClaimBatch>| {
        r.map(|b| {
            if reports {
                format!("{:?} at {:?}", b.claimed, b.now)
            } else {
                format!("{:?}", b.claimed)
            }
        })
    };
    let (ra, rb) = (view(ra), view(rb));
    (format!("claim with horizon {req:?}"), (norm(ra), norm(rb)))
}

/// `acknowledge_and_claim`, compared as `claim_due_with_horizon` is.
async fn acknowledge_and_claim<B: LeaseBackend + Clone>(
    w: &mut World,
    mem: &MemoryBackend,
    red: &B,
) -> Step {
    let ack = Acknowledgement {
        lease: w.lease(),
        outcome: w.outcome(),
    };
    let req = ClaimRequest {
        now: w.time(),
        limit: w.rng.random_range(0..3),
        duration: w.duration(),
    };
    let (ra, rb) = (
        mem.acknowledge_and_claim(&ack, req).await,
        red.acknowledge_and_claim(&ack, req).await,
    );
    if let Ok(r) = &ra {
        w.leases
            .extend(r.next.claimed.iter().map(|c| c.lease.clone()));
    }
    // Compared as claim_due_with_horizon is: claims and clock exactly.
    let view = |r: lease_core::Result<lease_core::AckAndClaim>| {
        r.map(|r| format!("{:?} then {:?}", r.acknowledged, r.next.claimed))
    };
    (
        format!("acknowledge_and_claim {ack:?} {req:?}"),
        (norm(view(ra)), norm(view(rb))),
    )
}

/// `request_wake` of a random execution at a random time.
async fn request_wake<B: LeaseBackend + Clone>(
    w: &mut World,
    mem: &MemoryBackend,
    red: &B,
) -> Step {
    let (id, at) = (w.id(), w.time());
    (
        format!("request_wake {id} {at}"),
        both(mem, red, |x| {
            let id = id.clone();
            async move { x.request_wake(&id, at).await }
        })
        .await,
    )
}

/// `claim_due` or `claim_due_with_records` (half each); the leases are remembered.
async fn claim<B: LeaseBackend + Clone>(w: &mut World, mem: &MemoryBackend, red: &B) -> Step {
    let req = ClaimRequest {
        now: w.time(),
        limit: w.rng.random_range(0..5),
        duration: w.duration(),
    };
    if w.rng.random_bool(0.5) {
        let (ra, rb) = (mem.claim_due(req).await, red.claim_due(req).await);
        // Remember the leases (both replied the same, or the comparison fails below).
        if let Ok(leases) = &ra {
            w.leases.extend(leases.iter().cloned());
        }
        (format!("claim {req:?}"), (norm(ra), norm(rb)))
    } else {
        let (ra, rb) = (
            mem.claim_due_with_records(req).await,
            red.claim_due_with_records(req).await,
        );
        if let Ok(claimed) = &ra {
            w.leases.extend(claimed.iter().map(|c| c.lease.clone()));
        }
        (format!("claim with records {req:?}"), (norm(ra), norm(rb)))
    }
}

/// `renew` of a random (current, stale or forged) lease.
async fn renew<B: LeaseBackend + Clone>(w: &mut World, mem: &MemoryBackend, red: &B) -> Step {
    let (lease, d) = (w.lease(), w.duration());
    (
        format!("renew {lease:?} {d:?}"),
        both(mem, red, |x| {
            let lease = lease.clone();
            async move { x.renew(&lease, d).await }
        })
        .await,
    )
}

/// `release` of a random lease.
async fn release<B: LeaseBackend + Clone>(w: &mut World, mem: &MemoryBackend, red: &B) -> Step {
    let lease = w.lease();
    (
        format!("release {lease:?}"),
        both(mem, red, |x| {
            let lease = lease.clone();
            async move { x.release(&lease).await }
        })
        .await,
    )
}

/// `acknowledge` of a random lease with a random outcome.
async fn acknowledge<B: LeaseBackend + Clone>(w: &mut World, mem: &MemoryBackend, red: &B) -> Step {
    let lease = w.lease();
    let outcome = w.outcome();
    (
        format!("acknowledge {lease:?} {outcome:?}"),
        both(mem, red, |x| {
            let (lease, outcome) = (lease.clone(), outcome.clone());
            async move { x.acknowledge(&lease, &outcome).await }
        })
        .await,
    )
}

/// `write_step` of a random lease.
async fn write_step<B: LeaseBackend + Clone>(w: &mut World, mem: &MemoryBackend, red: &B) -> Step {
    let lease = w.lease();
    let write = StepWrite {
        step_key: StepKey::new(["s1", "s2"][w.rng.random_range(0..2)]).expect("key"),
        step_attempt: w.rng.random_range(0..2),
        done: w.rng.random_bool(0.5),
        response: w.json(),
    };
    (
        format!("write_step {lease:?} {write:?}"),
        both(mem, red, |x| {
            let (lease, write) = (lease.clone(), write.clone());
            async move { x.write_step(&lease, &write).await }
        })
        .await,
    )
}

/// `list_failing` with random bounds.
async fn list_failing<B: LeaseBackend + Clone>(
    w: &mut World,
    mem: &MemoryBackend,
    red: &B,
) -> Step {
    let (min, limit) = (w.rng.random_range(0..4), w.rng.random_range(0..5));
    (
        format!("list_failing {min} {limit}"),
        both(
            mem,
            red,
            |x| async move { x.list_failing(min, limit).await },
        )
        .await,
    )
}

/// `get_or_create` of one of two stores.
async fn get_or_create<B: LeaseBackend + Clone>(
    w: &mut World,
    mem: &MemoryBackend,
    red: &B,
) -> Step {
    let store = StoreId::new(["s", "t"][w.rng.random_range(0..2)]).expect("store");
    let initial = vec![(StoreKey::new("k").expect("key"), w.json())];
    (
        format!("get_or_create {store}"),
        both(mem, red, |x| {
            let (store, initial) = (store.clone(), initial.clone());
            async move { x.get_or_create(&store, &initial).await }
        })
        .await,
    )
}

/// `update`: a random store operation under a random receipt.
async fn update<B: LeaseBackend + Clone>(w: &mut World, mem: &MemoryBackend, red: &B) -> Step {
    let receipt = StoreReceipt {
        store: StoreId::new(["s", "t"][w.rng.random_range(0..2)]).expect("store"),
        execution_id: w.id(),
        step_key: StepKey::new(["u1", "u2", "u3"][w.rng.random_range(0..3)]).expect("k"),
    };
    let key = StoreKey::new(["k", "l"][w.rng.random_range(0..2)]).expect("key");
    let op = match w.rng.random_range(0..4) {
        0 => StoreOp::Put {
            key,
            value: w.json(),
        },
        1 => StoreOp::Delete { key },
        2 => StoreOp::CompareAndSet {
            key,
            expected: w.rng.random_bool(0.7).then(|| w.json()),
            new: w.json(),
        },
        _ => StoreOp::TakeIfMatches {
            key,
            expected: w.json(),
        },
    };
    (
        format!("update {receipt:?} {op:?}"),
        both(mem, red, |x| {
            let (receipt, op) = (receipt.clone(), op.clone());
            async move { x.update(&receipt, &op).await }
        })
        .await,
    )
}

/// `start` of one of two requests.
async fn start<B: LeaseBackend + Clone>(w: &mut World, mem: &MemoryBackend, red: &B) -> Step {
    let request = StartRequest {
        request_id: RequestId::new(["r1", "r2"][w.rng.random_range(0..2)]).expect("r"),
        workflow: WorkflowName::new("wf").expect("wf"),
        input: w.json(),
        target: ExecutionId::new(IDS[w.rng.random_range(0..IDS.len())]).expect("id"),
    };
    (
        format!("start {request:?}"),
        both(mem, red, |x| {
            let request = request.clone();
            async move { x.start(&request).await }
        })
        .await,
    )
}

/// `acknowledge_batch` of up to four acknowledgements.
async fn acknowledge_batch<B: LeaseBackend + Clone>(
    w: &mut World,
    mem: &MemoryBackend,
    red: &B,
) -> Step {
    let acks = w.acks();
    (
        format!("acknowledge_batch {acks:?}"),
        both(mem, red, |x| {
            let acks = acks.clone();
            async move { x.acknowledge_batch(&acks).await }
        })
        .await,
    )
}

/// Moves the shared manual clock (no reply to compare).
fn advance(w: &mut World) -> Step {
    let ms = [0, 1, 50, 100, 400, 5_000, 30_000][w.rng.random_range(0..7)];
    w.clock.advance(Duration::from_millis(ms));
    (format!("advance {ms}ms"), (String::new(), String::new()))
}

/// Runs seed `seed` against the reference on the case's clock and policy.
async fn run_seed<H: Harness>(ctx: Arc<Ctx<H>>, seed: u64) {
    let base = ctx.harness.token_base().await.expect("token base");
    let mem = MemoryBackend::with_clock(Arc::new(ctx.clock.clone()))
        .with_policy(ctx.policy)
        .with_last_token(base)
        .await;
    let backend = ctx.backend();
    let mut world = World {
        rng: StdRng::seed_from_u64(seed + env("LEASE_DIFF_SEED_BASE", 0) as u64),
        clock: ctx.clock.clone(),
        leases: Vec::new(),
        live_leases: ctx.caps().live_leases,
    };
    for n in 0..env("LEASE_DIFF_OPS", 250) {
        step(&mut world, &mem, &backend, n).await;
    }
}

/// The differential run for one seed (the macro runs seeds 1 to 4, one `#[case]` each).
pub async fn differential_seed<H: Harness>(ctx: Arc<Ctx<H>>, seed: u64) {
    run_seed(ctx, seed).await;
}
