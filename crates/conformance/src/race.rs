//! What the adapters' stale-holder race tests share (`tests/race.rs` of lease-postgres and
//! lease-redis, RFC 002 "Fencing tests" under real concurrency): the round count, the claim
//! each round starts with, and the tally whose verdict is "no violation, and both sides won
//! at least once" (a race that never raced proves nothing).

use std::time::Duration;

use lease_core::{
    ClaimRequest, Clock, ExecutionClient, ExecutionClientExt, ExecutionLease, ManualClock,
};

/// How long each round's claims last: long, since the manual clock, not real time, ends them.
pub const LEASE: Duration = Duration::from_secs(30);

/// A race stops after this many violations (enough to read, without 500 copies).
pub const MAX_VIOLATIONS: usize = 20;

/// The number of rounds: `LEASE_RACE_ROUNDS`, else 500.
pub fn rounds() -> usize {
    std::env::var("LEASE_RACE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500)
}

/// Claims at most one due execution at the manual clock's time, for [`LEASE`].
pub async fn claim<B: ExecutionClient + ?Sized>(
    backend: &B,
    clock: &ManualClock,
) -> Vec<ExecutionLease> {
    backend
        .claim_due(ClaimRequest {
            now: clock.now(),
            limit: 1,
            duration: LEASE,
        })
        .await
        .expect("claim")
}

/// What the rounds of one race observed.
#[derive(Debug, Default)]
pub struct Tally {
    /// Rounds where the peer's claim won (the stale holder's acknowledgement was `Lost`).
    pub claim_won: usize,
    /// Rounds where the stale holder's acknowledgement won (the peer claimed nothing).
    pub holder_won: usize,
    /// Rounds where the holder's step write committed before the peer's claim (and the
    /// peer read it).
    pub write_before_claim: usize,
    /// Each violation, as `round N: what`.
    pub violations: Vec<String>,
}

impl Tally {
    /// True once [`MAX_VIOLATIONS`] were seen: the race should stop.
    pub fn full(&self) -> bool {
        self.violations.len() >= MAX_VIOLATIONS
    }

    /// Prints the counts of `rounds` rounds and fails the test on any violation, or when
    /// one side never won (the operations never raced).
    pub fn assert_fenced(&self, rounds: usize) {
        eprintln!(
            "{rounds} rounds: peer claim won {}, stale holder's ack won {}, \
             write committed before the claim {}, violations {}",
            self.claim_won,
            self.holder_won,
            self.write_before_claim,
            self.violations.len()
        );
        assert!(
            self.violations.is_empty(),
            "fencing violated:\n{}",
            self.violations.join("\n")
        );
        assert!(
            self.claim_won > 0 && self.holder_won > 0,
            "the operations never raced: {self:?}"
        );
    }
}
