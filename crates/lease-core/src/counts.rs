//! How many executions a namespace holds in each status (for the operator command's
//! `status`), read by [`crate::ExecutionClient::status_counts`] (one atomic step on SQLite,
//! PostgreSQL and memory; one per partition on Redis, from counters its scripts keep, so a
//! count does not read every record), beside the namespace's takeover counter.

use serde::{Deserialize, Serialize};

use crate::execution::{ExecutionRecord, ExecutionStatus};
use crate::time::Timestamp;

/// Executions by *effective* status at the backend clock (a running lease whose expiry has
/// passed counts as admitted or suspended, as `get` reads it), plus the stored records the
/// backend cannot decode, which are counted apart and under no status, and the namespace's
/// takeovers so far ([`StatusCounts::takeovers`]), read in the same call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCounts {
    /// Admitted and never acknowledged as suspended.
    pub admitted: u64,
    /// Holding a live lease.
    pub running: u64,
    /// Acknowledged as suspended at least once, not running, not terminal.
    pub suspended: u64,
    /// Terminal: completed.
    pub completed: u64,
    /// Terminal: failed.
    pub failed: u64,
    /// Terminal: cancelled by an operator.
    #[serde(default)]
    pub cancelled: u64,
    /// Dead: out of attempts, waiting for an operator ([`crate::attempts`]).
    #[serde(default)]
    pub dead: u64,
    /// Stored records the backend set aside or cannot decode (listed by
    /// [`crate::ExecutionClient::list_corrupt`]); counted under no status.
    pub corrupt: u64,
    /// Claims that took over an expired lease since the namespace was created; never
    /// decreases, purges do not lower it. Not a status: a takeover claim leaves its
    /// execution running like any claim. Each backend adds to it in the atomic step of the
    /// takeover claim itself, and only there, so first claims and acknowledgements write
    /// nothing more for it.
    #[serde(default)]
    pub takeovers: u64,
}

impl StatusCounts {
    /// Every status, in life order, for tables.
    pub const STATUSES: [ExecutionStatus; 7] = [
        ExecutionStatus::Admitted,
        ExecutionStatus::Running,
        ExecutionStatus::Suspended,
        ExecutionStatus::Completed,
        ExecutionStatus::Failed,
        ExecutionStatus::Cancelled,
        ExecutionStatus::Dead,
    ];

    /// The count of one status.
    pub fn of(&self, status: ExecutionStatus) -> u64 {
        match status {
            ExecutionStatus::Admitted => self.admitted,
            ExecutionStatus::Running => self.running,
            ExecutionStatus::Suspended => self.suspended,
            ExecutionStatus::Completed => self.completed,
            ExecutionStatus::Failed => self.failed,
            ExecutionStatus::Cancelled => self.cancelled,
            ExecutionStatus::Dead => self.dead,
        }
    }

    /// Adds one execution of `status`.
    pub fn add(&mut self, status: ExecutionStatus) {
        *self.slot(status) += 1;
    }

    /// Adds `n` executions of the status stored as `name` ([`ExecutionStatus::as_str`]);
    /// any other name (`"corrupt"`, an unknown status) adds to [`StatusCounts::corrupt`].
    /// For backends that count in storage.
    pub fn add_named(&mut self, name: &str, n: u64) {
        let slot = match Self::STATUSES.iter().find(|s| s.as_str() == name) {
            Some(status) => self.slot(*status),
            None => &mut self.corrupt,
        };
        *slot += n;
    }

    fn slot(&mut self, status: ExecutionStatus) -> &mut u64 {
        match status {
            ExecutionStatus::Admitted => &mut self.admitted,
            ExecutionStatus::Running => &mut self.running,
            ExecutionStatus::Suspended => &mut self.suspended,
            ExecutionStatus::Completed => &mut self.completed,
            ExecutionStatus::Failed => &mut self.failed,
            ExecutionStatus::Cancelled => &mut self.cancelled,
            ExecutionStatus::Dead => &mut self.dead,
        }
    }

    /// Counts `records` by their effective status at `now` (the reference computation);
    /// records say nothing of past takeovers, so [`StatusCounts::takeovers`] is 0 here.
    pub fn of_records<'a>(
        records: impl IntoIterator<Item = &'a ExecutionRecord>,
        now: Timestamp,
    ) -> Self {
        let mut counts = StatusCounts::default();
        for record in records {
            counts.add(record.effective(now).status);
        }
        counts
    }

    /// Executions with a status (the corrupt records are not among them).
    pub fn total(&self) -> u64 {
        Self::STATUSES.iter().map(|s| self.of(*s)).sum()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::execution::Admission;
    use crate::ids::ExecutionId;

    fn admitted(id: &str, now: Timestamp) -> ExecutionRecord {
        let id = ExecutionId::new(id).expect("id");
        ExecutionRecord::admitted(&Admission::new(id), now)
    }

    #[test]
    fn an_expired_lease_counts_as_ended() {
        let now = Timestamp::from_millis(1_000);
        let mut live = admitted("live", now);
        live.status = ExecutionStatus::Running;
        live.lease_expires_at = Some(now.saturating_add(Duration::from_millis(1)));
        let mut expired = live.clone();
        expired.lease_expires_at = Some(now);
        let mut expired_suspended = expired.clone();
        expired_suspended.ever_suspended = true;
        let counts = StatusCounts::of_records([&live, &expired, &expired_suspended], now);
        assert_eq!(
            counts,
            StatusCounts {
                admitted: 1,
                running: 1,
                suspended: 1,
                ..StatusCounts::default()
            }
        );
        assert_eq!(counts.total(), 3);
        assert_eq!(counts.of(ExecutionStatus::Running), 1);
    }

    #[test]
    fn names_are_the_stored_ones_and_others_are_corrupt() {
        let mut counts = StatusCounts::default();
        for status in StatusCounts::STATUSES {
            counts.add_named(status.as_str(), 2);
        }
        counts.add_named("corrupt", 1);
        counts.add_named("Running", 1);
        assert_eq!(counts.total(), 14);
        assert_eq!(counts.corrupt, 2);
        assert!(StatusCounts::STATUSES.iter().all(|s| counts.of(*s) == 2));
    }
}
