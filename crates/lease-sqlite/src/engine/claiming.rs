//! What a claim carries across the engine's calls of one step: the namespace's token and
//! takeover counters (one row, read by the claim's opening statement and written once at
//! the end of the step) and what its selection held back, for the horizon after it.

use std::collections::BTreeSet;

use lease_core::{ExecutionRecord, FencingToken, LeaseError, PauseScope};

use crate::control::KeyGate;
use crate::error::{OpError, OpResult};
use crate::keyed_gate::KeyedGate;
use crate::scope::Scope;

/// `$1 namespace` -> the namespace's last issued token (no row: none issued yet). The
/// claim reads it inside [`crate::candidates::OPENING`]; the raw baseline alone.
pub(crate) const LAST_TOKEN: &str = include_str!("claiming/last_token.sql");
/// `$1 namespace, $2 token`: records the namespace's last issued token.
pub(crate) const STORE_LAST_TOKEN: &str = include_str!("claiming/store_last_token.sql");
/// `$1 namespace, $2 n`: adds a claim's takeovers to the namespace's counter.
pub(crate) const ADD_TAKEOVERS: &str = include_str!("claiming/add_takeovers.sql");

/// What a claim's selection held back, for the horizon after it.
pub(super) struct ClaimGates {
    pub(super) paused: BTreeSet<PauseScope>,
    pub(super) keys: KeyGate,
    pub(super) keyed: KeyedGate,
}

/// The namespace's counters as this step changes them.
#[derive(Clone, Copy, Debug)]
pub(super) struct Counters {
    /// The last token as stored.
    pub(super) loaded: u64,
    /// The last token issued.
    pub(super) last: u64,
    /// Takeovers this step counted.
    pub(super) takeovers: u64,
}

impl Counters {
    pub(super) fn at(last: i64) -> OpResult<Self> {
        let last =
            u64::try_from(last).map_err(|e| OpError::Corrupt(format!("stored last token: {e}")))?;
        Ok(Counters {
            loaded: last,
            last,
            takeovers: 0,
        })
    }
}

/// A refusal of the token counter (behind a stored token, or used up): the step rolls
/// back, so nothing changes.
pub(super) fn refuse(scope: &Scope, reason: String) -> OpError {
    OpError::Lease(LeaseError::TokenCounter {
        location: format!("{} (namespace {})", scope.location, scope.namespace),
        reason,
    })
}

/// A claim must issue a token above every stored one, or a stale holder's token would be
/// issued again: a counter behind `stored` (deleted, or restored from an older copy) is
/// refused.
pub(super) fn check_rising(
    scope: &Scope,
    stored: &ExecutionRecord,
    next: FencingToken,
) -> OpResult<()> {
    if next <= stored.token {
        return Err(refuse(
            scope,
            format!(
                "next token {next} is not above token {} of execution {}; set the counter \
                 above the highest stored token",
                stored.token, stored.id
            ),
        ));
    }
    Ok(())
}
