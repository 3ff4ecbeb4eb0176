//! The context a worker receives for one delivery: its lease, the execution record, the
//! clients it may use, and the cancellation signal.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::DeliveryError;
use crate::export::Exporter;
use lease_core::client::{StartClient, StoreClient};
use lease_core::execution::ExecutionRecord;
use lease_core::heap::{HeapRecord, StepWrite};
use lease_core::ids::{ExecutionId, StepKey, StoreId, WorkflowName};
use lease_core::json::Json;
use lease_core::lease::{ExecutionLease, Fenced, FencingToken};
use lease_core::store::{StartRequest, Started, StoreOp, StoreReceipt, StoreUpdate};
use lease_core::time::Timestamp;

pub use lease_core::SharedBackend;

/// One delivery of an execution, as its worker sees it. Cheap to clone; clones share the
/// lease, the cancellation signal and the lost flag.
///
/// Every write made through it first checks that the delivery is neither lost nor
/// cancelled, so no fenced write ever leaves a cancelled worker (RFC 002: "A holder whose
/// lease is lost will stop ... it will make no further fenced writes").
#[derive(Clone)]
pub struct Delivery {
    inner: Arc<Inner>,
}

struct Inner {
    claimed: ExecutionLease,
    current: Mutex<ExecutionLease>,
    record: ExecutionRecord,
    /// The record shows the first delivery: no step record can exist but this delivery's.
    first: bool,
    /// Step records this delivery wrote or read (records never change once written).
    steps: Mutex<HashMap<(StepKey, u32), HeapRecord>>,
    backend: SharedBackend,
    cancel: CancellationToken,
    lost: AtomicBool,
    /// The local deadline: past it, the lease may have expired unrenewed, so the
    /// delivery counts as lost. `None` for a delivery built outside a dispatcher.
    deadline: Mutex<Option<Instant>>,
    /// Times the worker's backend calls (feature `metrics`; empty otherwise).
    export: Exporter,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("lease", &self.lease())
            .field("lost", &self.is_lost())
            .field("cancelled", &self.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl Delivery {
    /// A delivery of `record` under `lease`, cancelled by `cancel`. The dispatcher builds
    /// these; tests and custom runtimes may too. `record` must have been read at or after
    /// the claim (as [`lease_core::ExecutionClient::claim_due_with_horizon`] returns it): when it
    /// shows a first delivery ([`ExecutionRecord::is_first_delivery`]) the step driver reads
    /// no step records.
    pub fn new(
        backend: SharedBackend,
        lease: ExecutionLease,
        record: ExecutionRecord,
        cancel: CancellationToken,
    ) -> Self {
        Delivery {
            inner: Arc::new(Inner {
                current: Mutex::new(lease.clone()),
                first: record.is_first_delivery(&lease),
                steps: Mutex::default(),
                claimed: lease,
                record,
                backend,
                cancel,
                lost: AtomicBool::new(false),
                deadline: Mutex::new(None),
                export: Exporter::disabled(),
            }),
        }
    }

    /// The same delivery, its backend calls timed by `export` (the dispatcher's). Only
    /// before the delivery is shared.
    pub(crate) fn exporting(mut self, export: Exporter) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.export = export;
        }
        self
    }

    /// The execution being delivered.
    pub fn execution_id(&self) -> &ExecutionId {
        &self.inner.claimed.execution_id
    }

    /// This delivery's fencing token.
    pub fn token(&self) -> FencingToken {
        self.inner.claimed.token
    }

