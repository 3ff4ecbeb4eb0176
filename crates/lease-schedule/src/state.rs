//! The persisted schedules: one entry per schedule in the store [`STORE`], keyed by name,
//! holding its definition and its cursor (docs/decisions/0035-schedules.md: state).
//!
//! Every write is a compare-and-set against the entry as read, and rises the entry's
//! `revision`; the cursor only moves forward (a scheduler with a stale view never moves it
//! back). A write's receipt is checked by reading the entry back, so two writers that
//! happen to share a receipt (the same revision) cannot mistake each other's write for
//! their own.

use std::collections::BTreeMap;

use lease_core::{
    ExecutionId, Json, LeaseError, StepKey, StoreClient, StoreId, StoreKey, StoreOp, StoreReceipt,
    Timestamp,
};
use serde::{Deserialize, Serialize};

use crate::error::{Result, ScheduleError};
use crate::schedule::{Definition, Schedule};

/// The store that holds every schedule of a backend namespace.
pub const STORE: &str = "lease.schedules";

/// How often a write is retried after another writer changed the entry first.
const WRITE_ATTEMPTS: usize = 16;

/// One schedule as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    /// Rises with every write of the entry.
    pub revision: u64,
    /// The backend clock at the first registration: occurrences before it are never
    /// admitted.
    pub registered_at: Timestamp,
    /// Every occurrence at or before this instant is settled (admitted, or skipped by the
    /// catch-up policy); `None` before the first.
    pub through: Option<Timestamp>,
    /// The latest occurrence admitted.
    pub last_admitted: Option<Timestamp>,
    /// The definition.
    pub definition: Definition,
}

impl Stored {
    /// The exclusive lower bound of the occurrences still to consider.
    pub fn cursor(&self) -> Timestamp {
        self.through
            .unwrap_or(Timestamp::from_millis(self.registered_at.as_millis() - 1))
    }
}

/// What a registration did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registered {
    /// The schedule was new.
    Created,
    /// An equal definition was already registered; nothing changed.
    Unchanged,
    /// A different definition was replaced ([`crate::Scheduler::replace`]); the cursor kept.
    Replaced,
}

/// The store id [`STORE`].
pub fn store_id() -> StoreId {
    StoreId::new(STORE).unwrap_or_else(|_| unreachable!("{STORE} is a valid store id"))
}

/// Every stored entry, creating the (empty) store when it does not exist.
pub async fn entries<S: StoreClient + ?Sized>(store: &S) -> Result<BTreeMap<StoreKey, Json>> {
    Ok(store.get_or_create(&store_id(), &[]).await?.entries)
}

/// Every stored entry without writing anything: none when the store does not exist (an
/// operator's read and a tick with nothing registered must not create it).
pub async fn read_only_entries<S: StoreClient + ?Sized>(
    store: &S,
) -> Result<BTreeMap<StoreKey, Json>> {
    let probe = StoreKey::new("lease.schedules.probe")?;
    match store.read_entry(&store_id(), &probe).await {
        Err(LeaseError::UnknownStore(_)) => Ok(BTreeMap::new()),
        Err(e) => Err(e.into()),
        // It exists (stores are never deleted), so this creates nothing.
        Ok(_) => entries(store).await,
    }
}

/// Decodes an entry.
pub fn decode(name: &str, value: &Json) -> Result<Stored> {
    value.decode().map_err(|e| ScheduleError::CorruptState {
        name: name.to_owned(),
        reason: e.to_string(),
    })
}

fn encode(stored: &Stored) -> Result<Json> {
    Json::to_json("schedule entry", stored).map_err(|e| match e {
        LeaseError::PayloadTooLarge { .. } => ScheduleError::InvalidOption {
            field: "schedule definition",
            reason: e.to_string(),
        },
        other => other.into(),
    })
}

/// Registers `schedule` at backend instant `now`: creates it, finds it equal, replaces it
/// (`replace`), or refuses a different definition with [`ScheduleError::Conflict`].
pub async fn register<S: StoreClient + ?Sized>(
    store: &S,
    schedule: &Schedule,
    now: Timestamp,
    replace: bool,
) -> Result<Registered> {
    schedule.check_fires_after(now)?;
    let key = schedule.key()?;
    let conflict = || ScheduleError::Conflict {
        name: schedule.name().to_owned(),
    };
    entries(store).await?;
    let mut wrote = None;
    for _ in 0..WRITE_ATTEMPTS {
        let current = store.read_entry(&store_id(), &key).await?;
        let decoded = match &current {
            Some(value) => Some(decode(schedule.name(), value)?),
            None => None,
        };
        let next = match &decoded {
            Some(d) if d.definition == *schedule.definition() => {
                return Ok(wrote.unwrap_or(Registered::Unchanged));
            }
            Some(_) if !replace => return Err(conflict()),
            Some(d) => Stored {
                revision: d.revision + 1,
                definition: schedule.definition().clone(),
                ..d.clone()
            },
            None => Stored {
                revision: 1,
                registered_at: now,
                through: None,
                last_admitted: None,
                definition: schedule.definition().clone(),
            },
        };
        wrote = Some(if decoded.is_some() {
            Registered::Replaced
        } else {
            Registered::Created
        });
        let receipt = receipt(
            &format!("schedules.register:{}", schedule.name()),
            next.revision,
        )?;
        let op = StoreOp::CompareAndSet {
            key: key.clone(),
            expected: current,
            new: encode(&next)?,
        };
        store.update(&receipt, &op).await?;
    }
    Err(contended(schedule.name()))
}

/// Moves the cursor of schedule `name` forward to `through` (and `last_admitted` to
/// `admitted`, when given), never back; `receipt_id` names the execution the write's receipt
/// belongs to (the occurrence's, so retention forgets it with the execution).
pub async fn advance<S: StoreClient + ?Sized>(
    store: &S,
    name: &str,
    through: Timestamp,
    admitted: Option<Timestamp>,
    receipt_id: &ExecutionId,
) -> Result<()> {
    let key = StoreKey::new(name)?;
    for _ in 0..WRITE_ATTEMPTS {
        let Some(current) = store.read_entry(&store_id(), &key).await? else {
            return Ok(());
        };
        let d = decode(name, &current)?;
        if d.through.is_some_and(|t| t >= through) {
            return Ok(());
        }
        let next = Stored {
            revision: d.revision + 1,
            through: Some(through),
            last_admitted: d.last_admitted.max(admitted),
            ..d
        };
        let step = StepKey::new(format!("schedule.advance:{}", next.revision))?;
        let receipt = StoreReceipt {
            store: store_id(),
            execution_id: receipt_id.clone(),
            step_key: step,
        };
        let op = StoreOp::CompareAndSet {
            key: key.clone(),
            expected: Some(current),
            new: encode(&next)?,
        };
        store.update(&receipt, &op).await?;
    }
    Err(contended(name))
}

fn receipt(execution: &str, revision: u64) -> Result<StoreReceipt> {
    Ok(StoreReceipt {
        store: store_id(),
        execution_id: ExecutionId::new(execution)?,
        step_key: StepKey::new(format!("revision:{revision}"))?,
    })
}

fn contended(name: &str) -> ScheduleError {
    ScheduleError::Backend(LeaseError::Unavailable {
        backend: "lease-schedule",
        operation: "schedule write",
        source: format!("schedule {name:?} kept changing under {WRITE_ATTEMPTS} attempts").into(),
    })
}
