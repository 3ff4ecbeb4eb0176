//! What an adapter provides to run the suite: a fresh isolated store and peers on it.

use async_trait::async_trait;
use lease_core::{LeaseBackend, ManualClock, RedeliveryPolicy, Result};

/// A backend under test, built fresh for every case (openraft's store builder pattern).
///
/// `setup` makes a store nobody else sees (own file, schema or key prefix) whose backend
/// reads time from `clock`; `peer` opens another connection to the *same* store, as a second
/// runtime process would (the createPeer model); `teardown` removes everything `setup` made.
#[async_trait]
pub trait Harness: Sized + Send + Sync + 'static {
    /// The backend type.
    type Backend: LeaseBackend + Clone;

    /// The backend sends wake-ups ([`lease_core::ExecutionClient::wakeups`]) and reports
    /// the next claimable instant with each claim, so work is picked up at once rather than
    /// at the next poll. The pickup cases assert both when `true`; with `false` they check
    /// only what polling guarantees.
    const WAKEUPS: bool = false;

    /// Wake-ups travel over a connection that [`Harness::kill_listeners`] can kill on the
    /// server (PostgreSQL LISTEN, Redis SUBSCRIBE).
    const KILLABLE_LISTENER: bool = false;

    /// The backend implements retention ([`lease_core::ExecutionClient::purge_terminal`]);
    /// with `false` the retention cases check only that it reports `Unsupported`.
    const RETENTION: bool = false;

    /// The backend counts executions by status
    /// ([`lease_core::ExecutionClient::status_counts`]); with `false` the count cases check
    /// only that it reports `Unsupported`.
    const STATUS_COUNTS: bool = false;
    /// The backend lists the live leases
    /// ([`lease_core::ExecutionClient::list_live_leases`]); with `false` the live-lease
    /// cases check only that it reports `Unsupported` (a bad limit is `InvalidInput` either
    /// way).
    const LIVE_LEASES: bool = false;
    /// The backend implements effects ([`lease_core::ExecutionClient::effects`]) and store
    /// waiters ([`lease_core::StoreClient::watch_entry`]); with `false` the effect cases
    /// check only that it reports neither.
    const EFFECTS: bool = false;
    /// The backend cancels executions ([`lease_core::ExecutionClient::cancel`]); with
    /// `false` the cancel cases check only that it reports `Unsupported`.
    const CANCEL: bool = false;
    /// The backend pauses and resumes scopes ([`lease_core::ExecutionClient::pause`]); with
    /// `false` the pause cases check only `Unsupported`.
    const PAUSE: bool = false;
    /// The backend claims by priority and enforces per-key concurrency limits
    /// ([`lease_core::Admission::priority`], [`lease_core::Admission::concurrency_key`]);
    /// with `false` an admission using either must be `Unsupported` and admit nothing.
    const PRIORITIES_AND_LIMITS: bool = false;
    /// The backend keeps attempt limits and dead letters
    /// ([`lease_core::ExecutionClient::set_attempt_limit`], `release_with`, `list_dead`,
    /// `retry_dead`); with `false` the attempt cases check only the typed `Unsupported`
    /// answers, and that `release_with` still ends a lease.
    const ATTEMPTS: bool = false;
    /// The backend enforces start rates per key ([`lease_core::ExecutionClient::set_rate_limit`],
    /// [`lease_core::keyed`]); with `false` the rate cases check only the typed
    /// `Unsupported` answers.
    const RATE_LIMITS: bool = false;
    /// The backend runs ordered keys one at a time in admission order
    /// ([`lease_core::ExecutionClient::set_key_ordering`]); with `false` the ordering cases
    /// check only the typed `Unsupported` answers.
    const ORDERED_KEYS: bool = false;
    /// The backend lists executions by filter a page at a time
    /// ([`lease_core::ExecutionClient::list_executions`]); with `false` the browse cases check
    /// only that a bad limit is `InvalidInput` and the rest `Unsupported`.
    const BROWSE: bool = false;
    /// The backend keeps workflows' own redelivery policies
    /// ([`lease_core::ExecutionClient::set_redelivery_policy`]); with `false` the cases check
    /// only the typed `Unsupported` answers.
    const WORKFLOW_REDELIVERY: bool = false;
    /// The backend keeps each execution's delivery history
    /// ([`lease_core::ExecutionClient::deliveries`]); with `false` the history cases check
    /// only the typed `Unsupported` answer.
    const DELIVERY_HISTORY: bool = false;

    /// Whether this run's store takes concurrency keys and limits: by default
    /// [`Harness::PRIORITIES_AND_LIMITS`]. A harness whose store mode is chosen at run time
    /// and cannot count a key's live leases in some modes (a Redis namespace split into
    /// partitions) returns `false` for them; the limit cases then check that a keyed
    /// admission and `set_concurrency_limit` are refused (`Unsupported` or `InvalidInput`)
    /// and admit nothing, while the priority cases still run.
    fn concurrency_limits() -> bool {
        Self::PRIORITIES_AND_LIMITS
    }

    /// Kills, on the server, every connection this store's backends listen for wake-ups on
    /// (`pg_terminate_backend`, `CLIENT KILL`); `true` when it killed at least one.
    async fn kill_listeners(&self) -> Result<bool> {
        Ok(false)
    }

    /// The counter value a fresh store of this harness issues its first token after (0, so
    /// token 1, unless the backend's tokens start higher: lease-redis on a Redis Cluster,
    /// where tokens carry the node's config epoch so a failover never reissues one). The
    /// differential case starts the reference's counter there.
    async fn token_base(&self) -> Result<u64> {
        Ok(0)
    }

    /// Builds a fresh, isolated store over `clock`, using `policy` for redelivery delays.
    async fn setup(clock: ManualClock, policy: RedeliveryPolicy) -> Result<Self>;

    /// The first connection to the store.
    fn backend(&self) -> Self::Backend;

    /// Another connection to the same store.
    async fn peer(&self) -> Result<Self::Backend>;

    /// Removes the store (schema, file, keys). Called after every case, pass or fail.
    async fn teardown(self) -> Result<()>;
}
