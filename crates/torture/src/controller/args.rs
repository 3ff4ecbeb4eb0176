//! The options of a controller run (`lease-torture run --help`).

use std::collections::BTreeSet;
use std::num::NonZeroU64;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::RangedU64ValueParser;

use crate::app::AppWrite;
use crate::controls;
use crate::effects::EffectMode;
use crate::failover;
use crate::faults::{self, FaultKind};
use crate::values;

/// Options of a controller run (`lease-torture run --help`).
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Durations take a bare number in the unit their value name says \
    (SECS, MS) or humantime's spelling: 90s, 1m 30s, 500ms."
)]
pub struct RunArgs {
    /// sqlite:PATH | postgres://... | redis://... (default: sqlite, a file in the work dir).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Runtime processes, 1 to 64.
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=64))]
    pub processes: usize,
    /// Deliveries per process.
    #[arg(long, value_name = "N", default_value_t = 8,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..))]
    pub concurrency: usize,
    /// Executions kept in flight: admitted, not yet complete (at least 1).
    #[arg(long = "executions", value_name = "N", default_value_t = 100,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..))]
    pub window: usize,
    /// Stop admitting after N in all (default: no limit).
    #[arg(long, value_name = "N")]
    pub max_executions: Option<u64>,
    /// How long faults are injected and executions admitted.
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = values::secs)]
    pub duration: Duration,
    /// Fault schedule seed (default: from the clock; printed).
    #[arg(long, value_name = "N", default_value_t = values::clock_seed(), hide_default_value = true)]
    pub seed: u64,
    /// pause,kill,drop,slow-renew,restart,failover,partition,loss,latency | all | none (all:
    /// each kind the backend and the given options allow).
    #[arg(long, value_name = "LIST", default_value = "all", value_parser = faults::parse_kinds)]
    pub faults: BTreeSet<FaultKind>,
    /// Mean time between faults.
    #[arg(long, value_name = "MS", default_value = "2000", value_parser = values::millis)]
    pub fault_every: Duration,
    /// Lease duration, renewed every third; at least 30 ms.
    #[arg(long = "lease-ms", value_name = "MS", default_value = "1500", value_parser = values::lease_ms)]
    pub lease_ms: u64,
    /// Every execution must complete this long after the faults stop.
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = values::secs)]
    pub liveness: Duration,
    /// Shell command restarting the server (needed for the `restart` fault).
    #[arg(long, value_name = "CMD")]
    pub restart_cmd: Option<String>,
    /// Run each runtime incarnation under libfaketime, its clock offset by up to an hour
    /// either way and running 0.5x-2x (drawn from the seed; combines with any --faults).
    #[arg(long)]
    pub clock_skew: bool,
    /// Logs and the SQLite file (default: a fresh temp dir).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Also write the report as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write the run's timeline picture (SVG; always written to the work dir as
    /// timeline.svg).
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    /// Keep the work dir and the namespace even when the run passes.
    #[arg(long)]
    pub keep: bool,
    /// fenced: the application rows through step_in_tx / step_in_script; unfenced:
    /// NEGATIVE CONTROL, the rows written outside the fence (the checker must report
    /// violations).
    #[arg(long, value_name = "MODE", default_value = "fenced", value_parser = AppWrite::parse)]
    pub app_write: AppWrite,
    /// The failover fault's script and replication mode.
    #[command(flatten)]
    pub failover: failover::Options,
    /// helper: the effect step calls its provider through Delivery::effect; unfenced:
    /// NEGATIVE CONTROL, the provider called inside a plain step (the effect checker must
    /// report violations).
    #[arg(long, value_name = "MODE", default_value = "helper", value_parser = EffectMode::parse)]
    pub effects: EffectMode,
    /// Cancel every Nth admitted execution during the faults (checked by history rule 6),
    /// through the controller's recorder (default: no cancels).
    #[arg(long, value_name = "N")]
    pub cancel_every: Option<NonZeroU64>,
    /// Concurrency keys, their limits and priorities (history rule 7).
    #[command(flatten)]
    pub controls: controls::Controls,
    /// Each runtime in its own network namespace, reaching the server through a forwarder
    /// (root, ip and nft; PostgreSQL and Redis): needed for partition, loss and latency.
    #[arg(long)]
    pub netns: bool,
}
