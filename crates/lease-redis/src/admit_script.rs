//! Admission inside the application's own script: an [`AdmitScript`] is the application's
//! Lua, run by [`RedisBackend::admit_script`] in one script with the admissions it makes
//! and their wake-up, so its writes and the executions exist together.

use std::fmt;
use std::sync::Arc;

use lease_core::execution::check_admit_batch;
use lease_core::{Admission, ExecutionRecord, LeaseError, Result};
use redis::{Script, Value};

use crate::admit::{ADMIT_BATCH_BODY, ScriptAdmissions, decode_admitted, refuse_split_keys};
use crate::backend::RedisBackend;
use crate::error::{Access, BACKEND};
use crate::fenced::{ScriptBodyError, compile_error};
use crate::keys::Keys;
use crate::partitioned::by_partition;
use crate::reply::Reply;
use crate::scripts::admit_source;

const OP: &str = "admit_script";

/// An application's Lua script that admits executions in the same script as its own
/// writes (RFC 001 admit, atomic with the application's data): built once, run with
/// [`RedisBackend::admit_script`]. The shape of [`crate::FencedScript`], without a lease:
/// the body sees only its own `KEYS` and `ARGV` and none of the library's helpers; only
/// when it returned without error do the admissions follow, exactly as `admit_batch`
/// makes them, with their wake-up published in the same script.
///
/// The body's rules are [`crate::FencedScript`]'s: declare every key it touches (each
/// with the namespace's hash tag, outside the library's prefix) and check before writing,
/// since Redis does not roll a script back: a body that fails after writing leaves those
/// writes, and admits nothing.
#[derive(Clone)]
pub struct AdmitScript {
    body: Arc<str>,
    script: Script,
}

impl AdmitScript {
    /// Builds the admitting script for `body`, Lua as for `EVAL`. Cheap to clone; build it
    /// once.
    pub fn new(body: impl Into<String>) -> Self {
        let body: String = body.into();
        let script = Script::new(&admit_source(ADMIT_BATCH_BODY, &body));
        AdmitScript {
            body: body.into(),
            script,
        }
    }

    /// The caller's body as given.
    pub fn body(&self) -> &str {
        &self.body
    }

    /// The SHA-1 of the combined script (`EVALSHA`, `SCRIPT EXISTS`).
    pub fn hash(&self) -> &str {
        self.script.get_hash()
    }
}

impl fmt::Debug for AdmitScript {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmitScript")
            .field("hash", &self.hash())
            .field("body_bytes", &self.body.len())
            .finish()
    }
}

/// What [`RedisBackend::admit_script`] did: the body's return value and the admitted
/// records, in the admissions' order (an existing id as stored, unchanged).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ScriptAdmitted {
    /// What the body returned (`Nil` for nothing).
    pub value: Value,
    /// The records, as `admit_batch` returns them.
    pub records: Vec<ExecutionRecord>,
}

impl RedisBackend {
    /// Runs `script`'s body with `keys` as its `KEYS` and `args` as its `ARGV`, then, in
    /// the same script and only if the body returned without error, admits `admissions`
    /// exactly as `admit_batch` does (an existing id is returned unchanged and wakes
    /// nobody) and publishes their wake-up: no other command runs between the body's
    /// writes and the admissions, and a dispatcher is woken as by a plain admit.
    ///
    /// Checked before anything is sent (`InvalidInput`, nothing run): the batch as
    /// `admit_batch` checks it, with at least one admission; on a namespace split into
    /// partitions, every admission in one partition and none with a concurrency key; each
    /// key carrying the admissions' hash tag ([`RedisBackend::hash_tag_for`] of their ids)
    /// and lying outside the library's prefix; a body that does not compile.
    ///
    /// `Backend` with a [`ScriptBodyError`] source: the body failed; nothing was admitted,
    /// and writes it made before failing remain. `OutcomeUnknown`: the connection failed
    /// after the call was sent, or an existing record could not be read after the script
    /// ran.
    pub async fn admit_script(
        &self,
        script: &AdmitScript,
        keys: &[&str],
        args: &[&str],
        admissions: &[Admission],
    ) -> Result<ScriptAdmitted> {
        let prefix = self.admitting_prefix(admissions)?;
        for key in keys {
            self.keys().check_app_key(key, &admissions[0].id)?;
        }
        let batch = ScriptAdmissions::new(admissions);
        let seqs = self.reserve_sequences(admissions.len()).await?;
        let mut all = batch.args(self, &seqs);
        all.extend(args.iter().map(|a| a.as_bytes()));
        let anchor = Keys::anchor(prefix);
        let mut declared = vec![prefix, anchor.as_str()];
        declared.extend_from_slice(keys);
        let v = self
            .invoke(OP, Access::Write, &script.script, &declared, &all)
            .await?
            .map_err(|e| match compile_error(&e) {
                Some(reason) => LeaseError::invalid("admit script", reason),
                None => self.script_error(OP, Access::Write, e),
            })?;
        decode(v, admissions)
    }

    /// The one prefix every admission of `admissions` lies in, after the batch's checks.
    fn admitting_prefix(&self, admissions: &[Admission]) -> Result<&str> {
        check_admit_batch(admissions)?;
        refuse_split_keys(self.keys().split(), admissions)?;
        let groups = by_partition(self, admissions, |a| &a.id);
        match groups.as_slice() {
            [(prefix, _)] => Ok(prefix),
            [] => Err(LeaseError::invalid(
                "admissions",
                "an admitting script needs at least one admission (without, use EVAL)",
            )),
            _ => Err(LeaseError::invalid(
                "admissions",
                "they lie in several partitions of a split namespace; one script runs in one",
            )),
        }
    }
}

/// The script's reply: `{'ok', admit_batch's reply, value}` or `{'failed', message}`.
fn decode(v: Value, admissions: &[Admission]) -> Result<ScriptAdmitted> {
    let reply = Reply::new(OP);
    let (status, mut rest) = reply.status(v)?;
    match status.as_str() {
        "ok" => {}
        "failed" => {
            let message = reply.string(reply.next(&mut rest, "error message")?)?;
            return Err(LeaseError::Backend {
                backend: BACKEND,
                operation: OP,
                source: Box::new(ScriptBodyError::new(message)),
            });
        }
        other => return Err(reply.unexpected(other)),
    }
    let admitted = reply.next(&mut rest, "admissions")?;
    let value = rest.next().unwrap_or(Value::Nil);
    let records = admitted_records(reply, admissions, admitted)?;
    Ok(ScriptAdmitted { value, records })
}

/// The records of `admit_batch`'s reply inside an application's script (`admitted`), in
/// the admissions' order; an existing record that cannot be read is `OutcomeUnknown`, since
/// the script ran.
pub(crate) fn admitted_records(
    reply: Reply,
    admissions: &[Admission],
    admitted: Value,
) -> Result<Vec<ExecutionRecord>> {
    let items: Vec<&Admission> = admissions.iter().collect();
    decode_admitted(reply, &items, admitted)?
        .into_iter()
        .enumerate()
        .map(|(i, (_, record))| {
            record.map_err(|e| LeaseError::OutcomeUnknown {
                backend: BACKEND,
                operation: reply.op,
                source: format!(
                    "the script ran (body and admissions), but item {i}'s existing record \
                     cannot be read: {e}"
                )
                .into(),
            })
        })
        .collect()
}
