//! `claim_due_with_horizon`: one claim script whose reply carries each claimed execution's
//! record and the horizon (the script's clock and the earliest claimable instant it left)
//! (RFC 002 `claimDue`).

use lease_core::{
    ClaimBatch, ClaimRequest, Claimed, ExecutionLease, ExecutionRecord, ExecutionStatus,
    FencingToken, Result, Timestamp,
};

use crate::backend::RedisBackend;
use crate::error::Access;
use crate::reply::Reply;
use crate::scripts::operation_script;
use crate::wire::{MAX_EXACT_MS, exact_time};
use redis::Value;

// The operation scripts this module runs, each compiled once per process.
operation_script!(CLAIM_DUE = claim_script(include_str!("claim/claim_due.lua")));

/// One claimed delivery: its lease and, when asked for, the record right after the claim.
pub(crate) type ClaimedItem = (ExecutionLease, Option<ExecutionRecord>);

/// The claim's operation name, for errors and logs (the claim always returns the records,
/// the script's clock and the earliest claimable instant left).
pub(crate) const CLAIM_OP: &str = "claim_due_with_horizon";

/// A decoded claim reply.
#[derive(Debug, Default)]
pub(crate) struct ClaimOutcome {
    /// The claimed deliveries, in claim order.
    pub(crate) items: Vec<ClaimedItem>,
    /// The clock the script claimed at.
    pub(crate) now: Option<Timestamp>,
    /// The earliest claimable instant left in the namespace (`None` when nothing is
    /// pending).
    pub(crate) next_claimable_at: Option<Timestamp>,
}

impl RedisBackend {
    /// Runs the claim script. It returns each claimed execution's hash as it stands right
    /// after its claim (`HGETALL` inside the script, no extra round trip), which is what
    /// `get` reads at that instant: the stored record is running with the lease's token and
    /// expiry, and a lease always expires after the claim's now, so the effective record is
    /// the stored one. The reply starts with the script's clock and the first score of
    /// `ready` and of `waiting` (the earliest claimable instant left, never later than the
    /// truth: see `slots` in `scripts/record.lua`).
    pub(crate) async fn claim(&self, request: ClaimRequest) -> Result<ClaimOutcome> {
        self.await_first_subscribe().await;
        let partitions = self.keys().partitions();
        if partitions.len() == 1 {
            return self.claim_in(&partitions[0], request).await;
        }
        self.claim_split(request).await
    }

    /// The claim script on one partition.
    async fn claim_in(&self, prefix: &str, request: ClaimRequest) -> Result<ClaimOutcome> {
        let v = self
            .claim_script(prefix, &request, CLAIM_OP, true, true, b"")
            .await?;
        decode_claim(Reply::new(CLAIM_OP), v, request.limit)
    }

    /// Runs `claim/claim_due.lua` on `prefix` for `request`, with or without records and
    /// horizon; `mode` is its ARGV[9] (`""`, `peek`, or the reserved tokens: see
    /// `crate::claim_split`).
    pub(crate) async fn claim_script(
        &self,
        prefix: &str,
        request: &ClaimRequest,
        op: &'static str,
        records: bool,
        horizon: bool,
        mode: &[u8],
    ) -> Result<Value> {
        let args = ClaimArgs::new(request)?;
        let flag = |on: bool| -> &'static [u8] { if on { b"1" } else { b"" } };
        self.eval(
            op,
            Access::Write,
            prefix,
            &CLAIM_DUE,
            &[
                args.now.as_bytes(),
                args.limit.as_bytes(),
                args.lease_ms.as_bytes(),
                flag(records),
                self.publish_word(),
                flag(horizon),
                mode,
            ],
        )
        .await
    }
}

/// A claim request as the claiming scripts take it (`claim/claim_due.lua`,
/// `combined/acknowledge_and_claim.lua`): validated (limit, duration, the caller's now) before
/// any script runs, so bad input changes nothing.
pub(crate) struct ClaimArgs {
    /// The caller's now in ms, or `""` for the clock's (a now beyond the exact range is
    /// later than any clock, so `min()` ignores it).
    pub(crate) now: String,
    /// The claim limit.
    pub(crate) limit: String,
    /// The lease duration in ms.
    pub(crate) lease_ms: String,
}

impl ClaimArgs {
    /// Validates `request` (`ClaimRequest::validate`, the exact time range).
    pub(crate) fn new(request: &ClaimRequest) -> Result<Self> {
        let lease_ms = request.validate()?;
        let now = if request.now.as_millis() > MAX_EXACT_MS {
            String::new()
        } else {
            exact_time("claim now", request.now)?.to_string()
        };
        Ok(ClaimArgs {
            now,
            limit: request.limit.to_string(),
            lease_ms: lease_ms.to_string(),
        })
    }
}

