//! Throughput across shards (`--only shards`): one namespace drained on one standalone
//! `redis-server` and on Redis Clusters of 1, 2 and 3 primaries, all started by the row
//! ([`servers`]) in the same run, so the figures compare.
//!
//! Each layout ([`LAYOUTS`]) admits [`crate::drain::JOBS`] executions to a fresh namespace
//! and drains them with a separate worker process at concurrency [`CONCURRENCY`] (the drain
//! rows' measurement, [`crate::drain::sample_on`]); the cost probe reads `INFO cpu`
//! (`used_cpu_user + used_cpu_sys`) and `INFO commandstats` of every server of the layout
//! around the drain alone, summed over the primaries and divided by the jobs. The layouts:
//!
//! - `shards single p1`: the standalone server, one partition (the plain key layout, one
//!   script per claim-and-acknowledge): the reference every other layout is divided by;
//! - `shards single p6`: the standalone server, [`PARTITIONS`] partitions: what the
//!   partition routing costs on one server (a claim peeks every partition and reserves
//!   tokens at home; acknowledge and claim are two steps);
//! - `shards cluster k p6` (k = 1, 2, 3): a cluster of k primaries (no replicas, slots split
//!   in node order, [`slots::range`]), [`PARTITIONS`] partitions on a namespace chosen so they fall evenly on the
//!   primaries ([`slots::even_namespace`]: 6, 3+3, 2+2+2); the home keys (token counter,
//!   reservations) on whichever primary their slot names.
//!
//! Every round runs each layout once (the order reversed on odd rounds), [`RUNS`] rounds; the
//! table shows the mean of the rounds and each layout's ratio to `single p1`.

mod servers;
pub mod slots;

use serde::Serialize;

use crate::anchors::Probe;
use crate::args::{Kind, Options};
use crate::drain;
use crate::error::Result;
use crate::fixture::{Fixture, StoreSpec};
use crate::load;
use servers::Servers;

/// The word that selects the rows (`--only shards`).
pub const NAME: &str = "shards";

/// Partitions of the partitioned layouts (even on 1, 2 and 3 primaries).
pub const PARTITIONS: u16 = 6;

/// The worker's concurrency.
pub const CONCURRENCY: usize = 64;

/// Rounds (each layout once per round).
pub const RUNS: usize = 2;

/// One way to hold the namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// Cluster primaries; 0 for the standalone server.
    pub primaries: usize,
    /// The namespace's partitions.
    pub partitions: u16,
}

/// The layouts, in table order.
pub const LAYOUTS: [Layout; 5] = [
    Layout {
        primaries: 0,
        partitions: 1,
    },
    Layout {
        primaries: 0,
        partitions: PARTITIONS,
    },
    Layout {
        primaries: 1,
        partitions: PARTITIONS,
    },
    Layout {
        primaries: 2,
        partitions: PARTITIONS,
    },
    Layout {
        primaries: 3,
        partitions: PARTITIONS,
    },
];

impl Layout {
    /// The row's name (what `--only` matches).
    pub fn name(self) -> String {
        match self.primaries {
            0 => format!("{NAME} single p{}", self.partitions),
            k => format!("{NAME} cluster {k} p{}", self.partitions),
        }
    }
}

/// One layout's figures over the rounds.
#[derive(Debug, Clone, Serialize)]
pub struct ShardRow {
    /// The row's name.
    pub name: String,
    /// The layout.
    pub layout: Layout,
    /// Jobs drained per run.
    pub jobs: u64,
    /// Jobs/s of each round.
    pub jobs_per_sec: Vec<f64>,
    /// Server CPU microseconds per job of each round (summed over the primaries).
    pub cpu_us_per_job: Vec<f64>,
    /// Server commands per job of each round (summed over the primaries).
    pub commands_per_job: Vec<f64>,
    /// 1-minute load average before each round's run.
    pub load_1m: Vec<f64>,
    /// Why a run failed.
    pub error: Option<String>,
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

impl ShardRow {
    fn new(layout: Layout, jobs: u64) -> Self {
        ShardRow {
            name: layout.name(),
            layout,
            jobs,
            jobs_per_sec: Vec::new(),
            cpu_us_per_job: Vec::new(),
            commands_per_job: Vec::new(),
            load_1m: Vec::new(),
            error: None,
        }
    }

    /// Mean jobs/s over the rounds.
    pub fn rate(&self) -> Option<f64> {
        mean(&self.jobs_per_sec)
    }

