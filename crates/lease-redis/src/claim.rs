//! `claim_due` and `claim_due_with_records`: one claim script, with or without each claimed
//! execution's record in its reply (RFC 002 `claimDue`; design.md section 4).

use lease_core::{
    ClaimRequest, ExecutionLease, ExecutionRecord, ExecutionStatus, FencingToken, Result, Timestamp,
};

use crate::backend::RedisBackend;
use crate::errors::Access;
use crate::reply::Reply;
use crate::scripts::SCRIPTS;
use crate::wire::{MAX_EXACT_MS, exact_time};

/// One claimed delivery: its lease and, when asked for, the record right after the claim.
pub(crate) type ClaimedItem = (ExecutionLease, Option<ExecutionRecord>);

impl RedisBackend {
    /// Runs the claim script. With `with_records`, the script also returns each claimed
    /// execution's hash as it stands right after its claim (`HGETALL` inside the script, no
    /// extra round trip), which is what `get` reads at that instant: the stored record is
    /// running with the lease's token and expiry, and a lease always expires after the
    /// claim's now, so the effective record is the stored one. Without, the reply carries
    /// only ids, tokens and expiries (`claim_due` stays as cheap as before).
    pub(crate) async fn claim(
        &self,
        request: ClaimRequest,
        with_records: bool,
    ) -> Result<Vec<ClaimedItem>> {
        let op: &'static str = if with_records {
            "claim_due_with_records"
        } else {
            "claim_due"
        };
        let lease_ms = request.validate()?;
        // A caller's now beyond the exact range is later than any clock: min() ignores it.
        let requested = if request.now.as_millis() > MAX_EXACT_MS {
            String::new()
        } else {
            exact_time("claim now", request.now)?.to_string()
        };
        let flag: &[u8] = if with_records { b"1" } else { b"" };
        let v = self
            .eval(
                op,
                Access::Write,
                &SCRIPTS.claim_due,
                &[
                    requested.as_bytes(),
                    request.limit.to_string().as_bytes(),
                    lease_ms.to_string().as_bytes(),
                    flag,
                ],
            )
            .await?;
        let reply = Reply::new(op);
        let items = reply.array(v)?;
        let stride = if with_records { 4 } else { 3 };
        if items.len() % stride != 0 || items.len() / stride > request.limit {
            return Err(reply.unexpected(&format!("{} elements", items.len())));
        }
        let mut out = Vec::with_capacity(items.len() / stride);
        let mut items = items.into_iter();
        while let Some(id) = items.next() {
            let execution_id = reply.execution_id(id)?;
            let token: u64 = reply.number(reply.next(&mut items, "token")?, "token")?;
            let expires: i64 = reply.number(reply.next(&mut items, "expiry")?, "expiry")?;
            if token == 0 {
                return Err(reply.unexpected("token 0"));
            }
            let lease = ExecutionLease {
                execution_id,
                token: FencingToken::new(token),
                expires_at: Timestamp::from_millis(expires),
            };
            let record = if with_records {
                let fields = reply.next(&mut items, "record")?;
                let record = reply
                    .record(lease.execution_id.clone(), fields)?
                    .ok_or_else(|| reply.unexpected("an empty record"))?;
                // The script wrote the lease into the record it read back.
                if record.status != ExecutionStatus::Running
                    || record.token != lease.token
                    || record.lease_expires_at != Some(lease.expires_at)
                {
                    return Err(reply.unexpected("a record that does not hold its lease"));
                }
                Some(record)
            } else {
                None
            };
            out.push((lease, record));
        }
        Ok(out)
    }
}
