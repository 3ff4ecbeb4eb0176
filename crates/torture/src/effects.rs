//! The torture workflow's effect step: step [`EFFECT_STEP`] calls a simulated
//! external system (the provider) through `Delivery::effect`, and every effect operation is
//! logged to the process's effect log for [`crate::effectcheck`]:
//!
//! - `begin` and `settle` as the backend answered them ([`RecordedEffects`], the recorder's
//!   effect client);
//! - one line per provider call: effect id, caller (process, token), the result offered.
//!
//! The provider does *not* deduplicate: each call offers a result naming its caller, so two
//! holders that both call (one of them stale, around a takeover) offer different results,
//! and only the effect decides which one the workflow uses. For a third of the executions
//! the step then delivers a late callback: a second settle offering a different result (a
//! provider's duplicate notification, or a stale holder's settle), which must come back as
//! a conflict, never applied.
//!
//! [`EffectMode::Unfenced`] is the negative control: the provider is called inside a plain
//! `Delivery::step`, bypassing the effect helper, and the checker must report it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use lease_core::{
    Begun, EffectClient, EffectId, EffectRecord, EffectWait, ExecutionId, Json, LeaseBackend,
    LeaseError, Result, Settlement,
};
use lease_runtime::{Delivery, DeliveryError};
use serde::{Deserialize, Serialize};

use crate::hash::fnv;
use crate::history::error_result;
use crate::oplog::now_us;

/// The workflow step that is an effect (every execution has at least three steps; `s1` is
/// never an application step, which are the even ones).
pub const EFFECT_STEP: &str = "s1";

/// Whether step `key` is the effect step.
pub fn is_effect_step(key: &str) -> bool {
    key == EFFECT_STEP
}

/// Whether `execution`'s effect step delivers a late, conflicting callback.
pub fn late_callback(execution: &str) -> bool {
    fnv(&[execution, "late-callback"]).is_multiple_of(3)
}

/// How the effect step reaches the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffectMode {
    /// Through `Delivery::effect` (begin, call unless settled, settle, record the kept result).
    Helper,
    /// NEGATIVE CONTROL: the provider called inside a plain `Delivery::step`.
    Unfenced,
}

impl EffectMode {
    /// Parses `helper` / `unfenced`.
    pub fn parse(s: &str) -> std::result::Result<Self, String> {
        match s {
            "helper" => Ok(EffectMode::Helper),
            "unfenced" => Ok(EffectMode::Unfenced),
            _ => Err("helper or unfenced".to_owned()),
        }
    }

    /// The flag value.
    pub fn name(self) -> &'static str {
        match self {
            EffectMode::Helper => "helper",
            EffectMode::Unfenced => "unfenced",
        }
    }
}

/// The effect step's value: the chained step value (what later steps fold in) and the
/// provider's receipt, which names the call that made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EffectValue {
    /// The step value of the chain (`workflow::step_value`).
    pub value: String,
    /// The provider's receipt: `p<process>/t<token>`, or `late/...` for a late callback.
    pub receipt: String,
}

/// What a logged `begin` returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum BeginResult {
    /// This call created the effect (pending).
    Created,
    /// It existed, pending.
    Pending,
    /// It existed, settled with `kept` (JSON text).
    Settled {
        /// The kept result.
        kept: String,
    },
    /// An error; `unknown` when it may have applied.
    Error {
        /// Whether it may have applied.
        unknown: bool,
    },
}

/// What a logged `settle` returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum SettleResult {
    /// The offered result was recorded (the first settle).
    Recorded,
    /// An equal result was recorded before.
    AlreadySettled {
        /// The kept result.
        kept: String,
    },
    /// A different result was kept; the offered one was not applied.
    Conflict {
        /// The kept result.
        kept: String,
    },
    /// An error; `unknown` when it may have applied.
    Error {
        /// Whether it may have applied.
        unknown: bool,
    },
}

/// One line of an effect log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EffectEvent {
    /// A `begin` call.
    Begin {
        /// Calling process.
        process: u32,
        /// Execution (the caller).
        execution: String,
        /// Effect id.
        effect: String,
        /// Invoked at.
        start_us: i64,
        /// Returned at.
        end_us: i64,
        /// What it returned.
        #[serde(flatten)]
        result: BeginResult,
    },
    /// One provider call.
    Call {
        /// Calling process.
        process: u32,
        /// Execution.
        execution: String,
        /// Effect id (the idempotency key the provider receives).
        effect: String,
        /// The caller's fencing token.
        token: u64,
        /// The result the call offers (JSON text).
        offered: String,
        /// When the call was made.
        at_us: i64,
    },
    /// A `settle` call.
    Settle {
        /// Calling process.
        process: u32,
        /// Execution (the caller).
        execution: String,
        /// Effect id.
        effect: String,
        /// The offered result (JSON text).
        offered: String,
        /// Invoked at.
        start_us: i64,
        /// Returned at.
        end_us: i64,
        /// What it returned.
        #[serde(flatten)]
        result: SettleResult,
    },
    /// The controller's final read of an execution's effect.
    Final {
        /// Execution.
        execution: String,
        /// Effect id.
        effect: String,
        /// The owner, if the effect exists.
        owner: Option<String>,
        /// The kept result, if it exists and is settled.
        kept: Option<String>,
    },
}