    /// The lease as last renewed (its token never changes; its expiry moves on renewal).
    pub fn lease(&self) -> ExecutionLease {
        self.inner
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The lease as claimed.
    pub fn claimed_lease(&self) -> &ExecutionLease {
        &self.inner.claimed
    }

    pub(crate) fn set_lease(&self, lease: ExecutionLease) {
        *self.inner.current.lock().unwrap_or_else(|p| p.into_inner()) = lease;
    }

    /// The execution record as read right after the claim.
    pub fn record(&self) -> &ExecutionRecord {
        &self.inner.record
    }

    /// The workflow the execution runs, if named at admission.
    pub fn workflow(&self) -> Option<&WorkflowName> {
        self.inner.record.workflow.as_ref()
    }

    /// The workflow input, if given at admission.
    pub fn input(&self) -> Option<&Json> {
        self.inner.record.input.as_ref()
    }

    /// The store client (RFC 005, reduced; unfenced, idempotent by receipt).
    pub fn store(&self) -> &dyn StoreClient {
        &*self.inner.backend
    }

    /// The backend's effect client, if it has one (for the effect helpers).
    pub(crate) fn backend_effects(&self) -> Option<&dyn lease_core::client::EffectClient> {
        self.inner.backend.effects()
    }

    /// The backend's declaration of what it can do.
    pub(crate) fn backend_capabilities(&self) -> lease_core::Capabilities {
        self.inner.backend.capabilities()
    }

    /// The start client (RFC 003, reduced; idempotent by request id).
    pub fn starts(&self) -> &dyn StartClient {
        &*self.inner.backend
    }

    /// True once this delivery's lease was seen `Lost`.
    pub fn is_lost(&self) -> bool {
        self.inner.lost.load(Ordering::SeqCst)
    }

    /// True once the delivery was cancelled (lease lost, shutdown deadline, dispatcher
    /// dropped). A cancelled delivery makes no further writes.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// Completes when the delivery is cancelled; for workers that want to stop cooperatively
    /// (the dispatcher also stops the worker's future itself).
    pub async fn cancelled(&self) {
        self.inner.cancel.cancelled().await;
    }

    /// Marks the lease lost and cancels the worker at once: for a fenced write made outside
    /// this type (a backend's transactional step) that returned `Lost`. The
    /// delivery then makes no further fenced write and is neither acknowledged nor released.
    pub fn mark_lost(&self) {
        self.inner.lost.store(true, Ordering::SeqCst);
        self.inner.cancel.cancel();
    }

    /// Sets the local deadline: the monotonic instant after which the lease may have
    /// expired without a renewal (as etcd's `Session.Done()`).
    pub(crate) fn set_deadline(&self, at: Instant) {
        *self
            .inner
            .deadline
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(at);
    }

    /// The local deadline, if a dispatcher set one.
    pub fn deadline(&self) -> Option<Instant> {
        *self
            .inner
            .deadline
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// `Err(Lost)` or `Err(Cancelled)` when the delivery must not write any more: lost,
    /// cancelled, or past its local deadline (which marks it lost).
    pub fn ensure_live(&self) -> Result<(), DeliveryError> {
        if self.deadline().is_some_and(|d| Instant::now() >= d) && !self.is_lost() {
            tracing::warn!("local lease deadline passed without a renewal: stopping");
            self.mark_lost();
        }
        if self.is_lost() {
            Err(DeliveryError::Lost)
        } else if self.is_cancelled() {
            Err(DeliveryError::Cancelled)
        } else {
            Ok(())
        }
    }

    /// A fenced step write under this delivery's lease (RFC 002 `writeStep`). Refused
    /// locally once the delivery is lost or cancelled; `Lost` from the backend cancels the
    /// delivery and returns [`DeliveryError::Lost`]. Most workers use [`Delivery::step`].
    pub async fn write_step(&self, write: &StepWrite) -> Result<HeapRecord, DeliveryError> {
        self.ensure_live()?;
        let call = self.inner.backend.write_step(&self.inner.claimed, write);
        match self.inner.export.timed("write_step", call).await? {
            Fenced::Accepted(record) => {
                self.remember(&record);
                Ok(record)
            }
            Fenced::Lost => {
                tracing::warn!(
                    operation = "write_step",
                    step = %write.step_key,
                    "lost: step write refused"
                );
                self.mark_lost();
                Err(DeliveryError::Lost)
            }
        }
    }

    /// The step record for (`step_key`, `attempt`) as far as this delivery needs to ask:
    /// one it wrote or read before, none on a first delivery, else a read from the backend.
    pub(crate) async fn known_step(
        &self,
        step_key: &StepKey,
        attempt: u32,
    ) -> lease_core::error::Result<Option<HeapRecord>> {
        let key = (step_key.clone(), attempt);
        if let Some(record) = self.lock_steps().get(&key) {
            return Ok(Some(record.clone()));
        }
        if self.inner.first {
            return Ok(None);
        }
        let call = self
            .inner
            .backend
            .read_step(self.execution_id(), step_key, attempt);
        let read = self.inner.export.timed("read_step", call).await?;
        if let Some(record) = &read {
            self.remember(record);
        }
        Ok(read)
    }

    pub(crate) fn remember(&self, record: &HeapRecord) {
        self.lock_steps().insert(
            (record.step_key.clone(), record.step_attempt),
            record.clone(),
        );
    }

    fn lock_steps(&self) -> std::sync::MutexGuard<'_, HashMap<(StepKey, u32), HeapRecord>> {
        self.inner.steps.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies a store mutation once per (store, execution, `step_key`) receipt (RFC 002
    /// fencing table: idempotent by receipt). Refused locally once the delivery is lost or
    /// cancelled.
    pub async fn update_store(
        &self,
        store: &StoreId,
        step_key: &str,
        op: &StoreOp,
    ) -> Result<StoreUpdate, DeliveryError> {
        self.ensure_live()?;
        let receipt = StoreReceipt {
            store: store.clone(),
            execution_id: self.execution_id().clone(),
            step_key: StepKey::new(step_key)?,
        };
        let call = self.inner.backend.update(&receipt, op);
        Ok(self.inner.export.timed("update", call).await?)
    }

    /// Starts a workflow, idempotent by request id (RFC 003). Refused locally once the
    /// delivery is lost or cancelled.
    pub async fn start(&self, request: &StartRequest) -> Result<Started, DeliveryError> {
        self.ensure_live()?;
        let call = self.inner.backend.start(request);
        Ok(self.inner.export.timed("start", call).await?)
    }

    /// The backend clock now (unfenced): the clock wakes and durable sleeps are measured on.
    /// Refused locally once the delivery is lost or cancelled.
    pub async fn backend_now(&self) -> Result<Timestamp, DeliveryError> {
        self.ensure_live()?;
        let call = self.inner.backend.now();
        Ok(self.inner.export.timed("now", call).await?)
    }

    /// Requests a wake of this execution at `at` (unfenced; remembered for the
    /// acknowledgement of this delivery).
    pub async fn request_wake(&self, at: Timestamp) -> Result<(), DeliveryError> {
        self.ensure_live()?;
        let call = self.inner.backend.request_wake(self.execution_id(), at);
        Ok(self.inner.export.timed("request_wake", call).await?)
    }
}
