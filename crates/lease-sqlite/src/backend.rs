//! [`SqliteBackend`]: the lease-core client traits over one SQLite connection.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lease_core::execution::{check_ack_batch, check_admit_batch};
use lease_core::limits::{MAX_ID_BYTES, check_limit};
use lease_core::time::lease_millis;
use lease_core::{
    AckAndClaim, Acknowledged, Acknowledgement, Admission, ClaimBatch, ClaimRequest, Claimed,
    CorruptRecord, EffectClient, ExecutionClient, ExecutionId, ExecutionLease, ExecutionRecord,
    Fenced, HeapClient, HeapRecord, Json, LeaseError, Purged, Result, StartClient, StartRequest,
    Started, StepCursor, StepKey, StepPage, StepWrite, StoreClient, StoreId, StoreKey, StoreOp,
    StoreReceipt, StoreSnapshot, StoreUpdate, Timestamp, WakeReceiver, WorkflowRunOutcome,
};
use rusqlite::Transaction;

use crate::config::SqliteConfig;
use crate::conn::{ConnHandle, Weight};
use crate::error::OpResult;
use crate::group::Woken;
use crate::scope::Scope;
use crate::wake::{self, Wakes};
use crate::{counts, effect, executions, retention, schema, starts, steps, stores, tx};

/// The SQLite lease backend: implements every lease-core client trait, so it is a
/// [`lease_core::LeaseBackend`].
///
/// Each handle owns one connection with its own OS thread; clones share that connection
/// (an operation runs inline when it is idle, else queues on its thread),
/// [`SqliteBackend::peer`] opens another one to the same database, as a second runtime
/// process would. Every mutating operation is one `BEGIN IMMEDIATE` transaction, so the
/// fencing check and the write it guards are atomic across every connection and process
/// sharing the file (RFC 002 "Fencing").
///
/// Every handle of this process on one database and namespace shares one wake-up hub
/// ([`ExecutionClient::wakeups`], issue 10), signalled right after each commit that made an
/// execution claimable; other processes' such writes reach it through a wake log watched
/// with `PRAGMA data_version` (see docs/DESIGN.md, "SQLite backend").
#[derive(Clone)]
pub struct SqliteBackend {
    conn: ConnHandle,
    scope: Arc<Scope>,
    config: Arc<SqliteConfig>,
    wakes: Arc<Wakes>,
}

impl fmt::Debug for SqliteBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteBackend")
            .field("location", &self.config.location)
            .field("namespace", &self.scope.namespace)
            .finish_non_exhaustive()
    }
}

/// Test support: see [`SqliteBackend::hold_connection_for_tests`].
#[doc(hidden)]
#[must_use = "the connection is released when the hold is dropped"]
pub struct ConnectionHold<'a>(#[allow(dead_code)] std::sync::MutexGuard<'a, rusqlite::Connection>);

fn check_namespace(namespace: &str) -> Result<()> {
    if namespace.is_empty() {
        return Err(LeaseError::invalid("namespace", "must not be empty"));
    }
    if namespace.len() > MAX_ID_BYTES {
        return Err(LeaseError::invalid(
            "namespace",
            format!(
                "{} bytes, over the limit of {MAX_ID_BYTES}",
                namespace.len()
            ),
        ));
    }
    if namespace.chars().any(char::is_control) {
        return Err(LeaseError::invalid(
            "namespace",
            "must not contain control characters",
        ));
    }
    Ok(())
}

impl SqliteBackend {
    /// Opens (creating if needed) the database, migrates its schema and starts the
    /// connection thread.
    ///
    /// Fails with [`LeaseError::Schema`] when the file is not a SQLite database, belongs to
    /// another product, or has a newer schema version; with `InvalidInput` for a bad
    /// namespace; with `Unavailable` when the database stays locked.
    pub async fn open(config: SqliteConfig) -> Result<Self> {
        check_namespace(&config.namespace)?;
        wake::check_poll(config.wake_poll)?;
        let location = config.location.clone();
        let busy_timeout = config.busy_timeout;
        let synchronous = config.synchronous;
        // A COMMIT that syncs the disk must not run on an async worker (crate::conn).
        let worker_writes = matches!(config.location, crate::config::Location::Memory(_))
            || synchronous == crate::config::Synchronous::Normal;
        let conn = ConnHandle::spawn(
            move || schema::open_with(&location, busy_timeout, synchronous),
            busy_timeout,
            worker_writes,
        )
        .await?;
        let scope = Arc::new(Scope {
            location: config.location.describe(),
            namespace: config.namespace.clone(),
            clock: config.clock.clone(),
            policy: config.policy,
        });
        let wakes = wake::shared(&config.location, &config.namespace, config.wake_poll);
        Ok(SqliteBackend {
            conn,
            scope,
            config: Arc::new(config),
            wakes,
        })
    }

