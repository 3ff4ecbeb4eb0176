//! `lease-bench`: throughput of every lease backend next to the raw baseline of its own
//! statements (run it with `cargo xtask bench`).
//!
//! For each backend it measures, on the system clock, each in a fresh isolated store that
//! is removed afterwards:
//! - single operations, one call in flight: `claim_due` (batch 1 and 32), `renew`,
//!   `write_step`, `acknowledge`. Library and raw calls are interleaved on one store and
//!   timed one by one, so both sides see the same background load ([`ops`]);
//! - end-to-end executions/s through the dispatcher at concurrency 1, 8 and 64, for
//!   workflows of 0 steps (claim + acknowledge) and of 3 fenced steps, next to a raw
//!   pipeline of the same shape issuing the same statements ([`e2e`]);
//! - the operator console (`lease ui`) over 10^5 stored executions: pages per second and
//!   what it costs while nobody watches ([`ui`]);
//! - one namespace drained on a standalone Redis and on clusters of 1, 2 and 3 primaries:
//!   jobs/s and server CPU per job ([`shards`], `--only shards`).
//!
//! Each measurement runs `--rounds` times (alternating library and raw for end-to-end
//! rows) and the median round of each side is reported: a markdown table on stdout with
//! library/raw per row and the target, and JSON (every round, the load average)
//! in `--json-dir`. Targets are shown, never enforced: the exit status only says whether
//! every measurement ran.

mod admit;
mod anchor_db;
mod anchor_river;
mod anchor_runs;
mod anchor_tools;
mod anchors;
mod args;
mod bound;
mod chain;
mod client;
mod controls;
mod drain;
mod e2e;
mod error;
mod fenced;
mod fill;
mod fixture;
mod footprint;
mod list;
mod load;
mod measure;
mod ops;
mod peer_runs;
mod peers;
mod progress;
mod purge;
mod raw;
mod report;
mod row;
mod shards;
mod side;
mod stored;
mod ui;
mod wake;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::args::{Kind, Options};
use crate::client::{Baseline, Library};
use crate::e2e::Engine;
use crate::error::{BenchError, Result};
use crate::fixture::Fixture;
use crate::measure::Sample;
use crate::ops::Op;
use crate::row::Row;
use crate::side::Side;

/// Runs one round of a single-operation measurement on a fresh store: library and raw
/// interleaved (raw `None` on the memory backend).
async fn op_pair(kind: Kind, op: Op, options: &Options) -> Result<(Sample, Option<Sample>)> {
    let mut fx = Fixture::new(kind, options).await?;
    let result = async {
        let lib = Library::new(fx.lib.clone())?;
        match fx.raw().await? {
            Some(raw) => {
                let raw = Baseline(raw);
                ops::measure(&lib, Some(&raw), &mut fx, op, options.round()).await
            }
            None => ops::measure(&lib, None::<&Baseline>, &mut fx, op, options.round()).await,
        }
    }
    .await;
    fx.remove_after(result).await
}

/// Runs one end-to-end measurement on a fresh store.
async fn e2e_sample(
    kind: Kind,
    side: Side,
    concurrency: usize,
    steps: usize,
    options: &Options,
) -> Result<Option<Sample>> {
    let mut fx = Fixture::new(kind, options).await?;
    let result = async {
        let engine = match side {
            Side::Library => Engine::Library,
            Side::Raw => match fx.raw_sqlite()? {
                Some(sqlite) => Engine::RawSqlite(Arc::new(sqlite)),
                None => match fx.raw().await? {
                    Some(raw) => Engine::Raw(raw),
                    None => return Ok(None),
                },
            },
        };
        e2e::measure(&engine, &mut fx, concurrency, steps, options.round())
            .await
            .map(Some)
    }
    .await;
    fx.remove_after(result).await
}

/// The round whose rate is the median (the lower middle one for an even count).
fn median(mut samples: Vec<Sample>) -> Option<Sample> {
    samples.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
    let n = samples.len();
    (n > 0).then(|| samples[(n - 1) / 2])
}

