//! What every operation of one handle shares: namespace, clock and redelivery policy.

use lease_core::{RedeliveryPolicy, SharedClock, Timestamp};

/// The per-handle context passed to every operation on the connection.
#[derive(Debug)]
pub(crate) struct Scope {
    /// The database, for errors that name it.
    pub(crate) location: String,
    /// The namespace column value of every row this handle reads or writes.
    pub(crate) namespace: String,
    /// The authoritative clock.
    pub(crate) clock: SharedClock,
    /// The redelivery policy.
    pub(crate) policy: RedeliveryPolicy,
}

impl Scope {
    /// The clock's now, read inside the operation's transaction (after the write lock is
    /// taken, for mutating operations).
    pub(crate) fn now(&self) -> Timestamp {
        self.clock.now()
    }
}
