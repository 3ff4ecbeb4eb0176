//! The application-row checker: after a run, the committed application
//! rows ([`crate::app`]) are checked against the merged op log. Each row names the
//! operation that wrote it (process, sequence number), whose invocation interval bounds
//! when the row committed.
//!
//! Rules (every one reported, not just the first):
//! 1. Exactly once per step: a step of the workflow's application steps whose record the
//!    final reads found has exactly one row ([`AppViolation::RowCount`]); no row exists
//!    for a step without a record ([`AppViolation::RowWithoutRecord`]); the row holds the
//!    record's token and value (effect and record committed together,
//!    [`AppViolation::RowDiffers`]).
//! 2. Only a current holder: no row's writing operation was invoked after a claim with a
//!    higher token had returned ([`AppViolation::StaleRow`]: the row committed after a
//!    higher token was issued); no row comes from an operation that reported `Lost` or
//!    `Failed` (the caller was told nothing applied, [`AppViolation::RowOfRefusedWrite`]);
//!    every row has its operation in the log ([`AppViolation::RowWithoutOp`]).

use std::collections::BTreeMap;
use std::fmt;

use crate::history::{Op, OpKind, OpResult};
use serde::Serialize;

use crate::app::AppRow;
use crate::opcount::result_name;

/// A broken application-row invariant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AppViolation {
    /// A recorded application step has `rows` rows instead of exactly one.
    RowCount {
        /// Execution.
        execution: String,
        /// Step key.
        step: String,
        /// Rows found.
        rows: usize,
    },
    /// A row of a step that has no record.
    RowWithoutRecord {
        /// Execution.
        execution: String,
        /// Step key.
        step: String,
        /// The row's token.
        token: u64,
    },
    /// A row whose token or value is not its step record's.
    RowDiffers {
        /// Execution.
        execution: String,
        /// Step key.
        step: String,
        /// `token` or `value`.
        field: &'static str,
        /// The record's.
        record: String,
        /// The row's.
        row: String,
    },
    /// A row committed by an operation invoked after a higher token had been issued.
    StaleRow {
        /// Execution.
        execution: String,
        /// Step key.
        step: String,
        /// The row's (stale) token.
        token: u64,
        /// The higher token issued before the operation was invoked.
        newer: u64,
    },
    /// A row committed by an operation that reported it applied nothing.
    RowOfRefusedWrite {
        /// Execution.
        execution: String,
        /// Step key.
        step: String,
        /// The row's token.
        token: u64,
        /// The operation's logged result.
        result: &'static str,
    },
    /// A row whose writing operation is not in the log (or is another step's).
    RowWithoutOp {
        /// Execution.
        execution: String,
        /// Step key.
        step: String,
        /// The process the row names.
        process: u32,
        /// The sequence number the row names.
        seq: u64,
    },
}

impl fmt::Display for AppViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match serde_json::to_string(self) {
            Ok(s) => f.write_str(&s),
            Err(_) => write!(f, "{self:?}"),
        }
    }
}

/// An operation with its op-log sequence number.
pub type KeyedOp = (u64, Op);

/// Whether step `step` of execution `execution` is an application step.
pub type IsAppStep<'a> = &'a dyn Fn(&str, &str) -> bool;

/// What the check reads from the log: the writing operations by (process, seq), the final
/// step records by (execution, step) as (token, value), and the claims by execution.
#[derive(Default)]
struct Log<'a> {
    writers: BTreeMap<(u32, u64), &'a Op>,
    records: BTreeMap<(&'a str, &'a str), (u64, &'a str)>,
    claims: BTreeMap<&'a str, Vec<&'a Op>>,
}

/// Indexes `ops`. Final reads are the controller's (process 0) accepted step reads.
fn index(ops: &[KeyedOp]) -> Log<'_> {
    let mut log = Log::default();
    for (seq, op) in ops {
        match (&op.kind, op.result) {
            (OpKind::WriteStep { .. }, _) => {
                log.writers.insert((op.process, *seq), op);
            }
            (
                OpKind::ReadStep {
                    step_key,
                    value: Some(v),
                    ..
                },
                OpResult::Accepted,
            ) if op.process == 0 => {
                log.records
                    .insert((op.execution.as_str(), step_key.as_str()), (op.token, v));
            }
            (OpKind::Claim { .. }, OpResult::Accepted) => {
                log.claims
                    .entry(op.execution.as_str())
                    .or_default()
                    .push(op);
            }
            _ => {}
        }
    }
    log
}

