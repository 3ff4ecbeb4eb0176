//! The list API's cost against the amount of stored work (the `stored list 10^k` rows):
//! one page of [`LIMIT`] executions from `list_executions`, newest admitted first, timed
//! call by call, one call in flight, on a store holding `n` executions (10^3, 10^5, 10^6),
//! for each filter shape ([`Filter`]): the first page, and the page at a cursor half way
//! through the filter's matches (reached by walking the cursor). Library only: the list has
//! no raw counterpart. The cost ratio (time per page at the largest `n` over that at 10^3)
//! is held against [`TARGET`].
//!
//! The store ([`fill()`]) is built so that a page which walks one field's index and tests the
//! others on each row (rather than walking an index of every field it filters on) grows with
//! `n`: [`RARE`] admitted executions of workflow [`W_RARE`] and key [`K_RARE`], a fixed
//! number, spread over ten blocks of admission order among three populations that grow with
//! `n`:
//!
//! * 40 % completed, workflow [`W_RARE`], key [`K_RARE`] (the rare workflow's and key's
//!   history: a walk of either that tests the status reads them);
//! * 40 % completed, workflow [`W_BULK`], key [`K_BULK`];
//! * 20 % admitted a day ahead, workflow [`W_BULK`], key [`K_RARE`] (the key's backlog of
//!   another workflow: a walk of the key's admitted executions that tests the workflow reads
//!   them).
//!
//! Completed executions are server-side copies of a template the library completed
//! ([`crate::raw::Raw::clone_terminal`]), each with its own place in admission order.

use std::time::{Duration, Instant};

use lease_core::ExecutionClientExt;

use lease_core::{
    Admission, ClaimRequest, ConcurrencyKey, ExecutionFilter, ExecutionId, ExecutionRecord,
    ExecutionStatus, Fenced, Json, ListCursor, SharedBackend, WorkflowName, WorkflowRunOutcome,
};

use crate::client::FAR_FUTURE;
use crate::error::{BenchError, Context, Result};
use crate::fill;
use crate::fixture::Fixture;
use crate::measure::Sample;
use crate::raw::Raw;

/// Records per page: the console's page (`lease ui`'s `/executions`).
pub const LIMIT: usize = 50;

/// The target of the cost ratio (largest stored count over 10^3).
pub const TARGET: f64 = 1.2;

/// The rare executions: admitted, [`W_RARE`], [`K_RARE`]; a fixed number at every `n`.
pub const RARE: u64 = 200;

/// The workflow of the rare executions and of their completed history.
pub const W_RARE: &str = "list-rare";
/// The workflow of the bulk.
pub const W_BULK: &str = "list-bulk";
/// The key of the rare executions, their history and the bulk's backlog.
pub const K_RARE: &str = "key-rare";
/// The key of the completed bulk.
pub const K_BULK: &str = "key-bulk";

/// Blocks of admission order the populations are spread over.
const BLOCKS: u64 = 10;

/// What a page filters on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    /// Nothing: every execution.
    Newest,
    /// Status admitted.
    Status,
    /// Status admitted, workflow [`W_RARE`].
    StatusWorkflow,
    /// Status admitted, workflow [`W_RARE`], key [`K_RARE`].
    StatusWorkflowKey,
}

impl Filter {
    /// The filter as `list_executions` takes it.
    pub fn filter(self) -> Result<ExecutionFilter> {
        let workflow = || WorkflowName::new(W_RARE).context(|| "workflow".into());
        let key = || ConcurrencyKey::new(K_RARE).context(|| "key".into());
        let admitted = Some(ExecutionStatus::Admitted);
        Ok(match self {
            Filter::Newest => ExecutionFilter::default(),
            Filter::Status => ExecutionFilter {
                status: admitted,
                ..ExecutionFilter::default()
            },
            Filter::StatusWorkflow => ExecutionFilter {
                status: admitted,
                workflow: Some(workflow()?),
                key: None,
            },
            Filter::StatusWorkflowKey => ExecutionFilter {
                status: admitted,
                workflow: Some(workflow()?),
                key: Some(key()?),
            },
        })
    }

    /// Name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Filter::Newest => "newest",
            Filter::Status => "status",
            Filter::StatusWorkflow => "status+workflow",
            Filter::StatusWorkflowKey => "status+workflow+key",
        }
    }
}

/// One measured page: a filter, from the newest or from half way through its matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListOp {
    /// The filter.
    pub filter: Filter,
    /// From a cursor half way through the matches (else the first page).
    pub deep: bool,
}

