//! The key gate (issue 21 item 4; DESIGN "How each backend gates its claims"): a claim
//! whose first candidates include a key some concurrency limit applies to runs as one
//! READ COMMITTED transaction of two statements per round, because one statement cannot
//! count a key's live leases race-free (its snapshot predates the commit of a concurrent
//! claim of the same key):
//!
//! 1. `execution/claim_walk.sql` locks the candidates (`FOR UPDATE SKIP LOCKED`, claim
//!    order, keys already at their limit left out) and then takes a transaction-scoped
//!    advisory lock per limited key among them (the first round waits for them, in
//!    ascending lock order; later rounds only try);
//! 2. `execution/claim_gated.sql`, whose snapshot is taken after those locks were granted,
//!    counts each key's live leases (seeing every lease the lock's previous holder
//!    committed, and this transaction's own), keeps a keyed candidate only while its key
//!    has room, and claims with `claim.sql`'s transition, horizon and wake-up.
//!
//! A round that comes back short while its walk may have stopped early (a key filled up
//! during it) is followed by another, up to [`MAX_ROUNDS`]. The commit releases the key
//! locks. Nothing waits for a row lock while holding a key lock, and the only waits for key
//! locks happen in one statement in one order, so claims cannot deadlock.
//!
//! The transaction spans client round trips, so a claimer frozen inside it would hold its
//! key locks, and every claim waiting for them, for as long as it stays frozen (a torture
//! run's SIGSTOPped runtime stalled every keyed claim for 18 minutes). It therefore opens
//! with a stall bound ([`stall_bound_ms`], `gate/begin.sql`): the server ends a
//! session idle inside it for longer, and a wait for a key lock longer than that fails;
//! both roll the attempt back with nothing claimed.

use lease_core::{ClaimBatch, ClaimRequest, Result};
use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, Connection, PgConnection};

use crate::backend::{PostgresBackend, query};
use crate::error::{Attempt, Effect, detached, settle};
use crate::rows::col;

/// At most this many rounds per claim: a round that came back short because a key filled
/// up during it (the walk had locked more of the key's rows than it had room for) walks on
/// past what earlier rounds walked; each round fills a key or takes rows.
const MAX_ROUNDS: usize = 4;

/// The longest a gated claim may stall keyed claims: see [`stall_bound_ms`].
pub const MAX_GATE_STALL_MS: i64 = 5_000;

/// The message opening the gate's transaction, `{ms}` the stall bound.
const BEGIN: &str = include_str!("gate/begin.sql");

/// The gate's stall bound in milliseconds for leases of `lease_ms`: the lease duration
/// (a frozen claimer holds its keys no longer than a lease it took would stay live), at
/// least [`crate::fenced::MIN_STALL_BOUND_MS`], at most [`MAX_GATE_STALL_MS`].
pub fn stall_bound_ms(lease_ms: i64) -> i64 {
    lease_ms.clamp(crate::fenced::MIN_STALL_BOUND_MS, MAX_GATE_STALL_MS)
}

/// A gated claim's parameters, owned (the attempt runs detached).
struct GatedParams {
    requested: i64,
    clock: Option<i64>,
    limit: i64,
    lease_ms: i64,
}

fn before_commit(error: sqlx::Error) -> Attempt {
    Attempt::before_commit(error)
}

impl PostgresBackend {
    /// Claims `request` through the key gate (see the module doc): the walk, the key
    /// locks and the counted claim in one transaction, never retried once its commit may
    /// have been sent (a retry could issue a second token).
    pub(crate) async fn claim_gated(
        &self,
        request: &ClaimRequest,
        lease_ms: i64,
    ) -> Result<ClaimBatch> {
        let params = std::sync::Arc::new(GatedParams {
            requested: request.now.as_millis(),
            clock: self.clock_param(),
            limit: i64::try_from(request.limit).unwrap_or(i64::MAX),
            lease_ms,
        });
        let found = self
            .run("claim_due", Effect::Write, |mut conn| {
                let (this, params) = (self.clone(), params.clone());
                detached(async move {
                    let r = this.gated_once(&mut conn, &params).await;
                    settle(r, &mut conn)
                })
            })
            .await
            .map_err(|e| crate::error::in_schema(e, self.schema()))?;
        let (batch, _) = self.claim_batch(&found)?;
        Ok(batch)
    }

