//! The engine's delivery histories ([`crate::history`]): each is written in the same
//! transaction as the transition it records.

use crate::attempts::Release;
use crate::error::Result;
use crate::execution::{Acknowledged, ExecutionStatus};
use crate::history::DeliveryEnd;
use crate::ids::ExecutionId;
use crate::time::Timestamp;

use super::tx::Tx;
use super::values::DeliveryEvent;

/// Closes `id`'s open entry when its stored delivery's lease has expired by `now`: the step
/// about to apply the effective record (a claim, a cancel, a retry) writes down the expiry
/// that `get` reads, so the history agrees with the record it keeps. True when it did (for
/// a claim: a takeover).
pub(super) fn close_expired(tx: &mut impl Tx, id: &ExecutionId, now: Timestamp) -> Result<bool> {
    let expired = tx
        .read_execution(id, |r| {
            (r.status == ExecutionStatus::Running && !r.lease_live(now)).then(|| r.clone())
        })?
        .flatten();
    let Some(expired) = expired else {
        return Ok(false);
    };
    tx.record_delivery(
        id,
        DeliveryEvent::Expired {
            stored: &expired,
            at: now,
        },
    )?;
    Ok(true)
}

/// Closes `id`'s open entry as its acknowledgement `acked` says.
pub(super) fn acknowledged(
    tx: &mut impl Tx,
    id: &ExecutionId,
    acked: &Acknowledged,
    now: Timestamp,
) -> Result<()> {
    let end = match acked {
        Acknowledged::Suspended => DeliveryEnd::Suspended,
        Acknowledged::Terminal(_) => DeliveryEnd::Acknowledged,
    };
    let event = DeliveryEvent::Ended {
        end,
        at: now,
        error: None,
    };
    tx.record_delivery(id, event)
}

/// Closes `id`'s open entry as `release` ends it: an attempt is `Released` (with the
/// worker's error when it reported one; a retry reply is no error), an unstarted lease
/// `NotStarted`.
pub(super) fn released(
    tx: &mut impl Tx,
    id: &ExecutionId,
    release: &Release,
    now: Timestamp,
) -> Result<()> {
    let (end, error) = match release {
        Release::NotStarted => (DeliveryEnd::NotStarted, None),
        Release::Failed(note) => (DeliveryEnd::Released, Some(note)),
        Release::Retry => (DeliveryEnd::Released, None),
    };
    let event = DeliveryEvent::Ended {
        end,
        at: now,
        error,
    };
    tx.record_delivery(id, event)
}
