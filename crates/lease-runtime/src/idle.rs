//! Waiting until a dispatcher has nothing to do ([`crate::Dispatcher::idle`]), without
//! sleeping: the claim loop's own claims say whether anything is due, and every delivery
//! that ends says so.
//!
//! Idle means: no delivery runs, no lease is held for one, no acknowledgement is in flight
//! in the background, and a claim *sent after all of that ended* found nothing claimable at
//! the backend's clock. Only such a claim can have seen everything the earlier deliveries
//! wrote (an admission they started, a wake already due). Work scheduled for later (a
//! `not_before`, a durable sleep, a redelivery delay) does not keep a dispatcher busy.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

use lease_core::time::Timestamp;

/// What the idle waiters watch: the last claim's answer, and a signal for every change.
#[derive(Default)]
pub(crate) struct IdleWatch {
    changed: Notify,
    last_claim: Mutex<Option<ClaimReport>>,
    /// Deliveries started so far: a waiter that saw the dispatcher quiet knows whether any
    /// ran since, even if it only looks again after they all ended.
    started: AtomicU64,
    /// Claims numbered so far. A number, not a clock reading: two readings of a coarse
    /// clock can be equal, and then a claim sent just before the dispatcher fell quiet
    /// would pass for one sent after it.
    claims: AtomicU64,
}

/// One claim's answer, as far as idleness goes.
#[derive(Debug, Clone, Copy)]
struct ClaimReport {
    /// The claim's number ([`IdleWatch::claim_sending`]).
    seq: u64,
    /// It claimed nothing, and nothing was claimable at its clock.
    nothing_due: bool,
}

impl IdleWatch {
    /// Numbers a claim about to be sent: later claims get higher numbers.
    pub(crate) fn claim_sending(&self) -> u64 {
        self.claims.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The claims numbered so far: every claim numbered later was sent after this call.
    fn claims_numbered(&self) -> u64 {
        self.claims.load(Ordering::SeqCst)
    }

    /// Claim number `seq` got `got` leases at backend clock `now` (if reported) and saw
    /// `next` as the earliest claimable instant.
    pub(crate) fn claimed(
        &self,
        seq: u64,
        now: Option<Timestamp>,
        next: Option<Timestamp>,
        got: usize,
    ) {
        let due = match (now, next) {
            (Some(now), Some(next)) => next <= now,
            // Without the backend's clock, an empty claim is all there is to go by.
            _ => false,
        };
        let report = ClaimReport {
            seq,
            nothing_due: got == 0 && !due,
        };
        {
            let mut last = self.last_claim.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_none_or(|l| l.seq <= seq) {
                *last = Some(report);
            }
        }
        self.changed();
    }

    /// A delivery starts (a claimed lease, a held one, or one an acknowledgement claimed).
    pub(crate) fn delivery_started(&self) {
        self.started.fetch_add(1, Ordering::SeqCst);
    }

    fn started(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }

    /// Something idleness depends on changed (a delivery ended, a held lease was released,
    /// a background acknowledgement was answered).
    pub(crate) fn changed(&self) {
        self.changed.notify_waiters();
    }

    fn last_claim(&self) -> Option<ClaimReport> {
        *self.last_claim.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What [`until_idle`] reads of the dispatcher besides its [`IdleWatch`].
pub(crate) trait IdleProbe {
    /// The dispatcher still claims new work.
    fn claiming(&self) -> bool;
    /// Nothing runs, nothing is held, no background acknowledgement or release waits for
    /// its answer.
    fn quiet(&self) -> bool;
    /// Asks the claim loop for one claim at once.
    fn force_claim(&self);
}

/// Completes once the dispatcher `probe` describes is idle (module docs). Each time it finds
/// the dispatcher quiet with deliveries run since it last looked, it asks the claim loop for
/// one claim at once (`force_claim`); otherwise it waits for the loop's own claims, paced by
/// its horizon and poll as always.
pub(crate) async fn until_idle(idle: &IdleWatch, probe: &impl IdleProbe) {
    // Since when the dispatcher has been seen quiet (the claims numbered by then) and the
    // deliveries started by then: the claim that proves idleness is numbered after that,
    // with no delivery started since.
    let mut quiet_since: Option<(u64, u64)> = None;
    loop {
        let changed = idle.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if !probe.claiming() {
            return;
        }
        let started = idle.started();
        match quiet_since {
            _ if !probe.quiet() => quiet_since = None,
            Some((from, seen)) if seen == started => match idle.last_claim() {
                Some(claim) if claim.seq > from && claim.nothing_due => return,
                // Something was due that this claim could not take: wait for the loop's
                // next claim, at its own pace.
                Some(claim) if claim.seq > from => {
                    quiet_since = Some((idle.claims_numbered(), seen));
                }
                _ => {}
            },
            _ => {
                quiet_since = Some((idle.claims_numbered(), started));
                probe.force_claim();
            }
        }
        changed.await;
    }
}
