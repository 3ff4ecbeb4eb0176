//! Fencing the application's own Redis writes: a [`FencedScript`] is the
//! application's Lua, run by [`RedisBackend::fenced_script`] only while a lease is held, and
//! by [`RedisBackend::step_in_script`] as a step whose record is written in the same script
//! as the application's writes. Their admitting variants (`crate::fenced_admit`) run the
//! same calls ([`Call`]) with admissions.

use std::fmt;
use std::sync::{Arc, LazyLock, OnceLock};

use lease_core::limits::MAX_PAYLOAD_BYTES;
use lease_core::{ExecutionLease, Fenced, HeapRecord, Json, LeaseError, Result, StepKey};
use lease_runtime::next_step_attempt;
use lease_runtime::{Delivery, DeliveryError, StepSlot};
use redis::{Script, Value};

use crate::admit::{ADMIT_BATCH_BODY, ScriptAdmissions};
use crate::backend::RedisBackend;
use crate::error::{Access, BACKEND, protocol};
use crate::keys::Keys;
use crate::refusal::refusal;
use crate::reply::Reply;
use crate::scripts::{fenced_admit_source, fenced_source};
use crate::wire::{parse_step_value, step_field, step_value_prefix, token_arg};

const OP_SCRIPT: &str = "fenced_script";
const OP_STEP: &str = "step_in_script";

/// The largest step response the script records, as its argument.
static MAX_RESPONSE: LazyLock<String> = LazyLock::new(|| MAX_PAYLOAD_BYTES.to_string());

/// An application's Lua script that runs only while a lease is held (RFC 002 fencing:
/// "the check and the write will be atomic"): built once, run with
/// [`RedisBackend::fenced_script`] or [`RedisBackend::step_in_script`], or, to admit
/// executions in the same script, [`RedisBackend::fenced_script_admitting`] or
/// [`RedisBackend::step_in_script_admitting`] (another combined script of the same body,
/// built at their first use).
///
/// [`FencedScript::new`] builds one Lua script from the caller's body and the library's
/// prelude, which checks the lease exactly as `write_step` does (the execution's stored
/// token equals the lease's and its delivery has not ended), and only then calls the body,
/// all inside one script, so no other command runs between the check and the body's writes.
/// The body sees only its own `KEYS` and `ARGV` (numbered from 1, as in a plain `EVAL`) and
/// none of the library's helpers; what it returns is the call's result. The combined script
/// is hashed once and sent with `EVALSHA` (loaded again after `NOSCRIPT`), like every
/// script of the backend; keep the value and reuse it.
///
/// Rules for the body:
///
/// - **Declare every key it touches**, and touch no other: Redis enforces this only in
///   cluster mode, and only a declared key is checked to lie in the namespace's slot.
///   Each key must carry the namespace's hash tag `{<namespace>}` as its first hash tag (with
///   partitions, the lease's partition tag, [`RedisBackend::hash_tag_for`]) and lie outside
///   the library's prefixes (`lease:{<namespace>}:`); other keys are
///   `LeaseError::InvalidInput` before anything runs.
/// - **Check before writing.** Redis scripts do not roll back on error: a body that raises
///   an error (or returns `redis.error_reply`) after some writes leaves those writes. The
///   body runs under `pcall`, so such a failure is reported as a typed error
///   ([`ScriptBodyError`]) rather than an unknown outcome; validate inputs and read what you
///   need first, then write.
/// - No shebang (`#!lua`): the body is wrapped in a function placed after the lease check
///   (so text that closes the wrapper still runs only after the check). Line
///   numbers in its error messages are the combined script's. A body that does not compile is `LeaseError::InvalidInput` and
///   nothing runs.
#[derive(Clone)]
pub struct FencedScript {
    body: Arc<str>,
    script: Script,
    /// The admitting variant's script (`fenced_admit_source`), built at its first use, so
    /// the plain script stays as small as it was (its helpers are created on every call).
    admitting: Arc<OnceLock<Script>>,
}

impl FencedScript {
    /// Builds the fenced script for `body`, Lua as for `EVAL` (using `KEYS`, `ARGV` and
    /// `redis.call`). Cheap to clone; build it once.
    pub fn new(body: impl Into<String>) -> Self {
        let body: String = body.into();
        let script = Script::new(&fenced_source(&body));
        FencedScript {
            body: body.into(),
            script,
            admitting: Arc::default(),
        }
    }

    /// The caller's body as given (runnable on its own with `EVAL`, unfenced).
    pub fn body(&self) -> &str {
        &self.body
    }

