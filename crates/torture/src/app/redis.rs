//! Redis: the application rows as JSON text in a list in the namespace's slot
//! (`app:{<namespace>}:rows`), appended by the fenced script `redis_row.lua` with
//! `RedisBackend::step_in_script` (fenced) or a plain `RPUSH` (the negative control).

use lease::redis::{FencedScript, RedisBackend};
use lease_core::{Delivery, DeliveryError, Json};
use redis::AsyncCommands;

use super::row::AppRow;

const BODY: &str = include_str!("redis_row.lua");

/// The Redis application store.
#[derive(Clone)]
pub struct RedisApp {
    backend: RedisBackend,
    key: String,
    script: FencedScript,
}

fn row_text(row: &AppRow) -> Result<String, String> {
    serde_json::to_string(row).map_err(|e| e.to_string())
}

impl RedisApp {
    /// The store of `backend` (a list in its namespace's slot).
    pub fn new(backend: RedisBackend) -> Self {
        let key = format!("app:{}:rows", backend.hash_tag());
        RedisApp {
            backend,
            key,
            script: FencedScript::new(BODY),
        }
    }

    pub async fn step_fenced(&self, d: &Delivery, row: AppRow) -> Result<String, DeliveryError> {
        let text = row_text(&row).map_err(DeliveryError::worker)?;
        let recorded: Json = self
            .backend
            .step_in_script(
                d,
                &row.step,
                &self.script,
                &[&self.key],
                &[&text, &row.value],
            )
            .await?;
        Ok(recorded.decode()?)
    }

    pub async fn write_unfenced(&self, row: &AppRow) -> Result<(), String> {
        let text = row_text(row)?;
        let mut conn = self.backend.connection();
        conn.rpush::<_, _, ()>(&self.key, text)
            .await
            .map_err(|e| e.to_string())
    }

    pub async fn rows(&self) -> Result<Vec<AppRow>, String> {
        let mut conn = self.backend.connection();
        let texts: Vec<String> = conn
            .lrange(&self.key, 0, -1)
            .await
            .map_err(|e| format!("redis app rows: {e}"))?;
        texts
            .iter()
            .map(|t| serde_json::from_str(t).map_err(|e| format!("redis app row {t:?}: {e}")))
            .collect()
    }

    pub async fn destroy(&self) -> Result<(), String> {
        let mut conn = self.backend.connection();
        conn.del::<_, ()>(&self.key)
            .await
            .map_err(|e| e.to_string())
    }
}
