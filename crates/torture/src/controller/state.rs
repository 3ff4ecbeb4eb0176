//! The controller's state: the runtime slots, what is scheduled for later, and the
//! counters the report reads.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use lease_core::LeaseBackend;
use tokio::process::{Child, ChildStdin};
use tokio::time::Instant;

use super::args::RunArgs;
use crate::app::AppStore;
use crate::backend::Kind;
use crate::nemesis::Dropper;
use crate::netns::Network;
use crate::oplog::{OpLog, Tail};
use crate::recorder::Recorder;
use crate::skew::Skewer;
use crate::timeline::FaultEvent;

/// One runtime slot: the current process and its history.
pub(super) struct Slot {
    pub(super) incarnation: u32,
    pub(super) child: Option<Child>,
    pub(super) stdin: Option<ChildStdin>,
    pub(super) pid: Option<u32>,
    /// Set while we keep it down on purpose (killed, waiting to restart).
    pub(super) down: bool,
}

/// Something to do later.
#[derive(Debug)]
pub(super) enum Later {
    Respawn {
        slot: usize,
    },
    Fast {
        slot: usize,
        incarnation: u32,
    },
    /// End a network impairment (the fault whose event is `event` in `fault_events`).
    Heal {
        slot: usize,
        event: usize,
    },
}

/// One run's controller: the options, the backend, the runtime slots, what is scheduled
/// and what has been seen.
pub(super) struct Controller {
    pub(super) a: RunArgs,
    pub(super) kind: Kind,
    pub(super) url: String,
    pub(super) namespace: String,
    pub(super) dir: PathBuf,
    pub(super) exe: PathBuf,
    pub(super) slots: Vec<Slot>,
    pub(super) logs: Vec<PathBuf>,
    pub(super) tails: Vec<Tail>,
    pub(super) later: Vec<(Instant, Later)>,
    pub(super) backend: Arc<dyn LeaseBackend>,
    pub(super) app: AppStore,
    pub(super) control: Arc<OpLog>,
    /// Admissions, limits and cancels (`--cancel-every`) through the recorder into the
    /// controller log.
    pub(super) recorded: Recorder,
    /// Executions `--cancel-every` has tried to cancel.
    pub(super) cancel_tried: BTreeSet<String>,
    /// Cancels that returned.
    pub(super) cancels: u64,
    /// Since when the namespace may be paused (`--pause-every`): set at each pause call,
    /// cleared by a resume that returned.
    pub(super) paused_since: Option<Instant>,
    /// When the next pause is due.
    pub(super) next_pause: Instant,
    /// The backend instant the runtimes' schedulers stop at (`--schedule`: the end of the
    /// faults).
    pub(super) schedule_until_ms: Option<i64>,
    pub(super) dropper: Option<Dropper>,
    /// The namespaces, veths and forwarders of `--netns`.
    pub(super) net: Option<Network>,
    pub(super) server_port: u16,
    pub(super) admitted: BTreeMap<String, Instant>,
    pub(super) done: BTreeSet<String>,
    pub(super) next_id: u64,
    pub(super) faults_done: BTreeMap<String, u64>,
    /// Every fault that took effect, for the timeline.
    pub(super) fault_events: Vec<FaultEvent>,
    pub(super) faults_skipped: u64,
    pub(super) restarts: u64,
    pub(super) unexpected_exits: u64,
    pub(super) stale_refused: u64,
    pub(super) last_done_at: Instant,
    /// Draws and checks the runtimes' clock skews (`--clock-skew`).
    pub(super) skew: Option<Skewer>,
}

/// The id of the `n`th admitted execution.
pub(super) fn execution_name(n: u64) -> String {
    format!("e{n:06}")
}