/// Runs `rounds` rounds of `round` (each on fresh stores) and keeps the median round of
/// each side.
async fn measure_row(
    kind: Kind,
    name: String,
    unit: &'static str,
    options: &Options,
    round: impl AsyncFn() -> Result<(Option<Sample>, Option<Sample>)>,
) -> Row {
    let load = load::one_minute();
    let mut library = Vec::new();
    let mut raw = Vec::new();
    let mut error = None;
    for _ in 0..options.rounds {
        match round().await {
            Ok((l, r)) => {
                library.extend(l);
                raw.extend(r);
            }
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    let mut row = Row::new(
        kind,
        name,
        unit,
        median(library.clone()),
        median(raw.clone()),
        load,
        error,
    );
    row.library_rounds = library.iter().map(Sample::rate).collect();
    row.raw_rounds = raw.iter().map(Sample::rate).collect();
    progress::print(&row);
    row
}

/// One round of an end-to-end measurement: the library, then the raw bound, each on its
/// own fresh store.
async fn e2e_round(
    kind: Kind,
    concurrency: usize,
    steps: usize,
    options: &Options,
) -> Result<(Option<Sample>, Option<Sample>)> {
    let lib = e2e_sample(kind, Side::Library, concurrency, steps, options).await?;
    let raw = e2e_sample(kind, Side::Raw, concurrency, steps, options).await?;
    Ok((lib, raw))
}

/// Everything one run measured.
struct Measured {
    rows: Vec<Row>,
    wake: wake::WakeRows,
    footprint: Vec<footprint::Row>,
    controls: controls::ControlRows,
    shards: Vec<shards::ShardRow>,
}

async fn run(options: &Options) -> Measured {
    let mut rows = Vec::new();
    let mut controls = controls::ControlRows::default();
    let mut wake_rows = wake::WakeRows::default();
    let mut footprint_rows = Vec::new();
    let mut shard_rows = Vec::new();
    for &kind in &options.backends {
        for op in Op::ALL {
            let name = op.name();
            if !options.selected(&name) {
                continue;
            }
            rows.push(
                measure_row(kind, name, op.unit(), options, async || {
                    op_pair(kind, op, options).await.map(|(l, r)| (Some(l), r))
                })
                .await,
            );
        }
        for steps in [0, 3] {
            for concurrency in [1, 8, 64] {
                let name = format!("e2e {steps} steps c{concurrency}");
                if !options.selected(&name) {
                    continue;
                }
                rows.push(
                    measure_row(kind, name, "executions/s", options, async || {
                        e2e_round(kind, concurrency, steps, options).await
                    })
                    .await,
                );
            }
        }
        if options.selected(admit::NAME) {
            rows.push(
                measure_row(
                    kind,
                    admit::NAME.into(),
                    "executions/s",
                    options,
                    async || {
                        let d = options.round();
                        let lib = admit::sample(kind, Side::Library, options, d).await?;
                        let raw = admit::sample(kind, Side::Raw, options, d).await?;
                        Ok((lib, raw))
                    },
                )
                .await,
            );
        }
        if kind != args::Kind::Memory {
            fenced_rows(kind, options, &mut rows).await;
            drain_and_storage_rows(kind, options, &mut rows).await;
            footprint_rows.extend(footprint::rows(kind, options).await);
            ui::rows(kind, options, &mut rows).await;
        }
        controls::run(kind, options, &mut controls).await;
        wake::run(kind, options, &mut wake_rows).await;
        if kind == Kind::Redis {
            shard_rows.extend(shards::run(options).await);
        }
    }
    Measured {
        rows,
        wake: wake_rows,
        footprint: footprint_rows,
        controls,
        shards: shard_rows,
    }
}

/// The fenced-write rows of one backend: the fenced application transaction beside the same
/// transaction unfenced, and `step_in_tx` beside `write_step` + a separate transaction.
async fn fenced_rows(kind: Kind, options: &Options, rows: &mut Vec<Row>) {
    for (i, name) in fenced::NAMES.into_iter().enumerate() {
        if !options.selected(name) {
            continue;
        }
        rows.push(
            measure_row(kind, name.into(), "ops/s", options, async || {
                let (l, r) = fenced::measure(kind, i, options, options.round()).await?;
                Ok((Some(l), Some(r)))
            })
            .await,
        );
    }
}

/// The drain and storage rows of one backend (none for the memory backend: no raw bound, no store
/// another process can open): the job-queue drain, acknowledge_and_claim, stored work,
/// purge.
async fn drain_and_storage_rows(kind: Kind, options: &Options, rows: &mut Vec<Row>) {
    for c in drain::CONCURRENCY {
        let name = drain::name(c);
        if !options.selected(&name) {
            continue;
        }
        let load = load::one_minute();
        let mut lib = Vec::new();
        let mut raw = Vec::new();
        let mut error = None;
        for _ in 0..drain::RUNS {
            let run = async {
                let l = drain::sample(
                    kind,
                    Side::Library,
                    c,
                    drain::JOBS,
                    drain::Place::Child,
                    options,
                )
                .await?;
                let r = drain::sample(
                    kind,
                    Side::Raw,
                    c,
                    drain::JOBS,
                    drain::Place::Child,
                    options,
                )
                .await?;
                Ok::<_, BenchError>((l, r))
            };
            match run.await {
                Ok((l, r)) => {
                    lib.push(l.rate());
                    raw.push(r.rate());
                }
                Err(e) => {
                    error = Some(e.to_string());
                    break;
                }
            }
        }
        let mut row = Row::new(
            kind,
            name,
            "jobs/s",
            drain::median(lib.clone(), drain::JOBS),
            drain::median(raw.clone(), drain::JOBS),
            load,
            error,
        );
        row.library_rounds = lib;
        row.raw_rounds = raw;
        progress::print(&row);
        rows.push(row);
    }
    for (combined, name) in [(true, chain::NAMES[0]), (false, chain::NAMES[1])] {
        if !options.selected(name) {
            continue;
        }
        rows.push(
            measure_row(kind, name.into(), "deliveries/s", options, async || {
                let (l, r) = chain::measure(kind, combined, options, options.round()).await?;
                Ok((Some(l), Some(r)))
            })
            .await,
        );
    }
    for shape in stored::Shape::ALL {
        for n in stored::SIZES
            .into_iter()
            .filter(|&n| n <= options.stored_max)
        {
            if !options.selected(&stored::group(shape, n)) {
                continue;
            }
            rows.extend(stored::rows(kind, shape, n, options, options.round()).await);
        }
    }
    if options.selected(purge::NAME) {
        rows.push(
            measure_row(
                kind,
                purge::NAME.into(),
                "executions/s",
                options,
                async || {
                    let l = purge::sample(kind, Side::Library, purge::EXECUTIONS, options).await?;
                    let r = purge::sample(kind, Side::Raw, purge::EXECUTIONS, options).await?;
                    Ok((Some(l), Some(r)))
                },
            )
            .await,
        );
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, config] = argv.as_slice()
        && flag == "--child"
    {
        return wake::worker::child_main(config);
    }
    if argv.iter().any(|a| a == "-h" || a == "--help") {
        println!("{}", args::usage());
        return ExitCode::SUCCESS;
    }
    let options = match args::parse(&argv) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("lease-bench: {e}");
            return ExitCode::from(2);
        }
    };
    match main_with(&options) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("lease-bench: {e}");
            ExitCode::from(2)
        }
    }
}

