//! Removing one namespace's rows from a shared database file (`lease::destroy`).

use lease_core::Result;

use crate::backend::SqliteBackend;
use crate::conn::Weight;

/// The statements of [`SqliteBackend::delete_namespace`], one per table.
const DELETE: &str = include_str!("namespace/delete.sql");

impl SqliteBackend {
    /// Deletes every row of this handle's namespace (executions, steps, stores, effects,
    /// wake log, pauses, concurrency, attempt and rate limits, ordered keys, recorded claim
    /// instants) in one transaction; other namespaces in the file and the schema stay. The
    /// namespace's token counter stays too (RFC 002 "tokens rise on every claim"): if the
    /// namespace is used again, a holder from before the deletion still carries a token
    /// below every new one, so its writes are refused. For tearing a namespace down; routine
    /// clean-up is `purge_terminal`.
    pub async fn delete_namespace(&self) -> Result<()> {
        self.write("delete_namespace", Weight::Heavy, |tx, s| {
            for statement in statements(DELETE) {
                tx.execute(&statement, [&s.namespace])?;
            }
            Ok(())
        })
        .await
    }
}

/// The statements of a `;`-separated file, its `--` comment lines left out first.
fn statements(sql: &str) -> Vec<String> {
    let code: String = sql
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    code.split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}
