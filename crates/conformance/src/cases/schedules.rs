//! Recurring admissions (`lease-schedule`, docs/decisions/0035-schedules.md): schedulers on several
//! peers admit each occurrence once under its derived id, catch-up follows each schedule's
//! policy after a gap, occurrences follow the zone's DST changes, bad input and a
//! conflicting registration change nothing. All through the four client traits, so every
//! backend runs them unchanged; time moves only by the manual clock.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    ExecutionClient, LeaseError, SharedBackend, StoreClient, StoreKey, Timestamp, WorkflowName,
    WorkflowRunOutcome,
};
use lease_schedule::{CatchUp, Registered, Schedule, ScheduleError, Scheduler, Tick};

use crate::context::{Ctx, json, plus};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __schedules_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, schedules, [
            schedules_two_peers_admit_each_occurrence_once, schedules_catch_up_after_a_gap,
            schedules_follow_dst_in_their_zone,
            schedules_bad_input_is_refused_and_writes_nothing,
            schedules_conflicting_registration_is_refused_unless_replaced,
            schedules_cursor_never_moves_back,
            schedules_purged_occurrence_is_not_admitted_again,
        ] }
    };
}

const MINUTE: Duration = Duration::from_secs(60);

fn shared<H: Harness>(b: H::Backend) -> SharedBackend {
    Arc::new(b)
}

fn scheduler<H: Harness>(ctx: &Ctx<H>) -> Scheduler {
    Scheduler::new(shared::<H>(ctx.backend()))
}

