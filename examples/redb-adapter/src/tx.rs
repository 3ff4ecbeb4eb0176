//! The storage layer: the tables and one write transaction with typed, JSON-encoded reads
//! and writes, so the trait methods never see a redb error type.

use std::collections::BTreeSet;

use lease_core::{
    AttemptLimits, ConcurrencyLimits, ExecutionId, HeapRecord, LeaseError, PauseScope, Result,
};
use redb::{Database, ReadableTable, TableDefinition, WriteTransaction};
use serde::{Deserialize, Serialize, de::DeserializeOwned};

/// A table of JSON values under string keys.
pub(crate) type Table = TableDefinition<'static, &'static str, &'static [u8]>;

/// Execution records by id.
pub(crate) const EXECUTIONS: Table = TableDefinition::new("executions");
/// Stores: each one's entries as one JSON map, by store id.
pub(crate) const STORES: Table = TableDefinition::new("stores");
/// Store receipts' outcomes, by the JSON triple (store, execution, step key).
pub(crate) const RECEIPTS: Table = TableDefinition::new("receipts");
/// Start requests: the target execution, by request id.
pub(crate) const STARTS: Table = TableDefinition::new("starts");
/// Effect records by effect id.
pub(crate) const EFFECTS: Table = TableDefinition::new("effects");
/// Effects whose owner waits for their settle, by effect id.
pub(crate) const EFFECT_WAITS: Table = TableDefinition::new("effect_waits");
/// Executions waiting for a store entry to change, by the JSON pair (store, key).
pub(crate) const STORE_WAITERS: Table = TableDefinition::new("store_waiters");
/// The one [`Meta`] row.
const META: Table = TableDefinition::new("meta");
/// Step records under [`step_key`], whose byte order is `list_steps`'s order.
pub(crate) const STEPS: Table = TableDefinition::new("steps");

/// The namespace-wide values: the last fencing token issued and the operator controls.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Meta {
    pub last_token: u64,
    pub paused: BTreeSet<PauseScope>,
    pub limits: ConcurrencyLimits,
    pub attempt_limits: AttemptLimits,
}

/// A redb failure as the contract's typed backend error.
pub(crate) fn db_error(e: impl Into<redb::Error>) -> LeaseError {
    LeaseError::Backend {
        backend: "redb",
        operation: "transaction",
        source: Box::new(e.into()),
    }
}

/// A stored value that is not the JSON this adapter wrote, or one it cannot write.
fn json_error(e: serde_json::Error) -> LeaseError {
    LeaseError::Backend {
        backend: "redb",
        operation: "json",
        source: Box::new(e),
    }
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(json_error)
}

fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(json_error)
}

/// A composite key as JSON text: unambiguous whatever the parts hold.
pub(crate) fn key_of<T: Serialize>(parts: &T) -> Result<String> {
    serde_json::to_string(parts).map_err(json_error)
}

/// Execution, step key and padded attempt joined by NUL (names hold no control characters).
pub(crate) fn step_key(id: &ExecutionId, key: &str, attempt: u32) -> String {
    format!("{id}\0{key}\0{attempt:010}")
}

/// One write transaction: one trait method's atomic step. Dropped uncommitted, it aborts.
pub(crate) struct Tx(WriteTransaction);

impl Tx {
    pub(crate) fn begin(db: &Database) -> Result<Self> {
        db.begin_write().map(Tx).map_err(db_error)
    }

    pub(crate) fn commit(self) -> Result<()> {
        self.0.commit().map_err(db_error)
    }

    /// The value under `key`, if any.
    pub(crate) fn get<T: DeserializeOwned>(&self, table: Table, key: &str) -> Result<Option<T>> {
        let table = self.0.open_table(table).map_err(db_error)?;
        let found = table.get(key).map_err(db_error)?;
        found.map(|v| decode(v.value())).transpose()
    }

    /// Writes `value` under `key`.
    pub(crate) fn put<T: Serialize + ?Sized>(
        &self,
        table: Table,
        key: &str,
        value: &T,
    ) -> Result<()> {
        let bytes = encode(value)?;
        let mut table = self.0.open_table(table).map_err(db_error)?;
        table.insert(key, bytes.as_slice()).map_err(db_error)?;
        Ok(())
    }

    /// Removes `key`; `true` when it was there.
    pub(crate) fn remove(&self, table: Table, key: &str) -> Result<bool> {
        let mut table = self.0.open_table(table).map_err(db_error)?;
        Ok(table.remove(key).map_err(db_error)?.is_some())
    }

    /// Every row of `table`, by key.
    pub(crate) fn all<T: DeserializeOwned>(&self, table: Table) -> Result<Vec<(String, T)>> {
        self.rows_from(table, "", usize::MAX, |_| true)
    }

    /// Up to `take` rows from key `start` on, by key, up to the first one `keep` refuses.
    pub(crate) fn rows_from<T: DeserializeOwned>(
        &self,
        table: Table,
        start: &str,
        take: usize,
        keep: impl Fn(&T) -> bool,
    ) -> Result<Vec<(String, T)>> {
        let table = self.0.open_table(table).map_err(db_error)?;
        let mut rows = Vec::new();
        for row in table.range(start..).map_err(db_error)? {
            let (k, v) = row.map_err(db_error)?;
            let value = decode(v.value())?;
            if rows.len() == take || !keep(&value) {
                break;
            }
            rows.push((k.value().to_owned(), value));
        }
        Ok(rows)
    }

    /// Removes every row of `table` whose value `gone` picks.
    pub(crate) fn remove_where<T: DeserializeOwned>(
        &self,
        table: Table,
        gone: impl Fn(&str, &T) -> bool,
    ) -> Result<()> {
        for (key, value) in self.all::<T>(table)? {
            if gone(&key, &value) {
                self.remove(table, &key)?;
            }
        }
        Ok(())
    }

    pub(crate) fn meta(&self) -> Result<Meta> {
        Ok(self.get(META, "meta")?.unwrap_or_default())
    }

    pub(crate) fn put_meta(&self, meta: &Meta) -> Result<()> {
        self.put(META, "meta", meta)
    }

    /// Up to `take` step records of `id` from (`key`, `attempt`) on, with their keys.
    pub(crate) fn steps_from(
        &self,
        id: &ExecutionId,
        key: &str,
        attempt: u32,
        take: usize,
    ) -> Result<Vec<(String, HeapRecord)>> {
        let start = step_key(id, key, attempt);
        self.rows_from(STEPS, &start, take, |r: &HeapRecord| &r.execution_id == id)
    }
}
