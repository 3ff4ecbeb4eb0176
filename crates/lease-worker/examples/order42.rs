//! RFC 002's order-42 story, told live by real worker processes with short leases.
//!
//! ```text
//! cargo run -p lease-worker --example order42                 # embedded SQLite (a temp file)
//! cargo run -p lease-worker --example order42 -- sqlite:/tmp/o.db
//! ```
//!
//! Three acts, each on its own namespace of one shared backend, each with worker processes
//! (this program re-executed as `order42 worker ...`) that claim with 3 s leases renewed
//! every second:
//!
//! 1. A slow charge (5 s, longer than the lease) keeps its lease by renewing: one claim,
//!    one charge.
//! 2. A worker crashes (SIGKILL) holding the lease; another worker takes order-42 soon
//!    after the lease runs out, skips the recorded step and finishes.
//! 3. A worker's server freezes (SIGSTOP) in its charge step, after the payment provider
//!    charged the card and before the worker settled the charge; its lease runs out, another
//!    worker claims order-42 with a higher token, calls the provider again and finishes; the
//!    frozen worker wakes (SIGCONT), has its charge step refused (Lost), and stops. Both
//!    workers called the provider with the same idempotency key, the charge step's effect id,
//!    so the provider charged once. On SQLite and PostgreSQL the charge step
//!    writes a `charges` row with its step record in one fenced `step_in_tx` transaction, so
//!    the act also ends with exactly one `charges` row for order 42, the new holder's.
//!
//! The payment provider is a simulated card processor outside the lease database (a
//! directory of files per act, `src/provider.rs`) that honours idempotency keys, as real
//! ones do; the demo reads it back. It prints each act's timeline and final records (the
//! provider's calls and charges, the `charges` rows), and exits non-zero if the story did
//! not happen as told.

#[path = "../src/args.rs"]
#[allow(dead_code)]
mod args;
#[path = "../src/backend.rs"]
#[allow(dead_code)]
mod backend;
#[path = "../src/charges.rs"]
mod charges;
#[path = "../src/cluster.rs"]
#[allow(dead_code)]
mod cluster;
#[path = "../src/events.rs"]
mod events;
#[path = "../src/process.rs"]
mod process;
#[path = "../src/provider.rs"]
mod provider;
#[path = "../src/workflow.rs"]
mod workflow;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use lease::{Admission, ExecutionId, Json, SharedBackend};
use serde_json::json;

use crate::args::WorkerArgs;
use crate::backend::Opened;
use crate::charges::ChargeRow;
use crate::cluster::{Cluster, Event};
use crate::provider::Provider;

type DemoResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const LEASE: Duration = Duration::from_secs(3);
const RENEW: Duration = Duration::from_secs(1);
const REDELIVERY: Duration = Duration::from_millis(500);
/// How long any one thing in an act may take before the demo gives up.
const PATIENCE: Duration = Duration::from_secs(30);

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1);
    let first = argv.next();
    if first.as_deref() == Some("worker") {
        return process::main_with(argv);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("order42: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(demo(first)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("\norder42: the story did not go as told: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn demo(url: Option<String>) -> DemoResult<()> {
    let started = Instant::now();
    let dir = tempfile::tempdir()?;
    let url = match url {
        Some(url) => url,
        None => format!("sqlite:{}", dir.path().join("order42.db").display()),
    };
    let exe = std::env::current_exe()?;
    let run = format!("order42_{}", std::process::id());
    println!(
        "RFC 002, order 42, told live by worker processes on {}",
        lease::redact_url(&url)
    );
    println!(
        "Leases last {} s and are renewed every {} s; a redelivery waits {} ms.",
        LEASE.as_secs(),
        RENEW.as_secs(),
        REDELIVERY.as_millis()
    );

    let mut result = Ok(());
    let mut has_charges = false;
    for act in 1..=3 {
        let stage = Stage {
            url: url.clone(),
            namespace: format!("{run}_act{act}"),
            exe: exe.clone(),
            provider: Provider::open(dir.path().join(format!("provider_act{act}")))?,
        };
        let outcome = match act {
            1 => act_slow_charge(&stage).await.map(|()| false),
            2 => act_crash(&stage).await.map(|()| false),
            _ => act_freeze(&stage).await,
        };
        has_charges = matches!(outcome, Ok(true));
        backend::cleanup(&url, &stage.namespace).await?;
        if let Err(e) = outcome {
            result = Err(e);
            break;
        }
    }
    result?;
    println!(
        "\nThe lease decided when another worker could take over; the token decided whose saves \
         counted;\nthe effect id, passed to the provider as its idempotency key, made its charge \
         happen once{}.\nAll three acts ran as told in {:.1} s.",
        if has_charges {
            ";\nstep_in_tx kept the application's charges row and its step record together"
        } else {
            ""
        },
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Where one act plays.
struct Stage {
    url: String,
    namespace: String,
    exe: std::path::PathBuf,
    /// The act's payment provider (its own directory).
    provider: Provider,
}

impl Stage {
    fn worker(&self, name: &str) -> WorkerArgs {
        WorkerArgs {
            url: self.url.clone(),
            namespace: self.namespace.clone(),
            name: name.to_owned(),
            concurrency: 4,
            lease: LEASE,
            renew_every: RENEW,
            poll: Duration::from_millis(50),
            redelivery_base: REDELIVERY,
            provider: self.provider.dir().to_path_buf(),
        }
    }

    async fn backend(&self) -> DemoResult<Opened> {
        let opened =
            backend::open_store(&self.url, &self.namespace, backend::policy(REDELIVERY)?).await?;
        // The workers create it too; created here, it can be read before any worker wrote.
        opened.store.create_charges().await?;
        Ok(opened)
    }

    fn cluster(&self) -> Cluster {
        Cluster::new(&self.exe, &["worker"])
    }
}

fn order_id() -> DemoResult<ExecutionId> {
    Ok(ExecutionId::new("order-42")?)
}

async fn admit(backend: &SharedBackend, input: serde_json::Value) -> DemoResult<()> {
    let admission = Admission::new(order_id()?)
        .workflow(lease::WorkflowName::new("charge-order")?)
        .input(Json::from_value("input", &input)?);
    backend.admit(&admission).await?;
    Ok(())
}

fn check(ok: bool, what: &str) -> DemoResult<()> {
    if ok {
        println!("  ok: {what}");
        Ok(())
    } else {
        Err(what.to_owned().into())
    }
}

fn is(e: &Event, worker: &str, msg: &str) -> bool {
    e.worker == worker && e.msg() == msg
}

// ---------------------------------------------------------------------------------------
// Act 1

async fn act_slow_charge(stage: &Stage) -> DemoResult<()> {
    {
        heading(
            "Act 1: the payment provider is slow",
            "Worker A's charge takes 5 s, longer than its 3 s lease. A keeps renewing, so nobody \
             else may take order-42: one claim, one charge.",
        );
        let backend = stage.backend().await?;
        let mut cluster = stage.cluster();
        let t0 = events::wall_ms();
        cluster.spawn(&stage.worker("A"))?;
        admit(&backend.shared, json!({ "order": 42, "charge_ms": 5000 })).await?;
        cluster.note("order 42 comes in: the workflow run order-42 is admitted");
        cluster.wait_event(PATIENCE, |e| is(e, "A", "claim"))?;
        cluster.spawn(&stage.worker("B"))?;
        cluster.note("worker B joins; order-42 is leased, so B cannot take it");
        cluster.wait_event(PATIENCE, |e| e.msg() == "acknowledge")?;
        cluster.stop_all()?;
        let events = cluster.events();
        timeline(&events, t0);
        let records = final_records(&backend).await?;
        let claims = count(&events, |e| e.msg() == "claim");
        let renewals = count(&events, |e| e.msg() == "renew");
        let provider = Tally::of(&stage.provider)?;
        println!("  claims {claims}, renewals {renewals}; {provider}");
        check(claims == 1, "one claim for the whole slow delivery")?;
        check(
            renewals >= 2,
            "the lease was renewed past its original expiry",
        )?;
        check(
            provider.is(1, 1),
            "the provider was called once and charged once",
        )?;
        check(records.one_charge_row(), "one charges row")?;
        check(records.completed, "order-42 completed")?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Act 2

async fn act_crash(stage: &Stage) -> DemoResult<()> {
    {
        heading(
            "Act 2: a worker crashes",
            "Worker A loads order-42, then crashes (SIGKILL) during the fraud review, holding \
             the lease. Nothing renews it, so it runs out after 3 s and worker B takes over.",
        );
        let backend = stage.backend().await?;
        let mut cluster = stage.cluster();
        let t0 = events::wall_ms();
        cluster.spawn(&stage.worker("A"))?;
        admit(
            &backend.shared,
            json!({ "order": 42, "review_ms": 1500, "charge_ms": 300 }),
        )
        .await?;
        cluster.note("order 42 comes in: the workflow run order-42 is admitted");
        cluster.wait_event(PATIENCE, |e| is(e, "A", "reviewing"))?;
        cluster.kill("A")?;
        cluster.note("A crashes (SIGKILL) while holding the lease");
        cluster.spawn(&stage.worker("B"))?;
        cluster.wait_event(PATIENCE, |e| is(e, "B", "acknowledge"))?;
        cluster.stop_all()?;
        let events = cluster.events();
        timeline(&events, t0);
        let records = final_records(&backend).await?;
        let a = last_expiry(&events, "A").ok_or("A never claimed")?;
        let b = events
            .iter()
            .find(|e| is(e, "B", "claim"))
            .ok_or("B never claimed")?;
        let b_claimed = claimed_at(b);
        println!(
            "  A's lease ran out at +{}; B claimed at +{} ({} ms later, the redelivery delay)",
            secs(a.1 - t0),
            secs(b_claimed - t0),
            b_claimed - a.1
        );
        check(b.token() > Some(a.0), "B's token is higher than A's")?;
        check(b_claimed >= a.1, "B claimed only after A's lease ran out")?;
        check(
            events.iter().any(|e| {
                is(e, "B", "step") && e.str("step") == "load" && e.json["replayed"] == true
            }),
            "B skipped the load step A had recorded",
        )?;
        let provider = Tally::of(&stage.provider)?;
        println!("  {provider}");
        check(
            provider.is(1, 1),
            "the provider was called once (by B) and charged once",
        )?;
        check(records.one_charge_row(), "one charges row")?;
        check(records.completed, "order-42 completed")?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Act 3

/// `Ok(true)` when the backend has the `charges` table and it was checked.
async fn act_freeze(stage: &Stage) -> DemoResult<bool> {
    {
        let backend = stage.backend().await?;
        // Where A freezes: after the provider charged the card, while A waits for the
        // provider's response (a synchronous call), so before A settles the charge's effect
        // and before its charge transaction. B then finds the effect begun and not settled,
        // and calls the provider itself: both workers call it, with the same key.
        let input = json!({ "order": 42, "charge_ms": 200, "receipt_ms": 1000 });
        let blurb = if backend.store.has_charges() {
            "Worker A's call has reached the payment provider, which charged the card, when \
             A's server freezes (SIGSTOP) before A heard back. Its lease runs out; worker B \
             claims order-42 with a higher token, calls the provider for the same charge, and \
             commits its charges row and receipt in one transaction. Then A wakes (SIGCONT) \
             and tries to go on with its charge step."
        } else {
            "Worker A's call has reached the payment provider, which charged the card, when \
             A's server freezes (SIGSTOP) before A heard back. Its lease runs out; worker B \
             claims order-42 with a higher token, calls the provider for the same charge, and \
             saves its receipt. Then A wakes (SIGCONT) and tries to go on with its charge step."
        };
        heading("Act 3: a server freezes", blurb);
        let mut cluster = stage.cluster();
        let t0 = events::wall_ms();
        cluster.spawn(&stage.worker("A"))?;
        admit(&backend.shared, input).await?;
        cluster.note("order 42 comes in: the workflow run order-42 is admitted");
        cluster.wait_event(PATIENCE, |e| is(e, "A", "charged"))?;
        cluster.freeze("A")?;
        cluster.note("A's server freezes (SIGSTOP) before A has the provider's response");
        cluster.spawn(&stage.worker("B"))?;
        cluster.wait_event(PATIENCE, |e| is(e, "B", "acknowledge"))?;
        cluster.note("A's server wakes up (SIGCONT)");
        cluster.resume("A")?;
        cluster.wait_event(PATIENCE, |e| is(e, "A", "done") || is(e, "A", "stopped"))?;
        cluster.stop_all()?;
        let events = cluster.events();
        timeline(&events, t0);
        let records = final_records(&backend).await?;
        let provider = Tally::of(&stage.provider)?;
        provider.print();
        let a = events
            .iter()
            .find(|e| is(e, "A", "claim"))
            .and_then(Event::token)
            .ok_or("A never claimed")?;
        let b = events
            .iter()
            .find(|e| is(e, "B", "claim"))
            .and_then(Event::token)
            .ok_or("B never claimed")?;
        println!("  A held token #{a}; B took over with token #{b}");
        check(b > a, "B's token is higher than A's")?;
        let refused = events.iter().any(|e| is(e, "A", "refused"));
        let lost_on_renewal = events
            .iter()
            .any(|e| e.worker == "A" && e.msg().starts_with("lost on renewal"));
        check(
            refused || lost_on_renewal,
            "A's charge step was refused (Lost) after it woke",
        )?;
        check(
            !events.iter().any(|e| is(e, "A", "acknowledge")),
            "A did not acknowledge; it stopped",
        )?;
        check(
            records.charge_token == Some(b),
            "the one recorded receipt is B's save (token decided whose save counts)",
        )?;
        check(records.completed, "order-42 completed")?;
        check(
            provider.callers == ["A", "B"],
            "both workers called the provider, A first, with the same idempotency key",
        )?;
        check(
            provider.is(2, 1),
            "the provider charged once: B's call returned A's charge",
        )?;
        check(
            records.charge_receipt.is_some() && records.charge_receipt == provider.receipt,
            "the recorded receipt is the provider's one charge",
        )?;
        if let Some(rows) = &records.charges {
            let tokens: Vec<u64> = rows.iter().map(|r| r.token).collect();
            check(
                tokens == [b],
                "exactly one charges row for order 42, and it is B's",
            )?;
            check(
                !events.iter().any(|e| is(e, "A", "charge row inserted")),
                "A never inserted its row: its charge step was refused before its transaction",
            )?;
        }
        println!("\n  What made it so:");
        made_so(
            "lease",
            "when B could take over: once A, frozen, stopped renewing and its lease ran out.",
        );
        made_so(
            "token",
            &format!("whose saves count: B's #{b}; A's writes with #{a} return Lost."),
        );
        made_so(
            "effect ID",
            "the provider's deduplication: both workers passed the charge step's effect id as \
             the idempotency key, so B's call got A's charge back instead of a second one.",
        );
        if records.charges.is_some() {
            made_so(
                "step_in_tx",
                "the charges row and the charge step's record commit together, only while the \
                 token is current, or not at all: A's never did; B's did.",
            );
        }
        println!("\n  {provider}: the customer paid once.");
        Ok(records.charges.is_some())
    }
}

/// What the act's payment provider says: its calls and its charges.
struct Tally {
    calls: usize,
    charges: usize,
    /// The callers, in call order.
    callers: Vec<String>,
    /// The receipt of the first charge.
    receipt: Option<String>,
    lines: Vec<String>,
}

impl Tally {
    fn of(provider: &Provider) -> DemoResult<Tally> {
        let calls = provider.calls()?;
        let charges = provider.charges()?;
        let mut lines: Vec<String> = calls
            .iter()
            .map(|c| {
                format!(
                    "call by {} (token #{}, key {}): {}",
                    c.caller,
                    c.token,
                    c.key,
                    if c.new {
                        "charged the card"
                    } else {
                        "key seen before: returned the earlier charge, charged nothing"
                    }
                )
            })
            .collect();
        lines.extend(charges.iter().map(|c| {
            format!(
                "charge: order {}, {} cents, receipt {}",
                c.order,
                c.cents,
                c.response["receipt"].as_str().unwrap_or_default()
            )
        }));
        Ok(Tally {
            calls: calls.len(),
            charges: charges.len(),
            callers: calls.into_iter().map(|c| c.caller).collect(),
            receipt: charges
                .first()
                .and_then(|c| c.response["receipt"].as_str().map(str::to_owned)),
            lines,
        })
    }

    fn is(&self, calls: usize, charges: usize) -> bool {
        self.calls == calls && self.charges == charges
    }

    fn print(&self) {
        println!("  the payment provider (outside the lease database):");
        for line in &self.lines {
            println!("    {line}");
        }
        println!();
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "provider: {}, {}",
            plural(self.calls, "call"),
            plural(self.charges, "charge")
        )
    }
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// One line of "What made it so": the part, then its job, wrapped under itself.
fn made_so(part: &str, job: &str) {
    let text = wrap(job, 72, "                ");
    println!("    {part:<12}{}", text.trim_start());
}

// ---------------------------------------------------------------------------------------
// Printing

fn heading(title: &str, blurb: &str) {
    println!("\n== {title} ==");
    println!("{}", wrap(blurb, 88, ""));
    println!();
}

fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            out.push_str(indent);
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(indent);
    out.push_str(&line);
    out
}

fn secs(ms: i64) -> String {
    format!("{:.3}s", ms as f64 / 1000.0)
}

fn count(events: &[Event], f: impl Fn(&Event) -> bool) -> usize {
    events.iter().filter(|e| f(e)).count()
}

fn claimed_at(e: &Event) -> i64 {
    e.int("expires_at").unwrap_or(0) - LEASE.as_millis() as i64
}

/// The token and last known lease expiry of `worker`'s (only) delivery.
fn last_expiry(events: &[Event], worker: &str) -> Option<(u64, i64)> {
    let token = events
        .iter()
        .find(|e| is(e, worker, "claim"))
        .and_then(Event::token)?;
    let expiry = events
        .iter()
        .filter(|e| e.worker == worker && e.token() == Some(token))
        .filter(|e| matches!(e.msg(), "claim" | "renew"))
        .filter_map(|e| e.int("expires_at"))
        .max()?;
    Some((token, expiry))
}

/// One line per event worth telling, in time order.
fn timeline(events: &[Event], t0: i64) {
    let mut sorted: Vec<&Event> = events.iter().collect();
    sorted.sort_by_key(|e| e.ts());
    for e in sorted {
        let Some(text) = describe(e, t0) else {
            continue;
        };
        let who = if e.worker == "demo" { "--" } else { &e.worker };
        println!("  +{:>7}  {who:<2}  {text}", secs(e.ts() - t0));
    }
}

fn describe(e: &Event, t0: i64) -> Option<String> {
    let token = e.token().map(|t| format!("#{t}")).unwrap_or_default();
    let until = |e: &Event| {
        e.int("expires_at")
            .map(|x| secs(x - t0))
            .unwrap_or_default()
    };
    Some(match e.msg() {
        "note" => e.str("text").to_owned(),
        "ready" => format!("worker starts (pid {})", e.json["pid"]),
        "claim" => format!(
            "claims {} with token {token}; lease until +{}",
            e.execution(),
            until(e)
        ),
        "renew" => format!("renews its lease (token {token}) until +{}", until(e)),
        "step" => {
            if e.json["replayed"] == true {
                format!(
                    "step {}: already recorded, skipped (replay rule)",
                    e.str("step")
                )
            } else {
                format!(
                    "step {}: ran, result saved with token {token}",
                    e.str("step")
                )
            }
        }
        "reviewing" => format!("reviews the order ({} ms)", e.json["review_ms"]),
        "charging" => format!(
            "calls the provider ({} ms) with idempotency key {}",
            e.json["charge_ms"],
            e.str("key")
        ),
        "charged" if e.json["new"] == true => format!(
            "the provider charges the card (receipt {})",
            e.str("receipt")
        ),
        "charged" => format!(
            "the provider knows the key: it returns the earlier charge (receipt {}), charges \
             nothing",
            e.str("receipt")
        ),
        "refused" if e.json["in_tx"] == true => format!(
            "goes on with its charge step (settle, charges row + receipt) with token {token}: \
             REFUSED (Lost), nothing of it written; it stops"
        ),
        "refused" => format!(
            "goes on with its charge step (settle, receipt) with token {token}: REFUSED \
             (Lost), nothing of it written; it stops"
        ),
        "charge row inserted" => format!(
            "inserts its charges row (receipt {}) inside its charge transaction, token {token}",
            e.str("receipt")
        ),
        "stalling in the charge transaction" => {
            "blocks inside the charge transaction, before its commit".to_owned()
        }
        "lost on renewal: cancelling the worker" => {
            format!("renews with token {token}: REFUSED (Lost)")
        }
        "acknowledge" => format!("acknowledges order-42: {}", e.str("status")),
        "release" => format!("releases its lease (token {token})"),
        "stopped" => format!("delivery with token {token} stopped without acknowledging"),
        "exit" => format!(
            "shuts down (claims {}, renewals {}, lost {}, acknowledgements {})",
            e.json["claims"], e.json["renewals"], e.json["lost"], e.json["acknowledgements"]
        ),
        _ => return None,
    })
}

/// What `get`, `list_steps` and the `charges` table say at the end of an act.
struct Records {
    completed: bool,
    charge_token: Option<u64>,
    /// The receipt the charge step recorded.
    charge_receipt: Option<String>,
    /// The committed `charges` rows of order 42; `None` on a backend without the table.
    charges: Option<Vec<ChargeRow>>,
}

impl Records {
    /// Exactly one `charges` row (or no table on this backend).
    fn one_charge_row(&self) -> bool {
        self.charges.as_ref().is_none_or(|rows| rows.len() == 1)
    }
}

async fn final_records(backend: &Opened) -> DemoResult<Records> {
    let id = order_id()?;
    let shared = &backend.shared;
    let record = shared.get(&id).await?.ok_or("order-42 has no record")?;
    println!("\n  final record of {}:", record.id);
    println!(
        "    status {}, token #{}, unacknowledged deliveries {}",
        record.status,
        record.token.get(),
        record.unacknowledged_deliveries
    );
    if let Some(outcome) = &record.outcome {
        println!("    outcome {}: {}", outcome.status(), outcome.text());
    }
    let mut charge_token = None;
    let mut charge_receipt = None;
    for step in shared.list_steps(&id).await? {
        println!(
            "    step {:<6} written with token #{}: {}",
            step.step_key.as_str(),
            step.token.get(),
            step.response
        );
        if step.step_key.as_str() == "charge" {
            charge_token = Some(step.token.get());
            charge_receipt = step.response.to_value()?["receipt"]
                .as_str()
                .map(str::to_owned);
        }
    }
    let charges = backend.store.charges(42).await?;
    if let Some(rows) = &charges {
        println!(
            "    SELECT count(*) FROM charges WHERE order_id = 42: {}",
            rows.len()
        );
        for r in rows {
            println!(
                "      charges row: {} cents, receipt {}, written by {} with token #{}",
                r.cents, r.receipt, r.worker, r.token
            );
        }
    }
    println!();
    Ok(Records {
        completed: record.status == lease::ExecutionStatus::Completed,
        charge_token,
        charge_receipt,
        charges,
    })
}
