//! The history checker (design.md section 5): reads a log of every claim, renewal, fenced
//! write, acknowledgement and release, and reports every violation of the lease invariants.
//!
//! Each [`Op`] carries the real-time interval in which it was invoked and returned
//! (`start_us..end_us`, microseconds on one machine-wide clock such as the system clock, so
//! logs of several processes on one host merge). An operation that returned before another
//! was invoked committed before it; overlapping operations are concurrent and may commit in
//! either order. The checker only reports what the intervals prove.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

/// What an operation did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum OpKind {
    /// `claim_due` issued this lease (`token`) with this expiry and duration (backend ms).
    Claim {
        /// Lease expiry, backend clock ms.
        expires_at: i64,
        /// Lease duration in ms (so the backend's claim time is `expires_at - duration_ms`).
        duration_ms: i64,
    },
    /// `renew`; on acceptance the new expiry.
    Renew {
        /// New expiry when accepted.
        expires_at: Option<i64>,
    },
    /// `write_step`; on acceptance the recorded value the backend returned.
    WriteStep {
        /// Step key.
        step_key: String,
        /// Step attempt.
        step_attempt: u32,
        /// The value the worker tried to write.
        written: String,
        /// The recorded value returned when accepted.
        recorded: Option<String>,
    },
    /// `acknowledge`; the outcome sent (`"suspended"` or the terminal JSON).
    Acknowledge {
        /// `suspended`, or `completed:<json>` / `failed:<json>`.
        outcome: String,
    },
    /// `release`.
    Release,
    /// A final read of a step record after the run.
    ReadStep {
        /// Step key.
        step_key: String,
        /// Step attempt.
        step_attempt: u32,
        /// The value read, if any.
        value: Option<String>,
    },
    /// A final read of an execution's terminal outcome after the run.
    ReadOutcome {
        /// `completed:<json>` / `failed:<json>`, or `None` when not terminal.
        outcome: Option<String>,
    },
}

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpResult {
    /// Accepted with the current token (or a successful read / claim).
    Accepted,
    /// Refused: `Fenced::Lost`.
    Lost,
    /// Failed before taking effect.
    Failed,
    /// May or may not have taken effect (`LeaseError::OutcomeUnknown`).
    Unknown,
}

/// One logged operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// Which runtime process made it.
    pub process: u32,
    /// The execution.
    pub execution: String,
    /// The lease token the operation carried (or issued, for a claim).
    pub token: u64,
    /// Invocation time, microseconds.
    pub start_us: i64,
    /// Return time, microseconds.
    pub end_us: i64,
    /// What it did.
    pub kind: OpKind,
    /// How it ended.
    pub result: OpResult,
}

/// A broken invariant, with the operations that prove it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Violation {
    /// Two claims of one execution issued the same token, or a claim that began after another
    /// returned issued a lower token.
    TokenNotIncreasing {
        /// Execution.
        execution: String,
        /// The earlier claim's token.
        earlier: u64,
        /// The later claim's token.
        later: u64,
    },
    /// A claim was granted while another lease on the execution was still live.
    OverlappingLeases {
        /// Execution.
        execution: String,
        /// Token of the lease that was still live.
        live: u64,
        /// Token of the claim granted during it.
        claimed: u64,
    },
    /// A fenced operation was accepted although a higher token had been issued before it was
    /// invoked.
    StaleAccepted {
        /// Execution.
        execution: String,
        /// The stale token.
        token: u64,
        /// The higher token issued before the operation.
        newer: u64,
        /// Which operation.
        op: String,
    },
    /// A step record was reported with two different values.
    StepChanged {
        /// Execution.
        execution: String,
        /// Step key and attempt.
        step: String,
        /// First value seen.
        first: String,
        /// A different value seen later.
        other: String,
    },
    /// A step value is not the one the workflow derives for it.
    StepCorrupt {
        /// Execution.
        execution: String,
        /// Step key and attempt.
        step: String,
        /// The expected value.
        expected: String,
        /// The value found.
        found: String,
    },
    /// Two different terminal outcomes were accepted or read for one execution.
    OutcomeChanged {
        /// Execution.
        execution: String,
        /// First outcome.
        first: String,
        /// A different one.
        other: String,
    },
    /// An execution did not complete within the liveness bound.
    NotCompleted {
        /// Execution.
        execution: String,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match serde_json::to_string(self) {
            Ok(s) => f.write_str(&s),
            Err(_) => write!(f, "{self:?}"),
        }
    }
}

/// Derives the value a step must hold from (execution, step key, step attempt), when known.
pub type ExpectedStep<'a> = &'a dyn Fn(&str, &str, u32) -> Option<String>;

