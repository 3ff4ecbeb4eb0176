//! The claim batch and the prefetch bound a dispatcher uses now, when the user fixed
//! neither ([`DispatcherOptions::claim_batch`], [`DispatcherOptions::prefetch`]).
//!
//! Small claims keep pickup quick and an idle dispatcher holding nothing; a long backlog
//! is drained fastest by large ones, since each claim and each batch of acknowledgements is
//! one round trip and one commit whatever it carries. So both start at their defaults and
//! follow the backlog: a claim that got every lease the batch asked for doubles the batch
//! (more is due), one that came back short halves it (the backlog is gone). The prefetch
//! bound doubles only when it, and not the expected starts, limited a claim that then came
//! back full, and no held lease was released unrun since the last claim; a lease released
//! unrun halves it, because then the slots did not start what was held within the hold.
//! The expected starts ([`crate::prefetch`]) still bound what is held, so a
//! larger bound never holds more than the slots are expected to start in time.

use crate::options::{DispatcherOptions, MAX_ADAPTIVE};

/// The current claim batch and prefetch bound of one dispatcher's claim loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Growth {
    batch: usize,
    prefetch: usize,
    batch_floor: usize,
    prefetch_floor: usize,
    adapt_batch: bool,
    adapt_prefetch: bool,
    /// The dispatcher's count of held leases released unrun, at the last claim.
    released: u64,
}

/// What one claim asked for and found.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClaimSize {
    /// Leases asked for.
    pub(crate) want: usize,
    /// Leases claimed.
    pub(crate) got: usize,
    /// The prefetch bound, not the expected starts, limited what the claim asked for.
    pub(crate) prefetch_bound: bool,
    /// Held leases released unrun so far (the dispatcher's metric).
    pub(crate) released: u64,
}

impl Growth {
    pub(crate) fn new(options: &DispatcherOptions) -> Self {
        Growth {
            batch: options.get_claim_batch(),
            prefetch: options.get_prefetch(),
            batch_floor: options.get_claim_batch(),
            prefetch_floor: options.get_prefetch(),
            adapt_batch: options.adapts_claim_batch(),
            adapt_prefetch: options.adapts_prefetch(),
            released: 0,
        }
    }

    /// The most leases the next claim asks for.
    pub(crate) fn batch(&self) -> usize {
        self.batch
    }

    /// The most leases held beyond the free slots.
    pub(crate) fn prefetch(&self) -> usize {
        self.prefetch
    }

    /// Follows one claim's result.
    pub(crate) fn claimed(&mut self, claim: ClaimSize) {
        let released_unrun = claim.released > self.released;
        self.released = claim.released;
        let full = claim.got == claim.want && claim.got > 0;
        if self.adapt_batch {
            self.batch = if full && claim.want >= self.batch {
                (self.batch * 2).min(MAX_ADAPTIVE)
            } else if claim.got < claim.want {
                (self.batch / 2).max(self.batch_floor)
            } else {
                self.batch
            };
        }
        if self.adapt_prefetch {
            self.prefetch = if released_unrun || claim.got < claim.want {
                (self.prefetch / 2).max(self.prefetch_floor)
            } else if full && claim.prefetch_bound {
                (self.prefetch * 2).min(MAX_ADAPTIVE)
            } else {
                self.prefetch
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(want: usize, got: usize, prefetch_bound: bool, released: u64) -> ClaimSize {
        ClaimSize {
            want,
            got,
            prefetch_bound,
            released,
        }
    }

    #[test]
    fn full_claims_double_both_up_to_the_ceiling_and_short_ones_halve_to_the_default() {
        let mut g = Growth::new(&DispatcherOptions::new());
        assert_eq!((g.batch(), g.prefetch()), (32, 32));
        for _ in 0..10 {
            let want = g.batch();
            g.claimed(size(want, want, true, 0));
        }
        assert_eq!((g.batch(), g.prefetch()), (MAX_ADAPTIVE, MAX_ADAPTIVE));
        g.claimed(size(512, 100, false, 0));
        assert_eq!((g.batch(), g.prefetch()), (256, 256));
        for _ in 0..10 {
            g.claimed(size(10, 0, false, 0));
        }
        assert_eq!(
            (g.batch(), g.prefetch()),
            (32, 32),
            "never below the defaults"
        );
    }

    #[test]
    fn a_claim_smaller_than_the_batch_does_not_grow_it() {
        let mut g = Growth::new(&DispatcherOptions::new());
        g.claimed(size(3, 3, false, 0));
        assert_eq!((g.batch(), g.prefetch()), (32, 32));
    }

    #[test]
    fn a_lease_released_unrun_halves_the_prefetch_bound_even_on_a_full_claim() {
        let mut g = Growth::new(&DispatcherOptions::new());
        for _ in 0..3 {
            let want = g.batch();
            g.claimed(size(want, want, true, 0));
        }
        assert_eq!(g.prefetch(), 256);
        g.claimed(size(256, 256, true, 1));
        assert_eq!(g.prefetch(), 128, "the slots did not start what was held");
        assert_eq!(g.batch(), 512, "the batch follows the backlog only");
        g.claimed(size(512, 512, true, 1));
        assert_eq!(g.prefetch(), 256, "no new release since");
    }

    #[test]
    fn fixed_values_never_change() {
        let options = DispatcherOptions::new().claim_batch(7).prefetch(5);
        let mut g = Growth::new(&options);
        for _ in 0..5 {
            g.claimed(size(7, 7, true, 0));
        }
        g.claimed(size(7, 1, false, 3));
        assert_eq!((g.batch(), g.prefetch()), (7, 5));
    }
}
