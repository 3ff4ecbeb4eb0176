//! Effects (RFC 004, reduced from what RFC 002's write table states).
//!
//! An effect is one call to an external system that must not repeat (a card charge). Its
//! [`EffectId`] identifies it across redeliveries and holders; the external system receives
//! the id as its idempotency key. The backend records the effect's state:
//!
//! - `begin` (idempotent by receipt): the first call creates the effect, pending; a repeat, by
//!   any holder, returns its current state and creates nothing.
//! - `settle` (idempotent by receipt): the first result is kept; a later settle with an equal
//!   result returns it; a different result is a [`Settlement::Conflict`] carrying both values,
//!   and is not applied.
//! - `wait` (unfenced): registers the owner to be woken when the effect settles; the settle
//!   makes it due (a wake, as `request_wake` at the backend's now) in its own atomic step.
//!   A stale registration causes at most one extra delivery, which replay absorbs.
//!
//! None of these is fenced: the effect id already makes each take effect once, whichever
//! holder commits it. The step that returns the effect's result to workflow code is a
//! fenced step write (lease-runtime's `Delivery::effect`).

use serde::{Deserialize, Serialize};

use crate::error::{LeaseError, Result};
use crate::ids::{EffectId, ExecutionId};
use crate::json::Json;
use crate::time::Timestamp;

/// Where an effect stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum EffectState {
    /// Begun, no result recorded yet.
    Pending,
    /// Settled with its first result, which never changes.
    Settled(Json),
}

/// One effect as the backend records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EffectRecord {
    /// The effect's identity.
    pub id: EffectId,
    /// The execution that began it (its only owner: another execution's calls are refused).
    pub execution_id: ExecutionId,
    /// Pending or settled.
    pub state: EffectState,
    /// Backend time of the first `begin`.
    pub begun_at: Timestamp,
    /// Backend time of the first `settle`.
    pub settled_at: Option<Timestamp>,
}

impl EffectRecord {
    /// A new pending effect, as the first `begin` creates it.
    pub fn pending(id: EffectId, execution_id: ExecutionId, now: Timestamp) -> Self {
        EffectRecord {
            id,
            execution_id,
            state: EffectState::Pending,
            begun_at: now,
            settled_at: None,
        }
    }

    /// The settled result, if any.
    pub fn result(&self) -> Option<&Json> {
        match &self.state {
            EffectState::Pending => None,
            EffectState::Settled(result) => Some(result),
        }
    }

    /// `EffectOfAnotherExecution` unless `caller` owns this effect.
    pub fn check_owner(&self, caller: &ExecutionId) -> Result<()> {
        if self.execution_id == *caller {
            Ok(())
        } else {
            Err(LeaseError::EffectOfAnotherExecution {
                effect: self.id.clone(),
                owner: self.execution_id.clone(),
                caller: caller.clone(),
            })
        }
    }

    /// The settle rule (RFC 002: "the first result is kept ... a conflict is reported, not
    /// applied"), written once: what settling this record with `result` at `now` gives.
    /// Only [`Settlement::Recorded`] changes the record (and wakes the waiters).
    pub fn settle(&self, result: &Json, now: Timestamp) -> Settlement {
        match &self.state {
            EffectState::Pending => Settlement::Recorded(EffectRecord {
                state: EffectState::Settled(result.clone()),
                settled_at: Some(now),
                ..self.clone()
            }),
            EffectState::Settled(kept) if kept == result => {
                Settlement::AlreadySettled(self.clone())
            }
            EffectState::Settled(_) => Settlement::Conflict {
                kept: self.clone(),
                offered: result.clone(),
            },
        }
    }
}

/// What `begin` found or made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Begun {
    /// The effect's current record.
    pub record: EffectRecord,
    /// `true` for the call that created it.
    pub created: bool,
}

/// What `settle` did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a conflict must be reported"]
pub enum Settlement {
    /// This call's result is the effect's result (the first settle).
    Recorded(EffectRecord),
    /// An equal result was recorded before; nothing changed.
    AlreadySettled(EffectRecord),
    /// A different result was recorded before; this call's `offered` result was not applied.
    Conflict {
        /// The record with the kept (first) result.
        kept: EffectRecord,
        /// The result this call offered.
        offered: Json,
    },
}

impl Settlement {
    /// The effect's record after the call (the kept one on a conflict).
    pub fn record(&self) -> &EffectRecord {
        match self {
            Settlement::Recorded(r) | Settlement::AlreadySettled(r) => r,
            Settlement::Conflict { kept, .. } => kept,
        }
    }

    /// The effect's result after the call: always the first result (a settlement always
    /// leaves the record settled, so this is `Some`).
    pub fn result(&self) -> Option<&Json> {
        self.record().result()
    }
}

/// What `wait` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EffectWait {
    /// The effect is settled: nothing was registered.
    Settled(EffectRecord),
    /// The effect is pending: the owner is registered and will be woken by the settle.
    Registered,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> Json {
        Json::parse("test", text).expect("json")
    }

    fn record() -> EffectRecord {
        EffectRecord::pending(
            EffectId::new("e").expect("id"),
            ExecutionId::new("x").expect("id"),
            Timestamp::from_millis(5),
        )
    }

    #[test]
    fn first_result_is_kept_equal_repeats_return_it_different_ones_conflict() {
        let settled = match record().settle(&json("1"), Timestamp::from_millis(9)) {
            Settlement::Recorded(r) => r,
            other => panic!("{other:?}"),
        };
        assert_eq!(settled.result(), Some(&json("1")));
        assert_eq!(settled.settled_at, Some(Timestamp::from_millis(9)));
        assert_eq!(
            settled.settle(&json("1"), Timestamp::from_millis(20)),
            Settlement::AlreadySettled(settled.clone())
        );
        let conflict = settled.settle(&json("2"), Timestamp::from_millis(20));
        assert_eq!(conflict.result(), Some(&json("1")));
        assert!(matches!(conflict, Settlement::Conflict { offered, .. } if offered == json("2")));
    }

    #[test]
    fn only_the_owner_passes_the_owner_check() {
        let r = record();
        r.check_owner(&ExecutionId::new("x").expect("id"))
            .expect("owner");
        let err = r
            .check_owner(&ExecutionId::new("y").expect("id"))
            .expect_err("other");
        assert!(matches!(err, LeaseError::EffectOfAnotherExecution { .. }));
    }

    #[test]
    fn step_effect_ids_are_stable_and_never_shared() {
        let x = |s: &str| ExecutionId::new(s).expect("id");
        let k = |s: &str| crate::StepKey::new(s).expect("key");
        let a = EffectId::for_step(&x("a:b"), &k("c")).expect("id");
        let b = EffectId::for_step(&x("a"), &k("b:c")).expect("id");
        assert_ne!(a, b);
        assert_eq!(a, EffectId::for_step(&x("a:b"), &k("c")).expect("id"));
        let long = "x".repeat(200);
        assert!(EffectId::for_step(&x(&long), &k(&long)).is_err());
    }
}