    /// One attempt of the gated claim's transaction: the claim rows of its rounds (leases
    /// in claim order per round, each round's summary row after its leases; the last one
    /// is the claim's).
    async fn gated_once(
        &self,
        conn: &mut PgConnection,
        p: &GatedParams,
    ) -> std::result::Result<Vec<PgRow>, Attempt> {
        let begin = BEGIN.replace("{ms}", &stall_bound_ms(p.lease_ms).to_string());
        let mut tx = conn
            .begin_with(AssertSqlSafe(begin))
            .await
            .map_err(before_commit)?;
        let mut found = Vec::new();
        let mut walked_ids: Vec<String> = Vec::new();
        let mut remaining = p.limit;
        for round in 0..MAX_ROUNDS {
            let walked = self
                .walk(&mut tx, p, remaining, &walked_ids, round == 0)
                .await?;
            let walked_all = i64::try_from(walked.len()).unwrap_or(i64::MAX);
            let takeable: Vec<String> = walked
                .iter()
                .filter(|(_, may_take)| *may_take)
                .map(|(id, _)| id.clone())
                .collect();
            walked_ids.extend(walked.into_iter().map(|(id, _)| id));
            let rows: Vec<PgRow> = query(&self.execution_sql().claim_gated)
                .bind(p.requested)
                .bind(p.clock)
                .bind(remaining)
                .bind(p.lease_ms)
                .bind(&self.inner.delays)
                .bind(&takeable)
                .fetch_all(&mut *tx)
                .await
                .map_err(before_commit)?;
            // Every row but the summary is a lease.
            let taken = i64::try_from(rows.len().saturating_sub(1)).unwrap_or(i64::MAX);
            found.extend(rows);
            remaining -= taken;
            // Done when full, or when the walk met fewer rows than it could take (both of
            // its sides ran out): a later round finds nothing more.
            if remaining <= 0 || walked_all < remaining + taken {
                break;
            }
        }
        tx.commit().await?;
        Ok(found)
    }

    /// One round's walk (`claim_walk.sql`): (id, may this transaction take it?) in claim
    /// order; `wait`: the first round waits for its key locks, later ones only try.
    async fn walk(
        &self,
        tx: &mut PgConnection,
        p: &GatedParams,
        limit: i64,
        walked: &[String],
        wait: bool,
    ) -> std::result::Result<Vec<(String, bool)>, Attempt> {
        let rows: Vec<PgRow> = query(&self.execution_sql().claim_walk)
            .bind(p.requested)
            .bind(p.clock)
            .bind(limit)
            .bind(walked)
            .bind(wait)
            .fetch_all(&mut *tx)
            .await
            .map_err(before_commit)?;
        rows.iter()
            .map(|row| Ok((col(row, 0, "claim_due")?, col(row, 1, "claim_due")?)))
            .collect::<Result<Vec<_>>>()
            .map_err(|e| before_commit(sqlx::Error::Decode(Box::new(e))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stall_bound_is_the_lease_within_its_limits() {
        assert_eq!(stall_bound_ms(1_500), 1_500);
        assert_eq!(stall_bound_ms(30_000), MAX_GATE_STALL_MS);
        assert_eq!(stall_bound_ms(1), crate::fenced::MIN_STALL_BOUND_MS);
    }

    #[test]
    fn the_begin_message_sets_both_limits_then_begins() {
        let sql = BEGIN.replace("{ms}", "1500");
        assert!(sql.contains("'idle_in_transaction_session_timeout', '1500', true"));
        assert!(sql.contains("'lock_timeout', '1500', true"));
        assert!(sql.trim_end().ends_with("BEGIN"));
    }
}
