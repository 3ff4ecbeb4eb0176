//! Delivery history on Redis (lease-core's `history`): the open delivery is the running
//! record's own lease (`tk`, and `ca` when its claim issued it); the list `hist:<id>` beside
//! it holds the ended ones, oldest first, at most `MAX_DELIVERY_HISTORY`, and the record's
//! field `he` counts the ones dropped. The scripts that start and end deliveries write it
//! in the same step (`write_history` in `scripts/record.lua`): a takeover claim appends the
//! expired delivery; a suspension, a release and a cancel of a live lease append the one
//! they end; a terminal acknowledgement appends nothing (the completed or failed record
//! still describes its delivery); a stale holder's refused write writes nothing.
//! `purge_terminal` deletes the list with the record.

use lease_core::{
    DeliveryEnd, DeliveryEntry, DeliveryHistory, ErrorNote, ExecutionId, ExecutionStatus,
    FencingToken, LeaseError, Result, Timestamp,
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
        let claimed_at = reply.string(reply.next(&mut items, "claimed_at")?)?;
        if let Some(at) = record_delivery(&record, &history, &claimed_at) {
            let at = at.map_err(|_| reply.unexpected(&format!("claimed_at {claimed_at:?}")))?;
            history.claim(record.token, Timestamp::from_millis(at), None);
            if record.status.is_terminal() {
                let ended = record.last_delivery_ended_at.ok_or_else(|| {
                    reply.unexpected("an acknowledged record without its end instant")
                })?;
                history.end(DeliveryEnd::Acknowledged, ended, None);
            }
        }
        Ok(history.effective(&record, Timestamp::from_millis(now)))
    }
}

/// The claim instant of the delivery the record itself describes, if it describes one the
/// list does not hold: a running record's lease, or a completed or failed record's
/// acknowledged delivery (a terminal acknowledgement appends nothing). Records acknowledged
/// before that rule appended their delivery, so one whose token the list's last entry
/// already has is not added twice. `None` when its claim kept no `ca`.
fn record_delivery(
    record: &lease_core::ExecutionRecord,
    history: &DeliveryHistory,
    claimed_at: &str,
) -> Option<std::result::Result<i64, std::num::ParseIntError>> {
    if claimed_at.is_empty() {
        return None;
    }
    let listed = history
        .deliveries
        .last()
        .is_some_and(|last| last.token == record.token);
    let describes = match record.status {
        ExecutionStatus::Running => true,
        ExecutionStatus::Completed | ExecutionStatus::Failed => !listed,
        _ => false,
    };
    describes.then(|| claimed_at.parse())
}

/// One stored entry: `token`, `claimed_at`, its end and `ended_at`, separated by 0x1f, then
/// for an attempt 0x1f, the kind's length in bytes, 0x1f, the kind and the message.
fn entry_of(reply: Reply, text: &str) -> Result<DeliveryEntry> {
    let bad = || reply.unexpected(&format!("delivery entry {text:?}"));
    let parts: Vec<&str> = text.splitn(6, '\u{1f}').collect();
    let number =
        |i: usize| -> Result<i64> { parts.get(i).and_then(|p| p.parse().ok()).ok_or_else(bad) };
    let token = u64::try_from(number(0)?).map_err(|_| bad())?;
    let mut entry =
        DeliveryEntry::claimed(FencingToken::new(token), Timestamp::from_millis(number(1)?));
    let end = parts
        .get(2)
        .and_then(|e| DeliveryEnd::parse(e))
        .ok_or_else(bad)?;
    entry.end = Some(end);
    entry.ended_at = Some(Timestamp::from_millis(number(3)?));
    match parts.len() {
        4 => {}
        6 => {
            let len: usize = parts[4].parse().map_err(|_| bad())?;
            let rest = parts[5];
            if !rest.is_char_boundary(len.min(rest.len())) || len > rest.len() {
                return Err(bad());
            }
            let (kind, message) = rest.split_at(len);
            entry.error = Some(ErrorNote::new(kind, message));
        }
        _ => return Err(bad()),
    }
    Ok(entry)
}
