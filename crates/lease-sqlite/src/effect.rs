//! Effect rows (RFC 004, reduced): the stored form of an [`EffectRecord`] and its owner's
//! wait mark. The rules are lease-core's engine's ([`lease_core::effect`]), run on these
//! rows through [`crate::SqliteStore`].

use lease_core::{EffectId, EffectRecord, EffectState, ExecutionId, Json, Timestamp};
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::error::{OpError, OpResult};

/// `$1 namespace, $2 id` -> the effect row.
const LOAD: &str = include_str!("effect/load.sql");

/// An effect row as stored, before decoding.
struct RawEffect {
    id: String,
    execution_id: String,
    result: Option<String>,
    begun_at: i64,
    settled_at: Option<i64>,
    waiting: bool,
}

fn read_raw(row: &Row<'_>) -> rusqlite::Result<RawEffect> {
    Ok(RawEffect {
        id: row.get(0)?,
        execution_id: row.get(1)?,
        result: row.get(2)?,
        begun_at: row.get(3)?,
        settled_at: row.get(4)?,
        waiting: row.get(5)?,
    })
}

impl RawEffect {
    /// The record, or `Corrupt` (a `Protocol` error naming the effect) for a row this
    /// library never writes: an invalid id, or a result without a settle time (or back).
    fn into_record(self) -> OpResult<EffectRecord> {
        let corrupt = |what: String| OpError::Corrupt(format!("effect {:?}: {what}", self.id));
        let id = EffectId::new(self.id.clone()).map_err(|e| corrupt(format!("id: {e}")))?;
        let execution_id = ExecutionId::new(self.execution_id.clone())
            .map_err(|e| corrupt(format!("execution id: {e}")))?;
        let (state, settled_at) = match (self.result, self.settled_at) {
            (None, None) => (EffectState::Pending, None),
            (Some(result), Some(at)) => (
                EffectState::Settled(Json::from_stored(result)),
                Some(Timestamp::from_millis(at)),
            ),
            _ => return Err(corrupt("result and settled_at disagree".to_owned())),
        };
        Ok(EffectRecord {
            id,
            execution_id,
            state,
            begun_at: Timestamp::from_millis(self.begun_at),
            settled_at,
        })
    }
}

/// The stored effect and whether its owner waits for it.
pub(crate) fn load(
    conn: &Connection,
    namespace: &str,
    id: &EffectId,
) -> OpResult<Option<(EffectRecord, bool)>> {
    let raw = conn
        .prepare_cached(LOAD)?
        .query_row(params![namespace, id.as_str()], read_raw)
        .optional()?;
    raw.map(|r| {
        let waiting = r.waiting;
        r.into_record().map(|record| (record, waiting))
    })
    .transpose()
}