fn main_with(options: &Options) -> Result<bool> {
    let load_wait = options.wait_load.map(|below| {
        let (ok, waited) = load::wait_below(below, options.wait_max);
        (ok, waited.as_secs_f64())
    });
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let load_before = load::now();
    eprintln!(
        "lease-bench: backends {}, {:?} per measurement in {} rounds, load average {:?}",
        options
            .backends
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", "),
        options.duration,
        options.rounds,
        load_before
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| BenchError::Setup(format!("tokio runtime: {e}")))?;
    let Measured {
        rows,
        wake: wake_rows,
        footprint: footprint_rows,
        controls,
        shards: shard_rows,
    } = runtime.block_on(run(options));
    let anchors_ok = if anchor_runs::selected(options) {
        let report = runtime.block_on(anchor_runs::run(options, started_unix))?;
        println!("{}", anchors::markdown(&report.cells));
        for e in &report.errors {
            println!("anchors: failed: {e}");
        }
        let path = anchor_runs::write_json(&options.json_dir, &report)?;
        eprintln!("lease-bench: anchors JSON in {}", path.display());
        report.errors.is_empty()
    } else {
        true
    };
    let peers_ok = if peer_runs::selected(options).is_empty() {
        true
    } else {
        let report = runtime.block_on(peer_runs::run(options, started_unix))?;
        println!("{}", peers::markdown(&report.cells));
        let path = peer_runs::write_json(&options.json_dir, &report)?;
        eprintln!("lease-bench: peers JSON in {}", path.display());
        report.ok()
    };
    let load_after = load::now();
    if !rows.is_empty() {
        println!("{}", report::markdown(&rows));
    }
    if !wake_rows.latency.is_empty() {
        println!("{}", report::latency_markdown(&wake_rows.latency));
    }
    if !wake_rows.cost.is_empty() {
        println!("{}", report::cost_markdown(&wake_rows.cost));
    }
    let stored = stored::ratios(&rows);
    if !stored.is_empty() {
        println!("{}", stored::markdown(&stored));
    }
    if !footprint_rows.is_empty() {
        println!("{}", footprint::markdown(&footprint_rows));
    }
    if !controls.is_empty() {
        println!("{}", controls.markdown());
    }
    if !shard_rows.is_empty() {
        println!("{}", shards::markdown(&shard_rows));
    }
    println!(
        "load average (1/5/15 min) before: {}, after: {}; {} cores; {:?} per measurement{}",
        fmt_load(load_before),
        fmt_load(load_after),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        options.duration,
        match load_wait {
            Some((false, w)) => format!("; load stayed high after waiting {w:.0}s"),
            Some((true, w)) if w > 0.0 => format!("; waited {w:.0}s for the load to drop"),
            _ => String::new(),
        }
    );
    let path = report::write_json(
        &options.json_dir,
        &report::Report {
            started_unix,
            duration_secs: options.duration.as_secs_f64(),
            rounds: options.rounds,
            quick: options.quick,
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            load_before,
            load_after,
            load_wait,
            rows: &rows,
            wake: &wake_rows,
            stored: &stored,
            footprint: &footprint_rows,
            controls: &controls,
            shards: &shard_rows,
        },
    )?;
    eprintln!("lease-bench: JSON report in {}", path.display());
    Ok(anchors_ok
        && peers_ok
        && controls.ok()
        && shard_rows.iter().all(|r| r.error.is_none())
        && rows.iter().all(|r| r.error.is_none())
        && wake_rows.latency.iter().all(|r| r.error.is_none())
        && wake_rows.cost.iter().all(|r| r.error.is_none())
        && footprint_rows.iter().all(|r| r.error.is_none()))
}

fn fmt_load(l: Option<[f64; 3]>) -> String {
    l.map_or_else(
        || "unknown".into(),
        |l| format!("{:.2}/{:.2}/{:.2}", l[0], l[1], l[2]),
    )
}
