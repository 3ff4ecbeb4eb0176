//! `list_executions` for [`PostgresBackend`] ([`lease_core::browse`]): one statement per
//! filter shape (`browse/page.sql`), each walking one index in admission order (schema
//! v16) backwards from the cursor, so a page costs the same however many rows are stored.
//!
//! The cursor is `a<n>`: the admission number of the last record of the previous page
//! (the next page starts below it). Which index a page walks is fixed per shape, the most
//! selective field set first (key, then workflow, then status): the sessions' generic plans
//! would otherwise choose once per connection from the statistics of that moment.

use std::sync::Arc;

use lease_core::limits::check_limit;
use lease_core::{ExecutionFilter, ExecutionPage, ListCursor, Result, Timestamp};
use sqlx::postgres::PgRow;

use crate::backend::PostgresBackend;
use crate::error::Effect;
use crate::rows::{self, EXECUTION_COLUMNS, col};
use crate::statements::{BrowseSql, Renderer};

const PAGE: &str = include_str!("browse/page.sql");

/// The filter fields, as (parameter, column): status, workflow, key.
const FIELDS: [(&str, &str); 3] = [
    ("$1::text", "status"),
    ("$2::text", "workflow"),
    ("$3::text", "concurrency_key"),
];

/// The page statement for one filter shape: bit `i` of `mask` set when field `i` of
/// [`FIELDS`] is filtered on.
fn page_statement(r: &Renderer, mask: usize) -> Arc<str> {
    let lead = (0..FIELDS.len()).rev().find(|i| mask & (1 << i) != 0);
    let mut rest = Vec::new();
    for (i, (param, column)) in FIELDS.iter().enumerate() {
        if Some(i) == lead {
            continue;
        }
        rest.push(if mask & (1 << i) != 0 {
            format!("(e.{column} || '') = {param}")
        } else {
            format!("{param} IS NULL")
        });
    }
    let lead = match lead {
        Some(i) => {
            let (param, column) = FIELDS[i];
            format!("e.{column} = {param} AND e.{column} IS NOT NULL")
        }
        // `executions_admitted`'s predicate: only this shape can walk that index.
        None => "e.admission_seq > 0".to_owned(),
    };
    let template = PAGE
        .replace("{lead}", &lead)
        .replace("{rest}", &rest.join(" AND "));
    r.render(&template)
}

/// This module's statements, rendered for one schema.
pub(crate) fn statements(r: &Renderer) -> BrowseSql {
    BrowseSql {
        pages: (0..8).map(|mask| page_statement(r, mask)).collect(),
    }
}

/// The admission number a cursor of this backend names.
fn cursor_position(cursor: &ListCursor) -> Result<i64> {
    cursor
        .as_str()
        .strip_prefix('a')
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| n.parse::<i64>().ok())
        .ok_or_else(|| cursor.unreadable())
}

impl PostgresBackend {
    /// One page of `list_executions` (see the module doc).
    pub(crate) async fn browse_page(
        &self,
        filter: &ExecutionFilter,
        after: Option<&ListCursor>,
        limit: usize,
    ) -> Result<ExecutionPage> {
        const OP: &str = "list_executions";
        check_limit("list limit", limit)?;
        let position = after.map(cursor_position).transpose()?;
        let status = filter.status.map(|s| s.as_str());
        let workflow = filter.workflow.as_ref().map(|w| w.as_str());
        let key = filter.key.as_ref().map(|k| k.as_str());
        let mask = usize::from(status.is_some())
            | usize::from(workflow.is_some()) << 1
            | usize::from(key.is_some()) << 2;
        let sql = &self.browse_sql().pages[mask];
        let fetch = i64::try_from(limit + 1).unwrap_or(i64::MAX);
        let clock = self.clock_param();
        let found: Vec<PgRow> = self
            .run_statement(OP, Effect::Read, sql, |q| {
                q.bind(status)
                    .bind(workflow)
                    .bind(key)
                    .bind(position)
                    .bind(fetch)
                    .bind(clock)
            })
            .await?;
        let mut page = ExecutionPage::default();
        for row in found.iter().take(limit) {
            let record = rows::execution(row, OP)?;
            let now = Timestamp::from_millis(col(row, EXECUTION_COLUMNS + 1, OP)?);
            page.records.push(record.effective(now));
        }
        if found.len() > limit {
            let last: i64 = col(&found[limit - 1], EXECUTION_COLUMNS, OP)?;
            page.next = Some(ListCursor::new(format!("a{last}"))?);
        }
        Ok(page)
    }

    /// This module's statements.
    fn browse_sql(&self) -> &BrowseSql {
        let sql = &self.inner.sql;
        sql.browse.get(&sql.renderer, statements)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_read_back_and_foreign_ones_refused() {
        let ok = ListCursor::new("a42").unwrap();
        assert_eq!(cursor_position(&ok).unwrap(), 42);
        for bad in ["42", "a", "a-1", "a+1", "b42", "a99999999999999999999"] {
            let c = ListCursor::new(bad).unwrap();
            assert!(cursor_position(&c).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_shape_walks_its_lead_field_and_binds_every_parameter() {
        let r = Renderer::new("\"t\"", "lease_wake_t");
        let shapes = statements(&r);
        for (mask, sql) in shapes.pages.iter().enumerate() {
            for n in 1..=6 {
                assert!(sql.contains(&format!("${n}")), "{mask}: ${n} in {sql}");
            }
            assert!(!sql.contains('{'), "{sql}");
        }
        assert!(shapes.pages[0].contains("WHERE e.admission_seq > 0"));
        assert!(shapes.pages[7].contains("e.concurrency_key = $3::text AND"));
        assert!(shapes.pages[3].contains("e.workflow = $2::text AND"));
        assert!(shapes.pages[1].contains("e.status = $1::text AND"));
    }
}
