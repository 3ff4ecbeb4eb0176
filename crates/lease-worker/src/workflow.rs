//! The demo workflow: RFC 002's order story. Load the order, charge the card (a slow
//! external call), record the receipt, acknowledge. Every step goes through the step
//! driver, so a redelivery skips recorded steps and a stale holder's receipt is refused.
//!
//! The charge step is an effect: the driver begins the step's effect, calls the
//! payment provider (`provider.rs`) with the effect id as its idempotency key unless the
//! effect is settled already, settles it, and records the settled result. Two holders
//! around a takeover can both call the provider; the key makes it charge once.
//!
//! On SQLite and PostgreSQL the charge step also writes the application's own record of
//! the charge, a row of the `charges` table, through the backend's fenced `step_in_tx`:
//! the row and the step's done record commit together, only while the token is current
//! (see `charges.rs`). The provider call itself stays outside the transaction. Elsewhere
//! the charge step is `Delivery::effect`.
//!
//! The execution's input tunes it: `{"order": 42, "amount_cents": 1999, "load_ms": 0,
//! "review_ms": 0, "stall_first_ms": 0, "charge_ms": 5000, "receipt_ms": 0,
//! "stall_in_charge_tx_ms": 0, "retry_first": false}`: how long loading takes, the fraud
//! review between load and charge, a stall in the first delivery only (so a test can catch
//! a process holding leases), the charge at the provider, the blocking wait for the
//! provider's receipt after the card is charged, a blocking stall of the first delivery
//! inside its charge transaction after the row is inserted and before the commit, and
//! whether the first delivery replies retry.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lease::{
    Delivery, DeliveryError, EffectId, Json, Reply, SharedBackend, StepKey, StepSlot,
    WorkflowRunOutcome,
};
use serde_json::{Value, json};

use crate::backend::Store;
use crate::charges::ChargeRow;
use crate::events::TARGET;
use crate::provider::{ChargeRequest, Provider};

/// The workflow input, with defaults for missing fields.
#[derive(Debug, Clone)]
struct OrderInput {
    order: u64,
    amount_cents: u64,
    load: Duration,
    review: Duration,
    stall_first: Duration,
    charge: Duration,
    receipt: Duration,
    stall_in_charge_tx: Duration,
    retry_first: bool,
}

impl OrderInput {
    fn from_json(input: Option<&Json>) -> lease::Result<Self> {
        let v = input
            .map(Json::to_value)
            .transpose()?
            .unwrap_or(Value::Null);
        let ms = |k: &str| Duration::from_millis(v[k].as_u64().unwrap_or(0));
        Ok(OrderInput {
            order: v["order"].as_u64().unwrap_or(42),
            amount_cents: v["amount_cents"].as_u64().unwrap_or(1999),
            load: ms("load_ms"),
            review: ms("review_ms"),
            stall_first: ms("stall_first_ms"),
            charge: ms("charge_ms"),
            receipt: ms("receipt_ms"),
            stall_in_charge_tx: ms("stall_in_charge_tx_ms"),
            retry_first: v["retry_first"].as_bool().unwrap_or(false),
        })
    }
}

/// The order workflow, run by the dispatcher of one runtime process.
#[derive(Clone)]
pub struct OrderWorkflow {
    /// For reading the backend clock at the end of a delivery (the claims log).
    pub backend: SharedBackend,
    /// The same backend, concrete: the charge step's fenced transaction.
    pub store: Store,
    /// This process's worker name.
    pub name: Arc<str>,
    /// The lease duration (a claim's time is its first expiry minus this).
    pub lease: Duration,
    /// The payment provider (an external system, idempotent by key).
    pub provider: Provider,
}

/// Logs `stopped` if the worker's future is dropped before it returned: the dispatcher
/// cancelled it (lease lost, shutdown deadline).
struct StopGuard {
    delivery: Delivery,
    finished: AtomicBool,
}

impl Drop for StopGuard {
    fn drop(&mut self) {
        if !self.finished.load(Ordering::SeqCst) {
            tracing::warn!(
                target: TARGET,
                execution_id = %self.delivery.execution_id(),
                token = self.delivery.token().get(),
                lost = self.delivery.is_lost(),
                "stopped"
            );
        }
    }
}