fn every_minute(name: &str, catch_up: CatchUp) -> Schedule {
    Schedule::new(name, "* * * * *", "UTC")
        .expect("schedule")
        .workflow(WorkflowName::new("tick").expect("workflow"))
        .input(json(r#"{"from":"schedule"}"#))
        .catch_up(catch_up)
}

/// `ms` after the Unix epoch.
fn at(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms)
}

/// The occurrences `tick` admitted for schedule `name`, ascending.
fn admitted(tick: &Tick, name: &str) -> Vec<Timestamp> {
    tick.admitted
        .iter()
        .filter(|a| a.schedule == name)
        .map(|a| a.occurrence)
        .collect()
}

/// Every execution id claimable now on `b` (claimed: each at most once).
async fn claim_all<H: Harness>(ctx: &Ctx<H>, b: &H::Backend) -> Vec<String> {
    ctx.claim(b, 1000)
        .await
        .into_iter()
        .map(|l| l.execution_id.as_str().to_owned())
        .collect()
}

/// Two schedulers on two peers tick the same schedule, concurrently, minute after minute:
/// every occurrence is one execution (scheduled at the occurrence, with the schedule's
/// workflow and input), claimed once, and the cursor ends at the last occurrence.
pub async fn schedules_two_peers_admit_each_occurrence_once<H: Harness>(ctx: Arc<Ctx<H>>) {
    let a = scheduler(&*ctx);
    let b = Scheduler::new(shared::<H>(ctx.peer().await));
    let s = every_minute("every-minute", CatchUp::Last);
    assert_eq!(a.register(&s).await.expect("register"), Registered::Created);
    assert_eq!(
        b.register(&s).await.expect("register"),
        Registered::Unchanged
    );
    let start = ctx.now();
    let mut seen = Vec::new();
    for _ in 0..5 {
        let (ta, tb) = tokio::join!(a.tick(), b.tick());
        for t in [ta.expect("tick a"), tb.expect("tick b")] {
            seen.extend(admitted(&t, "every-minute"));
        }
        ctx.advance(MINUTE);
    }
    let want: Vec<Timestamp> = (0..5).map(|i| plus(start, MINUTE * i)).collect();
    let distinct: BTreeSet<_> = seen.iter().copied().collect();
    assert_eq!(distinct.into_iter().collect::<Vec<_>>(), want);
    let record = ctx.get(s.execution_id(want[2]).expect("id").as_str()).await;
    assert_eq!(record.due_at, Some(want[2]), "not_before is the occurrence");
    assert_eq!(record.workflow.as_ref().map(|w| w.as_str()), Some("tick"));
    assert_eq!(record.input, Some(json(r#"{"from":"schedule"}"#)));
    let mut claimed = claim_all(&*ctx, &ctx.backend()).await;
    claimed.extend(claim_all(&*ctx, &ctx.peer().await).await);
    claimed.sort();
    let mut ids: Vec<String> = want
        .iter()
        .map(|t| s.execution_id(*t).expect("id").as_str().to_owned())
        .collect();
    ids.sort();
    assert_eq!(
        claimed, ids,
        "each occurrence is one execution, claimed once"
    );
    let listed = a.schedules().await.expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].stored.through, Some(want[4]));
    assert_eq!(listed[0].stored.last_admitted, Some(want[4]));
}

/// After a gap of ten and a half minutes (grace one minute): `Last` admits the latest
/// missed occurrence and the on-time one, `All` every one (at most `max_per_tick` per
/// tick, the rest on the next ticks), `None` only the on-time one.
pub async fn schedules_catch_up_after_a_gap<H: Harness>(ctx: Arc<Ctx<H>>) {
    let sched = scheduler(&*ctx);
    let bounded = every_minute("all-bounded", CatchUp::All)
        .max_per_tick(4)
        .expect("bound");
    for s in [
        every_minute("last", CatchUp::Last),
        every_minute("all", CatchUp::All),
        every_minute("none", CatchUp::None),
        bounded,
    ] {
        sched.register(&s).await.expect("register");
    }
    let t0 = ctx.now();
    let first = sched.tick().await.expect("tick");
    assert_eq!(first.admitted.len(), 4, "each admits the occurrence at t0");
    ctx.set_clock(plus(t0, MINUTE * 10 + Duration::from_secs(30)));
    let after = sched.tick().await.expect("tick after the gap");
    let minutes =
        |ms: &[u32]| -> Vec<Timestamp> { ms.iter().map(|m| plus(t0, MINUTE * *m)).collect() };
    assert_eq!(admitted(&after, "last"), minutes(&[9, 10]));
    assert_eq!(
        admitted(&after, "all"),
        minutes(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    );
    assert_eq!(admitted(&after, "none"), minutes(&[10]));
    assert_eq!(admitted(&after, "all-bounded"), minutes(&[1, 2, 3, 4]));
    assert!(after.more, "the bounded schedule has more");
    for skipped in [1, 5, 8] {
        let id = format!("schedule:last:{}", plus(t0, MINUTE * skipped).as_millis());
        assert!(ctx.try_get(&id).await.is_none(), "{id} was skipped");
    }
    let again = sched.tick().await.expect("tick");
    assert_eq!(admitted(&again, "all-bounded"), minutes(&[5, 6, 7, 8]));
    let last = sched.tick().await.expect("tick");
    assert_eq!(admitted(&last, "all-bounded"), minutes(&[9, 10]));
    assert!(!last.more);
    assert!(last.admitted.iter().all(|a| a.schedule == "all-bounded"));
    assert!(sched.tick().await.expect("tick").admitted.is_empty());
}

/// Registers `name` (`30 2 * * *` in Europe/Berlin, catch-up `All`) at `registered`, ticks
/// at `tick`, and asserts the UTC instants it admitted.
async fn berlin_fires_at<H: Harness>(
    ctx: &Ctx<H>,
    name: &str,
    registered: i64,
    tick: i64,
    want: [i64; 3],
) {
    let sched = scheduler(ctx);
    let s = Schedule::new(name, "30 2 * * *", "Europe/Berlin")
        .expect("schedule")
        .catch_up(CatchUp::All);
    ctx.set_clock(at(registered));
    sched.register(&s).await.expect("register");
    ctx.set_clock(at(tick));
    let t = sched.tick().await.expect("tick");
    assert_eq!(admitted(&t, name), want.map(at).to_vec(), "{name}");
}

/// `30 2 * * *` in Europe/Berlin: 01:30Z in winter; on 2026-03-29 02:30 does not exist and
/// it fires at 03:00 CEST (01:00Z); then 00:30Z in summer; on 2026-10-25 02:30 happens
/// twice and it fires once, on the first pass (00:30Z).
pub async fn schedules_follow_dst_in_their_zone<H: Harness>(ctx: Arc<Ctx<H>>) {
    // Registered 2026-03-27T12:00Z, ticked 2026-03-30T12:00Z.
    let spring = [1_774_661_400_000, 1_774_746_000_000, 1_774_830_600_000];
    berlin_fires_at(
        &*ctx,
        "spring",
        1_774_612_800_000,
        1_774_872_000_000,
        spring,
    )
    .await;
    // Registered 2026-10-24T00:00Z, ticked 2026-10-26T12:00Z.
    let autumn = [1_792_801_800_000, 1_792_888_200_000, 1_792_978_200_000];
    berlin_fires_at(
        &*ctx,
        "autumn",
        1_792_800_000_000,
        1_793_016_000_000,
        autumn,
    )
    .await;
}

/// Each bad input is its typed error, and nothing is written: no store, no execution.
pub async fn schedules_bad_input_is_refused_and_writes_nothing<H: Harness>(ctx: Arc<Ctx<H>>) {
    let long = "n".repeat(lease_schedule::MAX_NAME_BYTES + 1);
    let refused = [
        Schedule::new("", "* * * * *", "UTC"),
        Schedule::new(&long, "* * * * *", "UTC"),
        Schedule::new("n", "61 * * * *", "UTC"),
        Schedule::new("n", "0 0 30 2 *", "UTC"),
        Schedule::new("n", "* * * * *", "Europe/Atlantis"),
        Schedule::new("n", "* * * * *", "UTC").and_then(|s| s.grace(Duration::from_secs(86_401))),
        Schedule::new("n", "* * * * *", "UTC").and_then(|s| s.max_per_tick(0)),
    ];
    let kinds: Vec<&str> = refused
        .iter()
        .map(|r| match r {
            Err(ScheduleError::InvalidName { .. }) => "name",
            Err(ScheduleError::InvalidCron { .. }) => "cron",
            Err(ScheduleError::NeverFires { .. }) => "never",
            Err(ScheduleError::UnknownZone { .. }) => "zone",
            Err(ScheduleError::InvalidOption { .. }) => "option",
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        ["name", "name", "cron", "never", "zone", "option", "option"]
    );
    // Fired only in 2020 (seconds to year): valid, but no occurrence after the backend clock.
    let past = Schedule::new("past", "0 0 0 1 1 * 2020", "UTC").expect("fired once");
    let sched = scheduler(&*ctx);
    let err = sched.register(&past).await.expect_err("never fires again");
    assert!(matches!(err, ScheduleError::NeverFires { .. }), "{err}");
    assert!(sched.schedules().await.expect("list").is_empty());
    ctx.advance(MINUTE);
    assert!(sched.tick().await.expect("tick").admitted.is_empty());
    // Neither the refusals nor a list or tick with nothing registered wrote the store.
    let store = lease_schedule::state::store_id();
    let key = StoreKey::new("past").expect("key");
    let read = ctx.backend().read_entry(&store, &key).await;
    assert!(
        matches!(read, Err(LeaseError::UnknownStore(_))),
        "the schedules store was created: {read:?}"
    );
    ctx.assert_nothing_claimable("a refused schedule admits nothing")
        .await;
}

/// A different definition under a registered name is `Conflict` from any peer and changes
/// nothing; an equal one is `Unchanged`; `replace` swaps it and keeps the cursor, so no
/// occurrence already settled is admitted again.
pub async fn schedules_conflicting_registration_is_refused_unless_replaced<H: Harness>(
    ctx: Arc<Ctx<H>>,
) {
    let a = scheduler(&*ctx);
    let b = Scheduler::new(shared::<H>(ctx.peer().await));
    let original = every_minute("report", CatchUp::Last);
    a.register(&original).await.expect("register");
    let t0 = ctx.now();
    assert_eq!(admitted(&a.tick().await.expect("tick"), "report"), vec![t0]);
    let hourly = Schedule::new("report", "0 * * * *", "UTC").expect("schedule");
    let err = b.register(&hourly).await.expect_err("conflict");
    assert!(
        matches!(err, ScheduleError::Conflict { ref name } if name == "report"),
        "{err}"
    );
    let listed = a.schedules().await.expect("list");
    assert_eq!(listed[0].stored.definition, *original.definition());
    assert_eq!(
        b.register(&original).await.expect("equal"),
        Registered::Unchanged
    );
    let every = Schedule::new("report", "* * * * *", "UTC").expect("schedule");
    assert_eq!(
        b.replace(&every).await.expect("replace"),
        Registered::Replaced
    );
    let listed = b.schedules().await.expect("list");
    assert_eq!(listed[0].stored.definition, *every.definition());
    assert_eq!(listed[0].stored.through, Some(t0), "the cursor is kept");
    ctx.advance(MINUTE);
    let next = a.tick().await.expect("tick");
    assert_eq!(admitted(&next, "report"), vec![plus(t0, MINUTE)]);
    let record = ctx
        .get(every.execution_id(plus(t0, MINUTE)).expect("id").as_str())
        .await;
    assert_eq!(
        record.workflow, None,
        "the replacement's definition admits it"
    );
}

/// A scheduler with a stale view never moves the cursor back.
pub async fn schedules_cursor_never_moves_back<H: Harness>(ctx: Arc<Ctx<H>>) {
    let sched = scheduler(&*ctx);
    let s = every_minute("steady", CatchUp::Last);
    sched.register(&s).await.expect("register");
    let t0 = ctx.now();
    ctx.advance(MINUTE * 3);
    sched.tick().await.expect("tick");
    let through = sched.schedules().await.expect("list")[0].stored.through;
    assert_eq!(through, Some(plus(t0, MINUTE * 3)));
    let stale = s.execution_id(t0).expect("id");
    lease_schedule::state::advance(&ctx.backend(), "steady", t0, Some(t0), &stale)
        .await
        .expect("stale advance");
    let after = &sched.schedules().await.expect("list")[0];
    assert_eq!(after.stored.through, through);
    assert_eq!(after.stored.last_admitted, through);
}

/// An occurrence admitted, completed and purged by retention is not admitted again: ticks
/// start after the stored cursor. (A backend without retention keeps it completed.)
pub async fn schedules_purged_occurrence_is_not_admitted_again<H: Harness>(ctx: Arc<Ctx<H>>) {
    let sched = scheduler(&*ctx);
    let s = every_minute("purged", CatchUp::All);
    sched.register(&s).await.expect("register");
    let t0 = ctx.now();
    sched.tick().await.expect("tick");
    let id = s.execution_id(t0).expect("id");
    let lease = ctx.claim_one(id.as_str()).await;
    let done = WorkflowRunOutcome::Completed(json("1"));
    let acked = ctx.backend().acknowledge(&lease, &done).await.expect("ack");
    assert!(!acked.is_lost());
    ctx.advance(MINUTE);
    if ctx.caps().retention {
        let purged = ctx
            .backend()
            .purge_terminal(ctx.now(), 10)
            .await
            .expect("purge");
        assert_eq!(purged.ids, vec![id.clone()]);
    }
    let next = sched.tick().await.expect("tick");
    assert_eq!(admitted(&next, "purged"), vec![plus(t0, MINUTE)]);
    let record = ctx.backend().get(&id).await.expect("get");
    if ctx.caps().retention {
        assert!(record.is_none(), "the purged occurrence was admitted again");
    } else {
        assert!(record.is_some_and(|r| r.status.is_terminal()));
    }
}
