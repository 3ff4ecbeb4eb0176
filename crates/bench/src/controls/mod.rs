//! The control rows (controls in use): what a claim, a drain and a cancel cost once
//! priorities, concurrency keys and limits are in the stored work.
//!
//! * `controls claim 10^k` ([`claim`]): `claim_due` x1 on a store of `n` executions with
//!   mixed priorities and keys ([`mix::Mix`]), interleaved call by call with the same claim on a
//!   plain store of `n` (today's claim) and the raw claim statement / script on that plain
//!   store; target: the mixed claim costs at most [`claim::TARGET`] times the plain one at
//!   10^6, and stays flat from 10^3 to 10^6.
//!   `controls claim unlimited 10^k`: the same with priorities and keys but no limits (no key
//!   gate), which separates what the limit check costs.
//! * `controls drain c1`, `c8` ([`drain`]): 20,000 admitted with the mix, drained by a worker
//!   process, beside the plain drain and the raw pipeline on a plain store, runs alternating;
//!   `controls drain unlimited c1`, `c8` without limits; `controls drain configured c1`,
//!   `c8`, `c64` with every control set and none binding ([`setup::CONFIGURED`]).
//! * `controls cancel` ([`cancel`]): `cancel()` -> the dispatcher's worker sees its delivery
//!   cancelled, against the renewal interval.

pub mod cancel;
mod cells;
pub mod claim;
pub mod drain;
pub mod mix;
pub mod setup;

use serde::Serialize;

use crate::args::{Kind, Options};
use mix::{CLAIM_MIX, UNLIMITED_MIX};

/// The control rows of one run.
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

/// Runs the selected control rows of `kind` (none on the memory backend: no raw bound, no
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
    for setup in drain::setups() {
        for &c in drain::concurrency(&setup) {
            if options.selected(&drain::name(&setup, c)) {
                rows.drain
                    .push(drain::row(kind, &setup, c, options, crate::drain::JOBS).await);
            }
        }
    }
    if options.selected(cancel::NAME) {
        rows.cancel
            .push(cancel::row(kind, options, cancel::SAMPLES, cancel::RENEW).await);
    }
}