/// The pages measured, in report order.
pub const OPS: [ListOp; 8] = {
    let f = [
        Filter::Newest,
        Filter::Status,
        Filter::StatusWorkflow,
        Filter::StatusWorkflowKey,
    ];
    [
        ListOp {
            filter: f[0],
            deep: false,
        },
        ListOp {
            filter: f[0],
            deep: true,
        },
        ListOp {
            filter: f[1],
            deep: false,
        },
        ListOp {
            filter: f[1],
            deep: true,
        },
        ListOp {
            filter: f[2],
            deep: false,
        },
        ListOp {
            filter: f[2],
            deep: true,
        },
        ListOp {
            filter: f[3],
            deep: false,
        },
        ListOp {
            filter: f[3],
            deep: true,
        },
    ]
};

impl ListOp {
    /// Name in the report (after the group's `stored list 10^k`).
    pub fn name(self) -> String {
        let at = if self.deep { "deep page" } else { "page" };
        format!("{} {at}", self.filter.name())
    }
}

/// How many executions of each population a store of `n` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Admitted, rare workflow and key.
    pub rare: u64,
    /// Completed, rare workflow and key (the template included).
    pub history: u64,
    /// Completed, bulk workflow and key (the template included).
    pub bulk: u64,
    /// Admitted, bulk workflow, rare key.
    pub backlog: u64,
}

impl Plan {
    /// The populations of a store of `n` (at least 10).
    pub fn of(n: u64) -> Plan {
        let rare = RARE.min(n / 5);
        let rest = n - rare;
        let history = rest * 2 / 5;
        let bulk = rest * 2 / 5;
        Plan {
            rare,
            history,
            bulk,
            backlog: rest - history - bulk,
        }
    }

    /// The executions `filter` matches.
    pub fn matches(&self, filter: Filter) -> u64 {
        match filter {
            Filter::Newest => self.rare + self.history + self.bulk + self.backlog,
            Filter::Status => self.rare + self.backlog,
            Filter::StatusWorkflow | Filter::StatusWorkflowKey => self.rare,
        }
    }
}

/// The part of `0..total` that falls in block `b` of [`BLOCKS`].
fn block(total: u64, b: u64) -> (u64, u64) {
    (total * b / BLOCKS, total * (b + 1) / BLOCKS)
}

/// Fills `fx` with the store of `n` executions described in the module doc.
pub async fn fill(fx: &Fixture, raw: &dyn Raw, n: u64) -> Result<()> {
    let plan = Plan::of(n);
    let history = template(&fx.lib, "lh-template", W_RARE, K_RARE).await?;
    let bulk = template(&fx.lib, "lb-template", W_BULK, K_BULK).await?;
    let day_ahead = lease_core::Timestamp::from_millis(fill::unix_ms() + 86_400_000);
    for b in 0..BLOCKS {
        // Copies 1.. of each completed population: the template is its first execution.
        for (template, prefix, total) in [(&history, "lh", plan.history), (&bulk, "lb", plan.bulk)]
        {
            let (from, to) = block(total, b);
            let from = from.max(1);
            if to > from {
                raw.clone_terminal(template, prefix, from, to - from)
                    .await?;
            }
        }
        for (prefix, total, workflow) in [("lq", plan.backlog, W_BULK), ("lr", plan.rare, W_RARE)] {
            let (from, to) = block(total, b);
            fill::admit_each(&fx.lib, prefix, from, to - from, |_, a| {
                Ok(a.not_before(day_ahead)
                    .workflow(WorkflowName::new(workflow)?)
                    .concurrency_key(ConcurrencyKey::new(K_RARE)?))
            })
            .await?;
        }
    }
    raw.settle().await
}

/// Makes `id` a completed execution of `workflow` with `key` through the library (admit,
/// claim, acknowledge) on a store with nothing else due; returns its id.
async fn template(lib: &SharedBackend, id: &str, workflow: &str, key: &str) -> Result<String> {
    let exec = ExecutionId::new(id).context(|| "id".into())?;
    let admission = Admission::new(exec.clone())
        .workflow(WorkflowName::new(workflow).context(|| "workflow".into())?)
        .concurrency_key(ConcurrencyKey::new(key).context(|| "key".into())?);
    lib.admit(&admission)
        .await
        .context(|| "admit template".into())?;
    let request = ClaimRequest {
        now: FAR_FUTURE,
        limit: 1,
        duration: Duration::from_secs(30),
    };
    let lease = lib
        .claim_due(request)
        .await
        .context(|| "claim template".into())?
        .into_iter()
        .next()
        .filter(|l| l.execution_id == exec)
        .ok_or_else(|| BenchError::Setup(format!("the template {id} was not claimed")))?;
    let acked = lib
        .acknowledge(&lease, &WorkflowRunOutcome::Completed(Json::null()))
        .await
        .context(|| "acknowledge template".into())?;
    match acked {
        Fenced::Accepted(_) => Ok(id.to_owned()),
        Fenced::Lost => Err(BenchError::Setup(format!("template {id}: lost"))),
    }
}

