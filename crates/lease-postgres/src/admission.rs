//! The admit statements' parameters and rows, shared by `admit` / `admit_batch` on the
//! pool ([`crate::execution`]) and by their runs inside the caller's transaction
//! ([`crate::PostgresBackend::admit_in_tx`]).

use lease_core::{Admission, ExecutionRecord, LeaseError, Result, Timestamp, TraceContext};
use sqlx::postgres::PgRow;

use crate::backend::PgQuery;
use crate::error::protocol;
use crate::rows::{self, EXECUTION_COLUMNS, col};

/// How often `admit` runs again when a concurrent admit of the same id committed after its
/// snapshot (the second run always sees it).
pub(crate) const SNAPSHOT_RETRIES: usize = 3;

/// `admit_batch`'s "created?" column: after the item number.
const ADMIT_BATCH_CREATED: usize = 1;
/// `admit_batch`'s first record column: after "created?".
const ADMIT_BATCH_RECORD: usize = ADMIT_BATCH_CREATED + 1;
/// `admit_batch`'s clock column: after the record.
const ADMIT_BATCH_NOW: usize = ADMIT_BATCH_RECORD + EXECUTION_COLUMNS;

/// `admit.sql`'s row as `admit` returns it; `None` for no row (the id was inserted by a
/// transaction that committed after the statement's snapshot: run it again, the next run
/// sees it).
pub(crate) fn admitted(
    row: Option<&PgRow>,
    operation: &'static str,
) -> Result<Option<ExecutionRecord>> {
    let Some(row) = row else { return Ok(None) };
    let record = rows::execution(row, operation)?;
    let now = Timestamp::from_millis(col(row, EXECUTION_COLUMNS, operation)?);
    Ok(Some(record.effective(now)))
}

/// The error when an admitted execution stayed invisible after every run.
pub(crate) fn invisible(operation: &'static str) -> LeaseError {
    protocol(operation, "the admitted execution stayed invisible")
}

/// A batch admitted by runs of `admit_batch.sql`, each over the items no earlier run could
/// see (a concurrent admission committed after its snapshot; see [`admitted`]).
pub(crate) struct AdmittedBatch<'a> {
    admissions: &'a [Admission],
    records: Vec<Option<ExecutionRecord>>,
    /// The indexes of the items the last run was given.
    asked: Vec<usize>,
}

impl<'a> AdmittedBatch<'a> {
    /// Nothing admitted yet.
    pub(crate) fn new(admissions: &'a [Admission]) -> Self {
        AdmittedBatch {
            admissions,
            records: vec![None; admissions.len()],
            asked: Vec::new(),
        }
    }

    /// The items the next run is for; `None` when every record was seen.
    pub(crate) fn missing(&mut self) -> Option<Vec<&'a Admission>> {
        self.asked = (0..self.admissions.len())
            .filter(|&i| self.records[i].is_none())
            .collect();
        let admissions = self.admissions;
        (!self.asked.is_empty()).then(|| self.asked.iter().map(|&i| &admissions[i]).collect())
    }

    /// What the last run found: (index into the items it was given, record).
    pub(crate) fn found(&mut self, found: Vec<(usize, ExecutionRecord)>) {
        for (item, record) in found {
            self.records[self.asked[item]] = Some(record);
        }
    }

    /// The records in the items' order.
    pub(crate) fn records(self, operation: &'static str) -> Result<Vec<ExecutionRecord>> {
        self.records
            .into_iter()
            .map(|r| r.ok_or_else(|| protocol(operation, "an admitted item stayed invisible")))
            .collect()
    }
}

