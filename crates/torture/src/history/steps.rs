//! Rule 4: each step record is written once, never changes, holds the derived value (when
//! known) and never disappears.

use std::collections::BTreeMap;

use super::op::{Op, OpKind, OpResult};
use super::options::CheckOptions;
use super::violation::{MISSING, Violation};

/// Rule 4: each step record is written once and never changes (and holds the derived value).
pub(super) fn steps_written_once(
    execution: &str,
    ops: &[&Op],
    options: &CheckOptions<'_>,
    out: &mut Vec<Violation>,
) {
    let mut steps: BTreeMap<(String, u32), String> = BTreeMap::new();
    for op in ops {
        if op.result != OpResult::Accepted {
            continue;
        }
        let (key, attempt, value) = match &op.kind {
            OpKind::WriteStep {
                step_key,
                step_attempt,
                recorded: Some(v),
                ..
            } => (step_key, *step_attempt, v),
            OpKind::ReadStep {
                step_key,
                step_attempt,
                value: Some(v),
            } => (step_key, *step_attempt, v),
            _ => continue,
        };
        let step = format!("{key}#{attempt}");
        if let Some(expected) = options
            .expected_step
            .and_then(|f| f(execution, key, attempt))
            && &expected != value
        {
            out.push(Violation::StepCorrupt {
                execution: execution.into(),
                step: step.clone(),
                expected,
                found: value.clone(),
            });
        }
        match steps.get(&(key.clone(), attempt)) {
            Some(first) if first != value => out.push(Violation::StepChanged {
                execution: execution.into(),
                step,
                first: first.clone(),
                other: value.clone(),
            }),
            Some(_) => {}
            None => {
                steps.insert((key.clone(), attempt), value.clone());
            }
        }
    }
}

/// Rule 4b: a recorded step never disappears: a read that found nothing after a write or
/// read that found the record had returned is a lost record.
pub(super) fn steps_never_disappear(execution: &str, ops: &[&Op], out: &mut Vec<Violation>) {
    for read in ops {
        let OpKind::ReadStep {
            step_key,
            step_attempt,
            value: None,
        } = &read.kind
        else {
            continue;
        };
        if read.result != OpResult::Accepted {
            continue;
        }
        let earlier = ops.iter().find_map(|op| {
            if op.result != OpResult::Accepted || op.end_us >= read.start_us {
                return None;
            }
            match &op.kind {
                OpKind::WriteStep {
                    step_key: k,
                    step_attempt: a,
                    recorded: Some(v),
                    ..
                }
                | OpKind::ReadStep {
                    step_key: k,
                    step_attempt: a,
                    value: Some(v),
                } if k == step_key && a == step_attempt => Some(v),
                _ => None,
            }
        });
        if let Some(first) = earlier {
            out.push(Violation::StepChanged {
                execution: execution.into(),
                step: format!("{step_key}#{step_attempt}"),
                first: first.clone(),
                other: MISSING.into(),
            });
        }
    }
}
