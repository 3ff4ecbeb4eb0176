//! `--pause-every MS` (operators pause a namespace; history rule 8): the controller pauses the
//! namespace for half of each period and resumes it, through its recorder, so the checker
//! sees each pause and resume next to the claims.

use std::time::Duration;

use lease_core::{ExecutionClient, PauseScope};
use tokio::time::Instant;

use super::state::Controller;

/// How long [`Controller::end_pause`] retries a resume before giving up (the liveness
/// check then reports what stayed held back).
const RESUME_WITHIN: Duration = Duration::from_secs(30);

impl Controller {
    /// Pauses the namespace when a period starts and resumes it half a period later. A
    /// pause whose call failed may still have committed, so it is resumed like one that
    /// returned.
    pub(super) async fn pause_some(&mut self) {
        let Some(pause_for) = self.a.controls.pause_for() else {
            return;
        };
        let now = Instant::now();
        match self.paused_since {
            None if now >= self.next_pause => {
                let _ = self.recorded.pause(&PauseScope::Namespace).await;
                self.paused_since = Some(now);
            }
            Some(since) if now.duration_since(since) >= pause_for => self.resume(pause_for).await,
            _ => {}
        }
    }

    /// Resumes the namespace; once that returned, the next pause is due `pause_for` later.
    async fn resume(&mut self, pause_for: Duration) {
        if self.recorded.resume(&PauseScope::Namespace).await.is_ok() {
            self.paused_since = None;
            self.next_pause = Instant::now() + pause_for;
        }
    }

    /// Resumes the namespace at the end of the faults (retrying a failed resume), so every
    /// execution can complete within the liveness bound.
    pub(super) async fn end_pause(&mut self) {
        if self.paused_since.is_none() {
            return;
        }
        let deadline = Instant::now() + RESUME_WITHIN;
        while Instant::now() < deadline {
            if self.recorded.resume(&PauseScope::Namespace).await.is_ok() {
                self.paused_since = None;
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        eprintln!("lease-torture: the namespace could not be resumed within {RESUME_WITHIN:?}");
    }
}
