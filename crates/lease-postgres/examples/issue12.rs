//! Issue 12 measurements (scratch, prints numbers; not a test).
//!
//! `cargo run --release -p lease-postgres --example issue12 -- <mode> [n]` against
//! `LEASE_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/test`), each in a
//! throwaway schema dropped afterwards:
//!
//! - `ackclaim [n]`: deliveries/s at concurrency 1, `acknowledge_and_claim` against
//!   `acknowledge` + `claim_due_with_horizon`;
//! - `purge [n]`: executions/s of `purge_terminal` in batches of 1000 over n completed;
//! - `sizes [n]`: table and index sizes after n completed executions with 3 steps each;
//! - `churn [seconds]`: an admit/claim/ack/purge loop, sampling dead tuples;
//! - `dispatch [n]`: deliveries/s of a `Dispatcher` at concurrency 1 with a worker that
//!   completes at once, over n executions admitted beforehand (`admit_batch`), three runs;
//! - `populate [n]`: a realistic table for `EXPLAIN (ANALYZE, BUFFERS)` by hand: n completed
//!   executions, n / 2 due, 50 running with live leases; the schema is kept (its name is
//!   printed; drop it afterwards).

use lease_core::ExecutionClientExt;
use std::time::{Duration, Instant};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use lease_core::{
    Acknowledgement, Admission, ClaimRequest, Delivery, Dispatcher, DispatcherOptions,
    ExecutionClient, ExecutionId, Json, Reply, Timestamp, WorkflowRunOutcome,
};
use lease_postgres::{PostgresBackend, PostgresConfig};
use sqlx::{AssertSqlSafe, Row};

fn url() -> String {
    lease_testserver::postgres_url()
}

fn claim(limit: usize) -> ClaimRequest {
    ClaimRequest {
        now: Timestamp::MAX,
        limit,
        duration: Duration::from_secs(30),
    }
}

