//! Admission from a delivery's fenced script: [`RedisBackend::fenced_script_admitting`] and
//! [`RedisBackend::step_in_script_admitting`] run a [`FencedScript`]'s body behind the lease
//! check, as [`RedisBackend::fenced_script`] and [`RedisBackend::step_in_script`] do, and
//! admit executions (a step's children) in the same script, only when the body returned
//! without error: a step and the children it admits exist together or not at all, and a
//! stale holder admits nothing.
//!
//! The shape: the same [`FencedScript`] (its body's rules unchanged) with one more
//! argument, the admissions, last as in [`RedisBackend::admit_script`]; the admitting
//! variant of the script is another Lua script made of the same body, built at its first
//! use, so a plain fenced script costs what it did. A builder on [`FencedScript`] would tie
//! the admissions to the script, which is built once and run with different children each
//! time; a separate script type would make the application write its body twice.

use lease_core::execution::check_admit_batch;
use lease_core::{Admission, ExecutionLease, Fenced, Json, LeaseError, Result, StepKey};
use lease_runtime::{Delivery, DeliveryError, StepSlot};

use crate::admit::{ScriptAdmissions, refuse_split_keys};
use crate::admit_script::{ScriptAdmitted, admitted_records};
use crate::backend::RedisBackend;
use crate::fenced::{Call, FencedScript};
use crate::reply::Reply;

const OP_SCRIPT: &str = "fenced_script_admitting";
const OP_STEP: &str = "step_in_script_admitting";

impl RedisBackend {
    /// [`RedisBackend::fenced_script`] that also admits `admissions` in the same script
    /// (RFC 002 fencing: the check and the write will be atomic; RFC 001 admit): the lease
    /// is checked, the body runs, and only if it returned without error are the admissions
    /// made exactly as `admit_batch` makes them (an existing id is returned as stored and
    /// wakes nobody) and their wake-up published, so an idle dispatcher is woken as by a
    /// plain admit. No other command runs between the check, the body's writes and the
    /// admissions.
    ///
    /// ```no_run
    /// # async fn demo(backend: &lease_redis::RedisBackend, lease: &lease_core::ExecutionLease)
    /// # -> lease_core::Result<()> {
    /// use lease_core::{Admission, ExecutionId};
    /// use lease_redis::FencedScript;
    ///
    /// // Built once: the parent's own write, behind the lease check.
    /// let split = FencedScript::new("return redis.call('INCR', KEYS[1])");
    /// let parts = format!("app:{}:parts", backend.hash_tag_for(&lease.execution_id));
    /// let child = Admission::new(ExecutionId::new("order-42-part-1")?);
    /// let made = backend
    ///     .fenced_script_admitting(lease, &split, &[&parts], &[], &[child])
    ///     .await?;
    /// match made.accepted() {
    ///     Some(made) => assert_eq!(made.records.len(), 1), // counter and child, together
    ///     None => return Ok(()), // lost: nothing written, nothing admitted; stop
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// - `Accepted` with the body's value and the records (in the admissions' order).
    /// - `Lost`: nothing of the body ran and nothing was admitted; nobody is woken.
    /// - `Backend` with a [`crate::ScriptBodyError`] source: the body failed; nothing was
    ///   admitted (writes it made before failing remain).
    /// - Checked before anything is sent (`InvalidInput`, nothing run, nothing admitted):
    ///   everything [`RedisBackend::fenced_script`] checks; the batch as `admit_batch`
    ///   checks it (too many items, an id twice, a scheduled instant out of range; none at
    ///   all is allowed, and admits nothing); on a namespace split into partitions, every
    ///   admission in the lease's execution's partition (the script runs in that one
    ///   slot: pick child ids whose [`RedisBackend::hash_tag_for`] equals the parent's)
    ///   and none with a concurrency key. `UnknownExecution` and `ForeignToken` as for
    ///   `fenced_script`.
    /// - `OutcomeUnknown`: the connection failed after the call was sent, or an existing
    ///   record could not be read after the script ran.
    pub async fn fenced_script_admitting(
        &self,
        lease: &ExecutionLease,
        script: &FencedScript,
        keys: &[&str],
        args: &[&str],
        admissions: &[Admission],
    ) -> Result<Fenced<ScriptAdmitted>> {
        self.check_children(lease, admissions)?;
        let batch = ScriptAdmissions::new(admissions);
        let call = Call {
            op: OP_SCRIPT,
            script,
            keys,
            args,
            admissions: Some(&batch),
        };
        let (value, admitted) = match self.fenced_call(&call, lease).await? {
            Fenced::Accepted(ran) => ran,
            Fenced::Lost => return Ok(Fenced::Lost),
        };
        let reply = Reply::new(OP_SCRIPT);
        let admitted = admitted.ok_or_else(|| reply.unexpected("no admissions"))?;
        let records = admitted_records(reply, admissions, admitted)?;
        Ok(Fenced::Accepted(ScriptAdmitted { value, records }))
    }

    /// [`RedisBackend::step_in_script`] that also admits `admissions` (the step's
    /// children) in the same script (RFC 002 fencing; RFC 001 admit): after the lease check,
    /// the record's absence, the body and its response check, the admissions are made as
    /// `admit_batch` makes them and their wake-up published, and then the step record is
    /// written, so the body's writes, the children and the record exist together or not at
    /// all. A replay (the record exists, this delivery's or an earlier one's) runs nothing
    /// and admits nothing: the first run admitted the children. The children's records are
    /// not returned (a replay has none to give): read them back with `get`.
    ///
    /// Errors: [`RedisBackend::step_in_script`]'s, with nothing admitted (`Lost`: nothing
    /// ran and nobody is woken; `Step`: the body failed or its response was refused); and
    /// `Backend(InvalidInput)` for admissions [`RedisBackend::fenced_script_admitting`]
    /// refuses, checked before anything is read or sent.
    pub async fn step_in_script_admitting(
        &self,
        delivery: &Delivery,
        step_key: &str,
        script: &FencedScript,
        keys: &[&str],
        args: &[&str],
        admissions: &[Admission],
    ) -> std::result::Result<Json, DeliveryError> {
        let key = StepKey::new(step_key)?;
        self.check_children(delivery.claimed_lease(), admissions)?;
        let attempt = match delivery.step_slot(&key).await? {
            StepSlot::Recorded(record) => return Ok(record.response),
            StepSlot::Free { attempt } => attempt,
        };
        let batch = ScriptAdmissions::new(admissions);
        let call = Call {
            op: OP_STEP,
            script,
            keys,
            args,
            admissions: Some(&batch),
        };
        self.step_call(&call, delivery, key, attempt).await
    }

    /// The checks of admissions a fenced script makes for `lease`'s execution: the batch's,
    /// then, on a split namespace, no concurrency key and every admission in the
    /// execution's partition.
    fn check_children(&self, lease: &ExecutionLease, admissions: &[Admission]) -> Result<()> {
        check_admit_batch(admissions)?;
        refuse_split_keys(self.keys().split(), admissions)?;
        let home = self.keys().of(&lease.execution_id);
        match admissions.iter().find(|a| self.keys().of(&a.id) != home) {
            None => Ok(()),
            Some(stray) => Err(LeaseError::invalid(
                "admissions",
                format!(
                    "{} lies in another partition of the split namespace than execution {}, \
                     whose fenced script runs in its partition only; pick ids whose hash tag \
                     ({}) is the execution's ({})",
                    stray.id,
                    lease.execution_id,
                    self.hash_tag_for(&stray.id),
                    self.hash_tag_for(&lease.execution_id),
                ),
            )),
        }
    }
}
