//! Delivery history on Redis (lease-core's `history`): the list `hist:<id>` beside each
//! execution record, oldest first, at most `MAX_DELIVERY_HISTORY` entries, and the record's
//! field `he` counting the ones dropped. The scripts that start and end deliveries write it
//! in the same step (`write_history` in `scripts/record.lua`): a claim appends an open entry
//! (closing a taken-over expired lease's entry as expired at its expiry), an
//! acknowledgement, a release and a cancel of a live lease close it; a stale holder's
//! refused write writes nothing. `purge_terminal` deletes the list with the record.

use lease_core::{
    DeliveryEnd, DeliveryEntry, DeliveryHistory, ErrorNote, ExecutionId, FencingToken, LeaseError,
    Result, Timestamp,
};

use crate::backend::RedisBackend;
use crate::error::Access;
use crate::reply::Reply;
use crate::scripts::operation_script;

// The operation script this module runs, compiled once per process.
operation_script!(DELIVERIES = script(include_str!("history/deliveries.lua")));

impl RedisBackend {
    /// `ExecutionClient::deliveries`: the stored history read with the record, then as a
    /// reader at the script's clock sees it (`DeliveryHistory::effective`).
    pub(crate) async fn read_deliveries(&self, id: &ExecutionId) -> Result<DeliveryHistory> {
        const OP: &str = "deliveries";
        let reply = Reply::new(OP);
        let args = [id.as_str().as_bytes()];
        let v = self
            .eval(OP, Access::Read, self.keys().of(id), &DELIVERIES, &args)
            .await?;
        let mut items = reply.array(v)?.into_iter();
        let Some(now) = items.next() else {
            return Err(LeaseError::UnknownExecution(id.clone()));
        };
        let now: i64 = reply.number(now, "clock")?;
        let record = reply
            .record(id.clone(), reply.next(&mut items, "record")?)?
            .ok_or_else(|| reply.unexpected("empty record"))?;
        let mut history = DeliveryHistory::default();
        for entry in reply.array(reply.next(&mut items, "entries")?)? {
            history
                .deliveries
                .push(entry_of(reply, &reply.string(entry)?)?);
        }
        history.earlier = reply.number(reply.next(&mut items, "earlier")?, "earlier")?;
        Ok(history.effective(&record, Timestamp::from_millis(now)))
    }
}

/// One stored entry: a JSON array of strings, token, claimed_at, then once ended its end,
/// ended_at and, for an attempt, the error's kind and message.
fn entry_of(reply: Reply, text: &str) -> Result<DeliveryEntry> {
    let bad = || reply.unexpected(&format!("delivery entry {text:?}"));
    let parts: Vec<String> = serde_json::from_str(text).map_err(|_| bad())?;
    let number =
        |i: usize| -> Result<i64> { parts.get(i).and_then(|p| p.parse().ok()).ok_or_else(bad) };
    let token = u64::try_from(number(0)?).map_err(|_| bad())?;
    let mut entry =
        DeliveryEntry::claimed(FencingToken::new(token), Timestamp::from_millis(number(1)?));
    match parts.len() {
        2 => {}
        4 | 6 => {
            entry.end = Some(DeliveryEnd::parse(&parts[2]).ok_or_else(bad)?);
            entry.ended_at = Some(Timestamp::from_millis(number(3)?));
            if parts.len() == 6 {
                entry.error = Some(ErrorNote::new(parts[4].clone(), parts[5].clone()));
            }
        }
        _ => return Err(bad()),
    }
    Ok(entry)
}
