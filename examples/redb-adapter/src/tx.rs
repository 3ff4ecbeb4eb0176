//! The storage layer: the tables and one write transaction with typed, JSON-encoded reads
//! and writes, so the store never sees a redb error type.

use lease_core::engine::Namespace;
use lease_core::{ExecutionId, LeaseError, Result};
use redb::{Database, ReadableTable, TableDefinition, WriteTransaction};
use serde::{Serialize, de::DeserializeOwned};

/// A table of JSON values under string keys.
pub(crate) type Table = TableDefinition<'static, &'static str, &'static [u8]>;

/// Execution records by id.
pub(crate) const EXECUTIONS: Table = TableDefinition::new("executions");
/// Each execution's place in admission order, by id.
pub(crate) const PLACES: Table = TableDefinition::new("places");
/// Execution ids by place in admission order.
pub(crate) const ADMISSION: TableDefinition<'static, u64, &'static str> =
    TableDefinition::new("admission");
/// Delivery histories by execution id.
pub(crate) const HISTORIES: Table = TableDefinition::new("histories");
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
/// Step records under [`step_key`], whose byte order is `list_steps`'s order.
pub(crate) const STEPS: Table = TableDefinition::new("steps");
/// The [`Namespace`] row and the last place in admission order.
const META: Table = TableDefinition::new("meta");

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

/// A composite key as JSON text: unambiguous whatever the parts hold.
pub(crate) fn key_of<T: Serialize>(parts: &T) -> Result<String> {
    serde_json::to_string(parts).map_err(json_error)
}

/// Execution, step key and padded attempt joined by NUL (names hold no control characters).
pub(crate) fn step_key(id: &ExecutionId, key: &str, attempt: u32) -> String {
    format!("{id}\0{key}\0{attempt:010}")
}

/// One write transaction, with the namespace row read at its start and written back at
/// commit when it changed. Dropped uncommitted, it aborts.
pub struct RedbTx {
    tx: WriteTransaction,
    pub(crate) namespace: Namespace,
    pub(crate) namespace_changed: bool,
}

impl RedbTx {
    pub(crate) fn begin(db: &Database) -> Result<Self> {
        let tx = db.begin_write().map_err(db_error)?;
        let mut this = RedbTx {
            tx,
            namespace: Namespace::default(),
            namespace_changed: false,
        };
        this.namespace = this.get(META, "namespace")?.unwrap_or_default();
        Ok(this)
    }

    pub(crate) fn commit(self) -> Result<()> {
        if self.namespace_changed {
            self.put(META, "namespace", &self.namespace)?;
        }
        self.tx.commit().map_err(db_error)
    }

    /// The value under `key`, if any.
    pub(crate) fn get<T: DeserializeOwned>(&self, table: Table, key: &str) -> Result<Option<T>> {
        let table = self.tx.open_table(table).map_err(db_error)?;
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
        let bytes = serde_json::to_vec(value).map_err(json_error)?;
        let mut table = self.tx.open_table(table).map_err(db_error)?;
        table.insert(key, bytes.as_slice()).map_err(db_error)?;
        Ok(())
    }

    /// Removes `key`; `true` when it was there.
    pub(crate) fn remove(&self, table: Table, key: &str) -> Result<bool> {
        let mut table = self.tx.open_table(table).map_err(db_error)?;
        Ok(table.remove(key).map_err(db_error)?.is_some())
    }

    /// Up to `take` rows from key `start` on, by key, up to the first one `keep` refuses.
    pub(crate) fn rows_from<T: DeserializeOwned>(
        &self,
        table: Table,
        start: &str,
        take: usize,
        keep: impl Fn(&T) -> bool,
    ) -> Result<Vec<(String, T)>> {
        let table = self.tx.open_table(table).map_err(db_error)?;
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

    /// Every row of `table`, by key.
    pub(crate) fn all<T: DeserializeOwned>(&self, table: Table) -> Result<Vec<(String, T)>> {
        self.rows_from(table, "", usize::MAX, |_| true)
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

    /// Gives `id` the next place in admission order.
    pub(crate) fn place(&self, id: &ExecutionId) -> Result<()> {
        let place = self.get::<u64>(META, "last_admitted")?.unwrap_or(0) + 1;
        self.put(META, "last_admitted", &place)?;
        self.put(PLACES, id.as_str(), &place)?;
        let mut table = self.tx.open_table(ADMISSION).map_err(db_error)?;
        table.insert(place, id.as_str()).map_err(db_error)?;
        Ok(())
    }

    /// Removes `id`'s place in admission order.
    pub(crate) fn unplace(&self, id: &ExecutionId) -> Result<()> {
        if let Some(place) = self.get::<u64>(PLACES, id.as_str())? {
            self.remove(PLACES, id.as_str())?;
            let mut table = self.tx.open_table(ADMISSION).map_err(db_error)?;
            table.remove(place).map_err(db_error)?;
        }
        Ok(())
    }

    /// The execution ids strictly before place `before`, newest first, until `visit` says stop.
    pub(crate) fn newest_first(
        &self,
        before: Option<u64>,
        mut visit: impl FnMut(u64, &str) -> Result<bool>,
    ) -> Result<()> {
        let table = self.tx.open_table(ADMISSION).map_err(db_error)?;
        for row in table
            .range(..before.unwrap_or(u64::MAX))
            .map_err(db_error)?
            .rev()
        {
            let (place, id) = row.map_err(db_error)?;
            if !visit(place.value(), id.value())? {
                break;
            }
        }
        Ok(())
    }
}
