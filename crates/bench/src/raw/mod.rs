//! The raw baselines: each backend's own SQL statements / Lua scripts, issued without the
//! library, with the least client work that still checks every reply for success.
//!
//! A raw operation does what the library operation does on the server (the same
//! statements, in the same transactions) and nothing else: no input validation, no typed
//! decoding of the reply beyond "accepted", no retry loop. The difference between the two
//! columns of the report is therefore the library's own cost.

pub mod postgres;
pub mod redis;
pub mod sqlite;

use async_trait::async_trait;

use crate::error::Result;

/// Lease duration of every raw claim and renewal (the dispatcher's default, 30 s).
pub const LEASE_MS: i64 = 30_000;

/// A lease as the raw baseline keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawLease {
    /// Execution id.
    pub id: String,
    /// Fencing token.
    pub token: i64,
}

/// The four hot-path operations, raw.
#[async_trait]
pub trait Raw: Send + Sync + 'static {
    /// Claims up to `limit` due executions (the backend clock's now).
    async fn claim(&self, limit: usize) -> Result<Vec<RawLease>>;
    /// Renews a held lease for [`LEASE_MS`]; an error unless accepted.
    async fn renew(&self, lease: &RawLease) -> Result<()>;
    /// Writes a new done step record (attempt 1); an error unless accepted.
    async fn write_step(&self, lease: &RawLease, step_key: &str, response: &str) -> Result<()>;
    /// Acknowledges completed with `outcome` (JSON text); an error unless accepted.
    async fn acknowledge(&self, lease: &RawLease, outcome: &str) -> Result<()>;
    /// Admits `ids` (new, due now) in one statement / script / transaction, skipping ids
    /// that exist: the bare bound of `admit_batch`. An error unless it ran.
    async fn admit_batch(&self, ids: &[String]) -> Result<()>;
    /// Acknowledges `lease` completed with `outcome`, then claims up to `limit` due
    /// executions, in one round trip and one atomic step (the bound of
    /// `acknowledge_and_claim`). An error unless the acknowledgement was accepted.
    async fn ack_and_claim(
        &self,
        lease: &RawLease,
        outcome: &str,
        limit: usize,
    ) -> Result<Vec<RawLease>>;
    /// The bare bound of `purge_terminal`: deletes up to `limit` completed or failed
    /// executions with their step records in one statement / script / transaction (no
    /// receipts, start records, locks or re-checks); returns how many it deleted.
    async fn purge(&self, limit: usize) -> Result<usize>;
    /// Setup only (a fast fill, never timed): `n` copies of the terminal execution
    /// `template` with its step records, as ids `{prefix}{i:09}` for `i` in
    /// `from..from + n`, written server-side in a few large statements / scripts.
    async fn clone_terminal(&self, template: &str, prefix: &str, from: u64, n: u64) -> Result<()>;
    /// Setup only, after a bulk fill: what a server's background maintenance would do
    /// soon after (PostgreSQL: `ANALYZE` of the executions and steps tables; without it, a
    /// fresh table filled by `admit_batch` has no statistics until autovacuum runs and a
    /// claim of 1 over 5,000 due rows took 15 ms instead of 0.7 ms).
    async fn settle(&self) -> Result<()> {
        Ok(())
    }
    /// Setup only, after [`Raw::settle`], for rows that read a whole store (the console's
    /// counts): what autovacuum does once a table has taken enough inserts (PostgreSQL:
    /// `VACUUM`, which marks the filled pages all-visible, so an index-only scan reads no
    /// row; a fresh fill leaves the visibility map empty until autovacuum's next visit).
    async fn vacuum(&self) -> Result<()> {
        Ok(())
    }
}

/// The id of copy `i` of [`Raw::clone_terminal`].
pub fn clone_id(prefix: &str, i: u64) -> String {
    format!("{prefix}{i:09}")
}