/// The cursor after the first `skip` executions `filter` matches, walked a page (of up to
/// 1000) at a time.
async fn cursor_after(
    lib: &SharedBackend,
    filter: &ExecutionFilter,
    skip: u64,
) -> Result<ListCursor> {
    let mut cursor: Option<ListCursor> = None;
    let mut left = skip;
    while left > 0 {
        let take = left.min(1000) as usize;
        let page = lib
            .list_executions(filter, cursor.as_ref(), take)
            .await
            .context(|| "list_executions (walk)".into())?;
        left = left.saturating_sub(page.records.len() as u64);
        cursor = page.next;
        if cursor.is_none() && left > 0 {
            return Err(BenchError::Setup(format!(
                "the list of {filter:?} ended {left} before the deep page"
            )));
        }
    }
    cursor.ok_or_else(|| BenchError::Setup("no cursor to start the deep page at".into()))
}

/// An error unless `records` is a full page that `filter` matches.
fn check_page(filter: &ExecutionFilter, records: &[ExecutionRecord]) -> Result<()> {
    let bad = records.iter().find(|r| {
        filter.status.is_some_and(|s| r.status != s)
            || filter
                .workflow
                .as_ref()
                .is_some_and(|w| r.workflow.as_ref() != Some(w))
            || filter
                .key
                .as_ref()
                .is_some_and(|k| r.concurrency_key.as_ref() != Some(k))
    });
    if let Some(r) = bad {
        return Err(BenchError::Setup(format!(
            "{filter:?} listed {} ({:?})",
            r.id, r.status
        )));
    }
    if records.len() != LIMIT {
        return Err(BenchError::Setup(format!(
            "{filter:?}: a page of {} records, not {LIMIT}",
            records.len()
        )));
    }
    Ok(())
}

/// Times pages of `filter` from `start`, one call at a time, for `window` (at least three
/// calls after one untimed warm-up call that also checks the page).
async fn pages(
    lib: &SharedBackend,
    filter: &ExecutionFilter,
    start: Option<&ListCursor>,
    window: Duration,
) -> Result<Sample> {
    let page = lib
        .list_executions(filter, start, LIMIT)
        .await
        .context(|| "list_executions".into())?;
    check_page(filter, &page.records)?;
    let mut sample = Sample {
        count: 0,
        secs: 0.0,
    };
    let started = Instant::now();
    while sample.count < 3 || started.elapsed() < window {
        let call = Instant::now();
        lib.list_executions(filter, start, LIMIT)
            .await
            .context(|| "list_executions".into())?;
        sample.secs += call.elapsed().as_secs_f64();
        sample.count += 1;
    }
    Ok(sample)
}

/// Measures every page of [`OPS`] on the filled store of `n` executions, each for about
/// `duration`.
pub async fn measure(fx: &Fixture, n: u64, duration: Duration) -> Result<Vec<Sample>> {
    let plan = Plan::of(n);
    let mut out = Vec::new();
    for op in OPS {
        let filter = op.filter.filter()?;
        let start = match op.deep {
            true => Some(cursor_after(&fx.lib, &filter, plan.matches(op.filter) / 2).await?),
            false => None,
        };
        out.push(pages(&fx.lib, &filter, start.as_ref(), duration).await?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rare_population_is_fixed_and_the_rest_grows() {
        for n in [1_000, 100_000, 1_000_000] {
            let p = Plan::of(n);
            assert_eq!(p.rare + p.history + p.bulk + p.backlog, n);
            assert_eq!(p.rare, RARE);
            assert_eq!(p.matches(Filter::StatusWorkflowKey), RARE);
            // The deep page of every filter starts with at least a page of matches left.
            for op in OPS {
                let m = p.matches(op.filter);
                assert!(m - m / 2 >= LIMIT as u64, "{n} {op:?}");
            }
        }
        let blocks: u64 = (0..BLOCKS)
            .map(|b| {
                let (from, to) = block(1_001, b);
                to - from
            })
            .sum();
        assert_eq!(blocks, 1_001);
    }

    #[test]
    fn names_are_distinct() {
        let names: std::collections::BTreeSet<String> = OPS.iter().map(|o| o.name()).collect();
        assert_eq!(names.len(), OPS.len());
        assert!(names.contains("status+workflow+key deep page"));
    }
}
