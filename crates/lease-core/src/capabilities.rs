//! What a backend can do, declared once ([`ExecutionClient::capabilities`]).
//!
//! Most of the traits' operations are optional: a backend that lacks one keeps the trait's
//! default, which refuses the call as [`crate::LeaseError::Unsupported`]. The declaration
//! says up front which ones a backend has, so a caller need not try a call to find out:
//! the conformance suite reads it to decide which rules to check and which refusals to
//! expect, the operator command prints it and refuses early, and the console hides the
//! actions the store cannot perform. The defaults' refusals name
//! [`Capabilities::backend`], so an operator sees which backend refused.
//!
//! [`ExecutionClient::capabilities`]: crate::ExecutionClient::capabilities

use serde::Serialize;

/// The optional operations a backend supports, and its name. Every field but `backend` is a
/// capability; one that is `false` means the matching calls answer
/// [`crate::LeaseError::Unsupported`] naming `backend` (the conformance suite checks both
/// directions).
///
/// Build one with [`Capabilities::none`] or [`Capabilities::all`] and set the fields that
/// differ; the struct is `#[non_exhaustive]`, so a capability added later starts as what
/// the constructor says (`false` for `none`, `true` for `all`) without breaking an adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub struct Capabilities {
    /// The kind of backend (`"memory"`, `"sqlite"`, `"postgres"`, `"redis"`, an adapter's
    /// own name): what [`crate::LeaseError::Unsupported`] and the dispatcher's metrics name.
    pub backend: &'static str,
    /// Wake-ups and claim horizons ([`crate::ExecutionClient::wakeups`], the
    /// `next_claimable_at` of a claim): work is picked up at once instead of at the next poll.
    pub wakeups: bool,
    /// Effects (RFC 004, [`crate::ExecutionClient::effects`]) and store waiters
    /// ([`crate::StoreClient::watch_entry`]).
    pub effects: bool,
    /// Retention: [`crate::ExecutionClient::purge_terminal`].
    pub retention: bool,
    /// Counting executions by status: [`crate::ExecutionClient::status_counts`].
    pub status_counts: bool,
    /// Listing the live leases: [`crate::ExecutionClient::list_live_leases`].
    pub live_leases: bool,
    /// Cancelling executions: [`crate::ExecutionClient::cancel`].
    pub cancel: bool,
    /// Pausing and resuming scopes: [`crate::ExecutionClient::pause`], `resume`,
    /// `list_paused`.
    pub pause: bool,
    /// Claiming by priority: [`crate::Admission::priority`].
    pub priorities: bool,
    /// Concurrency keys and per-key concurrency limits ([`crate::Admission::concurrency_key`],
    /// [`crate::ExecutionClient::set_concurrency_limit`]).
    pub concurrency_limits: bool,
    /// Attempt limits and dead letters: [`crate::ExecutionClient::set_attempt_limit`],
    /// `release_with` counting attempts, `list_dead`, `retry_dead`.
    pub attempts: bool,
    /// Start rates per key: [`crate::ExecutionClient::set_rate_limit`] ([`crate::keyed`]).
    pub rate_limits: bool,
    /// Ordered keys, run one at a time in admission order:
    /// [`crate::ExecutionClient::set_key_ordering`].
    pub ordered_keys: bool,
    /// Listing executions by filter, a page at a time:
    /// [`crate::ExecutionClient::list_executions`].
    pub browse: bool,
    /// Workflows' own redelivery policies: [`crate::ExecutionClient::set_redelivery_policy`].
    pub workflow_redelivery: bool,
    /// Each execution's delivery history: [`crate::ExecutionClient::deliveries`].
    pub delivery_history: bool,
}

impl Capabilities {
    /// A backend named `backend` with none of the optional operations: what an adapter
    /// that overrides only the required methods declares.
    pub const fn none(backend: &'static str) -> Self {
        Self::uniform(backend, false)
    }

    /// A backend named `backend` with every optional operation (the workspace's backends).
    pub const fn all(backend: &'static str) -> Self {
        Self::uniform(backend, true)
    }

    const fn uniform(backend: &'static str, has: bool) -> Self {
        Capabilities {
            backend,
            wakeups: has,
            effects: has,
            retention: has,
            status_counts: has,
            live_leases: has,
            cancel: has,
            pause: has,
            priorities: has,
            concurrency_limits: has,
            attempts: has,
            rate_limits: has,
            ordered_keys: has,
            browse: has,
            workflow_redelivery: has,
            delivery_history: has,
        }
    }

    /// Every capability by its name (the field's) and whether the backend has it, in the
    /// order the fields are declared: what an operator's listing prints.
    pub fn list(&self) -> [(&'static str, bool); 15] {
        [
            ("wakeups", self.wakeups),
            ("effects", self.effects),
            ("retention", self.retention),
            ("status_counts", self.status_counts),
            ("live_leases", self.live_leases),
            ("cancel", self.cancel),
            ("pause", self.pause),
            ("priorities", self.priorities),
            ("concurrency_limits", self.concurrency_limits),
            ("attempts", self.attempts),
            ("rate_limits", self.rate_limits),
            ("ordered_keys", self.ordered_keys),
            ("browse", self.browse),
            ("workflow_redelivery", self.workflow_redelivery),
            ("delivery_history", self.delivery_history),
        ]
    }

    /// `Ok` when `has` (one of this declaration's fields), else the
    /// [`crate::LeaseError::Unsupported`] refusal of `operation` naming the backend: for a
    /// caller that refuses up front what the store cannot do.
    pub fn require(&self, has: bool, operation: &'static str) -> crate::Result<()> {
        if has {
            Ok(())
        } else {
            Err(self.unsupported(operation))
        }
    }

    /// The [`crate::LeaseError::Unsupported`] refusal of `operation` naming this backend.
    pub fn unsupported(&self, operation: &'static str) -> crate::LeaseError {
        crate::LeaseError::Unsupported {
            backend: self.backend,
            operation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Capabilities;

    /// The listing names every capability once, and `none`/`all` set each of them.
    #[test]
    fn list_covers_every_field() {
        let none = Capabilities::none("x").list();
        let all = Capabilities::all("x").list();
        assert!(none.iter().all(|(_, has)| !has));
        assert!(all.iter().all(|(_, has)| *has));
        let json = serde_json::to_value(Capabilities::all("x")).expect("json");
        let fields = json.as_object().expect("object");
        // Every field but `backend` is listed, so one added to the struct but not to the
        // listing fails here.
        assert_eq!(fields.len(), all.len() + 1);
        for (name, _) in all {
            assert_eq!(
                fields.get(name),
                Some(&serde_json::Value::Bool(true)),
                "{name}"
            );
        }
    }

    #[test]
    fn require_names_the_backend() {
        let caps = Capabilities::none("redb");
        assert!(caps.require(true, "cancel").is_ok());
        let err = caps.require(caps.cancel, "cancel").expect_err("refused");
        assert_eq!(err.to_string(), "redb does not support cancel");
    }
}
