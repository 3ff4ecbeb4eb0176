//! The RFC 002 story on embedded SQLite, in real time: worker A claims order-42, saves
//! "load", then freezes while charging the card; its 300 ms lease runs out; worker B, on
//! its own connection, reclaims order-42 with a higher fencing token, charges and saves
//! "charge", and acknowledges. When A wakes up, its save of "charge" and its acknowledgement
//! are refused (`Fenced::Lost`): the current holder's saves count, not the first ones.
//!
//! ```text
//! cargo run -p execution-leases --example timeline
//! ```
//!
//! `tests/timeline.rs` runs the same [`scenario`] and asserts the refusals.

use lease_core::ExecutionClientExt;
use std::error::Error;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use lease::sqlite::{SqliteBackend, SqliteConfig};
use lease::{
    Acknowledged, Admission, ClaimRequest, ExecutionClient, ExecutionId, ExecutionLease,
    ExecutionRecord, Fenced, FencingToken, HeapClient, HeapRecord, Json, RedeliveryPolicy, StepKey,
    StepWrite, Timestamp, WorkflowRunOutcome,
};

/// The scenario's error type.
pub type BoxError = Box<dyn Error + Send + Sync>;

/// How long each claim lasts: short, so the story runs in well under a second.
pub const LEASE: Duration = Duration::from_millis(300);
/// Redelivery delay after an unacknowledged delivery (A's expired one): 100 ms.
pub const REDELIVERY_BASE: Duration = Duration::from_millis(100);
/// How often worker B polls `claim_due`.
const POLL: Duration = Duration::from_millis(20);
/// Worker B gives up if it cannot claim order-42 within this time.
const DEADLINE: Duration = Duration::from_secs(30);

/// What the scenario observed.
#[derive(Debug)]
pub struct Report {
    /// Worker A's lease.
    pub lease_a: ExecutionLease,
    /// Worker B's lease.
    pub lease_b: ExecutionLease,
    /// A's save of "charge" after B took over.
    pub stale_write: Fenced<HeapRecord>,
    /// A's acknowledgement after B took over.
    pub stale_ack: Fenced<Acknowledged>,
    /// The execution at the end.
    pub record: ExecutionRecord,
    /// Every step record at the end.
    pub steps: Vec<HeapRecord>,
}

/// Prints timeline lines, timed by the backend's clock from the start of the story.
struct Timeline<'a> {
    origin: Timestamp,
    out: &'a mut dyn Write,
}

impl Timeline<'_> {
    fn at(&self, t: Timestamp) -> i64 {
        t.as_millis() - self.origin.as_millis()
    }

    fn event(&mut self, t: Timestamp, who: &str, what: &str, result: &str) -> Result<(), BoxError> {
        let ms = self.at(t);
        writeln!(self.out, "{ms:>5} ms  {who:<9}  {what:<28}  {result}")?;
        Ok(())
    }

    fn note(&mut self, text: &str) -> Result<(), BoxError> {
        writeln!(self.out, "{:>5}     {:<9}  {text}", "", "")?;
        Ok(())
    }
}

fn step(key: &str, json: &str) -> Result<StepWrite, BoxError> {
    Ok(StepWrite {
        step_key: StepKey::new(key)?,
        step_attempt: 1,
        done: true,
        response: Json::parse("step response", json)?,
    })
}

fn verdict<T>(result: &Fenced<T>, accepted: &str) -> String {
    match result {
        Fenced::Accepted(_) => accepted.to_owned(),
        Fenced::Lost => "REFUSED: Lost".to_owned(),
    }
}

/// Runs the story on a SQLite file at `db`, printing the timeline to `out`.
pub async fn scenario(db: &Path, out: &mut dyn Write) -> Result<Report, BoxError> {
    let policy = RedeliveryPolicy::new(REDELIVERY_BASE, 2, Duration::from_secs(1))?;
    let worker_a = SqliteBackend::open(SqliteConfig::file(db).policy(policy)).await?;
    let worker_b = worker_a.peer().await?;
    let id = ExecutionId::new("order-42")?;
    print_header(db, out)?;
    let origin = worker_a.now().await?;
    let mut tl = Timeline { origin, out };

    let lease_a = a_admits_claims_and_saves_load(&worker_a, &id, &mut tl).await?;
    let lease_b = b_reclaims_after_a_expires(&worker_b, &id, &lease_a, &mut tl).await?;
    b_replays_load_charges_and_acknowledges(&worker_b, &id, &lease_b, &mut tl).await?;
    let (stale_write, stale_ack) = a_wakes_up_and_is_refused(&worker_a, &lease_a, &mut tl).await?;

    let record = worker_b.get(&id).await?.ok_or("order-42 vanished")?;
    let steps = worker_b.list_steps(&id).await?;
    print_final_records(tl.out, &record, &steps, &lease_b)?;
    Ok(Report {
        lease_a,
        lease_b,
        stale_write,
        stale_ack,
        record,
        steps,
    })
}