/// What the checker needs besides the log.
#[derive(Default)]
pub struct CheckOptions<'a> {
    /// Executions that must have completed (liveness); empty = no liveness check.
    pub must_complete: BTreeSet<String>,
    /// Liveness bound: the completing acknowledgement (or final read) must have returned by
    /// this time (microseconds), e.g. the end of the fault schedule plus the allowed recovery.
    pub complete_by_us: Option<i64>,
    /// The value a step must hold, derived from execution and step key, when known.
    pub expected_step: Option<ExpectedStep<'a>>,
}

/// Checks a history. Returns every violation found (empty = the history is consistent).
pub fn check(ops: &[Op], options: &CheckOptions<'_>) -> Vec<Violation> {
    let mut by_exec: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in ops {
        by_exec.entry(op.execution.as_str()).or_default().push(op);
    }
    let mut out = Vec::new();
    for (execution, ops) in &by_exec {
        check_execution(execution, ops, options, &mut out);
    }
    for execution in &options.must_complete {
        let done = by_exec.get(execution.as_str()).is_some_and(|ops| {
            ops.iter().any(|op| {
                op.result == OpResult::Accepted
                    && options.complete_by_us.is_none_or(|by| op.end_us <= by)
                    && match &op.kind {
                        OpKind::Acknowledge { outcome } => outcome != "suspended",
                        OpKind::ReadOutcome { outcome } => outcome.is_some(),
                        _ => false,
                    }
            })
        });
        if !done {
            out.push(Violation::NotCompleted {
                execution: execution.clone(),
            });
        }
    }
    out
}

fn op_name(kind: &OpKind) -> String {
    match kind {
        OpKind::Claim { .. } => "claim".into(),
        OpKind::Renew { .. } => "renew".into(),
        OpKind::WriteStep { step_key, .. } => format!("write_step {step_key}"),
        OpKind::Acknowledge { outcome } => format!("acknowledge {outcome}"),
        OpKind::Release => "release".into(),
        OpKind::ReadStep { .. } => "read_step".into(),
        OpKind::ReadOutcome { .. } => "read_outcome".into(),
    }
}

