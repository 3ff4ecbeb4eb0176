//! `acknowledge_and_claim`: one acknowledgement and the next claim in one script (so
//! one round trip per delivery at low concurrency).

use lease_core::{
    AckAndClaim, Acknowledgement, ClaimBatch, ClaimRequest, ExecutionClient, Fenced, Result,
};
use redis::Value;

use crate::ack::{acknowledged, outcome_args};
use crate::backend::RedisBackend;
use crate::claim::{ClaimArgs, decode_claim};
use crate::error::{Access, TOKEN_COUNTER_CODE};
use crate::refusal::is_lost;
use crate::reply::Reply;
use crate::scripts::operation_script;
use crate::wire::token_arg;

// The operation scripts this module runs, each compiled once per process.
operation_script!(
    ACKNOWLEDGE_AND_CLAIM = ack_claim_script(include_str!("combined/acknowledge_and_claim.lua"))
);

const OP: &str = "acknowledge_and_claim";

impl RedisBackend {
    /// Runs `combined/acknowledge_and_claim.lua`: the acknowledgement checked and applied exactly
    /// as `acknowledge` (the scripts share `scripts/ack.lua`), then the claim evaluated after it
    /// exactly as `claim_due_with_horizon` (they share `scripts/claim.lua`).
    ///
    /// The claim request and the lease token are validated before the script, and the
    /// script refuses an unknown execution, token 0 or a foreign token before any write, so
    /// bad input is a typed error with nothing applied (no claim either). When the token
    /// counter refuses the claim after an applied acknowledgement, the claim wrote nothing:
    /// the acknowledgement is returned with an empty claim and the refusal is logged (as the
    /// trait's default does for a failed claim); after a lost one the refusal is the error
    /// (`TokenCounter`), nothing having changed.
    pub(crate) async fn ack_and_claim(
        &self,
        ack: &Acknowledgement,
        next: ClaimRequest,
    ) -> Result<AckAndClaim> {
        let claim = ClaimArgs::new(&next)?;
        if self.keys().split() {
            return self.ack_then_claim(ack, next).await;
        }
        let token = token_arg(ack.lease.token)?;
        let (kind, value) = outcome_args(&ack.outcome);
        self.await_first_subscribe().await;
        let v = self
            .eval(
                OP,
                Access::Write,
                self.keys().prefix(),
                &ACKNOWLEDGE_AND_CLAIM,
                &[
                    ack.lease.execution_id.as_str().as_bytes(),
                    token.as_bytes(),
                    kind.as_bytes(),
                    value.as_bytes(),
                    self.publish_word(),
                    claim.now.as_bytes(),
                    claim.limit.as_bytes(),
                    claim.lease_ms.as_bytes(),
                ],
            )
            .await?;
        let reply = Reply::new(OP);
        let (status, mut rest) = reply.status(v)?;
        let acknowledged = match (is_lost(reply, &status, &ack.lease)?, status.as_str()) {
            (true, _) => Fenced::Lost,
            (false, "ok") => Fenced::Accepted(acknowledged(&ack.outcome)),
            (false, other) => return Err(reply.unexpected(other)),
        };
        let claimed = reply.next(&mut rest, "claim")?;
        let next = match claimed {
            Value::Array(_) => decode_claim(reply, claimed, next.limit)?.into_batch(OP)?,
            refused => refused_claim(reply, refused, &mut rest)?,
        };
        Ok(AckAndClaim { acknowledged, next })
    }
}

impl RedisBackend {
    /// With partitions: the acknowledgement (its execution's partition), then a claim across
    /// every partition from the rotating start, as `claim_due_with_horizon` (two or more
    /// round trips; one script would claim from the acknowledged execution's partition
    /// first every time and could starve the others). A failed claim after an applied
    /// acknowledgement is logged and an empty claim, as in the trait's default.
    async fn ack_then_claim(
        &self,
        ack: &Acknowledgement,
        next: ClaimRequest,
    ) -> Result<AckAndClaim> {
        let acknowledged = self.acknowledge(&ack.lease, &ack.outcome).await?;
        let next = match self.claim(next).await {
            Ok(claimed) => claimed.into_batch(OP)?,
            Err(e) => {
                tracing::warn!(operation = OP, error = %e, "the claim after an acknowledgement failed");
                ClaimBatch::default()
            }
        };
        Ok(AckAndClaim { acknowledged, next })
    }
}

/// The claim part `{'LEASETOKEN', reason}` of a reply whose acknowledgement was applied and
/// whose claim the token counter refused (nothing claimed): logged, an empty batch.
fn refused_claim(
    reply: Reply,
    word: Value,
    rest: &mut impl Iterator<Item = Value>,
) -> Result<ClaimBatch> {
    let word = reply.string(word)?;
    if word != TOKEN_COUNTER_CODE {
        return Err(reply.unexpected(&word));
    }
    let reason = reply.string(reply.next(rest, "reason")?)?;
    tracing::error!(
        operation = OP,
        %reason,
        "the token counter refused the claim after an applied acknowledgement; nothing claimed"
    );
    Ok(ClaimBatch::default())
}
