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
/// Step records by (execution, step key, attempt): redb orders tuple keys field by field,
/// which is `list_steps`'s order.
const STEPS: TableDefinition<(&str, &str, u32), &[u8]> = TableDefinition::new("steps");

/// The namespace-wide values: the token counter and the operator controls.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Meta {
    /// The last fencing token issued; the next claim issues the one after.
    pub last_token: u64,
    /// Paused scopes.
    pub paused: BTreeSet<PauseScope>,
    /// Concurrency limits.
    pub limits: ConcurrencyLimits,
    /// Attempt limits.
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

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| LeaseError::Backend {
        backend: "redb",
        operation: "decode",
        source: Box::new(e),
    })
}

fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| LeaseError::Backend {
        backend: "redb",
        operation: "encode",
        source: Box::new(e),
    })
}

/// A composite key as JSON text: unambiguous whatever the parts hold.
pub(crate) fn key_of<T: Serialize>(parts: &T) -> Result<String> {
    String::from_utf8(encode(parts)?).map_err(|e| LeaseError::invalid("key", e.to_string()))
}

/// One write transaction: the atomic step of one trait method. Dropped without
/// [`Tx::commit`], it aborts.
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
        let removed = table.remove(key).map_err(db_error)?.is_some();
        Ok(removed)
    }

    /// Every row of `table`, by key.
    pub(crate) fn all<T: DeserializeOwned>(&self, table: Table) -> Result<Vec<(String, T)>> {
        let table = self.0.open_table(table).map_err(db_error)?;
        let mut rows = Vec::new();
        for row in table.iter().map_err(db_error)? {
            let (k, v) = row.map_err(db_error)?;
            rows.push((k.value().to_owned(), decode(v.value())?));
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

    /// One step record.
    pub(crate) fn step(
        &self,
        id: &ExecutionId,
        key: &str,
        attempt: u32,
    ) -> Result<Option<HeapRecord>> {
        let table = self.0.open_table(STEPS).map_err(db_error)?;
        let found = table.get((id.as_str(), key, attempt)).map_err(db_error)?;
        found.map(|v| decode(v.value())).transpose()
    }

    pub(crate) fn put_step(&self, record: &HeapRecord) -> Result<()> {
        let bytes = encode(record)?;
        let key = (
            record.execution_id.as_str(),
            record.step_key.as_str(),
            record.step_attempt,
        );
        let mut table = self.0.open_table(STEPS).map_err(db_error)?;
        table.insert(key, bytes.as_slice()).map_err(db_error)?;
        Ok(())
    }

    /// Up to `take` step records of `id` from (`key`, `attempt`) on, in key order.
    pub(crate) fn steps_from(
        &self,
        id: &ExecutionId,
        key: &str,
        attempt: u32,
        take: usize,
    ) -> Result<Vec<HeapRecord>> {
        let table = self.0.open_table(STEPS).map_err(db_error)?;
        let mut rows = Vec::new();
        for row in table
            .range((id.as_str(), key, attempt)..)
            .map_err(db_error)?
        {
            let record: HeapRecord = decode(row.map_err(db_error)?.1.value())?;
            if &record.execution_id != id || rows.len() == take {
                break;
            }
            rows.push(record);
        }
        Ok(rows)
    }

    /// Removes every step record of `id`.
    pub(crate) fn remove_steps(&self, id: &ExecutionId) -> Result<()> {
        let mut table = self.0.open_table(STEPS).map_err(db_error)?;
        table
            .retain(|(e, _, _), _| e != id.as_str())
            .map_err(db_error)
    }
}
