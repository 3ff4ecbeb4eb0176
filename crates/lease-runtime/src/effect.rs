//! The step driver's effect helpers: an effect step runs its external call at most
//! once per effect id, whichever delivery or holder gets there, and store and effect waits.

use std::future::Future;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::delivery::Delivery;
use crate::error::DeliveryError;
use crate::step::StepSlot;
use lease_core::client::EffectClient;
use lease_core::effect::{EffectWait, Settlement};
use lease_core::error::{BoxError, LeaseError};
use lease_core::ids::{EffectId, StepKey, StoreId, StoreKey};
use lease_core::json::Json;

impl Delivery {
    /// The backend's effect client; `Unsupported` when it has none.
    pub fn effects(&self) -> Result<&dyn EffectClient, DeliveryError> {
        self.backend_effects().ok_or_else(|| {
            DeliveryError::Backend(self.backend_capabilities().unsupported("effects"))
        })
    }

    /// An effect step (RFC 004, reduced): the replay rule around one external call that
    /// must not repeat.
    ///
    /// - A done step record for `key` exists: its value is returned; nothing else runs.
    /// - Else the effect [`EffectId::for_step`]`(execution, key)` is begun (idempotent). If an
    ///   earlier delivery or another holder already settled it, its result is used and `f`
    ///   does not run. Otherwise `f` runs with the effect id, which the caller passes to the
    ///   external system as its idempotency key (every holder passes the same id, so the
    ///   system deduplicates a call a stale holder also made), and its result settles the
    ///   effect. The *settled* (first) result is used: on a [`Settlement::Conflict`] the
    ///   conflict is logged and the kept result wins, never the new one.
    /// - The result is recorded with a fenced step write; `Lost` as in [`Delivery::step`].
    pub async fn effect<T, F, Fut, E>(&self, key: &str, f: F) -> Result<T, DeliveryError>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce(EffectId) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Into<BoxError>,
    {
        let step_key = StepKey::new(key)?;
        let attempt = match self.step_slot(&step_key).await? {
            StepSlot::Recorded(record) => return Ok(record.response.decode()?),
            StepSlot::Free { attempt } => attempt,
        };
        let result = self.settled_effect(&step_key, f).await?;
        let record = self.record_step(&step_key, attempt, &result).await?;
        Ok(record.response.decode()?)
    }

    /// The effect half of [`Delivery::effect`], for a step that records its result in its
    /// own fenced transaction (a backend's `step_in_tx`): begins the effect
    /// [`EffectId::for_step`]`(execution, key)`, runs `f` with its id only if the effect is
    /// not settled yet, settles it, and returns the *settled* (first) result. It does not
    /// look for or write the step record: the caller checks the replay rule first
    /// ([`Delivery::step_slot`]) and records exactly the returned value, so the step's value
    /// and the effect's kept result are the same.
    pub async fn effect_result<T, F, Fut, E>(&self, key: &str, f: F) -> Result<T, DeliveryError>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce(EffectId) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Into<BoxError>,
    {
        let step_key = StepKey::new(key)?;
        Ok(self.settled_effect(&step_key, f).await?.decode()?)
    }

    /// Begins the step's effect and returns its settled result, running `f` only when no
    /// result is recorded yet.
    async fn settled_effect<T, F, Fut, E>(
        &self,
        step_key: &StepKey,
        f: F,
    ) -> Result<Json, DeliveryError>
    where
        T: Serialize,
        F: FnOnce(EffectId) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Into<BoxError>,
    {
        let effects = self.effects()?;
        let id = EffectId::for_step(self.execution_id(), step_key)?;
        self.ensure_live()?;
        let begun = effects.begin_effect(&id, self.execution_id()).await?;
        if let Some(result) = begun.record.result() {
            tracing::debug!(effect = %id, "effect already settled");
            return Ok(result.clone());
        }
        let value = f(id.clone()).await.map_err(|e| DeliveryError::Step {
            step: step_key.clone(),
            source: e.into(),
        })?;
        let result = Json::to_json("effect result", &value)?;
        self.ensure_live()?;
        let settlement = effects
            .settle_effect(&id, self.execution_id(), &result)
            .await?;
        if let Settlement::Conflict { offered, .. } = &settlement {
            tracing::warn!(effect = %id, offered = %offered, "effect settled before with a different result; the first result is kept");
        }
        settlement.result().cloned().ok_or_else(|| {
            DeliveryError::Backend(LeaseError::invalid(
                "effect settlement",
                format!("effect {id} is not settled after settle"),
            ))
        })
    }

    /// `EffectClient.wait` for an effect of this execution (unfenced): `Settled` returns its
    /// record; `Registered` means the settle will wake this execution, so the worker can
    /// reply suspended. Refused locally once the delivery is lost or cancelled.
    pub async fn wait_effect(&self, id: &EffectId) -> Result<EffectWait, DeliveryError> {
        self.ensure_live()?;
        Ok(self.effects()?.wait_effect(id, self.execution_id()).await?)
    }

    /// Store waiter registration for this execution (unfenced): the next update that
    /// changes the entry wakes it. Returns the entry's value at registration. Refused
    /// locally once the delivery is lost or cancelled.
    pub async fn watch_entry(
        &self,
        store: &StoreId,
        key: &StoreKey,
    ) -> Result<Option<Json>, DeliveryError> {
        self.ensure_live()?;
        // Refused here rather than by the store's default, which cannot name the backend
        // (the store trait does not see the declaration).
        self.backend_capabilities()
            .require(self.backend_capabilities().effects, "watch_entry")?;
        Ok(self
            .store()
            .watch_entry(store, key, self.execution_id())
            .await?)
    }
}