/// `admit_batch.sql`'s rows over `items`: (index into the items, record as `admit` would
/// return it) for every item the statement could see. A row the statement created comes
/// back without its columns: it holds exactly the item's admission at the statement's
/// clock, as [`ExecutionRecord::admitted`] builds it.
pub(crate) fn batch_admitted(
    found: &[PgRow],
    items: &[&Admission],
    operation: &'static str,
) -> Result<Vec<(usize, ExecutionRecord)>> {
    found
        .iter()
        .map(|row| {
            let ord: i64 = col(row, 0, operation)?;
            let index = usize::try_from(ord)
                .ok()
                .and_then(|o| o.checked_sub(1))
                .filter(|&i| i < items.len())
                .ok_or_else(|| protocol(operation, format!("row for item {ord}")))?;
            let now = Timestamp::from_millis(col(row, ADMIT_BATCH_NOW, operation)?);
            let created: bool = col(row, ADMIT_BATCH_CREATED, operation)?;
            let record = if created {
                ExecutionRecord::admitted(items[index], now)
            } else {
                rows::execution_from(row, ADMIT_BATCH_RECORD, operation)?
            };
            Ok((index, record.effective(now)))
        })
        .collect()
}

/// One admission as the admit statements take it.
pub(crate) struct AdmitParams<'a> {
    id: &'a str,
    workflow: Option<&'a str>,
    input: Option<&'a str>,
    not_before: Option<i64>,
    priority: i32,
    key: Option<&'a str>,
    trace: Option<String>,
}

pub(crate) fn admit_params(a: &Admission) -> AdmitParams<'_> {
    AdmitParams {
        id: a.id.as_str(),
        workflow: a.workflow.as_ref().map(|w| w.as_str()),
        input: a.input.as_ref().map(|i| i.as_str()),
        not_before: a.not_before.map(Timestamp::as_millis),
        priority: a.priority.get(),
        key: a.concurrency_key.as_ref().map(|k| k.as_str()),
        trace: a.trace_context.as_ref().map(TraceContext::to_stored),
    }
}

impl AdmitParams<'_> {
    /// `query` with `admit.sql`'s parameters bound: `$1..$3`, `clock` as `$4`, `$5..$8`.
    pub(crate) fn bind<'q>(&'q self, query: PgQuery<'q>, clock: Option<i64>) -> PgQuery<'q> {
        query
            .bind(self.id)
            .bind(self.workflow)
            .bind(self.input)
            .bind(clock)
            .bind(self.not_before)
            .bind(self.priority)
            .bind(self.key)
            .bind(self.trace.as_deref())
    }
}

/// `admit_batch.sql`'s array parameters `$1..$4` and `$6..$8`: one element per item.
#[derive(Default)]
pub(crate) struct AdmitColumns<'a> {
    ids: Vec<&'a str>,
    workflows: Vec<Option<&'a str>>,
    inputs: Vec<Option<&'a str>>,
    not_befores: Vec<Option<i64>>,
    priorities: Vec<i32>,
    keys: Vec<Option<&'a str>>,
    traces: Vec<Option<String>>,
}

impl<'a> FromIterator<AdmitParams<'a>> for AdmitColumns<'a> {
    fn from_iter<I: IntoIterator<Item = AdmitParams<'a>>>(items: I) -> Self {
        let mut columns = AdmitColumns::default();
        for item in items {
            columns.ids.push(item.id);
            columns.workflows.push(item.workflow);
            columns.inputs.push(item.input);
            columns.not_befores.push(item.not_before);
            columns.priorities.push(item.priority);
            columns.keys.push(item.key);
            columns.traces.push(item.trace);
        }
        columns
    }
}

impl AdmitColumns<'_> {
    /// `query` with the columns bound: `$1..$4`, then `clock` as `$5`, then `$6..$8`.
    pub(crate) fn bind<'q>(&'q self, query: PgQuery<'q>, clock: Option<i64>) -> PgQuery<'q> {
        query
            .bind(&self.ids)
            .bind(&self.workflows)
            .bind(&self.inputs)
            .bind(&self.not_befores)
            .bind(clock)
            .bind(&self.priorities)
            .bind(&self.keys)
            .bind(&self.traces)
    }
}