    /// The SHA-1 of the combined script (`EVALSHA`, `SCRIPT EXISTS`).
    pub fn hash(&self) -> &str {
        self.script.get_hash()
    }

    /// The SHA-1 of the admitting variant's combined script, which
    /// [`RedisBackend::fenced_script_admitting`] and [`RedisBackend::step_in_script_admitting`]
    /// run: another script than [`Self::hash`]'s, made of the same body.
    pub fn admitting_hash(&self) -> &str {
        self.admitting_script().get_hash()
    }

    /// The admitting variant's script, built at its first use.
    fn admitting_script(&self) -> &Script {
        self.admitting
            .get_or_init(|| Script::new(&fenced_admit_source(ADMIT_BATCH_BODY, &self.body)))
    }
}

impl fmt::Debug for FencedScript {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FencedScript")
            .field("hash", &self.hash())
            .field("body_bytes", &self.body.len())
            .finish()
    }
}

/// A fenced script's body failed after the lease check passed: it raised a Lua error,
/// returned an error reply, or (for [`RedisBackend::step_in_script`]) returned something
/// that is not JSON text. Writes the body made before failing remain (Redis does not roll
/// a script back); for a step, nothing was recorded, so the step runs again on redelivery.
///
/// [`RedisBackend::fenced_script`] returns it as the source of `LeaseError::Backend`;
/// [`RedisBackend::step_in_script`] as the source of `DeliveryError::Step`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptBodyError {
    message: String,
}

impl ScriptBodyError {
    pub(crate) fn new(message: String) -> Self {
        ScriptBodyError { message }
    }

    /// What Redis or the body reported.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ScriptBodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the application script's body failed (for a fenced script: after the lease \
             check); writes it made before failing remain: {}",
            self.message
        )
    }
}

impl std::error::Error for ScriptBodyError {}

/// What one run of a fenced script reported.
#[derive(Debug)]
pub(crate) enum Ran {
    /// The lease was not held: nothing of the body ran.
    Lost,
    /// The body returned this (no step), and (the admitting variant) the admissions'
    /// `admit_batch` reply.
    Returned(Value, Option<Value>),
    /// The body returned this response and the step record was written with it (the
    /// admitting variant: after the admissions).
    New(String),
    /// A record existed at the attempt (its stored value); the body did not run.
    Existing(String),
    /// The body failed, or its step response was refused; no record was written.
    Failed(ScriptBodyError),
}

/// One call of a fenced script as its caller made it.
pub(crate) struct Call<'a> {
    /// The operation, for errors.
    pub(crate) op: &'static str,
    pub(crate) script: &'a FencedScript,
    pub(crate) keys: &'a [&'a str],
    pub(crate) args: &'a [&'a str],
    /// The admissions the admitting variant makes after the body (already checked against
    /// the lease's partition); `None` runs the plain script.
    pub(crate) admissions: Option<&'a ScriptAdmissions<'a>>,
}

/// The step record a fenced step would write: its field and its value before the response.
struct StepArgs {
    field: String,
    value_prefix: String,
}

impl RedisBackend {
    /// Runs `script`'s body only while `lease` holds its execution (RFC 002 fencing: "the
    /// check and the write will be atomic"), in one script: the lease is checked
    /// exactly as `write_step` checks it, then the body runs with `keys` as its `KEYS` and
    /// `args` as its `ARGV`, and its return value is the result.
    ///
    /// - `Accepted(value)`: the token was current and the body ran; `value` is what it
    ///   returned (`Nil` for nothing).
    /// - `Lost`: a higher token exists or the delivery already ended: nothing of the body
    ///   ran. Stop, as for any `Lost`.
    /// - `InvalidInput` (a key without the namespace's hash tag, or inside the library's
    ///   prefix, named in the error; token 0; a token above 2^53 - 1; a body that does not
    ///   compile), `UnknownExecution`, `ForeignToken`: nothing ran.
    /// - `Backend` with a [`ScriptBodyError`] source: the body failed after the check;
    ///   writes it made before failing remain. `OutcomeUnknown`: the connection failed after
    ///   the call was sent.
    ///
    /// See [`FencedScript`] for the body's rules.
    pub async fn fenced_script(
        &self,
        lease: &ExecutionLease,
        script: &FencedScript,
        keys: &[&str],
        args: &[&str],
    ) -> Result<Fenced<Value>> {
        let call = Call {
            op: OP_SCRIPT,
            script,
            keys,
            args,
            admissions: None,
        };
        self.fenced_call(&call, lease)
            .await
            .map(|ran| ran.map(|(value, _)| value))
    }

