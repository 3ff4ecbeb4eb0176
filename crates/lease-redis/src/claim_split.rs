//! Claiming from a namespace split into partitions, keeping the rules of one
//! namespace: leases in claim order (priority descending, then `(due_at, id)`) over every
//! partition, and tokens from the one
//! counter of the namespace (unique across executions, each claim's above every earlier one).
//!
//! 1. **Peek** every partition (`claim/claim_due.lua` with `peek`: its candidates for `limit`
//!    leases with their due times and priorities, and its horizon; it claims nothing, writing
//!    only the index repairs any claim writes first).
//! 2. **Pick** the first `limit` candidates over all partitions in claim order.
//! 3. **Reserve** that many tokens from the namespace's counter under the home prefix
//!    (`claim_split/reserve_tokens.lua`), handed out in the picked order.
//! 4. **Claim** in each partition that has picks, with its tokens: the script re-plans and
//!    re-checks as any claim does, so a candidate another process took meanwhile is not
//!    claimed (its token is skipped), and a candidate whose stored token passed its reserved
//!    one (claimed and freed again meanwhile) refuses the claim (`TokenCounter`, nothing
//!    written), after which the whole claim is tried again.
//!
//! Three round trips in a row: the peeks (all partitions at once), the reservation, the
//! claims (at once). The horizon is the earliest over the partitions (the claims' where they ran, the peeks'
//! elsewhere); `now` the earliest clock reading.

use std::cmp::Reverse;

use lease_core::{ClaimRequest, LeaseError, Result, Timestamp};
use redis::Value;

use crate::backend::RedisBackend;
use crate::claim::{CLAIM_OP, ClaimArgs, ClaimOutcome, decode_claim, report_corrupt};
use crate::error::Access;
use crate::reply::Reply;
use crate::scripts::operation_script;

// The operation scripts this module runs, each compiled once per process.
operation_script!(RESERVE_TOKENS = claim_script(include_str!("claim_split/reserve_tokens.lua")));

/// How often a claim refused because of a concurrent claim is tried again.
const ATTEMPTS: usize = 3;

/// A candidate's place in claim order: higher priority first, then due ms, then id.
type Rank = (Reverse<i32>, i64, String);

/// One partition's peek: its clock, horizon and candidates by rank.
struct Peek {
    now: Timestamp,
    next: Option<Timestamp>,
    candidates: Vec<Rank>,
}

impl RedisBackend {
    /// A claim over every partition (see the module documentation).
    pub(crate) async fn claim_split(&self, request: ClaimRequest) -> Result<ClaimOutcome> {
        ClaimArgs::new(&request)?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.claim_split_once(request).await {
                Err(LeaseError::TokenCounter { .. }) if attempt < ATTEMPTS => continue,
                result => return result,
            }
        }
    }

    async fn claim_split_once(&self, request: ClaimRequest) -> Result<ClaimOutcome> {
        let op = CLAIM_OP;
        let partitions = self.keys().partitions();
        let peeks = futures::future::try_join_all(
            partitions
                .iter()
                .map(|prefix| self.peek(prefix, request, op)),
        )
        .await?;
        // Every candidate with its partition, in claim order; the first `limit` win.
        let mut all: Vec<(&Rank, usize)> = peeks
            .iter()
            .enumerate()
            .flat_map(|(p, peek)| peek.candidates.iter().map(move |rank| (rank, p)))
            .collect();
        all.sort();
        all.truncate(request.limit);
        let mut out = ClaimOutcome::default();
        let mut tokens: Vec<Vec<u64>> = vec![Vec::new(); partitions.len()];
        if !all.is_empty() {
            let base = self.reserve_tokens(all.len(), op).await?;
            for (i, (_, p)) in all.iter().enumerate() {
                tokens[*p].push(base + 1 + i as u64);
            }
        }
        let claims =
            futures::future::join_all(tokens.iter().enumerate().map(|(p, mine)| async move {
                match mine.is_empty() {
                    true => None,
                    false => Some(self.claim_with_tokens(&partitions[p], request, mine).await),
                }
            }))
            .await;
        let mut first_error = None;
        for (p, (peek, claimed)) in peeks.into_iter().zip(claims).enumerate() {
            let Some(claimed) = claimed else {
                out.merge(ClaimOutcome {
                    items: Vec::new(),
                    now: Some(peek.now),
                    next_claimable_at: peek.next,
                });
                continue;
            };
            match claimed {
                Ok(claimed) => out.merge(claimed),
                Err(e) => {
                    tracing::warn!(operation = op, partition = %partitions[p], error = %e,
                        "claiming from one partition failed; the others' leases stand");
                    // Work may be left there: claim again now.
                    out.next_claimable_at = Some(peek.now);
                    first_error.get_or_insert(e);
                }
            }
        }
        // Leases in claim order: their tokens were handed out in that order.
        out.items.sort_by_key(|(lease, _)| lease.token);
        match first_error {
            // Nothing was claimed anywhere: the failure is the answer.
            Some(e) if out.items.is_empty() => Err(e),
            _ => Ok(out),
        }
    }

    /// One partition's candidates and horizon (nothing claimed).
    async fn peek(&self, prefix: &str, request: ClaimRequest, op: &'static str) -> Result<Peek> {
        let v = self
            .claim_script(prefix, &request, op, false, false, b"peek")
            .await?;
        let reply = Reply::new(op);
        let mut items = reply.array(v)?;
        if let Some(Value::Array(_)) = items.last()
            && let Some(report) = items.pop()
        {
            report_corrupt(reply, report);
        }
        let mut items = items.into_iter();
        let now: i64 = reply.number(reply.next(&mut items, "now")?, "now")?;
        let next = reply.opt_string(reply.next(&mut items, "next")?)?;
        let next = match next.as_deref() {
            None | Some("") => None,
            Some(t) => Some(Timestamp::from_millis(
                t.parse()
                    .map_err(|_| reply.unexpected(&format!("next {t:?}")))?,
            )),
        };
        let mut candidates = Vec::new();
        while let Some(due) = items.next() {
            let due: i64 = reply.number(due, "due")?;
            let id = reply.string(reply.next(&mut items, "id")?)?;
            let priority: i32 = reply.number(reply.next(&mut items, "priority")?, "priority")?;
            candidates.push((Reverse(priority), due, id));
        }
        Ok(Peek {
            now: Timestamp::from_millis(now),
            next,
            candidates,
        })
    }

    /// Reserves `n` tokens of the namespace's counter; returns the counter before.
    async fn reserve_tokens(&self, n: usize, op: &'static str) -> Result<u64> {
        let v = self
            .eval(
                op,
                Access::Write,
                self.keys().prefix(),
                &RESERVE_TOKENS,
                &[n.to_string().as_bytes()],
            )
            .await?;
        let reply = Reply::new(op);
        reply.number(v, "token base")
    }

    /// The claim script on one partition with the tokens reserved for it.
    async fn claim_with_tokens(
        &self,
        prefix: &str,
        request: ClaimRequest,
        tokens: &[u64],
    ) -> Result<ClaimOutcome> {
        let op = CLAIM_OP;
        let request = ClaimRequest {
            limit: tokens.len(),
            ..request
        };
        let list = tokens
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        // Records and horizon always (one reply shape).
        let v = self
            .claim_script(prefix, &request, op, true, true, list.as_bytes())
            .await?;
        decode_claim(Reply::new(op), v, tokens.len())
    }
}
