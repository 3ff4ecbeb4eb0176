//! What fencing the application's own writes costs, per backend, one call
//! in flight. Two rows, each pairing the fenced path (the "library" column) with the same
//! work unfenced (the "raw" column), interleaved call by call on one store and timed one by
//! one (as [`crate::ops`]), so both sides see the same load:
//!
//! - [`NAMES`]`[0]`, a fenced application transaction (one row inserted into the
//!   application's table in the lease's database: SQLite `fenced`, PostgreSQL
//!   `begin_fenced` + `commit`; Redis `fenced_script` of a two-command body) against the
//!   same transaction without the fence (SQLite `BEGIN IMMEDIATE; INSERT; COMMIT` on a
//!   connection configured as the backend's; PostgreSQL a pool transaction; Redis the bare
//!   body by `EVALSHA` on the same connection). Target >= 0.9x.
//! - [`NAMES`]`[1]`, `step_in_tx` (Redis `step_in_script`: the row and the step record in
//!   one transaction) against the unfenced transaction followed by `write_step` (two
//!   commits, not atomic). Target: faster (>= 1.0x).
//!
//! Each round uses one execution claimed for an hour; every call inserts a new row and,
//! for the step rows, records a new step key.

mod postgres;
mod receipt;
mod redis;
mod sqlite;

use lease_core::ExecutionClientExt;
use std::time::{Duration, Instant};

use lease_core::{Admission, ClaimRequest, Claimed, ExecutionId, Json, StepKey, StepWrite};
use lease_runtime::Delivery;
use tokio_util::sync::CancellationToken;

use crate::args::{Kind, Options};
use crate::error::{BenchError, Context, Result};
use crate::fixture::{Fixture, Handle};
use crate::measure::Sample;

/// The two rows.
pub const NAMES: [&str; 2] = [
    "fenced tx vs the same tx unfenced",
    "fenced step_in_tx vs write_step + tx",
];

/// What is timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// The fenced application transaction.
    Fenced,
    /// The same transaction, no fence.
    Unfenced,
    /// The row and the step record in one fenced transaction.
    StepInTx,
    /// The unfenced transaction, then `write_step`.
    StepThenTx,
}

/// The cases of row `row` of [`NAMES`]: (library column, raw column).
fn cases(row: usize) -> (Case, Case) {
    if row == 0 {
        (Case::Fenced, Case::Unfenced)
    } else {
        (Case::StepInTx, Case::StepThenTx)
    }
}

/// The held lease, the delivery over it, and the backend's application handle.
struct Bench {
    claimed: Claimed,
    delivery: Delivery,
    app: App,
}

/// The backend-specific application handle.
enum App {
    Sqlite(sqlite::SqliteApp),
    Postgres(postgres::PostgresApp),
    Redis(redis::RedisApp),
}

impl Bench {
    async fn new(fx: &Fixture) -> Result<Self> {
        let app = match fx.handle() {
            Handle::Sqlite(b, file) => App::Sqlite(sqlite::SqliteApp::new(b, file)?),
            Handle::Postgres(b) => App::Postgres(postgres::PostgresApp::new(b).await?),
            Handle::Redis(b) => App::Redis(redis::RedisApp::new(b)),
            Handle::Memory => {
                return Err(BenchError::Setup("no fenced rows on memory".into()));
            }
        };
        let lib = fx.lib.clone();
        let id = ExecutionId::new("fenced-bench").context(|| "id".into())?;
        lib.admit(&Admission::new(id))
            .await
            .context(|| "admit".into())?;
        let claimed = lib
            .claim_due_with_records(ClaimRequest {
                now: lib.now().await.context(|| "now".into())?,
                limit: 1,
                duration: Duration::from_secs(3600),
            })
            .await
            .context(|| "claim".into())?
            .pop()
            .ok_or_else(|| BenchError::Setup("fenced: nothing claimed".into()))?;
        let delivery = Delivery::new(
            lib,
            claimed.lease.clone(),
            claimed.record.clone(),
            CancellationToken::new(),
        );
        Ok(Bench {
            claimed,
            delivery,
            app,
        })
    }

    /// One call of `case`; `i` makes its row and step key unique.
    async fn call(&self, case: Case, i: u64) -> Result<()> {
        let key = format!("{case:?}-{i}");
        let lease = &self.claimed.lease;
        match (&self.app, case) {
            (App::Sqlite(a), Case::Fenced) => a.fenced(lease, &key).await,
            (App::Sqlite(a), Case::StepInTx) => a.step_in_tx(&self.delivery, &key).await,
            (App::Sqlite(a), _) => a.unfenced(&key),
            (App::Postgres(a), Case::Fenced) => a.fenced(lease, &key).await,
            (App::Postgres(a), Case::StepInTx) => a.step_in_tx(&self.delivery, &key).await,
            (App::Postgres(a), _) => a.unfenced(&key).await,
            (App::Redis(a), Case::Fenced) => a.fenced(lease, &key).await,
            (App::Redis(a), Case::StepInTx) => a.step_in_script(&self.delivery, &key).await,
            (App::Redis(a), _) => a.unfenced(&key).await,
        }?;
        if case == Case::StepThenTx {
            self.write_step(&key).await?;
        }
        Ok(())
    }

    /// The step record of the split pair, with the library's `write_step`.
    async fn write_step(&self, key: &str) -> Result<()> {
        let write = StepWrite {
            step_key: StepKey::new(key).context(|| "step key".into())?,
            step_attempt: 1,
            done: true,
            response: Json::to_json("receipt", &key).context(|| "receipt".into())?,
        };
        self.delivery
            .write_step(&write)
            .await
            .map_err(|e| BenchError::Setup(format!("write_step: {e}")))
            .map(|_| ())
    }
}

/// One round on a fresh store: the two cases of row `row` alternating call by call (which
/// goes first alternates too) for twice `duration`; each side's sample is its calls over
/// its own calls' time.
pub async fn measure(
    kind: Kind,
    row: usize,
    options: &Options,
    duration: Duration,
) -> Result<(Sample, Sample)> {
    let fx = Fixture::new(kind, options).await?;
    let result = async {
        let bench = Bench::new(&fx).await?;
        let (lib, raw) = cases(row);
        for i in 0..50 {
            // Warm-up: connections, prepared statements, script cache.
            bench.call(lib, i).await?;
            bench.call(raw, i).await?;
        }
        let mut sides = [Sample {
            count: 0,
            secs: 0.0,
        }; 2];
        let started = Instant::now();
        let mut i = 50u64;
        while started.elapsed() < duration * 2 {
            for side in [i % 2, (i + 1) % 2] {
                let case = if side == 0 { lib } else { raw };
                let t = Instant::now();
                bench.call(case, i).await?;
                let s = &mut sides[usize::from(side == 1)];
                s.secs += t.elapsed().as_secs_f64();
                s.count += 1;
            }
            i += 1;
        }
        if let App::Redis(a) = &bench.app {
            a.remove().await?;
        }
        Ok((sides[0], sides[1]))
    }
    .await;
    fx.remove_after(result).await
}
