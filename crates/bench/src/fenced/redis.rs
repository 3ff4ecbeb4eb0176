//! Redis's side of the fenced rows: `fenced_script` and `step_in_script` of a two-command
//! body (`redis_body.lua`) on keys in the namespace's slot, against the bare body by
//! `EVALSHA` on the same connection.

use lease_core::{ExecutionLease, Fenced};
use lease_redis::{FencedScript, RedisBackend};
use lease_runtime::Delivery;
use redis::{Script, Value};

use super::receipt;
use crate::error::{BenchError, Result, raw};

const BODY: &str = include_str!("redis_body.lua");

/// The backend, the fenced and the bare script, and the application's keys.
pub struct RedisApp {
    backend: RedisBackend,
    fenced: FencedScript,
    bare: Script,
    keys: [String; 2],
}

impl RedisApp {
    /// The scripts and keys of `backend`'s namespace (deleted with it: see `remove`).
    pub fn new(backend: &RedisBackend) -> Self {
        let tag = backend.hash_tag();
        RedisApp {
            backend: backend.clone(),
            fenced: FencedScript::new(BODY),
            bare: Script::new(BODY),
            keys: [format!("app:{tag}:count"), format!("app:{tag}:order")],
        }
    }

    fn keys(&self) -> [&str; 2] {
        [self.keys[0].as_str(), self.keys[1].as_str()]
    }

    /// The fenced script.
    pub async fn fenced(&self, lease: &ExecutionLease, key: &str) -> Result<()> {
        let r = receipt::of(key);
        match self
            .backend
            .fenced_script(lease, &self.fenced, &self.keys(), &[key, &r])
            .await
        {
            Ok(Fenced::Accepted(_)) => Ok(()),
            other => Err(BenchError::Setup(format!("fenced_script: {other:?}"))),
        }
    }

    /// The bare body, no fence.
    pub async fn unfenced(&self, key: &str) -> Result<()> {
        let mut invocation = self.bare.prepare_invoke();
        invocation
            .key(&self.keys[0])
            .key(&self.keys[1])
            .arg(key)
            .arg(receipt::of(key));
        let _: Value = invocation
            .invoke_async(&mut self.backend.connection())
            .await
            .map_err(|e| raw("redis", "bare body", e))?;
        Ok(())
    }

    /// The body and the step record in one fenced script.
    pub async fn step_in_script(&self, d: &Delivery, key: &str) -> Result<()> {
        let r = receipt::of(key);
        self.backend
            .step_in_script(d, key, &self.fenced, &self.keys(), &[key, &r])
            .await
            .map_err(|e| BenchError::Setup(format!("step_in_script: {e}")))?;
        Ok(())
    }

    /// Deletes the application's keys (they lie outside the library's key prefix).
    pub async fn remove(&self) -> Result<()> {
        let _: Value = redis::cmd("DEL")
            .arg(&self.keys[0])
            .arg(&self.keys[1])
            .query_async(&mut self.backend.connection())
            .await
            .map_err(|e| raw("redis", "delete keys", e))?;
        Ok(())
    }
}
