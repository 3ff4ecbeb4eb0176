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

    /// Wake-ups travel over a connection that [`Harness::kill_listeners`] can kill on the
    /// server (PostgreSQL LISTEN, Redis SUBSCRIBE). A property of this harness, not of the
    /// backend: what the backend can do it declares itself
    /// ([`lease_core::ExecutionClient::capabilities`]), and the cases read that declaration,
    /// checking the rules of each capability it declares and the typed `Unsupported`
    /// refusal of each it does not.
    const KILLABLE_LISTENER: bool = false;

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
