//! Redis: the application rows as JSON text in a list per partition, in the slot of the
//! execution's partition (`app:{<namespace>}:rows` with one partition,
//! `app:{<namespace>#<i>}:rows` with more: a fenced script may only declare keys of its
//! lease's slot), appended by the fenced script `redis_row.lua` with
//! `RedisBackend::step_in_script` (fenced) or a plain `RPUSH` (the negative control).

use lease::redis::{FencedScript, RedisBackend};
use lease_core::{ExecutionId, Json};
use lease_runtime::{Delivery, DeliveryError};
use redis::AsyncCommands;

use super::row::AppRow;

const BODY: &str = include_str!("redis_row.lua");

/// The Redis application store.
#[derive(Clone)]
pub struct RedisApp {
    backend: RedisBackend,
    script: FencedScript,
}

fn row_text(row: &AppRow) -> Result<String, String> {
    serde_json::to_string(row).map_err(|e| e.to_string())
}

impl RedisApp {
    /// The store of `backend` (a list in each partition's slot).
    pub fn new(backend: RedisBackend) -> Self {
        RedisApp {
            backend,
            script: FencedScript::new(BODY),
        }
    }

    /// The list of the rows of execution `id`'s partition.
    fn key_for(&self, id: &ExecutionId) -> String {
        format!("app:{}:rows", self.backend.hash_tag_for(id))
    }

    /// Every partition's list.
    fn keys(&self) -> Vec<String> {
        self.backend
            .partition_hash_tags()
            .iter()
            .map(|tag| format!("app:{tag}:rows"))
            .collect()
    }

    pub async fn step_fenced(&self, d: &Delivery, row: AppRow) -> Result<String, DeliveryError> {
        let text = row_text(&row).map_err(DeliveryError::worker)?;
        let recorded: Json = self
            .backend
            .step_in_script(
                d,
                &row.step,
                &self.script,
                &[&self.key_for(d.execution_id())],
                &[&text, &row.value],
            )
            .await?;
        Ok(recorded.decode()?)
    }

    pub async fn write_unfenced(&self, row: &AppRow) -> Result<(), String> {
        let text = row_text(row)?;
        let id = ExecutionId::new(row.execution.as_str()).map_err(|e| e.to_string())?;
        let mut conn = self.backend.connection();
        conn.rpush::<_, _, ()>(self.key_for(&id), text)
            .await
            .map_err(|e| e.to_string())
    }

    /// Every partition's rows, partition after partition (each list in append order).
    pub async fn rows(&self) -> Result<Vec<AppRow>, String> {
        let mut conn = self.backend.connection();
        let mut rows = Vec::new();
        for key in self.keys() {
            let texts: Vec<String> = conn
                .lrange(&key, 0, -1)
                .await
                .map_err(|e| format!("redis app rows {key}: {e}"))?;
            for t in &texts {
                rows.push(
                    serde_json::from_str(t).map_err(|e| format!("redis app row {t:?}: {e}"))?,
                );
            }
        }
        Ok(rows)
    }

    pub async fn destroy(&self) -> Result<(), String> {
        let mut conn = self.backend.connection();
        for key in self.keys() {
            conn.del::<_, ()>(&key).await.map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}
