//! Delivery history for SQLite (lease_core::history): kept as compact JSON in the
//! execution's own row (`deliveries`), so the `UPDATE` that writes a transition writes its
//! history too and a purge takes it with the row.

use lease_core::{DeliveryEnd, DeliveryHistory, ExecutionRecord, LastError};

use crate::error::{OpError, OpResult};

/// The stored form of a history.
pub(crate) fn to_sql(history: &DeliveryHistory) -> OpResult<String> {
    serde_json::to_string(history)
        .map_err(|e| OpError::Corrupt(format!("delivery history cannot be written: {e}")))
}

/// A stored history read back; no value (a row written before the history existed) is an
/// empty one.
pub(crate) fn from_sql(text: Option<&str>) -> OpResult<DeliveryHistory> {
    text.map_or(Ok(DeliveryHistory::default()), |text| {
        serde_json::from_str(text)
            .map_err(|e| OpError::Corrupt(format!("stored delivery history is invalid: {e}")))
    })
}

/// Closes the entry of a stored running delivery whose lease ran out, as a reader would
/// see it ([`DeliveryHistory::effective`]), before a write that is not a claim moves the
/// record on (a cancel, a retry of an execution its expiry made dead).
pub(crate) fn close_expired(stored: &ExecutionRecord, history: &mut DeliveryHistory) {
    if stored.status == lease_core::ExecutionStatus::Running
        && let Some(expiry) = stored.lease_expires_at
    {
        history.end(DeliveryEnd::Expired, expiry, Some(LastError::expiry_note()));
    }
}
