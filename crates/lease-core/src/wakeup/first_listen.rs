//! Claims that wait for a backend's first subscription, so an idle dispatcher claims once at
//! start instead of twice.
//!
//! A listener connects in the background. A claim made before it subscribed may miss a
//! wake-up that a claim made after would be woken by, so a subscription normally signals
//! "now". That signal costs every dispatcher of the handle a second claim at start; waiting
//! briefly for the first subscription instead makes it unnecessary: each claim after it
//! already saw everything a lost message could announce. Reconnects still signal.

use std::time::Duration;

use tokio::sync::watch;

/// Longest a claim waits for the first subscription of its handle's listener.
pub const FIRST_LISTEN_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No listener was started (nobody asked for wake-ups).
    Idle,
    /// A listener was started.
    Started {
        /// Its connections that have not subscribed yet.
        pending: usize,
        /// A claim stopped waiting for them (its wait timed out): their first subscriptions
        /// must signal "now", as every reconnect does.
        claimed_early: bool,
    },
}

impl State {
    fn pending(self) -> bool {
        matches!(self, State::Started { pending, .. } if pending > 0)
    }
}

/// Whether a handle's wake-up listener has subscribed yet. Shared by the handle's claims
/// (which [`FirstListen::wait`]) and its listener connections (which report
/// [`FirstListen::subscribed`]).
#[derive(Debug)]
pub struct FirstListen {
    state: watch::Sender<State>,
}

impl Default for FirstListen {
    fn default() -> Self {
        FirstListen {
            state: watch::Sender::new(State::Idle),
        }
    }
}

impl FirstListen {
    /// A gate with no listener started.
    pub fn new() -> Self {
        Self::default()
    }

    /// A listener of `connections` connections starts; claims wait for all of them unless
    /// the handle's listener was started before (a restarted one signals as it reconnects).
    pub fn starting(&self, connections: usize) {
        self.state.send_if_modified(|s| {
            let idle = *s == State::Idle;
            if idle {
                *s = State::Started {
                    pending: connections,
                    claimed_early: false,
                };
            }
            idle
        });
    }

    /// One connection subscribed; `first` is whether it is that connection's first
    /// subscription. True when the listener must signal "now": on every reconnect, and on a
    /// first subscription that a claim did not wait for.
    pub fn subscribed(&self, first: bool) -> bool {
        let mut signal = true;
        self.state.send_if_modified(|s| match s {
            State::Started {
                pending,
                claimed_early,
            } if first && *pending > 0 => {
                *pending -= 1;
                signal = *claimed_early;
                true
            }
            _ => false,
        });
        signal
    }

    /// Waits (at most [`FIRST_LISTEN_WAIT`]) while a started listener has not subscribed
    /// everywhere. Returns at once when none was started or it subscribed before; never
    /// fails (a listener that cannot connect costs one wait, then claims stop waiting and
    /// its first subscriptions signal).
    pub async fn wait(&self) {
        if !self.state.borrow().pending() {
            return;
        }
        if tokio::time::timeout(FIRST_LISTEN_WAIT, self.subscribed_everywhere())
            .await
            .is_err()
        {
            self.state.send_if_modified(|s| match s {
                State::Started {
                    pending,
                    claimed_early,
                } if *pending > 0 && !*claimed_early => {
                    *claimed_early = true;
                    true
                }
                _ => false,
            });
        }
    }

    /// Completes once every connection of the started listener subscribed at least once
    /// (at once when none was started), with no time limit: for a caller that must know the
    /// listener hears every later wake-up, such as a test.
    pub async fn subscribed_everywhere(&self) {
        let mut rx = self.state.subscribe();
        // The sender lives in `self`, so the channel cannot close while this waits.
        let _ = rx.wait_for(|s| !s.pending()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn claims_wait_for_every_connection_and_the_first_subscriptions_stay_quiet() {
        let gate = std::sync::Arc::new(FirstListen::new());
        gate.wait().await; // nothing started: no wait
        gate.starting(2);
        let waiting = tokio::spawn({
            let gate = gate.clone();
            async move { gate.wait().await }
        });
        assert!(!gate.subscribed(true));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "one connection still connecting");
        assert!(!gate.subscribed(true));
        waiting.await.expect("the claim waited");
        assert!(gate.subscribed(false), "a reconnect signals");
        gate.starting(1); // a restarted listener of a handle that listened: no wait
        gate.wait().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_claim_that_stopped_waiting_makes_the_first_subscriptions_signal() {
        let gate = FirstListen::new();
        gate.starting(2);
        gate.wait().await; // gives up after FIRST_LISTEN_WAIT on the paused clock
        assert!(gate.subscribed(true));
        assert!(gate.subscribed(true));
        gate.subscribed_everywhere().await;
        gate.wait().await;
    }
}