/// Checks the committed `rows` against the log `ops`. Returns every violation.
pub fn check(rows: &[AppRow], ops: &[KeyedOp], is_app_step: IsAppStep<'_>) -> Vec<AppViolation> {
    let log = index(ops);
    let mut out = Vec::new();
    let mut counts: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for row in rows {
        *counts
            .entry((row.execution.as_str(), row.step.as_str()))
            .or_default() += 1;
        check_row(row, &log, &mut out);
    }
    for (execution, step) in log.records.keys() {
        let n = counts.get(&(*execution, *step)).copied().unwrap_or(0);
        if is_app_step(execution, step) && n != 1 {
            out.push(AppViolation::RowCount {
                execution: (*execution).to_owned(),
                step: (*step).to_owned(),
                rows: n,
            });
        }
    }
    out
}

/// The checks of one row against its record and its writing operation.
fn check_row(row: &AppRow, log: &Log<'_>, out: &mut Vec<AppViolation>) {
    let (execution, step) = (row.execution.clone(), row.step.clone());
    match log
        .records
        .get(&(row.execution.as_str(), row.step.as_str()))
    {
        None => out.push(AppViolation::RowWithoutRecord {
            execution: execution.clone(),
            step: step.clone(),
            token: row.token,
        }),
        Some((token, value)) => {
            if *token != row.token {
                out.push(AppViolation::RowDiffers {
                    execution: execution.clone(),
                    step: step.clone(),
                    field: "token",
                    record: token.to_string(),
                    row: row.token.to_string(),
                });
            }
            if *value != row.value {
                out.push(AppViolation::RowDiffers {
                    execution: execution.clone(),
                    step: step.clone(),
                    field: "value",
                    record: (*value).to_owned(),
                    row: row.value.clone(),
                });
            }
        }
    }
    let writer = log.writers.get(&(row.process, row.seq)).filter(|op| {
        op.execution == row.execution
            && op.token == row.token
            && matches!(&op.kind, OpKind::WriteStep { step_key, .. } if *step_key == row.step)
    });
    let Some(writer) = writer else {
        out.push(AppViolation::RowWithoutOp {
            execution,
            step,
            process: row.process,
            seq: row.seq,
        });
        return;
    };
    if matches!(writer.result, OpResult::Lost | OpResult::Failed) {
        out.push(AppViolation::RowOfRefusedWrite {
            execution: execution.clone(),
            step: step.clone(),
            token: row.token,
            result: result_name(writer.result),
        });
    }
    let newer = log
        .claims
        .get(row.execution.as_str())
        .into_iter()
        .flatten()
        .filter(|c| c.token > row.token && c.end_us < writer.start_us)
        .map(|c| c.token)
        .max();
    if let Some(newer) = newer {
        out.push(AppViolation::StaleRow {
            execution,
            step,
            token: row.token,
            newer,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(process: u32, token: u64, start: i64, end: i64, kind: OpKind, result: OpResult) -> Op {
        Op {
            process,
            execution: "e".into(),
            token,
            start_us: start,
            end_us: end,
            kind,
            result,
        }
    }

    fn claim(token: u64, start: i64, end: i64) -> KeyedOp {
        let kind = OpKind::Claim {
            expires_at: end + 1000,
            duration_ms: 1000,
            first_delivery: false,
        };
        (0, op(1, token, start, end, kind, OpResult::Accepted))
    }

    fn write(process: u32, seq: u64, token: u64, start: i64, result: OpResult) -> KeyedOp {
        let kind = OpKind::WriteStep {
            step_key: "s0".into(),
            step_attempt: 1,
            written: "\"v\"".into(),
            recorded: None,
        };
        (seq, op(process, token, start, start + 10, kind, result))
    }

    fn record(token: u64, value: &str) -> KeyedOp {
        let kind = OpKind::ReadStep {
            step_key: "s0".into(),
            step_attempt: 1,
            value: Some(value.into()),
        };
        (0, op(0, token, 9000, 9001, kind, OpResult::Accepted))
    }

    fn row(process: u32, seq: u64, token: u64) -> AppRow {
        AppRow {
            execution: "e".into(),
            step: "s0".into(),
            token,
            process,
            seq,
            value: "\"v\"".into(),
        }
    }

    fn every_step(_: &str, _: &str) -> bool {
        true
    }

    #[test]
    fn one_row_by_the_current_holder_passes() {
        // Holder 1 (token 1) is paused; token 2 is claimed at 200..210; the stale holder's
        // fenced write is invoked at 300 and refused (Lost, no row); the new holder's row
        // commits with the record.
        let ops = vec![
            claim(1, 0, 10),
            claim(2, 200, 210),
            write(1, 5, 1, 300, OpResult::Lost),
            write(2, 7, 2, 250, OpResult::Accepted),
            record(2, "\"v\""),
        ];
        assert_eq!(check(&[row(2, 7, 2)], &ops, &every_step), vec![]);
        // A write killed mid-call (Unknown) may have committed its row.
        let ops = vec![
            claim(1, 0, 10),
            write(1, 5, 1, 20, OpResult::Unknown),
            record(1, "\"v\""),
        ];
        assert_eq!(check(&[row(1, 5, 1)], &ops, &every_step), vec![]);
    }

    /// The negative control's history, as a unit test of the checker: the stale holder
    /// wrote its row outside the fence after token 2 was issued (its record write then
    /// returned Lost), and the new holder wrote the row again. The real run is
    /// `tests/negative_controls.rs`, so the checker is seen to catch a real broken fence,
    /// not only this made-up log.
    #[test]
    fn detects_a_stale_holders_unfenced_row() {
        let ops = vec![
            claim(1, 0, 10),
            claim(2, 200, 210),
            write(1, 5, 1, 300, OpResult::Lost),
            write(2, 7, 2, 250, OpResult::Accepted),
            record(2, "\"v\""),
        ];
        let v = check(&[row(2, 7, 2), row(1, 5, 1)], &ops, &every_step);
        assert!(v.contains(&AppViolation::StaleRow {
            execution: "e".into(),
            step: "s0".into(),
            token: 1,
            newer: 2,
        }));
        assert!(v.contains(&AppViolation::RowOfRefusedWrite {
            execution: "e".into(),
            step: "s0".into(),
            token: 1,
            result: "lost",
        }));
        assert!(v.contains(&AppViolation::RowCount {
            execution: "e".into(),
            step: "s0".into(),
            rows: 2,
        }));
        assert!(v.contains(&AppViolation::RowDiffers {
            execution: "e".into(),
            step: "s0".into(),
            field: "token",
            record: "2".into(),
            row: "1".into(),
        }));
    }

    #[test]
    fn detects_a_missing_row_a_row_without_record_and_an_unlogged_row() {
        let ops = vec![
            claim(1, 0, 10),
            write(1, 5, 1, 20, OpResult::Accepted),
            record(1, "\"v\""),
        ];
        let v = check(&[], &ops, &every_step);
        assert_eq!(
            v,
            vec![AppViolation::RowCount {
                execution: "e".into(),
                step: "s0".into(),
                rows: 0,
            }]
        );
        assert_eq!(
            check(&[], &ops, &|_, _| false),
            vec![],
            "not an application step"
        );
        let no_record = vec![claim(1, 0, 10), write(1, 5, 1, 20, OpResult::Accepted)];
        assert_eq!(
            check(&[row(1, 5, 1)], &no_record, &every_step),
            vec![AppViolation::RowWithoutRecord {
                execution: "e".into(),
                step: "s0".into(),
                token: 1,
            }]
        );
        let v = check(&[row(1, 6, 1)], &ops, &every_step);
        assert!(v.contains(&AppViolation::RowWithoutOp {
            execution: "e".into(),
            step: "s0".into(),
            process: 1,
            seq: 6,
        }));
    }

    #[test]
    fn detects_a_row_whose_value_is_not_the_records() {
        let ops = vec![
            claim(1, 0, 10),
            write(1, 5, 1, 20, OpResult::Accepted),
            record(1, "\"w\""),
        ];
        let v = check(&[row(1, 5, 1)], &ops, &every_step);
        assert_eq!(
            v,
            vec![AppViolation::RowDiffers {
                execution: "e".into(),
                step: "s0".into(),
                field: "value",
                record: "\"w\"".into(),
                row: "\"v\"".into(),
            }]
        );
        // A replayed (Failed) write whose row still exists.
        let ops = vec![
            claim(1, 0, 10),
            write(1, 5, 1, 20, OpResult::Failed),
            record(1, "\"v\""),
        ];
        let v = check(&[row(1, 5, 1)], &ops, &every_step);
        assert!(matches!(
            v[..],
            [AppViolation::RowOfRefusedWrite {
                result: "failed",
                ..
            }]
        ));
    }
}