/// The effect log of one process: JSON lines, one `write` each on an append-only file.
#[derive(Debug)]
pub struct EffectLog {
    file: Mutex<File>,
    path: PathBuf,
}

/// The effect log beside op log `log` (`p1-1.jsonl` -> `p1-1.effects.jsonl`).
pub fn log_path(log: &Path) -> PathBuf {
    log.with_extension("effects.jsonl")
}

impl EffectLog {
    /// Creates (or appends to) the log at `path`.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(EffectLog {
            file: Mutex::new(file),
            path: path.to_path_buf(),
        })
    }

    /// Appends one event; a failed write stops the process (a history with holes cannot be
    /// checked).
    pub fn write(&self, event: &EffectEvent) {
        let mut text = serde_json::to_string(event).unwrap_or_else(|e| {
            eprintln!("effect log: cannot encode {event:?}: {e}");
            std::process::abort();
        });
        text.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = file.write_all(text.as_bytes()) {
            eprintln!("effect log {}: write failed: {e}", self.path.display());
            std::process::abort();
        }
    }
}

/// Reads effect logs; torn lines (a SIGKILL mid-write) are skipped and counted. A missing
/// file reads as empty (a process killed before it logged anything).
pub fn read(paths: &[PathBuf]) -> std::io::Result<(Vec<EffectEvent>, usize)> {
    let mut events = Vec::new();
    let mut torn = 0;
    for path in paths {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str(line) {
                Ok(event) => events.push(event),
                Err(_) => torn += 1,
            }
        }
    }
    Ok((events, torn))
}

fn unknown(e: &LeaseError) -> bool {
    error_result(e) != crate::history::OpResult::Failed
}

/// The recorder's effect client: forwards to the backend's, logging `begin` and `settle`.
pub struct RecordedEffects {
    inner: Arc<dyn LeaseBackend>,
    log: Arc<EffectLog>,
    process: u32,
}

impl RecordedEffects {
    /// Logs the effect calls of `process` on `inner` to `log`.
    pub fn new(inner: Arc<dyn LeaseBackend>, log: Arc<EffectLog>, process: u32) -> Self {
        RecordedEffects {
            inner,
            log,
            process,
        }
    }

    fn client(&self) -> Result<&dyn EffectClient> {
        self.inner.effects().ok_or(LeaseError::Unsupported {
            backend: "torture backend",
            operation: "effects",
        })
    }
}

/// Logs begin, settle, read and wait; the backend's effect client (or, without one,
/// [`lease_core::forward::NoEffects`]) is what a method not overridden would reach.
#[async_trait]
impl lease_core::ForwardEffect for RecordedEffects {
    fn inner_effect(&self) -> &dyn EffectClient {
        self.inner
            .effects()
            .unwrap_or(&lease_core::forward::NoEffects)
    }

    async fn begin_effect(&self, id: &EffectId, execution: &ExecutionId) -> Result<Begun> {
        let start_us = now_us();
        let got = self.client()?.begin_effect(id, execution).await;
        let result = match &got {
            Ok(b) if b.created => BeginResult::Created,
            Ok(b) => match b.record.result() {
                Some(kept) => BeginResult::Settled {
                    kept: kept.as_str().to_owned(),
                },
                None => BeginResult::Pending,
            },
            Err(e) => BeginResult::Error {
                unknown: unknown(e),
            },
        };
        self.log.write(&EffectEvent::Begin {
            process: self.process,
            execution: execution.as_str().to_owned(),
            effect: id.as_str().to_owned(),
            start_us,
            end_us: now_us(),
            result,
        });
        got
    }

    async fn settle_effect(
        &self,
        id: &EffectId,
        execution: &ExecutionId,
        offered: &Json,
    ) -> Result<Settlement> {
        let start_us = now_us();
        let got = self.client()?.settle_effect(id, execution, offered).await;
        let kept = |r: &EffectRecord| {
            r.result()
                .map(|j| j.as_str().to_owned())
                .unwrap_or_default()
        };
        let result = match &got {
            Ok(Settlement::Recorded(_)) => SettleResult::Recorded,
            Ok(Settlement::AlreadySettled(r)) => SettleResult::AlreadySettled { kept: kept(r) },
            Ok(Settlement::Conflict { kept: r, .. }) => SettleResult::Conflict { kept: kept(r) },
            Err(e) => SettleResult::Error {
                unknown: unknown(e),
            },
        };
        self.log.write(&EffectEvent::Settle {
            process: self.process,
            execution: execution.as_str().to_owned(),
            effect: id.as_str().to_owned(),
            offered: offered.as_str().to_owned(),
            start_us,
            end_us: now_us(),
            result,
        });
        got
    }