fn done() -> WorkflowRunOutcome {
    WorkflowRunOutcome::Completed(Json::parse("o", r#"{"ok":true}"#).expect("json"))
}

/// Admits, claims and completes `n` executions named `{prefix}{i}`, 1000 per batch.
async fn complete(b: &PostgresBackend, prefix: &str, n: usize) -> lease_core::Result<()> {
    let mut i = 0;
    while i < n {
        let k = (n - i).min(1000);
        let batch: Vec<Admission> = (i..i + k)
            .map(|j| Admission::new(ExecutionId::new(format!("{prefix}{j:08}")).expect("id")))
            .collect();
        b.admit_batch(&batch).await?;
        let claimed = b.claim_due_with_records(claim(k)).await?;
        let acks: Vec<Acknowledgement> = claimed
            .into_iter()
            .map(|c| Acknowledgement {
                lease: c.lease,
                outcome: done(),
            })
            .collect();
        b.acknowledge_batch(&acks).await?;
        i += k;
    }
    Ok(())
}

async fn ackclaim(b: &PostgresBackend, n: usize) -> lease_core::Result<()> {
    let t = Instant::now();
    for _ in 0..1000 {
        b.now().await?;
    }
    println!(
        "baseline: SELECT clock round trip {:.3} ms",
        t.elapsed().as_secs_f64()
    );
    let _ = b.wakeups();
    for (round, combined) in [true, false, true, false].into_iter().enumerate() {
        let prefix = format!("ac{round}-");
        let batch: Vec<Admission> = (0..n)
            .map(|j| Admission::new(ExecutionId::new(format!("{prefix}{j:08}")).expect("id")))
            .collect();
        for chunk in batch.chunks(1000) {
            b.admit_batch(chunk).await?;
        }
        let mut current = b.claim_due_with_records(claim(1)).await?.remove(0).lease;
        let started = Instant::now();
        let mut delivered = 0;
        let mut spent = [Duration::ZERO; 3];
        loop {
            let ack = Acknowledgement {
                lease: current.clone(),
                outcome: done(),
            };
            let next = if combined {
                let t = Instant::now();
                let r = b.acknowledge_and_claim(&ack, claim(1)).await?.next;
                spent[0] += t.elapsed();
                r
            } else {
                let t = Instant::now();
                assert!(!b.acknowledge(&ack.lease, &ack.outcome).await?.is_lost());
                spent[1] += t.elapsed();
                let t = Instant::now();
                let r = b.claim_due_with_horizon(claim(1)).await?;
                spent[2] += t.elapsed();
                r
            };
            delivered += 1;
            match next.claimed.into_iter().next() {
                Some(c) => current = c.lease,
                None => break,
            }
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "{}: {delivered} deliveries in {secs:.2} s = {:.0}/s",
            if combined {
                "acknowledge_and_claim"
            } else {
                "acknowledge + claim_due_with_horizon"
            },
            delivered as f64 / secs
        );
        let [both, ack, claim] = spent.map(|d| d / delivered);
        println!("  per call: ack+claim {both:?} / ack {ack:?} / claim {claim:?}");
    }
    Ok(())
}

async fn purge(b: &PostgresBackend, n: usize) -> lease_core::Result<()> {
    complete(b, "p-", n).await?;
    sqlx::raw_sql(AssertSqlSafe(format!(
        "ANALYZE \"{}\".executions",
        b.schema()
    )))
    .execute(b.pool())
    .await
    .expect("analyze");
    let cutoff = b.now().await?;
    let started = Instant::now();
    let (mut total, mut calls) = (0, 0);
    loop {
        let purged = b.purge_terminal(cutoff, 1000).await?;
        total += purged.ids.len();
        calls += 1;
        if purged.ids.len() < 1000 {
            break;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "purged {total} in {calls} calls, {secs:.2} s = {:.0}/s",
        total as f64 / secs
    );
    Ok(())
}

async fn sizes(b: &PostgresBackend, n: usize) -> lease_core::Result<()> {
    let started = Instant::now();
    complete(b, "s-", n).await?;
    let s = b.schema();
    // Three steps per execution, as the step driver writes them (attempt 1, done).
    sqlx::raw_sql(AssertSqlSafe(format!(
        "INSERT INTO \"{s}\".steps (execution_id, step_key, step_attempt, done, response, token) \
         SELECT e.id, k.key, 1, true, '{{\"ok\":true,\"n\":42}}', e.token \
         FROM \"{s}\".executions e, (VALUES ('charge'), ('reserve'), ('ship')) k(key)"
    )))
    .execute(b.pool())
    .await
    .expect("steps");
    for table in ["executions", "steps"] {
        sqlx::raw_sql(AssertSqlSafe(format!("VACUUM ANALYZE \"{s}\".{table}")))
            .execute(b.pool())
            .await
            .expect("vacuum");
    }
    println!("populated {n} in {:.0} s", started.elapsed().as_secs_f64());
    report_sizes(b).await;
    Ok(())
}

async fn report_sizes(b: &PostgresBackend) {
    let rows = sqlx::query(
        "SELECT c.relname, c.relkind::text, pg_relation_size(c.oid), \
         pg_total_relation_size(c.oid), c.reltuples::bigint \
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = $1 AND c.relkind IN ('r', 'i') ORDER BY c.relkind DESC, c.relname",
    )
    .bind(b.schema())
    .fetch_all(b.pool())
    .await
    .expect("sizes");
    for r in rows {
        let (name, kind, own, total, tuples): (String, String, i64, i64, i64) =
            (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
        println!(
            "{kind} {name:32} own {:>8.1} MiB total {:>8.1} MiB rows {tuples}",
            own as f64 / 1048576.0,
            total as f64 / 1048576.0
        );
    }
}

async fn churn(b: &PostgresBackend, seconds: u64) -> lease_core::Result<()> {
    complete(b, "base-", 10_000).await?;
    let started = Instant::now();
    let mut next_sample = Duration::ZERO;
    let (mut i, mut done_total, mut purged_total) = (0usize, 0usize, 0usize);
    while started.elapsed() < Duration::from_secs(seconds) {
        complete(b, &format!("c{i}-"), 500).await?;
        done_total += 500;
        i += 1;
        // Retention keeps roughly the last second of terminal executions.
        let cutoff = Timestamp::from_millis(b.now().await?.as_millis() - 1000);
        purged_total += b.purge_terminal(cutoff, 1000).await?.ids.len();
        if started.elapsed() >= next_sample {
            next_sample += Duration::from_secs(15);
            let r = sqlx::query(
                "SELECT relname, n_live_tup, n_dead_tup, autovacuum_count, \
                 pg_total_relation_size(relid) FROM pg_stat_user_tables \
                 WHERE schemaname = $1 AND relname IN ('executions', 'steps') ORDER BY relname",
            )
            .bind(b.schema())
            .fetch_all(b.pool())
            .await
            .expect("stats");
            for r in r {
                let (name, live, dead, av, size): (String, i64, i64, i64, i64) =
                    (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
                println!(
                    "t={:>4.0}s {name:10} live {live:>8} dead {dead:>8} autovacuums {av} \
                     size {:.1} MiB (completed {done_total}, purged {purged_total})",
                    started.elapsed().as_secs_f64(),
                    size as f64 / 1048576.0
                );
            }
        }
    }
    report_sizes(b).await;
    Ok(())
}

async fn dispatch(b: &PostgresBackend, n: usize) -> lease_core::Result<()> {
    for run in 0..3 {
        let batch: Vec<Admission> = (0..n)
            .map(|j| Admission::new(ExecutionId::new(format!("dp{run}-{j:08}")).expect("id")))
            .collect();
        for chunk in batch.chunks(1000) {
            b.admit_batch(chunk).await?;
        }
        let done = Arc::new(AtomicUsize::new(0));
        let counter = done.clone();
        let started = Instant::now();
        let dispatcher = Dispatcher::start(
            Arc::new(b.clone()),
            move |_d: Delivery| {
                let counter = counter.clone();
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    Ok(Reply::Acknowledge(WorkflowRunOutcome::Completed(
                        Json::null(),
                    )))
                }
            },
            DispatcherOptions::new().concurrency(1),
        )?;
        // Every execution ran; the last acknowledgement is then in flight or done.
        while done.load(Ordering::SeqCst) < n {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let secs = started.elapsed().as_secs_f64();
        let m = dispatcher.metrics().snapshot();
        dispatcher.shutdown(Duration::from_secs(5)).await;
        println!(
            "dispatcher, concurrency 1: {n} deliveries in {secs:.2} s = {:.0}/s \
             (claim calls {}, empty {}, wake-ups {}, backend errors {})",
            n as f64 / secs,
            m.claim_calls,
            m.empty_claims,
            m.wakeups,
            m.backend_errors
        );
    }
    Ok(())
}

async fn populate(b: &PostgresBackend, n: usize) -> lease_core::Result<()> {
    complete(b, "t-", n).await?;
    let due: Vec<Admission> = (0..n / 2)
        .map(|j| Admission::new(ExecutionId::new(format!("d-{j:08}")).expect("id")))
        .collect();
    for chunk in due.chunks(1000) {
        b.admit_batch(chunk).await?;
    }
    let running = b.claim_due_with_records(claim(50)).await?.len();
    println!(
        "schema {}: {n} completed, {} due, {running} running (kept)",
        b.schema(),
        n / 2 - running
    );
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> lease_core::Result<()> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "ackclaim".to_owned());
    let n: Option<usize> = args.next().and_then(|a| a.parse().ok());
    let schema = format!("lease_issue12_{}", std::process::id());
    let b = PostgresBackend::connect(PostgresConfig::new(url()).schema(schema).max_connections(4))
        .await?;
    let r = match mode.as_str() {
        "ackclaim" => ackclaim(&b, n.unwrap_or(5_000)).await,
        "purge" => purge(&b, n.unwrap_or(100_000)).await,
        "sizes" => sizes(&b, n.unwrap_or(1_000_000)).await,
        "churn" => churn(&b, n.unwrap_or(180) as u64).await,
        "dispatch" => dispatch(&b, n.unwrap_or(5_000)).await,
        "populate" => {
            let r = populate(&b, n.unwrap_or(3_000)).await;
            b.close().await;
            return r;
        }
        other => panic!("unknown mode {other}"),
    };
    b.drop_schema().await?;
    b.close().await;
    r
}