    /// A new connection (own thread) to the same database, namespace, clock and policy
    /// (the createPeer model).
    pub async fn peer(&self) -> Result<Self> {
        Self::open((*self.config).clone()).await
    }

    /// Test support, not a stable API: holds this handle's connection until the guard is
    /// dropped, so operations submitted meanwhile (on this handle and its clones) queue and
    /// then run together as one group commit (up to 64). Deterministic grouping for tests.
    #[doc(hidden)]
    pub fn hold_connection_for_tests(&self) -> ConnectionHold<'_> {
        ConnectionHold(self.conn.hold())
    }

    /// Test support, not a stable API: operations queued for this handle's connection
    /// thread and not yet taken by it.
    #[doc(hidden)]
    pub fn queued_operations_for_tests(&self) -> usize {
        self.conn.queued()
    }

    /// Test support, not a stable API: whole-transaction retries on lock contention that
    /// this handle's connection made so far (issue 11 finding 15: all attempts of one
    /// operation share one `busy_timeout`; a test counts them instead of timing them).
    #[doc(hidden)]
    pub fn busy_retries_for_tests(&self) -> u64 {
        self.conn.busy_retries()
    }

    /// The namespace this handle reads and writes.
    pub fn namespace(&self) -> &str {
        &self.scope.namespace
    }

    /// This handle's scope (namespace, clock, policy).
    pub(crate) fn scope(&self) -> &Arc<Scope> {
        &self.scope
    }

    /// This handle's connection.
    pub(crate) fn connection(&self) -> &ConnHandle {
        &self.conn
    }

    /// A mutating operation that never makes anything claimable, of `weight` (where it may
    /// run: [`Weight`]).
    pub(crate) async fn write<T: Send + 'static>(
        &self,
        operation: &'static str,
        weight: Weight,
        mut f: impl FnMut(&Transaction<'_>, &Scope) -> OpResult<T> + Send + 'static,
    ) -> Result<T> {
        let scope = self.scope.clone();
        self.conn
            .write_waking(operation, None, weight, move |tx| {
                f(tx, &scope).map(Woken::quiet)
            })
            .await
    }

    /// A mutating operation that may make something claimable: signalled on this handle's
    /// hub (and logged for other processes) once its transaction committed.
    pub(crate) async fn write_waking<T: Send + 'static>(
        &self,
        operation: &'static str,
        weight: Weight,
        mut f: impl FnMut(&Transaction<'_>, &Scope) -> OpResult<Woken<T>> + Send + 'static,
    ) -> Result<T> {
        let scope = self.scope.clone();
        let wakes = Some(self.wakes.clone());
        self.conn
            .write_waking(operation, wakes, weight, move |tx| f(tx, &scope))
            .await
    }

    pub(crate) async fn read<T: Send + 'static>(
        &self,
        operation: &'static str,
        mut f: impl FnMut(&Transaction<'_>, &Scope) -> OpResult<T> + Send + 'static,
    ) -> Result<T> {
        let scope = self.scope.clone();
        let busy_timeout = self.config.busy_timeout;
        // Counted from now: time queued behind other jobs is part of the wait (item 22).
        let busy = (busy_timeout, tx::deadline(busy_timeout));
        self.conn
            .call(operation, move |conn| {
                tx::read(conn, operation, busy, |tx| f(tx, &scope))
            })
            .await
    }
}

