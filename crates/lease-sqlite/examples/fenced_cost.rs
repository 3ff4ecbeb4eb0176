//! What fencing the application's own writes costs, on a file: a measurement, not a usage
//! example (`cargo xtask bench --only fenced` is the maintained benchmark; this one also
//! prices the lease check alone).
//!
//! 1. One application transaction (insert a `charges` row) through
//!    `SqliteBackend::fenced` against the same transaction without the fence: `BEGIN
//!    IMMEDIATE; INSERT; COMMIT` on a raw connection configured as the backend's.
//! 2. A step whose effect is that row: `step_in_tx` (effect and step record in one
//!    transaction) against `Delivery::step` whose closure runs the application's own
//!    transaction (write_step + a separate application transaction, two commits).
//!
//! Also `fenced`'s own path with no check (`unfenced_for_tests`), which prices the check
//! alone. Modes run interleaved in rounds; prints each round and the median operations/s.
//!
//! `cargo run --release -p lease-sqlite --example fenced_cost -- [operations] [rounds]`

use lease_core::ExecutionClientExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lease_core::{Admission, ClaimRequest, Claimed, ExecutionClient, ExecutionId, Timestamp};
use lease_runtime::Delivery;
use lease_sqlite::{SqliteBackend, SqliteConfig};
use rusqlite::{Connection, Transaction, TransactionBehavior};
use tokio_util::sync::CancellationToken;

type Error = Box<dyn std::error::Error + Send + Sync>;

const CHARGE: &str = "INSERT INTO charges (execution_id, amount) VALUES (?1, ?2)";

struct Setup {
    _dir: tempfile::TempDir,
    backend: SqliteBackend,
    /// The application's own connection (the unfenced baseline).
    app: Connection,
    claimed: Claimed,
}

async fn setup() -> Result<Setup, Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("shop.db");
    let backend = SqliteBackend::open(SqliteConfig::file(&path)).await?;
    let app = lease_sqlite::raw::open(&path, Duration::from_secs(5))?;
    app.execute_batch(
        "CREATE TABLE charges (id INTEGER PRIMARY KEY, execution_id TEXT NOT NULL,
                               amount INTEGER NOT NULL)",
    )?;
    backend
        .admit(&Admission::new(ExecutionId::new("order-42")?))
        .await?;
    let claimed = backend
        .claim_due_with_records(ClaimRequest {
            now: Timestamp::MAX,
            limit: 1,
            duration: Duration::from_secs(3600),
        })
        .await?
        .pop()
        .ok_or("nothing claimed")?;
    Ok(Setup {
        _dir: dir,
        backend,
        app,
        claimed,
    })
}

fn charge(tx: &Transaction<'_>, amount: i64) -> rusqlite::Result<i64> {
    tx.prepare_cached(CHARGE)?.execute(("order-42", amount))?;
    Ok(amount)
}

fn raw_charge(app: &mut Connection, amount: i64) -> rusqlite::Result<i64> {
    let tx = app.transaction_with_behavior(TransactionBehavior::Immediate)?;
    charge(&tx, amount)?;
    tx.commit()?;
    Ok(amount)
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    Fenced,
    Unfenced,
    /// `fenced`'s own path without the lease check (`unfenced_for_tests`).
    SamePathNoCheck,
    StepInTx,
    StepThenAppTx,
}

async fn run(s: &mut Setup, mode: Mode, n: usize, round: usize) -> Result<f64, Error> {
    let delivery = Delivery::new(
        Arc::new(s.backend.clone()),
        s.claimed.lease.clone(),
        s.claimed.record.clone(),
        CancellationToken::new(),
    );
    let started = Instant::now();
    for i in 0..n {
        let amount = i64::try_from(i)?;
        let key = format!("{mode:?}-{round}-{i}");
        match mode {
            Mode::Fenced => {
                let got = s
                    .backend
                    .fenced(&s.claimed.lease, move |tx| charge(tx, amount))
                    .await?;
                assert!(!got.is_lost());
            }
            Mode::SamePathNoCheck => {
                let got = s
                    .backend
                    .unfenced_for_tests(move |tx| charge(tx, amount))
                    .await?;
                assert!(!got.is_lost());
            }
            Mode::Unfenced => {
                raw_charge(&mut s.app, amount)?;
            }
            Mode::StepInTx => {
                let got: i64 = s
                    .backend
                    .step_in_tx(&delivery, &key, move |tx| charge(tx, amount))
                    .await?;
                assert_eq!(got, amount);
            }
            Mode::StepThenAppTx => {
                let app = &mut s.app;
                let got: i64 = delivery
                    .step(&key, || async move { raw_charge(app, amount) })
                    .await?;
                assert_eq!(got, amount);
            }
        }
    }
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(20_000);
    let rounds: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(5);
    let modes = [
        Mode::Fenced,
        Mode::Unfenced,
        Mode::SamePathNoCheck,
        Mode::StepInTx,
        Mode::StepThenAppTx,
    ];
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for round in 0..rounds {
        // A fresh file each round: tables and WAL do not grow across rounds.
        let mut s = setup().await?;
        run(&mut s, Mode::Fenced, n / 10, usize::MAX).await?; // warm-up
        for (m, mode) in modes.iter().enumerate() {
            let ops = run(&mut s, *mode, n, round).await?;
            println!("round {round} {mode:?}: {ops:.0} ops/s");
            results[m].push(ops);
        }
    }
    // Paired by round: the machine's load moves between rounds more than within one.
    let ratio = |a: usize, b: usize| {
        median(
            results[a]
                .iter()
                .zip(&results[b])
                .map(|(x, y)| x / y)
                .collect(),
        )
    };
    let (fenced, no_check, step_in_tx) = (ratio(0, 1), ratio(2, 1), ratio(3, 4));
    let med: Vec<f64> = results.into_iter().map(median).collect();
    println!(
        "median ops/s: fenced {:.0}, unfenced {:.0}, fenced's path without the check {:.0}",
        med[0], med[1], med[2]
    );
    println!(
        "median of per-round ratios: fenced/unfenced {fenced:.2}x, \
         no-check path/unfenced {no_check:.2}x"
    );
    println!(
        "median ops/s: step_in_tx {:.0}, step + app tx {:.0}; per-round ratio {step_in_tx:.2}x",
        med[3], med[4]
    );
    Ok(())
}