fn check_execution(
    execution: &str,
    ops: &[&Op],
    options: &CheckOptions<'_>,
    out: &mut Vec<Violation>,
) {
    let claims: Vec<&Op> = ops
        .iter()
        .copied()
        .filter(|op| matches!(op.kind, OpKind::Claim { .. }) && op.result == OpResult::Accepted)
        .collect();

    // 1. Tokens strictly increase: distinct, and real-time order implies token order.
    let mut seen: BTreeMap<u64, &Op> = BTreeMap::new();
    for c in &claims {
        if seen.insert(c.token, c).is_some() {
            out.push(Violation::TokenNotIncreasing {
                execution: execution.into(),
                earlier: c.token,
                later: c.token,
            });
        }
    }
    for a in &claims {
        for b in &claims {
            if a.end_us < b.start_us && a.token >= b.token && a.token != b.token {
                out.push(Violation::TokenNotIncreasing {
                    execution: execution.into(),
                    earlier: a.token,
                    later: b.token,
                });
            }
        }
    }

    // 2. At most one live lease at any instant (backend clock). A lease is live from its
    //    claim until its latest accepted expiry, unless an accepted release or
    //    acknowledgement returned before the next claim was invoked.
    let mut ordered = claims.clone();
    ordered.sort_by_key(|c| c.token);
    for pair in ordered.windows(2) {
        let (prev, next) = (pair[0], pair[1]);
        let ended_before = ops.iter().any(|op| {
            op.token == prev.token
                && op.result == OpResult::Accepted
                && matches!(op.kind, OpKind::Release | OpKind::Acknowledge { .. })
                && op.end_us < next.start_us
        });
        if ended_before {
            continue;
        }
        let mut live_until = match prev.kind {
            OpKind::Claim { expires_at, .. } => expires_at,
            _ => continue,
        };
        for op in ops {
            if op.token == prev.token
                && op.result == OpResult::Accepted
                && op.start_us < next.end_us
                && let OpKind::Renew {
                    expires_at: Some(e),
                } = op.kind
            {
                live_until = live_until.max(e);
            }
        }
        if let OpKind::Claim {
            expires_at,
            duration_ms,
        } = next.kind
        {
            let claimed_at = expires_at - duration_ms;
            if claimed_at < live_until {
                out.push(Violation::OverlappingLeases {
                    execution: execution.into(),
                    live: prev.token,
                    claimed: next.token,
                });
            }
        }
    }

    // 3. Nothing accepted with a token lower than one issued before it was invoked.
    for op in ops {
        let fenced = matches!(
            op.kind,
            OpKind::Renew { .. }
                | OpKind::WriteStep { .. }
                | OpKind::Acknowledge { .. }
                | OpKind::Release
        );
        if !fenced || op.result != OpResult::Accepted {
            continue;
        }
        if let Some(newer) = claims
            .iter()
            .filter(|c| c.token > op.token && c.end_us < op.start_us)
            .map(|c| c.token)
            .max()
        {
            out.push(Violation::StaleAccepted {
                execution: execution.into(),
                token: op.token,
                newer,
                op: op_name(&op.kind),
            });
        }
    }

    // 4. Each step record is written once and never changes (and holds the derived value).
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

    // 5. An acknowledged outcome never changes.
    let mut outcome: Option<&str> = None;
    for op in ops {
        if op.result != OpResult::Accepted {
            continue;
        }
        let o = match &op.kind {
            OpKind::Acknowledge { outcome } if outcome != "suspended" => outcome.as_str(),
            OpKind::ReadOutcome {
                outcome: Some(outcome),
            } => outcome.as_str(),
            _ => continue,
        };
        match outcome {
            Some(first) if first != o => out.push(Violation::OutcomeChanged {
                execution: execution.into(),
                first: first.into(),
                other: o.into(),
            }),
            Some(_) => {}
            None => outcome = Some(o),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(token: u64, start: i64, end: i64, kind: OpKind, result: OpResult) -> Op {
        Op {
            process: 1,
            execution: "e".into(),
            token,
            start_us: start,
            end_us: end,
            kind,
            result,
        }
    }

    fn claim(token: u64, start: i64, end: i64, at_ms: i64) -> Op {
        op(
            token,
            start,
            end,
            OpKind::Claim {
                expires_at: at_ms + 100,
                duration_ms: 100,
            },
            OpResult::Accepted,
        )
    }

    fn write(token: u64, start: i64, end: i64, value: &str, result: OpResult) -> Op {
        op(
            token,
            start,
            end,
            OpKind::WriteStep {
                step_key: "charge".into(),
                step_attempt: 0,
                written: value.into(),
                recorded: (result == OpResult::Accepted).then(|| value.into()),
            },
            result,
        )
    }

    fn ack(token: u64, start: i64, end: i64, outcome: &str, result: OpResult) -> Op {
        op(
            token,
            start,
            end,
            OpKind::Acknowledge {
                outcome: outcome.into(),
            },
            result,
        )
    }

    fn check_all(ops: &[Op]) -> Vec<Violation> {
        check(ops, &CheckOptions::default())
    }

    #[test]
    fn a_clean_history_passes() {
        let h = vec![
            claim(1, 0, 10, 0),
            write(1, 20, 30, "v", OpResult::Accepted),
            claim(2, 40, 50, 200),
            write(1, 60, 70, "w", OpResult::Lost),
            ack(2, 80, 90, "completed:1", OpResult::Accepted),
            ack(1, 95, 99, "completed:2", OpResult::Lost),
        ];
        assert_eq!(check_all(&h), vec![]);
    }

    #[test]
    fn detects_duplicate_and_decreasing_tokens() {
        let dup = vec![claim(3, 0, 10, 0), claim(3, 20, 30, 500)];
        assert!(matches!(
            check_all(&dup)[..],
            [Violation::TokenNotIncreasing { .. }]
        ));
        let dec = vec![claim(5, 0, 10, 0), claim(4, 20, 30, 500)];
        assert!(check_all(&dec).iter().any(|v| matches!(
            v,
            Violation::TokenNotIncreasing {
                earlier: 5,
                later: 4,
                ..
            }
        )));
    }

    #[test]
    fn detects_overlapping_leases() {
        // Second claim at backend ms 50 while the first lease lives until 100.
        let h = vec![claim(1, 0, 10, 0), claim(2, 20, 30, 50)];
        assert!(matches!(
            check_all(&h)[..],
            [Violation::OverlappingLeases {
                live: 1,
                claimed: 2,
                ..
            }]
        ));
        // A renewal accepted before the second claim extends the first lease.
        let renewed = vec![
            claim(1, 0, 10, 0),
            op(
                1,
                12,
                14,
                OpKind::Renew {
                    expires_at: Some(300),
                },
                OpResult::Accepted,
            ),
            claim(2, 20, 30, 200),
        ];
        assert!(matches!(
            check_all(&renewed)[..],
            [Violation::OverlappingLeases { .. }]
        ));
        // Released before the next claim: no overlap.
        let released = vec![
            claim(1, 0, 10, 0),
            op(1, 12, 14, OpKind::Release, OpResult::Accepted),
            claim(2, 20, 30, 50),
        ];
        assert_eq!(check_all(&released), vec![]);
    }

    #[test]
    fn detects_stale_accepted_writes_acks_renewals_and_releases() {
        for stale in [
            write(1, 40, 50, "v", OpResult::Accepted),
            ack(1, 40, 50, "completed:1", OpResult::Accepted),
            op(
                1,
                40,
                50,
                OpKind::Renew {
                    expires_at: Some(999),
                },
                OpResult::Accepted,
            ),
            op(1, 40, 50, OpKind::Release, OpResult::Accepted),
        ] {
            let h = vec![claim(1, 0, 10, 0), claim(2, 20, 30, 200), stale];
            let v = check_all(&h);
            assert!(
                v.iter().any(|v| matches!(
                    v,
                    Violation::StaleAccepted {
                        token: 1,
                        newer: 2,
                        ..
                    }
                )),
                "{v:?}"
            );
        }
        // Concurrent with the claim: may have committed first, not a violation.
        let concurrent = vec![
            claim(1, 0, 10, 0),
            claim(2, 20, 30, 200),
            write(1, 25, 35, "v", OpResult::Accepted),
        ];
        assert_eq!(check_all(&concurrent), vec![]);
    }

    #[test]
    fn detects_changed_and_corrupt_steps() {
        let h = vec![
            claim(1, 0, 10, 0),
            write(1, 20, 30, "v", OpResult::Accepted),
            op(
                1,
                40,
                50,
                OpKind::ReadStep {
                    step_key: "charge".into(),
                    step_attempt: 0,
                    value: Some("w".into()),
                },
                OpResult::Accepted,
            ),
        ];
        assert!(matches!(check_all(&h)[..], [Violation::StepChanged { .. }]));
        let expected = |_: &str, _: &str, _: u32| Some("v".to_string());
        let corrupt = vec![
            claim(1, 0, 10, 0),
            write(1, 20, 30, "x", OpResult::Accepted),
        ];
        let v = check(
            &corrupt,
            &CheckOptions {
                expected_step: Some(&expected),
                ..CheckOptions::default()
            },
        );
        assert!(matches!(v[..], [Violation::StepCorrupt { .. }]));
    }

    #[test]
    fn detects_changed_outcomes() {
        let h = vec![
            claim(1, 0, 10, 0),
            ack(1, 20, 30, "completed:1", OpResult::Accepted),
            op(
                1,
                40,
                50,
                OpKind::ReadOutcome {
                    outcome: Some("failed:2".into()),
                },
                OpResult::Accepted,
            ),
        ];
        assert!(matches!(
            check_all(&h)[..],
            [Violation::OutcomeChanged { .. }]
        ));
    }

    #[test]
    fn detects_executions_that_never_complete() {
        let h = vec![
            claim(1, 0, 10, 0),
            ack(1, 20, 30, "suspended", OpResult::Accepted),
        ];
        let v = check(
            &h,
            &CheckOptions {
                must_complete: ["e".to_string(), "never-seen".to_string()].into(),
                ..CheckOptions::default()
            },
        );
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(
            v.iter()
                .all(|v| matches!(v, Violation::NotCompleted { .. }))
        );
        let late = vec![
            claim(1, 0, 10, 0),
            ack(1, 20, 30, "completed:1", OpResult::Accepted),
        ];
        let bounded = |by| {
            check(
                &late,
                &CheckOptions {
                    must_complete: ["e".to_string()].into(),
                    complete_by_us: Some(by),
                    ..CheckOptions::default()
                },
            )
        };
        assert_eq!(bounded(30), vec![]);
        assert!(matches!(bounded(29)[..], [Violation::NotCompleted { .. }]));
    }

    #[test]
    fn reports_every_violation_not_just_the_first() {
        let h = vec![
            claim(1, 0, 10, 0),
            claim(2, 20, 30, 50),
            write(1, 40, 50, "v", OpResult::Accepted),
            ack(1, 60, 70, "completed:1", OpResult::Accepted),
        ];
        let v = check_all(&h);
        assert!(
            v.iter()
                .any(|v| matches!(v, Violation::OverlappingLeases { .. }))
        );
        assert_eq!(
            v.iter()
                .filter(|v| matches!(v, Violation::StaleAccepted { .. }))
                .count(),
            2
        );
    }
}
