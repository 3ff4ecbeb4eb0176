//! The issue 21 rows (controls in use): what a claim, a drain and a cancel cost once
//! priorities, concurrency keys and limits are in the stored work.
//!
//! * `controls claim 10^k` ([`claim`]): `claim_due` x1 on a store of `n` executions with
//!   mixed priorities and keys ([`Mix`]), interleaved call by call with the same claim on a
//!   plain store of `n` (today's claim) and the raw claim statement / script on that plain
//!   store; target: the mixed claim costs at most [`claim::TARGET`] times the plain one at
//!   10^6, and stays flat from 10^3 to 10^6.
//! * `controls drain c1`, `c8` ([`drain`]): 20,000 admitted with the mix, drained by a worker
//!   process, beside the plain drain and the raw pipeline on a plain store, runs alternating.
//! * `controls cancel` ([`cancel`]): `cancel()` -> the dispatcher's worker sees its delivery
//!   cancelled, against the renewal interval.

pub mod cancel;
pub mod claim;
pub mod drain;

use lease_core::{
    Admission, ConcurrencyKey, ConcurrencyLimit, LimitScope, Priority, SharedBackend,
};
use serde::Serialize;

use crate::args::{Kind, Options};
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

/// The issue 21 rows of one run.
#[derive(Debug, Default, Serialize)]
pub struct ControlRows {
    /// Claim cost with the mix.
    pub claim: Vec<claim::ClaimRow>,
    /// Drain with the mix.
    pub drain: Vec<drain::DrainRow>,
    /// Cancel latency.
    pub cancel: Vec<cancel::CancelRow>,
}

impl ControlRows {
    /// True when nothing was measured.
    pub fn is_empty(&self) -> bool {
        self.claim.is_empty() && self.drain.is_empty() && self.cancel.is_empty()
    }

    /// True when every measurement ran.
    pub fn ok(&self) -> bool {
        self.claim.iter().all(|r| r.error.is_none())
            && self.drain.iter().all(|r| r.error.is_none())
            && self.cancel.iter().all(|r| r.error.is_none())
    }

    /// The markdown tables.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        if !self.claim.is_empty() {
            out.push_str(&claim::markdown(&self.claim));
            out.push('\n');
            out.push_str(&claim::flatness_markdown(&self.claim));
            out.push('\n');
        }
        if !self.drain.is_empty() {
            out.push_str(&drain::markdown(&self.drain));
            out.push('\n');
        }
        if !self.cancel.is_empty() {
            out.push_str(&cancel::markdown(&self.cancel));
        }
        out
    }
}

/// Runs the selected issue 21 rows of `kind` (none on the memory backend: no raw bound, no
/// store another process can open).
pub async fn run(kind: Kind, options: &Options, rows: &mut ControlRows) {
    if kind == Kind::Memory {
        return;
    }
    for n in crate::stored::SIZES
        .into_iter()
        .filter(|&n| n <= options.stored_max)
    {
        for mix in [CLAIM_MIX, UNLIMITED_MIX] {
            if options.selected(&claim::name(&mix, n)) {
                rows.claim
                    .push(claim::row(kind, &mix, n, options, options.duration).await);
            }
        }
    }
    for c in drain::CONCURRENCY {
        if options.selected(&drain::name(c)) {
            rows.drain
                .push(drain::row(kind, c, options, crate::drain::JOBS).await);
        }
    }
    if options.selected(cancel::NAME) {
        rows.cancel
            .push(cancel::row(kind, options, cancel::SAMPLES, cancel::RENEW).await);
    }
}

/// `x` with two decimals, `-` for none.
fn two(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |x| format!("{x:.2}"))
}

/// The markdown of a verdict.
fn verdict(error: &Option<String>, met: Option<bool>) -> String {
    match (error, met) {
        (Some(e), _) => format!("ERROR: {e}"),
        (None, Some(true)) => "yes".into(),
        (None, Some(false)) => "**no**".into(),
        (None, None) => String::new(),
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
