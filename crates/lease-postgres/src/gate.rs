//! The key gate (docs/decisions/0021-concurrency-limits.md): claims that count concurrency
//! limits. `claim.sql` cannot count a key's live leases race-free (its snapshot predates
//! the commit of a concurrent claim of the same key), so when its picked rows include a key
//! some limit applies to it claims nothing and says so, and the claim runs
//! `execution/claim_keyed.sql` instead: one statement that locks the candidates, takes the
//! advisory lock of each limited key's bucket (one of 64, so a claim holds at most 64
//! entries of the server's shared lock table whatever its limit), counts the key's live
//! leases in a snapshot taken after the lock (`live_leases`, schema v12) and claims within
//! the room left. One round trip, one implicit transaction; the locks never outlive the
//! statement, so no client, even one frozen between round trips, holds them.
//!
//! Once a claim met a limited key, this backend runs the keyed statement first for every
//! later claim (it claims unkeyed rows as `claim.sql` does, at the cost of a few empty
//! CTEs), saving the handed-over attempt. A round that comes back short while its horizon
//! says something is due now (a key filled up during it, so its candidates were passed
//! over) is followed by another, up to [`MAX_ROUNDS`]: each round's statement sees the
//! earlier rounds' leases, so a key that filled up is left out of its walk.

use std::sync::atomic::Ordering;

use lease_core::{ClaimBatch, ClaimRequest, Result};
use sqlx::postgres::PgRow;

use crate::backend::PostgresBackend;
use crate::error::Effect;

/// At most this many rounds per claim: a round that came back short because a key filled
/// up during it walks on past that key in the next.
const MAX_ROUNDS: usize = 4;

/// The shortest a keyed claim waits for a key lock before it fails (nothing claimed).
pub const MIN_GATE_STALL_MS: i64 = crate::fenced::MIN_STALL_BOUND_MS;

/// The longest a keyed claim waits for a key lock before it fails (nothing claimed); in
/// between, the lease duration (`claim_keyed.sql`'s `bound`).
pub const MAX_GATE_STALL_MS: i64 = 5_000;

impl PostgresBackend {
    /// Whether this backend's claims start with the keyed statement (a claim met a limited
    /// key before).
    pub(crate) fn claims_keyed(&self) -> bool {
        self.inner.keyed_claims.load(Ordering::Relaxed)
    }

    /// Claims `request` with `claim_keyed.sql` (see the module doc), in up to
    /// [`MAX_ROUNDS`] statements, each never retried once it may have run (a retry could
    /// issue a second token). Later claims of this backend start with the keyed statement.
    pub(crate) async fn claim_keyed(
        &self,
        request: &ClaimRequest,
        lease_ms: i64,
    ) -> Result<ClaimBatch> {
        self.inner.keyed_claims.store(true, Ordering::Relaxed);
        let mut batch = ClaimBatch::default();
        let mut remaining = request.limit;
        for _ in 0..MAX_ROUNDS {
            let round = self.keyed_round(request, remaining, lease_ms).await?;
            remaining = remaining.saturating_sub(round.claimed.len());
            let due_now = match (round.now, round.next_claimable_at) {
                (Some(now), Some(next)) => next <= now,
                _ => false,
            };
            batch.now = round.now;
            batch.next_claimable_at = round.next_claimable_at;
            batch.claimed.extend(round.claimed);
            if remaining == 0 || !due_now {
                break;
            }
        }
        Ok(batch)
    }

    /// One keyed statement claiming at most `limit`.
    async fn keyed_round(
        &self,
        request: &ClaimRequest,
        limit: usize,
        lease_ms: i64,
    ) -> Result<ClaimBatch> {
        let found: Vec<PgRow> = self
            .run_statement(
                "claim_due",
                Effect::Write,
                &self.execution_sql().claim_keyed,
                |q| {
                    q.bind(request.now.as_millis())
                        .bind(self.clock_param())
                        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                        .bind(lease_ms)
                        .bind(&self.inner.delays)
                },
            )
            .await
            .map_err(|e| crate::error::in_schema(e, self.schema()))?;
        Ok(self.claim_batch(&found)?.0)
    }
}