    /// [`RedisBackend::fenced_script`]'s run of `call`: `Accepted` with the body's value and
    /// (the admitting variant) the admissions' reply.
    pub(crate) async fn fenced_call(
        &self,
        call: &Call<'_>,
        lease: &ExecutionLease,
    ) -> Result<Fenced<(Value, Option<Value>)>> {
        match self.run_fenced(call, lease, None).await? {
            Ran::Lost => Ok(Fenced::Lost),
            Ran::Returned(value, admitted) => Ok(Fenced::Accepted((value, admitted))),
            Ran::Failed(e) => Err(LeaseError::Backend {
                backend: BACKEND,
                operation: call.op,
                source: Box::new(e),
            }),
            other => Err(protocol(call.op, format!("unexpected reply {other:?}"))),
        }
    }

    /// A step whose effect is the application's Redis writes: under the replay
    /// rule ([`Delivery::step_slot`]) a done record of `step_key` is returned and nothing
    /// runs; otherwise one script checks the lease (as `write_step` does), checks that no
    /// record exists at the attempt, runs `script`'s body, and records its return value as
    /// the step's done response under this delivery's token. The body's writes and the
    /// record therefore exist together or not at all (RFC 002 fencing: the check and the
    /// write will be atomic), and a redelivery finds the record and skips the body.
    ///
    /// The body must return JSON text (a Lua string; for example `cjson.encode(x)` or
    /// `tostring(n)`). It is checked in the script before the record is written (a string
    /// of at most `MAX_PAYLOAD_BYTES` that Redis's `cjson` decodes, nested at most
    /// `MAX_JSON_DEPTH` deep); the record stores the text as returned, and this call
    /// returns it as canonical [`Json`]. Text that passes those checks but that
    /// [`Json::parse`] refuses (duplicate keys, `nan`, hex numbers) is recorded and
    /// reported as that parse error.
    ///
    /// Errors: [`DeliveryError::Lost`] when the lease is not held (nothing of the body ran;
    /// the worker must stop); [`DeliveryError::Step`] with a [`ScriptBodyError`] when the
    /// body failed or returned no usable JSON (nothing recorded; the body's writes before
    /// the failure remain); `Cancelled`/`Lost` before the call once the delivery is
    /// cancelled or lost; `Backend` for bad input (keys, token, unknown execution), with
    /// nothing run.
    pub async fn step_in_script(
        &self,
        delivery: &Delivery,
        step_key: &str,
        script: &FencedScript,
        keys: &[&str],
        args: &[&str],
    ) -> std::result::Result<Json, DeliveryError> {
        let key = StepKey::new(step_key)?;
        let attempt = match delivery.step_slot(&key).await? {
            StepSlot::Recorded(record) => return Ok(record.response),
            StepSlot::Free { attempt } => attempt,
        };
        let call = Call {
            op: OP_STEP,
            script,
            keys,
            args,
            admissions: None,
        };
        self.step_call(&call, delivery, key, attempt).await
    }

    /// [`RedisBackend::step_in_script`] from the first free `attempt` of step `key` on.
    pub(crate) async fn step_call(
        &self,
        call: &Call<'_>,
        delivery: &Delivery,
        key: StepKey,
        mut attempt: u32,
    ) -> std::result::Result<Json, DeliveryError> {
        let lease = delivery.claimed_lease();
        loop {
            delivery.ensure_live()?;
            let step = StepArgs {
                field: step_field(&key, attempt),
                value_prefix: step_value_prefix(lease.token, true),
            };
            let ran = self.run_fenced(call, lease, Some(&step)).await?;
            let record = |done, response| HeapRecord {
                execution_id: lease.execution_id.clone(),
                step_key: key.clone(),
                step_attempt: attempt,
                done,
                response,
                token: lease.token,
            };
            match ran {
                Ran::Lost => {
                    tracing::warn!(step = %key, "lost: fenced step script refused");
                    delivery.mark_lost();
                    return Err(DeliveryError::Lost);
                }
                Ran::New(text) => {
                    let response = Json::parse("step response", &text).inspect_err(|e| {
                        tracing::warn!(step = %key, "recorded step response does not parse: {e}");
                    })?;
                    delivery.note_step_written(&record(true, response.clone()));
                    return Ok(response);
                }
                Ran::Existing(stored) => {
                    let (token, done, response) = parse_step_value(call.op, &stored)?;
                    let found = HeapRecord {
                        token,
                        ..record(done, response)
                    };
                    delivery.note_step_written(&found);
                    if found.done {
                        return Ok(found.response);
                    }
                    attempt = next_step_attempt(&key, attempt)?;
                }
                Ran::Failed(e) => {
                    return Err(DeliveryError::Step {
                        step: key,
                        source: Box::new(e),
                    });
                }
                Ran::Returned(..) => {
                    return Err(protocol(call.op, "a reply without a step").into());
                }
            }
        }
    }