/// The lines before the timeline: where the story runs and how long leases last.
fn print_header(db: &Path, out: &mut dyn Write) -> Result<(), BoxError> {
    let lease_ms = LEASE.as_millis();
    writeln!(
        out,
        "order-42 on embedded SQLite ({}), two connections:",
        db.display()
    )?;
    writeln!(
        out,
        "worker A and worker B (a peer). Leases last {lease_ms} ms; times are the backend clock's."
    )?;
    writeln!(out)?;
    Ok(())
}

/// The shop admits order-42; worker A claims it and saves step "load", then freezes.
async fn a_admits_claims_and_saves_load(
    worker_a: &SqliteBackend,
    id: &ExecutionId,
    tl: &mut Timeline<'_>,
) -> Result<ExecutionLease, BoxError> {
    let admitted = worker_a.admit(&Admission::new(id.clone())).await?;
    tl.event(
        tl.origin,
        "shop",
        "admit order-42",
        &format!("status {}", admitted.status),
    )?;

    let now = worker_a.now().await?;
    let lease_a = worker_a
        .claim_due(ClaimRequest {
            now,
            limit: 1,
            duration: LEASE,
        })
        .await?
        .pop()
        .ok_or("worker A found nothing to claim")?;
    let expires = tl.at(lease_a.expires_at);
    tl.event(
        now,
        "worker A",
        "claims order-42",
        &format!("token {}, lease until {expires} ms", lease_a.token),
    )?;

    let load = step("load", r#"{"order":42,"total_cents":1999}"#)?;
    let saved = worker_a.write_step(&lease_a, &load).await?;
    let t = worker_a.now().await?;
    tl.event(
        t,
        "worker A",
        "write_step \"load\"",
        &verdict(&saved, &format!("saved with token {}", lease_a.token)),
    )?;
    tl.note("worker A calls the card provider for \"charge\", then its server freezes")?;
    Ok(lease_a)
}

/// Worker B polls `claim_due` until A's lease runs out and it claims order-42 itself.
async fn b_reclaims_after_a_expires(
    worker_b: &SqliteBackend,
    id: &ExecutionId,
    lease_a: &ExecutionLease,
    tl: &mut Timeline<'_>,
) -> Result<ExecutionLease, BoxError> {
    let started = Instant::now();
    let mut empty_polls = 0u32;
    let lease_b = loop {
        let now = worker_b.now().await?;
        let request = ClaimRequest {
            now,
            limit: 1,
            duration: LEASE,
        };
        if let Some(lease) = worker_b.claim_due(request).await?.pop() {
            let note = format!(
                "token {} > {} (after {empty_polls} empty polls)",
                lease.token, lease_a.token
            );
            tl.event(now, "worker B", "claim_due: claims order-42", &note)?;
            break lease;
        }
        if empty_polls == 0 {
            tl.event(now, "worker B", "claim_due", "nothing: A's lease is live")?;
        }
        empty_polls += 1;
        if started.elapsed() > DEADLINE {
            return Err(format!("worker B could not claim order-42 within {DEADLINE:?}").into());
        }
        tokio::time::sleep(POLL).await;
    };
    let seen = worker_b.get(id).await?.ok_or("order-42 vanished")?;
    tl.note(&format!(
        "(A's lease ran out at {} ms; its delivery counts as unacknowledged: {}; \
         redelivery delay {} ms)",
        tl.at(lease_a.expires_at),
        seen.unacknowledged_deliveries,
        REDELIVERY_BASE.as_millis()
    ))?;
    Ok(lease_b)
}

/// Worker B skips "load" (saved by A: the replay rule), charges, saves "charge" and
/// acknowledges the run as completed.
async fn b_replays_load_charges_and_acknowledges(
    worker_b: &SqliteBackend,
    id: &ExecutionId,
    lease_b: &ExecutionLease,
    tl: &mut Timeline<'_>,
) -> Result<(), BoxError> {
    let load_key = StepKey::new("load")?;
    let t = worker_b.now().await?;
    match worker_b.read_step(id, &load_key, 1).await? {
        Some(r) => tl.event(
            t,
            "worker B",
            "step \"load\"",
            &format!("saved by token {}: skipped (replay rule)", r.token),
        )?,
        None => tl.event(t, "worker B", "step \"load\"", "no saved result: runs it")?,
    }
    let charge_b = step("charge", r#"{"receipt":"ch_B"}"#)?;
    let saved_b = worker_b.write_step(lease_b, &charge_b).await?;
    let t = worker_b.now().await?;
    tl.event(
        t,
        "worker B",
        "charges, write_step \"charge\"",
        &verdict(&saved_b, &format!("saved with token {}", lease_b.token)),
    )?;

    let outcome = WorkflowRunOutcome::Completed(Json::parse("outcome", r#"{"receipt":"ch_B"}"#)?);
    let ack_b = worker_b.acknowledge(lease_b, &outcome).await?;
    let t = worker_b.now().await?;
    tl.event(
        t,
        "worker B",
        "acknowledge completed",
        &verdict(&ack_b, "accepted: order-42 completed"),
    )?;
    Ok(())
}

/// Worker A wakes up with its old lease, saves "charge" and acknowledges: both are refused.
async fn a_wakes_up_and_is_refused(
    worker_a: &SqliteBackend,
    lease_a: &ExecutionLease,
    tl: &mut Timeline<'_>,
) -> Result<(Fenced<HeapRecord>, Fenced<Acknowledged>), BoxError> {
    tl.note("worker A's server wakes up; A still holds its old lease and carries on")?;
    let charge_a = step("charge", r#"{"receipt":"ch_A"}"#)?;
    let stale_write = worker_a.write_step(lease_a, &charge_a).await?;
    let t = worker_a.now().await?;
    tl.event(
        t,
        "worker A",
        "write_step \"charge\"",
        &format!(
            "{} (token {} is stale)",
            verdict(&stale_write, "ACCEPTED (fencing is broken!)"),
            lease_a.token
        ),
    )?;
    let outcome_a = WorkflowRunOutcome::Completed(Json::parse("outcome", r#"{"receipt":"ch_A"}"#)?);
    let stale_ack = worker_a.acknowledge(lease_a, &outcome_a).await?;
    let t = worker_a.now().await?;
    tl.event(
        t,
        "worker A",
        "acknowledge completed",
        &format!(
            "{} (nothing changed)",
            verdict(&stale_ack, "ACCEPTED (fencing is broken!)")
        ),
    )?;
    Ok((stale_write, stale_ack))
}

/// The execution and its step records at the end, and what the token did and did not do.
fn print_final_records(
    out: &mut dyn Write,
    record: &ExecutionRecord,
    steps: &[HeapRecord],
    lease_b: &ExecutionLease,
) -> Result<(), BoxError> {
    writeln!(out)?;
    writeln!(out, "Final records:")?;
    let outcome = match &record.outcome {
        Some(o) => format!("{} {}", o.status(), o.text()),
        None => "none".to_owned(),
    };
    writeln!(
        out,
        "  execution order-42  status {}, token {}, unacknowledged deliveries {}, outcome {outcome}",
        record.status, record.token, record.unacknowledged_deliveries
    )?;
    for r in steps {
        writeln!(
            out,
            "  step {:<14} attempt {}, saved by token {}: {}",
            format!("\"{}\"", r.step_key),
            r.step_attempt,
            r.token,
            r.response
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "Only token {} saved \"charge\". The token cannot undo A's call to the card provider \
         (RFC 002's stated limit; RFC 004 covers effects), but the records stay consistent.",
        lease_b.token
    )?;
    Ok(())
}

/// True when the story went as RFC 002 says: both stale writes refused, B's tokens higher.
pub fn fenced_as_specified(report: &Report) -> bool {
    report.stale_write.is_lost()
        && report.stale_ack.is_lost()
        && report.lease_b.token > report.lease_a.token
        && report.lease_a.token > FencingToken::NONE
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let dir = tempfile::tempdir()?;
    let report = scenario(&dir.path().join("timeline.db"), &mut std::io::stdout()).await?;
    if !fenced_as_specified(&report) {
        return Err("a stale write was accepted".into());
    }
    Ok(())
}