#[async_trait]
impl ExecutionClient for SqliteBackend {
    #[tracing::instrument(level = "debug", name = "admit", skip_all)]
    async fn admit(&self, admission: &Admission) -> Result<ExecutionRecord> {
        admission.validate()?;
        let admission = admission.clone();
        self.write_waking("admit", Weight::Light, move |tx, s| {
            executions::admit(tx, s, &admission)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "admit_batch", skip_all)]
    async fn admit_batch(&self, admissions: &[Admission]) -> Result<Vec<ExecutionRecord>> {
        check_admit_batch(admissions)?;
        if admissions.is_empty() {
            return Ok(Vec::new());
        }
        let admissions = admissions.to_vec();
        self.write_waking("admit_batch", Weight::of(admissions.len()), move |tx, s| {
            executions::admit_batch(tx, s, &admissions)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "get", skip_all)]
    async fn get(&self, id: &ExecutionId) -> Result<Option<ExecutionRecord>> {
        let id = id.clone();
        self.read("get", move |tx, s| executions::get(tx, s, &id))
            .await
    }

    #[tracing::instrument(level = "debug", name = "list_failing", skip_all)]
    async fn list_failing(&self, min: u32, limit: usize) -> Result<Vec<ExecutionRecord>> {
        check_limit("list limit", limit)?;
        self.read("list_failing", move |tx, s| {
            executions::list_failing(tx, s, min, limit)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "list_corrupt", skip_all)]
    async fn list_corrupt(&self, limit: usize) -> Result<Vec<CorruptRecord>> {
        check_limit("list limit", limit)?;
        self.read("list_corrupt", move |tx, s| {
            executions::list_corrupt(tx, s, limit)
        })
        .await
    }

    /// One `GROUP BY` over the namespace's rows in one read transaction
    /// (`sql/status_counts.sql`).
    #[tracing::instrument(level = "debug", name = "status_counts", skip_all)]
    async fn status_counts(&self) -> Result<lease_core::StatusCounts> {
        self.read("status_counts", |tx, s| counts::status_counts(tx, s))
            .await
    }

    /// Retention (issue 12) in one transaction: see `retention::purge_terminal`. A limit
    /// outside 1..=1000 is `InvalidInput` and deletes nothing.
    #[tracing::instrument(level = "debug", name = "purge_terminal", skip_all)]
    async fn purge_terminal(&self, before: Timestamp, limit: usize) -> Result<Purged> {
        check_limit("purge limit", limit)?;
        self.write("purge_terminal", Weight::of(limit), move |tx, s| {
            retention::purge_terminal(tx, s, before, limit)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "request_wake", skip_all)]
    async fn request_wake(&self, id: &ExecutionId, at: Timestamp) -> Result<()> {
        let id = id.clone();
        self.write_waking("request_wake", Weight::Light, move |tx, s| {
            executions::request_wake(tx, s, &id, at)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "claim_due", skip_all)]
    async fn claim_due(&self, request: ClaimRequest) -> Result<Vec<ExecutionLease>> {
        Ok(Claimed::leases(self.claim_due_with_records(request).await?))
    }

    #[tracing::instrument(level = "debug", name = "claim_due_with_records", skip_all)]
    async fn claim_due_with_records(&self, request: ClaimRequest) -> Result<Vec<Claimed>> {
        Ok(self.claim_due_with_horizon(request).await?.claimed)
    }

    #[tracing::instrument(level = "debug", name = "claim_due_with_horizon", skip_all)]
    async fn claim_due_with_horizon(&self, request: ClaimRequest) -> Result<ClaimBatch> {
        let lease_ms = request.validate()?;
        self.write_waking("claim_due", Weight::of(request.limit), move |tx, s| {
            executions::claim_due(tx, s, request.now, request.limit, lease_ms)
        })
        .await
    }

    fn wakeups(&self) -> Option<WakeReceiver> {
        Some(self.wakes.subscribe())
    }

    fn backend_name(&self) -> &'static str {
        crate::error::BACKEND
    }

    fn namespace_name(&self) -> Option<String> {
        Some(self.namespace().to_owned())
    }

    fn effects(&self) -> Option<&dyn EffectClient> {
        Some(self)
    }

    #[tracing::instrument(level = "debug", name = "renew", skip_all)]
    async fn renew(
        &self,
        lease: &ExecutionLease,
        duration: Duration,
    ) -> Result<Fenced<ExecutionLease>> {
        let lease_ms = lease_millis("renewal duration", duration)?;
        let lease = lease.clone();
        self.write("renew", Weight::Light, move |tx, s| {
            executions::renew(tx, s, &lease, lease_ms)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "release", skip_all)]
    async fn release(&self, lease: &ExecutionLease) -> Result<Fenced<()>> {
        let lease = lease.clone();
        self.write_waking("release", Weight::Light, move |tx, s| {
            executions::release(tx, s, &lease)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "acknowledge", skip_all)]
    async fn acknowledge(
        &self,
        lease: &ExecutionLease,
        outcome: &WorkflowRunOutcome,
    ) -> Result<Fenced<Acknowledged>> {
        let lease = lease.clone();
        let outcome = outcome.clone();
        self.write_waking("acknowledge", Weight::Light, move |tx, s| {
            executions::acknowledge(tx, s, &lease, &outcome)
        })
        .await
    }

    /// One operation in one transaction (issue 12), grouped like every write: the
    /// acknowledgement exactly as [`ExecutionClient::acknowledge`], then the claim exactly as
    /// [`ExecutionClient::claim_due_with_horizon`] after it. The claim request is validated
    /// first; bad input in either part is a typed error with nothing applied. Both parts'
    /// wake-ups are signalled after the COMMIT.
    #[tracing::instrument(level = "debug", name = "acknowledge_and_claim", skip_all)]
    async fn acknowledge_and_claim(
        &self,
        ack: &Acknowledgement,
        next: ClaimRequest,
    ) -> Result<AckAndClaim> {
        let lease_ms = next.validate()?;
        let ack = ack.clone();
        self.write_waking(
            "acknowledge_and_claim",
            Weight::of(next.limit),
            move |tx, s| {
                executions::acknowledge_and_claim(tx, s, &ack, next.now, next.limit, lease_ms)
            },
        )
        .await
    }

    #[tracing::instrument(level = "debug", name = "acknowledge_batch", skip_all)]
    async fn acknowledge_batch(
        &self,
        acks: &[Acknowledgement],
    ) -> Result<Vec<Fenced<Acknowledged>>> {
        check_ack_batch(acks)?;
        if acks.is_empty() {
            return Ok(Vec::new());
        }
        let acks = acks.to_vec();
        self.write_waking("acknowledge_batch", Weight::of(acks.len()), move |tx, s| {
            executions::acknowledge_batch(tx, s, &acks)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "now", skip_all)]
    async fn now(&self) -> Result<Timestamp> {
        Ok(self.scope.now())
    }
}

#[async_trait]
impl HeapClient for SqliteBackend {
    #[tracing::instrument(level = "debug", name = "write_step", skip_all)]
    async fn write_step(
        &self,
        lease: &ExecutionLease,
        write: &StepWrite,
    ) -> Result<Fenced<HeapRecord>> {
        let lease = lease.clone();
        let write = write.clone();
        self.write("write_step", Weight::Light, move |tx, s| {
            steps::write_step(tx, s, &lease, &write)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "read_step", skip_all)]
    async fn read_step(
        &self,
        id: &ExecutionId,
        step_key: &StepKey,
        step_attempt: u32,
    ) -> Result<Option<HeapRecord>> {
        let id = id.clone();
        let step_key = step_key.clone();
        self.read("read_step", move |tx, s| {
            steps::read_step(tx, s, &id, &step_key, step_attempt)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "list_steps", skip_all)]
    async fn list_steps(&self, id: &ExecutionId) -> Result<Vec<HeapRecord>> {
        let id = id.clone();
        self.read("list_steps", move |tx, s| steps::list_steps(tx, s, &id))
            .await
    }

    #[tracing::instrument(level = "debug", name = "list_steps_page", skip_all)]
    async fn list_steps_page(
        &self,
        id: &ExecutionId,
        after: Option<&StepCursor>,
        limit: u32,
    ) -> Result<StepPage> {
        StepPage::check_limit(limit)?;
        let (id, after) = (id.clone(), after.cloned());
        self.read("list_steps_page", move |tx, s| {
            steps::list_steps_page(tx, s, &id, after.as_ref(), limit)
        })
        .await
    }
}

#[async_trait]
impl StoreClient for SqliteBackend {
    #[tracing::instrument(level = "debug", name = "get_or_create", skip_all)]
    async fn get_or_create(
        &self,
        store: &StoreId,
        initial: &[(StoreKey, Json)],
    ) -> Result<StoreSnapshot> {
        let store = store.clone();
        let initial = initial.to_vec();
        self.write("get_or_create", Weight::of(initial.len()), move |tx, s| {
            stores::get_or_create(tx, s, &store, &initial)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "read_entry", skip_all)]
    async fn read_entry(&self, store: &StoreId, key: &StoreKey) -> Result<Option<Json>> {
        let store = store.clone();
        let key = key.clone();
        self.read("read_entry", move |tx, s| {
            stores::read_entry(tx, s, &store, &key)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "update", skip_all)]
    async fn update(&self, receipt: &StoreReceipt, op: &StoreOp) -> Result<StoreUpdate> {
        let receipt = receipt.clone();
        let op = op.clone();
        self.write_waking("update", Weight::Light, move |tx, s| {
            effect::update_waking(tx, s, &receipt, &op)
        })
        .await
    }

    /// Store waiter registration (issue 16), one transaction: see `effect::watch_entry`.
    #[tracing::instrument(level = "debug", name = "watch_entry", skip_all)]
    async fn watch_entry(
        &self,
        store: &StoreId,
        key: &StoreKey,
        waiter: &ExecutionId,
    ) -> Result<Option<Json>> {
        let (store, key, waiter) = (store.clone(), key.clone(), waiter.clone());
        self.write("watch_entry", Weight::Light, move |tx, s| {
            effect::watch_entry(tx, s, &store, &key, &waiter)
        })
        .await
    }
}

#[async_trait]
impl StartClient for SqliteBackend {
    #[tracing::instrument(level = "debug", name = "start", skip_all)]
    async fn start(&self, request: &StartRequest) -> Result<Started> {
        let request = request.clone();
        self.write_waking("start", Weight::Light, move |tx, s| {
            starts::start(tx, s, &request)
        })
        .await
    }
}