    async fn read_effect(&self, id: &EffectId) -> Result<Option<EffectRecord>> {
        self.client()?.read_effect(id).await
    }

    async fn wait_effect(&self, id: &EffectId, execution: &ExecutionId) -> Result<EffectWait> {
        self.client()?.wait_effect(id, execution).await
    }
}

/// The effect step of one runtime process.
pub struct EffectSteps {
    log: Arc<EffectLog>,
    process: u32,
    mode: EffectMode,
}

impl EffectSteps {
    /// The effect step of runtime `process`, logging provider calls to `log`.
    pub fn new(log: Arc<EffectLog>, process: u32, mode: EffectMode) -> Self {
        EffectSteps { log, process, mode }
    }

    /// The provider: logs the call and offers a result naming its caller.
    fn call(&self, d: &Delivery, effect: &EffectId, value: String) -> EffectValue {
        let offered = EffectValue {
            value,
            receipt: format!("p{}/t{}", self.process, d.token().get()),
        };
        self.log.write(&EffectEvent::Call {
            process: self.process,
            execution: d.execution_id().as_str().to_owned(),
            effect: effect.as_str().to_owned(),
            token: d.token().get(),
            offered: json_text(&offered),
            at_us: now_us(),
        });
        offered
    }

    /// Runs effect step `key` of `d`: `work` passes inside the provider call; returns the
    /// chained value of the effect's kept result.
    pub async fn step(
        &self,
        d: &Delivery,
        key: &str,
        value: String,
        work: Duration,
    ) -> std::result::Result<String, DeliveryError> {
        let kept: EffectValue = match self.mode {
            EffectMode::Helper => {
                d.effect(key, |effect| async move {
                    tokio::time::sleep(work).await;
                    Ok::<_, DeliveryError>(self.call(d, &effect, value))
                })
                .await?
            }
            EffectMode::Unfenced => {
                let effect = EffectId::for_step(d.execution_id(), &lease_core::StepKey::new(key)?)?;
                d.step(key, || async move {
                    tokio::time::sleep(work).await;
                    Ok::<_, DeliveryError>(self.call(d, &effect, value))
                })
                .await?
            }
        };
        if self.mode == EffectMode::Helper && late_callback(d.execution_id().as_str()) {
            self.late_callback(d, key, &kept).await?;
        }
        Ok(kept.value)
    }

    /// A second settle offering a different result: logged by [`RecordedEffects`]; the
    /// checker requires it to be a conflict that changed nothing.
    async fn late_callback(
        &self,
        d: &Delivery,
        key: &str,
        kept: &EffectValue,
    ) -> std::result::Result<(), DeliveryError> {
        let effect = EffectId::for_step(d.execution_id(), &lease_core::StepKey::new(key)?)?;
        let late = EffectValue {
            value: kept.value.clone(),
            receipt: format!("late/p{}/t{}", self.process, d.token().get()),
        };
        let offered = Json::to_json("late callback", &late)?;
        d.ensure_live()?;
        // Whatever it returns, the checker reads it from the effect log (it must be a
        // conflict, the kept result unchanged); the delivery goes on with `kept`.
        let _settlement = d
            .effects()?
            .settle_effect(&effect, d.execution_id(), &offered)
            .await?;
        Ok(())
    }
}

fn json_text(v: &EffectValue) -> String {
    Json::to_json("effect value", v)
        .map(|j| j.as_str().to_owned())
        .unwrap_or_default()
}

/// The controller's final read of the effect of each of `executions`, as log events.
pub async fn final_reads(
    backend: &Arc<dyn LeaseBackend>,
    executions: &[String],
) -> Vec<EffectEvent> {
    let Some(effects) = backend.effects() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for execution in executions {
        let Ok(eid) = ExecutionId::new(execution.clone()) else {
            continue;
        };
        let Ok(key) = lease_core::StepKey::new(EFFECT_STEP) else {
            continue;
        };
        let Ok(id) = EffectId::for_step(&eid, &key) else {
            continue;
        };
        for attempt in 0..5 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            if let Ok(record) = effects.read_effect(&id).await {
                out.push(EffectEvent::Final {
                    execution: execution.clone(),
                    effect: id.as_str().to_owned(),
                    owner: record.as_ref().map(|r| r.execution_id.as_str().to_owned()),
                    kept: record
                        .as_ref()
                        .and_then(|r| r.result().map(|j| j.as_str().to_owned())),
                });
                break;
            }
        }
    }
    out
}