    /// Mean server CPU microseconds per job over the rounds.
    pub fn cpu(&self) -> Option<f64> {
        mean(&self.cpu_us_per_job)
    }
}

/// Runs the selected layouts (none unless a Redis server binary can be started).
pub async fn run(options: &Options) -> Vec<ShardRow> {
    let jobs = if options.quick { 2_000 } else { drain::JOBS };
    let mut rows: Vec<ShardRow> = LAYOUTS
        .into_iter()
        .filter(|l| options.selected(&l.name()))
        .map(|l| ShardRow::new(l, jobs))
        .collect();
    if rows.is_empty() {
        return rows;
    }
    let mut sets: Vec<(usize, Servers)> = Vec::new();
    for row in &mut rows {
        let k = row.layout.primaries;
        if sets.iter().any(|(p, _)| *p == k) {
            continue;
        }
        match Servers::start(k).await {
            Ok(s) => sets.push((k, s)),
            Err(e) => row.error = Some(e.to_string()),
        }
    }
    for round in 0..RUNS {
        let order: Vec<usize> = match round % 2 {
            0 => (0..rows.len()).collect(),
            _ => (0..rows.len()).rev().collect(),
        };
        for i in order {
            let row = &mut rows[i];
            let Some((_, servers)) = sets.iter().find(|(p, _)| *p == row.layout.primaries) else {
                continue;
            };
            if row.error.is_some() {
                continue;
            }
            row.load_1m.push(load::one_minute());
            match sample(servers, row.layout, jobs).await {
                Ok((rate, cpu, commands)) => {
                    row.jobs_per_sec.push(rate);
                    row.cpu_us_per_job.push(cpu);
                    row.commands_per_job.push(commands);
                    eprintln!(
                        "lease-bench: {} round {}: {rate:.0} jobs/s, {cpu:.1} server CPU us/job",
                        row.name,
                        round + 1
                    );
                }
                Err(e) => row.error = Some(e.to_string()),
            }
        }
    }
    for (_, servers) in sets {
        servers.stop().await;
    }
    rows
}

/// One drain of `jobs` on `servers` in `layout`: jobs/s, server CPU us/job, commands/job.
async fn sample(servers: &Servers, layout: Layout, jobs: u64) -> Result<(f64, f64, f64)> {
    let base = format!(
        "bench-shards-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let namespace = match layout.primaries {
        0 => base,
        k => slots::even_namespace(&base, layout.partitions, k).ok_or_else(|| {
            crate::error::BenchError::Setup(format!(
                "no namespace spreads {} partitions evenly over {k} primaries",
                layout.partitions
            ))
        })?,
    };
    let spec = StoreSpec::Redis {
        url: servers.url(layout.partitions),
        namespace,
    };
    let fx = Fixture::on(Kind::Redis, spec).await?;
    let probe = Probe::RedisNodes(servers.connections().await?);
    let (s, cost) = drain::sample_on(fx, CONCURRENCY, jobs, &probe).await?;
    Ok((
        s.rate(),
        cost.cpu_us.unwrap_or(f64::NAN),
        cost.commands.unwrap_or(f64::NAN),
    ))
}

fn ratio(v: Option<f64>, reference: Option<f64>) -> String {
    match (v, reference) {
        (Some(v), Some(r)) if r > 0.0 => format!("{:.2}", v / r),
        _ => "-".into(),
    }
}

fn figure(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

/// The markdown table: each layout beside `single p1`.
pub fn markdown(rows: &[ShardRow]) -> String {
    let reference = rows.iter().find(|r| r.layout == LAYOUTS[0]);
    let (ref_rate, ref_cpu) = (
        reference.and_then(ShardRow::rate),
        reference.and_then(ShardRow::cpu),
    );
    let mut out = String::from(
        "| layout | primaries | partitions | jobs/s | x single p1 | server CPU us/job | x single p1 | server cores busy | commands/job | load 1m | error |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n",
    );
    for r in rows {
        let busy = match (r.rate(), r.cpu()) {
            (Some(rate), Some(cpu)) => Some(rate * cpu / 1e6),
            _ => None,
        };
        let loads: Vec<String> = r.load_1m.iter().map(|l| format!("{l:.1}")).collect();
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.name,
            r.layout.primaries,
            r.layout.partitions,
            figure(r.rate(), 0),
            ratio(r.rate(), ref_rate),
            figure(r.cpu(), 1),
            ratio(r.cpu(), ref_cpu),
            figure(busy, 2),
            figure(mean(&r.commands_per_job), 2),
            loads.join(" / "),
            r.error.as_deref().unwrap_or(""),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_named_for_only_and_compared_with_the_single_server() {
        let names: Vec<String> = LAYOUTS.iter().map(|l| l.name()).collect();
        assert_eq!(names[0], "shards single p1");
        assert_eq!(names[4], "shards cluster 3 p6");
        let mut single = ShardRow::new(LAYOUTS[0], 10);
        single.jobs_per_sec = vec![1000.0, 3000.0];
        single.cpu_us_per_job = vec![50.0, 50.0];
        let mut three = ShardRow::new(LAYOUTS[4], 10);
        three.jobs_per_sec = vec![3000.0];
        three.cpu_us_per_job = vec![60.0];
        three.load_1m = vec![1.3];
        let table = markdown(&[single, three]);
        assert!(
            table.contains(
                "| shards cluster 3 p6 | 3 | 6 | 3000 | 1.50 | 60.0 | 1.20 | 0.18 | - | 1.3 |"
            ),
            "{table}"
        );
        assert!(table.contains("| shards single p1 | 0 | 1 | 2000 | 1.00 | 50.0 | 1.00 |"));
    }
}