    /// One run of a fenced script: the keys and the token are checked here, before
    /// anything is sent (and, for the admitting variant, before its admission sequences are
    /// reserved); the script checks the lease before the body runs.
    async fn run_fenced(
        &self,
        call: &Call<'_>,
        lease: &ExecutionLease,
        step: Option<&StepArgs>,
    ) -> Result<Ran> {
        for key in call.keys {
            self.keys().check_app_key(key, &lease.execution_id)?;
        }
        let token = token_arg(lease.token)?;
        let seqs = match call.admissions {
            Some(batch) => self.reserve_sequences(batch.items().len()).await?,
            None => String::new(),
        };
        let mut all: Vec<&[u8]> = Vec::with_capacity(5 + call.args.len());
        all.push(lease.execution_id.as_str().as_bytes());
        all.push(token.as_bytes());
        all.push(step.map_or(b"", |s| s.field.as_bytes()));
        all.push(step.map_or(b"", |s| s.value_prefix.as_bytes()));
        all.push(MAX_RESPONSE.as_bytes());
        if let Some(batch) = call.admissions {
            all.extend(batch.args(self, &seqs));
        }
        all.extend(call.args.iter().map(|a| a.as_bytes()));
        // KEYS: the execution's partition prefix (and, to admit, its anchor), then the
        // caller's keys.
        let prefix = self.keys().of(&lease.execution_id);
        let anchor: String;
        let mut declared = Vec::with_capacity(2 + call.keys.len());
        declared.push(prefix);
        let script = match call.admissions {
            Some(_) => {
                anchor = Keys::anchor(prefix);
                declared.push(anchor.as_str());
                call.script.admitting_script()
            }
            None => &call.script.script,
        };
        declared.extend_from_slice(call.keys);
        let v = self
            .invoke(call.op, Access::Write, script, &declared, &all)
            .await?
            .map_err(|e| match compile_error(&e) {
                Some(reason) => LeaseError::invalid("fenced script", reason),
                None => self.script_error(call.op, Access::Write, e),
            })?;
        decode(Reply::new(call.op), lease, v, call.admissions.is_some())
    }
}

/// The reply of a fenced script; `admitting`: the admitting variant's, whose `ok` and `new`
/// carry the admissions' reply after the status word.
fn decode(reply: Reply, lease: &ExecutionLease, v: Value, admitting: bool) -> Result<Ran> {
    let (status, mut rest) = reply.status(v)?;
    if let Some(e) = refusal(&status, lease) {
        return Err(e);
    }
    let text = |rest: &mut std::vec::IntoIter<Value>, what| {
        reply.next(rest, what).and_then(|v| reply.string(v))
    };
    let admitted = |rest: &mut std::vec::IntoIter<Value>| match admitting {
        true => reply.next(rest, "admissions").map(Some),
        false => Ok(None),
    };
    Ok(match status.as_str() {
        "lost" => Ran::Lost,
        "ok" => {
            let admitted = admitted(&mut rest)?;
            // A body that returns nothing leaves the reply at its status word (or, to
            // admit, at the admissions).
            Ran::Returned(rest.next().unwrap_or(Value::Nil), admitted)
        }
        "new" => {
            // A step's caller reads its children back itself; the admissions' reply is only
            // checked to be there.
            admitted(&mut rest)?;
            Ran::New(text(&mut rest, "step response")?)
        }
        "existing" => Ran::Existing(text(&mut rest, "step record")?),
        "failed" | "bad_response" => Ran::Failed(ScriptBodyError {
            message: text(&mut rest, "error message")?,
        }),
        other => return Err(reply.unexpected(other)),
    })
}

/// The compiler's message when Redis refused to compile the script (the body's syntax):
/// nothing ran.
pub(crate) fn compile_error(e: &redis::RedisError) -> Option<String> {
    let text = e.to_string();
    text.contains("Error compiling script").then_some(text)
}
