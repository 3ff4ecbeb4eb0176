//! Delivery history for SQLite (lease_core::history), kept in the execution's own row, so
//! the `UPDATE` that writes a transition writes its history too and a purge takes it with
//! the row.
//!
//! The latest delivery lives in the row's own columns, the ones before it in compact JSON
//! (`deliveries`), as lease-postgres keeps them (decision record 0018). While
//! `delivery_claimed_at` is set, the row describes its latest delivery: the lease token is
//! `token`, the claim instant is `delivery_claimed_at`, and its end follows from the status
//! (open on a running row, read as expired once its lease passed; acknowledged at
//! `last_delivery_ended_at` on a completed or failed row). A transition folds that delivery
//! into the JSON only when the columns stop describing it: the next claim folds the one
//! before, and a release, a suspension, a cancel and `retry_dead` fold the delivery they
//! end and clear the column. The drain's path (a first claim, then a terminal
//! acknowledgement) therefore neither decodes nor rewrites the JSON: rewriting it in both
//! writes of every job cost the drain a share of its throughput. Rows stored before the
//! column existed (column NULL, latest entry open in the JSON) read as before, and the
//! first transition that ends that delivery closes the JSON's open entry.

use lease_core::{
    DeliveryEnd, DeliveryEntry, DeliveryHistory, ErrorNote, ExecutionRecord, ExecutionStatus,
    LastError, MAX_DELIVERY_HISTORY, Timestamp,
};

use crate::error::{OpError, OpResult};

/// The entries a claim keeps in the JSON: the row's columns hold the last one of the bound.
const CLAIM_KEEP: usize = MAX_DELIVERY_HISTORY - 1;

/// The history as stored in a row: the JSON of the earlier deliveries and the claim instant
/// of the delivery the row's columns describe.
#[derive(Debug, Clone, Default)]
pub(crate) struct StoredHistory {
    /// `deliveries`, not decoded until a transition or a reader needs its entries.
    json: Option<String>,
    /// `delivery_claimed_at`: set while the row's columns describe its latest delivery.
    claimed_at: Option<i64>,
}

/// What a transition writes of the history, bound by the `UPDATE` it runs anyway.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HistoryWrite {
    /// The new `deliveries`, or `None` to leave the stored value.
    pub(crate) json: Option<String>,
    /// The new `delivery_claimed_at` (`Some(None)` clears it), or `None` to leave it.
    pub(crate) claimed_at: Option<Option<i64>>,
}

/// The stored form of a history.
pub(crate) fn to_sql(history: &DeliveryHistory) -> OpResult<String> {
    serde_json::to_string(history)
        .map_err(|e| OpError::Corrupt(format!("delivery history cannot be written: {e}")))
}

/// A stored history read back; no value (a row written before the history existed, or
/// one whose only delivery is in its columns) is an empty one.
fn from_sql(text: Option<&str>) -> OpResult<DeliveryHistory> {
    text.map_or(Ok(DeliveryHistory::default()), |text| {
        serde_json::from_str(text)
            .map_err(|e| OpError::Corrupt(format!("stored delivery history is invalid: {e}")))
    })
}

/// Drops the oldest entries past `keep`, counting them in `earlier`.
fn keep_last(history: &mut DeliveryHistory, keep: usize) {
    let excess = history.deliveries.len().saturating_sub(keep);
    if excess > 0 {
        history.deliveries.drain(..excess);
        history.earlier = history.earlier.saturating_add(excess as u64);
    }
}

/// How a transition ends the delivery it ends: (end, instant, the worker's error).
type Ending = (DeliveryEnd, Timestamp, Option<ErrorNote>);

/// The end of a stored running delivery whose lease ran out, as readers see it
/// ([`DeliveryHistory::effective`]): expired at the lease's expiry, with the lease-expired
/// note; `None` for any other stored record.
fn expiry_ending(stored: &ExecutionRecord) -> Option<Ending> {
    match (stored.status, stored.lease_expires_at) {
        (ExecutionStatus::Running, Some(expiry)) => {
            Some((DeliveryEnd::Expired, expiry, Some(LastError::expiry_note())))
        }
        _ => None,
    }
}

impl StoredHistory {
    /// The history of a row read as (`deliveries`, `delivery_claimed_at`).
    pub(crate) fn new(json: Option<String>, claimed_at: Option<i64>) -> Self {
        StoredHistory { json, claimed_at }
    }

    /// The history as stored once `write` is written.
    pub(crate) fn after(&self, write: &HistoryWrite) -> StoredHistory {
        StoredHistory {
            json: write.json.clone().or_else(|| self.json.clone()),
            claimed_at: write.claimed_at.unwrap_or(self.claimed_at),
        }
    }

    /// True while the row's columns describe its latest delivery.
    pub(crate) fn describes_latest(&self) -> bool {
        self.claimed_at.is_some()
    }