impl ClaimOutcome {
    /// Adds another partition's claim: its items after these, the earlier clock reading
    /// (so a wait computed from it is never too long) and the earliest claimable instant.
    pub(crate) fn merge(&mut self, other: ClaimOutcome) {
        let earliest = |a: Option<Timestamp>, b: Option<Timestamp>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.items.extend(other.items);
        self.now = earliest(self.now, other.now);
        self.next_claimable_at = earliest(self.next_claimable_at, other.next_claimable_at);
    }

    /// The batch `claim_due_with_horizon` returns (every item carries its record).
    pub(crate) fn into_batch(self, op: &'static str) -> Result<ClaimBatch> {
        Ok(ClaimBatch {
            claimed: with_records(op, self.items)?,
            now: self.now,
            next_claimable_at: self.next_claimable_at,
        })
    }
}

/// The claims of a records-carrying claim reply (every item has its record).
pub(crate) fn with_records(op: &'static str, items: Vec<ClaimedItem>) -> Result<Vec<Claimed>> {
    items
        .into_iter()
        .map(|(lease, record)| match record {
            Some(record) => Ok(Claimed { lease, record }),
            None => Err(Reply::new(op).unexpected("no record")),
        })
        .collect()
}

/// Decodes the claim script's reply `v` (records and horizon) for a claim of at most `limit`
/// (`claim/claim_due.lua`; `acknowledge_and_claim` nests the same reply).
pub(crate) fn decode_claim(reply: Reply, v: Value, limit: usize) -> Result<ClaimOutcome> {
    let mut items = reply.array(v)?;
    let mut outcome = ClaimOutcome::default();
    {
        if items.len() < 2 {
            return Err(reply.unexpected(&format!("{} elements", items.len())));
        }
        let mut head = items.drain(..2);
        let now: i64 = reply.number(reply.next(&mut head, "now")?, "now")?;
        let next = reply.opt_string(reply.next(&mut head, "next")?)?;
        drop(head);
        outcome.now = Some(Timestamp::from_millis(now));
        outcome.next_claimable_at = match next.as_deref() {
            None | Some("") => None,
            Some(t) => {
                Some(Timestamp::from_millis(t.parse().map_err(|_| {
                    reply.unexpected(&format!("next claimable {t:?}"))
                })?))
            }
        };
    }
    let stride = 4;
    if items.len() % stride == 1 {
        // The last element reports the records the claim moved out as corrupt.
        if let Some(report) = items.pop() {
            report_corrupt(reply, report);
        }
    }
    if items.len() % stride != 0 || items.len() / stride > limit {
        return Err(reply.unexpected(&format!("{} elements", items.len())));
    }
    // The script has committed: from here on a bad item is logged and left out, never an
    // error that would hide the leases it issued. The script validates what
    // the client decodes, so this is a last line of defence.
    let mut items = items.into_iter();
    while let Some(id) = items.next() {
        let item: Vec<Value> = std::iter::once(id)
            .chain(items.by_ref().take(stride - 1))
            .collect();
        match decode_item(reply, item) {
            Ok(claimed) => outcome.items.push(claimed),
            Err(e) => tracing::error!(
                operation = reply.op,
                error = %e,
                "a claimed lease could not be decoded; it reaches nobody and will expire"
            ),
        }
    }
    Ok(outcome)
}

/// One claimed item of the reply: id, token, expiry and, with records, the `HGETALL`.
fn decode_item(reply: Reply, item: Vec<Value>) -> Result<ClaimedItem> {
    let mut item = item.into_iter();
    let execution_id = reply.execution_id(reply.next(&mut item, "id")?)?;
    let token: u64 = reply.number(reply.next(&mut item, "token")?, "token")?;
    let expires: i64 = reply.number(reply.next(&mut item, "expiry")?, "expiry")?;
    if token == 0 {
        return Err(reply.unexpected("token 0"));
    }
    let lease = ExecutionLease {
        execution_id,
        token: FencingToken::new(token),
        expires_at: Timestamp::from_millis(expires),
    };
    let fields = reply.next(&mut item, "record")?;
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
    Ok((lease, Some(record)))
}

/// Logs each record the claim moved out of the indexes as corrupt (`{'corrupt', id,
/// problem, ...}`); operators list them with `list_corrupt`.
pub(crate) fn report_corrupt(reply: Reply, report: Value) {
    let Ok(parts) = reply.array(report) else {
        tracing::warn!(operation = reply.op, "an unreadable corrupt-record report");
        return;
    };
    let mut parts = parts.into_iter().map(lossy);
    if parts.next().as_deref() != Some("corrupt") {
        tracing::warn!(operation = reply.op, "an unreadable corrupt-record report");
        return;
    }
    while let (Some(id), Some(problem)) = (parts.next(), parts.next()) {
        tracing::warn!(
            execution_id = %id,
            %problem,
            "corrupt execution record skipped by the claim and listed (list_corrupt)"
        );
    }
}

/// A reply string as text, invalid UTF-8 replaced (ids of corrupt records may be anything).
pub(crate) fn lossy(v: Value) -> String {
    match v {
        Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Value::SimpleString(s) => s,
        other => format!("{other:?}"),
    }
}