impl OrderWorkflow {
    /// Runs one delivery.
    pub async fn run(self, d: Delivery) -> Result<Reply, DeliveryError> {
        let claimed = d.claimed_lease().clone();
        let lease_ms = i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX);
        tracing::info!(
            target: TARGET,
            claimed_at = claimed.expires_at.as_millis() - lease_ms,
            expires_at = claimed.expires_at.as_millis(),
            unacked = d.record().unacknowledged_deliveries,
            "delivery"
        );
        let guard = StopGuard {
            delivery: d.clone(),
            finished: AtomicBool::new(false),
        };
        let result = self.steps(&d).await;
        let now = match self.backend.now().await {
            Ok(t) => t.as_millis(),
            Err(_) => claimed.expires_at.as_millis() - lease_ms,
        };
        let reply = match &result {
            Ok(Reply::Acknowledge(WorkflowRunOutcome::Completed(_))) => "completed",
            Ok(Reply::Acknowledge(WorkflowRunOutcome::Failed(_))) => "failed",
            Ok(Reply::Acknowledge(WorkflowRunOutcome::Suspended)) => "suspended",
            Ok(Reply::Retry) => "retry",
            Err(DeliveryError::Lost) => "lost",
            Err(_) => "error",
        };
        tracing::info!(
            target: TARGET,
            reply,
            now,
            expires_at = d.lease().expires_at.as_millis(),
            "done"
        );
        guard.finished.store(true, Ordering::SeqCst);
        result
    }

    async fn steps(&self, d: &Delivery) -> Result<Reply, DeliveryError> {
        let input = OrderInput::from_json(d.input())?;
        let ran = AtomicBool::new(false);
        let order: Value = d
            .step("load", || async {
                ran.store(true, Ordering::SeqCst);
                tokio::time::sleep(input.load).await;
                Ok::<_, DeliveryError>(json!({
                    "order": input.order,
                    "amount_cents": input.amount_cents,
                }))
            })
            .await?;
        tracing::info!(
            target: TARGET,
            step = "load",
            replayed = !ran.swap(false, Ordering::SeqCst),
            value = %order,
            "step"
        );
        if input.retry_first && d.record().unacknowledged_deliveries == 0 {
            tracing::info!(target: TARGET, "retry");
            return Ok(Reply::Retry);
        }
        if !input.stall_first.is_zero() && d.record().unacknowledged_deliveries == 0 {
            tracing::info!(target: TARGET, stall_ms = millis(input.stall_first), "stalling");
            tokio::time::sleep(input.stall_first).await;
        }
        if !input.review.is_zero() {
            tracing::info!(target: TARGET, review_ms = millis(input.review), "reviewing");
            tokio::time::sleep(input.review).await;
        }
        let charged = if self.store.has_charges() {
            self.charge_in_tx(d, &input, &ran).await
        } else {
            self.charge(d, &input, &ran).await
        };
        let receipt = match charged {
            Ok(receipt) => receipt,
            Err(DeliveryError::Lost) => {
                tracing::warn!(
                    target: TARGET,
                    step = "charge",
                    in_tx = self.store.has_charges(),
                    "refused"
                );
                return Err(DeliveryError::Lost);
            }
            Err(e) => return Err(e),
        };
        tracing::info!(
            target: TARGET,
            step = "charge",
            replayed = !ran.load(Ordering::SeqCst),
            value = %receipt,
            "step"
        );
        let outcome = Json::from_value("outcome", &json!({ "order": order, "receipt": receipt }))?;
        Ok(Reply::Acknowledge(WorkflowRunOutcome::Completed(outcome)))
    }
}

impl OrderWorkflow {
    /// The provider call, made with the charge step's effect id as its idempotency key:
    /// charges the card (or, for a key it has seen, returns that charge's response and
    /// charges nothing) and returns the provider's response.
    async fn call_provider(
        &self,
        d: &Delivery,
        input: &OrderInput,
        key: &EffectId,
    ) -> Result<Value, std::io::Error> {
        tracing::info!(
            target: TARGET,
            charge_ms = millis(input.charge),
            key = %key,
            "charging"
        );
        tokio::time::sleep(input.charge).await;
        let charged = self.provider.charge(&ChargeRequest {
            key: key.as_str(),
            caller: &self.name,
            token: d.token().get(),
            order: input.order,
            cents: input.amount_cents,
        })?;
        let receipt = charged.response["receipt"].as_str().unwrap_or_default();
        tracing::info!(target: TARGET, receipt = %receipt, new = charged.new, "charged");
        // A synchronous SDK call: the process does nothing else meanwhile. Frozen here and
        // resumed, the worker's next action is its settle, before any timer of the process
        // (a renewal) gets to run.
        std::thread::sleep(input.receipt);
        Ok(charged.response)
    }

    /// The charge step as an effect step (`Delivery::effect`): replay, else the provider
    /// call unless the effect is settled, the settle, and the settled response recorded
    /// with a fenced write.
    async fn charge(
        &self,
        d: &Delivery,
        input: &OrderInput,
        ran: &AtomicBool,
    ) -> Result<Value, DeliveryError> {
        d.effect("charge", |key| async move {
            ran.store(true, Ordering::SeqCst);
            self.call_provider(d, input, &key).await
        })
        .await
    }

    /// The charge step with the application's `charges` row: the replay rule, the effect
    /// (`Delivery::effect_result`: the provider call, outside any transaction, unless the
    /// effect is settled, then the settle), then the row and the step's done record, both
    /// carrying the settled response, in one fenced `step_in_tx` transaction.
    async fn charge_in_tx(
        &self,
        d: &Delivery,
        input: &OrderInput,
        ran: &AtomicBool,
    ) -> Result<Value, DeliveryError> {
        if let StepSlot::Recorded(record) = d.step_slot(&StepKey::new("charge")?).await? {
            return Ok(record.response.decode()?);
        }
        ran.store(true, Ordering::SeqCst);
        let value: Value = d
            .effect_result("charge", |key| async move {
                self.call_provider(d, input, &key).await
            })
            .await?;
        let first = d.record().unacknowledged_deliveries == 0;
        let row = ChargeRow {
            order_id: i64::try_from(input.order).unwrap_or(i64::MAX),
            execution_id: d.execution_id().to_string(),
            worker: self.name.to_string(),
            token: d.token().get(),
            receipt: value["receipt"].as_str().unwrap_or_default().to_owned(),
            cents: i64::try_from(input.amount_cents).unwrap_or(i64::MAX),
        };
        let stall = if first {
            input.stall_in_charge_tx
        } else {
            Duration::ZERO
        };
        self.store.charge_in_tx(d, row, value, stall).await
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
