//! `list_executions` for [`PostgresBackend`] ([`lease_core::browse`]): one statement per
//! filter shape, each reading an index of every field the filter names, in admission order
//! backwards from the cursor (schema v18), so a page costs the same however many rows are
//! stored and reads no row it skips: with a status, one walk of that index
//! (`browse/page.sql`); without one, one walk per status, merged (`browse/merged.sql`; with
//! no field at all, of the status index, schema v22). The status alone is tested in the "C" collation, the
//! collation of `executions_browse_status` only (schema v20): the planner, taking a status
//! and a name as independent, would otherwise walk the status index for a page that names
//! both and test the name on each row, reading every row of that status below the cursor.
//!
//! The cursor is `a<n>`: the admission number of the last record of the previous page
//! (the next page starts below it).

use std::sync::Arc;

use lease_core::limits::check_limit;
use lease_core::{ExecutionFilter, ExecutionPage, ListCursor, Result, Timestamp};
use sqlx::postgres::PgRow;

use crate::backend::PostgresBackend;
use crate::error::Effect;
use crate::rows::{self, EXECUTION_COLUMNS, col};
use crate::statements::{BrowseSql, Renderer};

const PAGE: &str = include_str!("browse/page.sql");
const MERGED: &str = include_str!("browse/merged.sql");

/// The filter fields, as (parameter, column): status, workflow, key.
const FIELDS: [(&str, &str); 3] = [
    ("$1::text", "status"),
    ("$2::text", "workflow"),
    ("$3::text", "concurrency_key"),
];

/// The page statement for one filter shape: bit `i` of `mask` set when field `i` of
/// [`FIELDS`] is filtered on.
fn page_statement(r: &Renderer, mask: usize) -> Arc<str> {
    let by_status = mask & 1 != 0;
    // Without a status, the names are matched inside the per-status walks (on `i`).
    let table = if by_status { "e" } else { "i" };
    let mut matched = Vec::new();
    let mut unused = Vec::new();
    for (i, (param, column)) in FIELDS.iter().enumerate() {
        if mask & (1 << i) == 0 {
            unused.push(format!("{param} IS NULL"));
        } else if i == 0 && mask == 1 {
            // The status alone: only `executions_browse_status` holds it in this collation
            // (schema v20), so no page that also names a workflow or key can walk that
            // index and test the names row by row.
            matched.push(format!("e.{column} COLLATE \"C\" = {param}"));
        } else if i == 0 {
            matched.push(format!("e.{column} = {param}"));
        } else {
            matched.push(format!(
                "{table}.{column} = {param} AND {table}.{column} IS NOT NULL"
            ));
        }
    }
    let template = if by_status {
        PAGE.replace("{match}", &matched.join(" AND "))
    } else {
        // Each walk's status: with no name, in the status index's collation, the only
        // index holding every row by (status, admission number) (schema v22).
        matched.push(if mask == 0 {
            "i.status COLLATE \"C\" = st.status".to_owned()
        } else {
            "i.status = st.status".to_owned()
        });
        MERGED.replace("{match}", &matched.join(" AND "))
    };
    if unused.is_empty() {
        unused.push("true".to_owned());
    }
    r.render(&template.replace("{unused}", &unused.join(" AND ")))
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
        let ok = ListCursor::new("a42").expect("cursor");
        assert_eq!(cursor_position(&ok).expect("position"), 42);
        for bad in ["42", "a", "a-1", "a+1", "b42", "a99999999999999999999"] {
            let c = ListCursor::new(bad).expect("cursor text");
            assert!(cursor_position(&c).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_shape_matches_each_field_it_filters_on_and_binds_every_parameter() {
        let r = Renderer::new("\"t\"", "lease_wake_t");
        let shapes = statements(&r);
        for (mask, sql) in shapes.pages.iter().enumerate() {
            for n in 1..=6 {
                assert!(sql.contains(&format!("${n}")), "{mask}: ${n} in {sql}");
            }
            assert!(!sql.contains('{'), "{sql}");
            // No field is tested in a form an index cannot match.
            assert!(!sql.contains("|| ''"), "{mask}: {sql}");
        }
        assert!(shapes.pages[0].contains("WHERE i.status COLLATE \"C\" = st.status"));
        assert!(shapes.pages[1].contains("e.status COLLATE \"C\" = $1::text"));
        for named in [3, 5, 7] {
            assert!(
                shapes.pages[named].contains("e.status = $1::text"),
                "{named}"
            );
            assert!(!shapes.pages[named].contains("COLLATE"), "{named}");
        }
        assert!(shapes.pages[7].contains(
            "e.status = $1::text AND e.workflow = $2::text AND e.workflow IS NOT NULL AND \
             e.concurrency_key = $3::text"
        ));
        for merged in [0, 2, 4, 6] {
            assert!(
                shapes.pages[merged].contains("CROSS JOIN LATERAL"),
                "{merged}"
            );
            assert!(
                shapes.pages[merged].contains("$1::text IS NULL"),
                "{merged}"
            );
        }
        assert!(shapes.pages[6].contains(
            "i.workflow = $2::text AND i.workflow IS NOT NULL AND i.concurrency_key = $3::text \
             AND i.concurrency_key IS NOT NULL AND i.status = st.status"
        ));
    }
}