    /// The delivery the row's columns describe, as of `stored` (the stored record of the
    /// same row); `None` when the JSON holds the latest delivery. A status that cannot have
    /// a delivery in the columns is a corrupt row, not an invented entry.
    fn row_entry(&self, stored: &ExecutionRecord) -> OpResult<Option<DeliveryEntry>> {
        let Some(at) = self.claimed_at else {
            return Ok(None);
        };
        let mut entry = DeliveryEntry::claimed(stored.token, Timestamp::from_millis(at));
        match stored.status {
            ExecutionStatus::Running => {}
            ExecutionStatus::Completed | ExecutionStatus::Failed => {
                let ended = stored.last_delivery_ended_at.ok_or_else(|| {
                    OpError::Corrupt(format!(
                        "execution {} describes an acknowledged delivery without its end",
                        stored.id
                    ))
                })?;
                entry.ended_at = Some(ended);
                entry.end = Some(DeliveryEnd::Acknowledged);
            }
            other => {
                return Err(OpError::Corrupt(format!(
                    "{other} execution {} describes a delivery in its columns",
                    stored.id
                )));
            }
        }
        Ok(Some(entry))
    }

    /// The stored (not effective) history: the JSON's entries, then the row's.
    pub(crate) fn read(&self, stored: &ExecutionRecord) -> OpResult<DeliveryHistory> {
        let mut history = from_sql(self.json.as_deref())?;
        history.deliveries.extend(self.row_entry(stored)?);
        Ok(history)
    }

    /// The JSON with the row's delivery folded in (ended by `ending` when still open) or,
    /// without one, the JSON's open entry ended by `ending`; then only the last `keep`
    /// entries. Written only when that changed what is stored.
    fn fold(
        &self,
        stored: &ExecutionRecord,
        ending: Option<Ending>,
        keep: usize,
    ) -> OpResult<Option<String>> {
        let before = from_sql(self.json.as_deref())?;
        let mut history = before.clone();
        let row_entry = self.row_entry(stored)?;
        let had_row_entry = row_entry.is_some();
        history.deliveries.extend(row_entry);
        if let Some((end, at, error)) = ending {
            history.end(end, at, error);
        }
        keep_last(&mut history, keep);
        if had_row_entry || history != before {
            to_sql(&history).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A claim of the row at `now`: the new delivery goes into the columns. The delivery
    /// the row held before (a takeover: expired at its lease's expiry) is folded into the
    /// JSON first. A first claim writes no JSON at all.
    pub(crate) fn claim(&self, stored: &ExecutionRecord, now: Timestamp) -> OpResult<HistoryWrite> {
        let claimed_at = Some(Some(now.as_millis()));
        if self.json.is_none() && self.claimed_at.is_none() {
            return Ok(HistoryWrite {
                json: None,
                claimed_at,
            });
        }
        // A stored running row a claim may take is a lease that ran out: a takeover.
        let ending = expiry_ending(stored);
        Ok(HistoryWrite {
            json: self.fold(stored, ending, CLAIM_KEEP)?,
            claimed_at,
        })
    }

    /// A transition that ends the delivery at `at` as `end` says (a release, a suspension,
    /// a cancel): the columns stop describing it, so it is folded into the JSON.
    pub(crate) fn end(
        &self,
        stored: &ExecutionRecord,
        end: DeliveryEnd,
        at: Timestamp,
        error: Option<ErrorNote>,
    ) -> OpResult<HistoryWrite> {
        Ok(HistoryWrite {
            json: self.fold(stored, Some((end, at, error)), MAX_DELIVERY_HISTORY)?,
            claimed_at: self.claimed_at.map(|_| None),
        })
    }

    /// An acknowledgement ending the delivery as `end` at `at`. A terminal one leaves the
    /// columns describing the delivery (the status says acknowledged, and
    /// `last_delivery_ended_at` when), so it writes no history at all; a suspension folds.
    pub(crate) fn acknowledge(
        &self,
        stored: &ExecutionRecord,
        end: DeliveryEnd,
        at: Timestamp,
    ) -> OpResult<HistoryWrite> {
        if end == DeliveryEnd::Acknowledged && self.claimed_at.is_some() {
            return Ok(HistoryWrite::default());
        }
        self.end(stored, end, at, None)
    }

    /// A write that is not a claim moving a record on whose stored delivery may have run
    /// out (a cancel of an expired lease, a retry of an execution its expiry made dead):
    /// the delivery is closed as a reader sees it ([`DeliveryHistory::effective`]) and
    /// folded, since the new status no longer describes it.
    pub(crate) fn close_expired(&self, stored: &ExecutionRecord) -> OpResult<HistoryWrite> {
        let ending = expiry_ending(stored);
        Ok(HistoryWrite {
            json: self.fold(stored, ending, MAX_DELIVERY_HISTORY)?,
            claimed_at: self.claimed_at.map(|_| None),
        })
    }
}
