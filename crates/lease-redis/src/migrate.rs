//! Key layout 1 -> 2 (retention: `purge_terminal` finds what to remove without a scan):
//! layout 2 adds three indexes, `done` (terminal
//! executions by end time), `rcpt:<id>` (the receipts each execution made) and `start_of`
//! (target -> start request). A namespace written by an older version has none of them, so
//! the first handle of this version to connect builds them: `SCAN` over the execution
//! records and receipt hashes and `HSCAN` over each receipt hash and `starts`, each page
//! handed to `migrate/migrate.lua` (idempotent, bounded per call), then layout 2 is stored. A
//! migration interrupted half-way leaves layout 1, and the next connect runs it again.
//!
//! Handles of this version maintain the indexes in every write, so writes made during the
//! migration are covered. A process still running the older version keeps writing without
//! them (what it makes terminal afterwards is never purged; its receipts and start records
//! outlive their purged execution): stop every older process before the first
//! `purge_terminal`. An older version refuses to connect to layout 2 (`Schema`).

use lease_core::Result;
use redis::Value;

use crate::backend::RedisBackend;
use crate::error::{Access, protocol};
use crate::scripts::operation_script;

// The operation scripts this module runs, each compiled once per process.
operation_script!(MIGRATE = script(include_str!("migrate/migrate.lua")));

const OP: &str = "migrate";

/// Keys or hash fields per `SCAN`/`HSCAN` page and per migration script call.
const PAGE: usize = 500;

impl RedisBackend {
    /// Builds layout 2's indexes over this namespace and stores layout 2; returns the layout
    /// stored afterwards.
    pub(crate) async fn migrate_from_v1(&self) -> Result<String> {
        let prefix = self.key_prefix().to_owned();
        tracing::info!(namespace = %prefix, "migrating key layout 1 to 2 (retention indexes)");
        self.migrate_terminal(&format!("{prefix}exec:")).await?;
        self.migrate_receipts(&format!("{prefix}receipts:")).await?;
        self.migrate_starts(format!("{prefix}starts").as_bytes())
            .await?;
        let v = self
            .eval(
                OP,
                Access::Write,
                self.keys().prefix(),
                &MIGRATE,
                &[b"finish"],
            )
            .await?;
        crate::reply::Reply::new(OP).string(v)
    }

    /// `done` from every execution record (keys `<exec>` + id).
    async fn migrate_terminal(&self, exec: &str) -> Result<()> {
        let mut cursor = 0;
        loop {
            let (next, keys) = self.scan_page(exec, cursor).await?;
            let ids = strip(&keys, exec);
            if !ids.is_empty() {
                self.migrate_batch(b"done", None, &ids).await?;
            }
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }

    /// `rcpt:<id>` from every receipt hash (keys `<receipts>` + store id).
    async fn migrate_receipts(&self, receipts: &str) -> Result<()> {
        let mut cursor = 0;
        loop {
            let (next, keys) = self.scan_page(receipts, cursor).await?;
            for key in &keys {
                let Some(store) = key.strip_prefix(receipts.as_bytes()) else {
                    continue;
                };
                let mut field_cursor = 0;
                loop {
                    let (next, items) = self.hscan_page(key, field_cursor).await?;
                    let fields: Vec<&[u8]> = items.iter().step_by(2).map(Vec::as_slice).collect();
                    if !fields.is_empty() {
                        self.migrate_batch(b"receipts", Some(store), &fields)
                            .await?;
                    }
                    if next == 0 {
                        break;
                    }
                    field_cursor = next;
                }
            }
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }

    /// `start_of` from the `starts` hash.
    async fn migrate_starts(&self, starts: &[u8]) -> Result<()> {
        let mut cursor = 0;
        loop {
            let (next, items) = self.hscan_page(starts, cursor).await?;
            let pairs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
            if !pairs.is_empty() {
                self.migrate_batch(b"starts", None, &pairs).await?;
            }
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }

    /// One `SCAN` page of the keys starting with `start`.
    async fn scan_page(&self, start: &str, cursor: u64) -> Result<(u64, Vec<Vec<u8>>)> {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(format!("{start}*"))
            .arg("COUNT")
            .arg(PAGE);
        decode(self.query(OP, &cmd).await?)
    }

    /// One `HSCAN` page of hash `key`: field, value, field, value, ...
    async fn hscan_page(&self, key: &[u8], cursor: u64) -> Result<(u64, Vec<Vec<u8>>)> {
        let mut cmd = redis::cmd("HSCAN");
        cmd.arg(key).arg(cursor).arg("COUNT").arg(PAGE);
        decode(self.query(OP, &cmd).await?)
    }

    /// One `migrate/migrate.lua` batch of `kind` over `items` (after `head`, when given).
    async fn migrate_batch(&self, kind: &[u8], head: Option<&[u8]>, items: &[&[u8]]) -> Result<()> {
        let mut args: Vec<&[u8]> = Vec::with_capacity(items.len() + 2);
        args.push(kind);
        args.extend(head);
        args.extend_from_slice(items);
        self.eval(OP, Access::Write, self.keys().prefix(), &MIGRATE, &args)
            .await?;
        Ok(())
    }
}

/// The rest of each key after `start`.
fn strip<'a>(keys: &'a [Vec<u8>], start: &str) -> Vec<&'a [u8]> {
    keys.iter()
        .filter_map(|k| k.strip_prefix(start.as_bytes()))
        .collect()
}

/// A `SCAN`-shaped reply: the next cursor and the page.
fn decode(v: Value) -> Result<(u64, Vec<Vec<u8>>)> {
    redis::from_redis_value(v).map_err(|e| protocol(OP, format!("a scan reply: {e}")))
}
