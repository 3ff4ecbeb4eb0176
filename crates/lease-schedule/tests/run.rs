//! `Scheduler::run` on the in-memory backend over a manual clock: it admits what is due
//! without being asked to tick, keeps admitting as the clock moves, and stops on its token.

use std::sync::Arc;
use std::time::Duration;

use lease_core::{ManualClock, MemoryBackend, SharedBackend};
use lease_schedule::{CancellationToken, Schedule, Scheduler};

/// Polls (with a deadline, no sleep) until `id` exists.
async fn until_admitted(backend: &SharedBackend, schedule: &Schedule, at: lease_core::Timestamp) {
    let id = schedule.execution_id(at).expect("id");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while backend.get(&id).await.expect("get").is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{id} never admitted"
        );
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn run_admits_due_occurrences_until_cancelled() {
    let clock = ManualClock::starting_now();
    let backend: SharedBackend = Arc::new(MemoryBackend::with_clock(Arc::new(clock.clone())));
    let s = Schedule::new("run", "* * * * *", "UTC").expect("schedule");
    // A short poll: the manual clock moves without waking the sleeping loop.
    let scheduler = Scheduler::new(backend.clone()).poll_interval(Duration::from_millis(5));
    scheduler.register(&s).await.expect("register");
    let t0 = backend.now().await.expect("now");
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (scheduler, cancel) = (scheduler.clone(), cancel.clone());
        async move { scheduler.run(cancel).await }
    });
    until_admitted(&backend, &s, t0).await;
    clock.advance(Duration::from_secs(60));
    until_admitted(&backend, &s, t0.saturating_add(Duration::from_secs(60))).await;
    cancel.cancel();
    let result = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("run stops on its token")
        .expect("no panic");
    assert!(result.is_ok(), "{result:?}");
    let listed = scheduler.schedules().await.expect("list");
    assert_eq!(
        listed[0].stored.through,
        Some(t0.saturating_add(Duration::from_secs(60)))
    );
}

/// A schedule whose input times its catch-up exceeds what one `admit_batch` carries
/// (`MAX_BATCH_PAYLOAD_BYTES`): the tick admits in several batches, every occurrence once.
#[tokio::test]
async fn a_large_input_catch_up_is_admitted_in_batches() {
    use lease_core::limits::{MAX_BATCH_PAYLOAD_BYTES, MAX_PAYLOAD_BYTES};
    let clock = ManualClock::starting_now();
    let backend: SharedBackend = Arc::new(MemoryBackend::with_clock(Arc::new(clock.clone())));
    // Room for the rest of the definition in its store entry (also at most 1 MiB).
    let text = format!("\"{}\"", "x".repeat(MAX_PAYLOAD_BYTES - 4096));
    let input = lease_core::Json::parse("input", &text).expect("large input");
    let due = MAX_BATCH_PAYLOAD_BYTES / text.len() + 2;
    let s = Schedule::new("large", "* * * * *", "UTC")
        .expect("schedule")
        .input(input)
        .catch_up(lease_schedule::CatchUp::All)
        .max_per_tick(due)
        .expect("max per tick");
    let scheduler = Scheduler::new(backend.clone());
    scheduler.register(&s).await.expect("register");
    clock.advance(Duration::from_secs(60 * (due as u64 + 5)));
    let tick = scheduler.tick().await.expect("tick");
    assert_eq!(tick.admitted.len(), due, "{:?}", tick.more);
    for admitted in &tick.admitted {
        let record = backend.get(&admitted.execution_id).await.expect("get");
        assert!(record.is_some(), "{} not admitted", admitted.execution_id);
    }
}
