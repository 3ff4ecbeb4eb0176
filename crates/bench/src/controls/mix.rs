//! The priorities, concurrency keys and limits the control rows put in the stored work.

use lease_core::{
    Admission, ConcurrencyKey, ConcurrencyLimit, LimitScope, Priority, SharedBackend,
};
use serde::Serialize;

use crate::error::{Context, Result};

/// Priorities, concurrency keys and limits of the stored work: execution `i` gets
/// priority `levels[i % levels.len()]` and key `k{(i / levels.len()) % keys:03}`; keys
/// `k000` to `k{limited - 1}` have a limit of `limit` (no namespace default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Mix {
    /// The priority levels, in rotation.
    pub levels: [i32; 4],
    /// Distinct keys.
    pub keys: u64,
    /// Keys with a limit of their own.
    pub limited: u64,
    /// Their limit.
    pub limit: u32,
}

/// The mix of the claim rows: 4 levels, 100 keys, 20 of them limited. The limit (1000)
/// is never reached by the claims of a measurement (at most a few thousand leases over 100
/// keys), so every claim of a limited key runs the key check and none is refused: the row
/// measures the check, not a saturated key.
pub const CLAIM_MIX: Mix = Mix {
    levels: [-10, 0, 10, 20],
    keys: 100,
    limited: 20,
    limit: 1000,
};

/// [`CLAIM_MIX`] without limits: priorities and keys in use, no key gate (the row that
/// separates what priorities and keys cost from what the limit check costs).
pub const UNLIMITED_MIX: Mix = Mix {
    limited: 0,
    ..CLAIM_MIX
};

/// The mix of the drain rows: as [`CLAIM_MIX`], limits of 2, which bind now and then at
/// concurrency 8 (the drain acknowledges, so places free again).
pub const DRAIN_MIX: Mix = Mix {
    limit: 2,
    ..CLAIM_MIX
};

/// [`DRAIN_MIX`] without limits (the drain row that separates the key gate's cost).
pub const DRAIN_UNLIMITED_MIX: Mix = Mix {
    limited: 0,
    ..DRAIN_MIX
};

impl Mix {
    /// The key of execution `i`.
    pub fn key(&self, i: u64) -> String {
        format!("k{:03}", (i / self.levels.len() as u64) % self.keys)
    }

    /// `a` with execution `i`'s priority and key.
    pub fn apply(&self, i: u64, a: Admission) -> lease_core::Result<Admission> {
        let level = self.levels[(i % self.levels.len() as u64) as usize];
        Ok(a.priority(Priority::new(level)?)
            .concurrency_key(ConcurrencyKey::new(self.key(i))?))
    }

    /// Sets the limits of the limited keys.
    pub async fn set_limits(&self, lib: &SharedBackend) -> Result<()> {
        let limit = ConcurrencyLimit::new(self.limit).context(|| "limit".into())?;
        for k in 0..self.limited {
            let key = ConcurrencyKey::new(format!("k{k:03}")).context(|| "key".into())?;
            lib.set_concurrency_limit(&LimitScope::Key(key), Some(limit))
                .await
                .context(|| "set_concurrency_limit".into())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_rotates_levels_and_keys() {
        assert_eq!(CLAIM_MIX.key(0), "k000");
        assert_eq!(CLAIM_MIX.key(3), "k000");
        assert_eq!(CLAIM_MIX.key(4), "k001");
        assert_eq!(CLAIM_MIX.key(4 * 100), "k000");
        let id = lease_core::ExecutionId::new("x").expect("id");
        let a = CLAIM_MIX.apply(6, Admission::new(id)).expect("admission");
        assert_eq!(a.priority.get(), 10);
        assert_eq!(
            a.concurrency_key
                .as_ref()
                .map(ToString::to_string)
                .as_deref(),
            Some("k001")
        );
        assert_eq!(DRAIN_MIX.limit, 2);
    }
}
