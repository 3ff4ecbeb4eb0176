//! What every handler of the console shares.

use std::sync::Arc;
use std::time::Duration;

use lease::LeaseBackend;
use tokio::sync::Semaphore;

use super::activity::Activity;
use super::guard::Guard;
use crate::connect::Limits;

/// What every handler shares.
pub struct Ui {
    pub backend: Arc<dyn LeaseBackend>,
    pub limits: Limits,
    pub guard: Arc<Guard>,
    pub allow_writes: bool,
    pub refresh: Duration,
    /// One permit per open event stream (`--max-event-streams`).
    pub streams: Arc<Semaphore>,
    /// The backend as the header shows it: its kind, namespace and URL, password redacted.
    pub shown: String,
    /// The status counts sampled for the activity page.
    pub activity: Arc<Activity>,
}
