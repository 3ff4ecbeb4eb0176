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
    /// May or may not have taken effect (`LeaseError::OutcomeUnknown`, or invoked by a
    /// process that died before the reply came; then `end_us` is `i64::MAX`).
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
    /// The terminal outcome of an execution is not the one its workflow derives.
    OutcomeCorrupt {
        /// Execution.
        execution: String,
        /// The expected outcome.
        expected: String,
        /// The outcome found.
        found: String,
    },
    /// Two executions were issued the same token (tokens come from one counter per
    /// namespace, so every claim's token is unique: a reset counter shows up here).
    TokenReused {
        /// The token.
        token: u64,
        /// One execution it was issued to.
        first: String,
        /// Another execution it was issued to.
        other: String,
    },
    /// A delivery was ended twice: two accepted acknowledgements or releases with one token
    /// (the first ends the delivery, so a second must return `Lost`).
    EndedTwice {
        /// Execution.
        execution: String,
        /// The token of the delivery.
        token: u64,
    },
    /// Something was accepted with a token above the token of an accepted terminal
    /// acknowledgement: a terminal execution was claimed again (whatever the timing: a claim
    /// committed before the acknowledgement makes the acknowledgement stale, and one after
    /// it claims a terminal execution).
    AfterOutcome {
        /// Execution.
        execution: String,
        /// The token of the terminal acknowledgement.
        outcome_token: u64,
        /// The higher token.
        token: u64,
        /// Which operation.
        op: String,
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

/// Derives the terminal outcome (`completed:<json>` / `failed:<json>`) of an execution, when
/// known.
pub type ExpectedOutcome<'a> = &'a dyn Fn(&str) -> Option<String>;

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
    /// The terminal outcome an execution must reach, derived from its id, when known.
    pub expected_outcome: Option<ExpectedOutcome<'a>>,
}

/// Checks a history. Returns every violation found (empty = the history is consistent).
pub fn check(ops: &[Op], options: &CheckOptions<'_>) -> Vec<Violation> {
    let mut by_exec: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in ops {
        by_exec.entry(op.execution.as_str()).or_default().push(op);
    }
    let mut out = Vec::new();
    // Tokens are unique across executions (one counter per namespace).
    let mut issued: BTreeMap<u64, &str> = BTreeMap::new();
    for op in ops {
        if matches!(op.kind, OpKind::Claim { .. }) && op.result == OpResult::Accepted {
            match issued.get(&op.token) {
                Some(first) if *first != op.execution => out.push(Violation::TokenReused {
                    token: op.token,
                    first: (*first).to_owned(),
                    other: op.execution.clone(),
                }),
                Some(_) => {}
                None => {
                    issued.insert(op.token, &op.execution);
                }
            }
        }
    }
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
    //    acknowledgement ended it first. A fenced operation is only accepted while its token
    //    is current, so every accepted release, acknowledgement or renewal of an earlier
    //    lease that may have committed before the later claim (it was invoked before the
    //    claim returned) did commit before it; one invoked after the claim returned is a
    //    stale acceptance, reported by check 3. A release or acknowledgement whose outcome
    //    is unknown (its reply never came) may have ended the lease too.
    let mut ordered = claims.clone();
    ordered.sort_by_key(|c| c.token);
    for (i, next) in ordered.iter().enumerate() {
        let OpKind::Claim {
            expires_at: next_expiry,
            duration_ms,
        } = next.kind
        else {
            continue;
        };
        let claimed_at = next_expiry - duration_ms;
        for prev in &ordered[..i] {
            let before_next = |op: &&&Op| {
                op.token == prev.token
                    && op.result == OpResult::Accepted
                    && op.start_us < next.end_us
            };
            let ended_before = ops.iter().any(|op| {
                op.token == prev.token
                    && matches!(op.result, OpResult::Accepted | OpResult::Unknown)
                    && op.start_us < next.end_us
                    && matches!(op.kind, OpKind::Release | OpKind::Acknowledge { .. })
            });
            if ended_before {
                continue;
            }
            let OpKind::Claim { expires_at, .. } = prev.kind else {
                continue;
            };
            let live_until = ops
                .iter()
                .filter(before_next)
                .filter_map(|op| match op.kind {
                    OpKind::Renew {
                        expires_at: Some(e),
                    } => Some(e),
                    _ => None,
                })
                .fold(expires_at, i64::max);
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

    // 4b. A recorded step never disappears: a read that found nothing after a write or read
    //     that found the record had returned is a lost record.
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

    // 5. An acknowledged outcome never changes, is the one the workflow derives, and
    //    nothing is accepted for a later delivery; each delivery ends once.
    let mut ended: BTreeSet<u64> = BTreeSet::new();
    for op in ops {
        if op.result == OpResult::Accepted
            && matches!(op.kind, OpKind::Release | OpKind::Acknowledge { .. })
            && !ended.insert(op.token)
        {
            out.push(Violation::EndedTwice {
                execution: execution.into(),
                token: op.token,
            });
        }
    }
    let terminal_token = ops
        .iter()
        .filter(|op| {
            op.result == OpResult::Accepted
                && matches!(&op.kind, OpKind::Acknowledge { outcome } if outcome != "suspended")
        })
        .map(|op| op.token)
        .min();
    if let Some(outcome_token) = terminal_token {
        for op in ops {
            let fenced_or_claim = matches!(
                op.kind,
                OpKind::Claim { .. }
                    | OpKind::Renew { .. }
                    | OpKind::WriteStep { .. }
                    | OpKind::Acknowledge { .. }
                    | OpKind::Release
            );
            if fenced_or_claim && op.result == OpResult::Accepted && op.token > outcome_token {
                out.push(Violation::AfterOutcome {
                    execution: execution.into(),
                    outcome_token,
                    token: op.token,
                    op: op_name(&op.kind),
                });
            }
        }
    }
    let expected_outcome = options.expected_outcome.and_then(|f| f(execution));
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
        if let Some(expected) = &expected_outcome
            && expected != o
        {
            out.push(Violation::OutcomeCorrupt {
                execution: execution.into(),
                expected: expected.clone(),
                found: o.into(),
            });
        }
        if let Some(first) = outcome
            && first != o
        {
            out.push(Violation::OutcomeChanged {
                execution: execution.into(),
                first: first.into(),
                other: o.into(),
            });
        }
        if outcome.is_none() {
            outcome = Some(o);
        }
    }
    // A terminal outcome never disappears: a read that found the execution not terminal
    // after a terminal acknowledgement or read had returned.
    for read in ops {
        if read.result != OpResult::Accepted
            || !matches!(read.kind, OpKind::ReadOutcome { outcome: None })
        {
            continue;
        }
        let earlier = ops.iter().find_map(|op| match &op.kind {
            OpKind::Acknowledge { outcome }
            | OpKind::ReadOutcome {
                outcome: Some(outcome),
            } if op.result == OpResult::Accepted
                && outcome != "suspended"
                && op.end_us < read.start_us =>
            {
                Some(outcome)
            }
            _ => None,
        });
        if let Some(first) = earlier {
            out.push(Violation::OutcomeChanged {
                execution: execution.into(),
                first: first.clone(),
                other: MISSING.into(),
            });
        }
    }
}

/// What a changed step or outcome reads as when it disappeared.
pub const MISSING: &str = "<missing>";

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
    fn an_end_concurrent_with_the_next_claim_committed_before_it() {
        // The release was accepted, so it committed while token 1 was current: before the
        // claim of token 2, even though its reply came back after the claim was invoked.
        // A release whose reply never came (result unknown) may have ended it too.
        for end in [
            op(1, 12, 40, OpKind::Release, OpResult::Accepted),
            ack(1, 12, 40, "suspended", OpResult::Accepted),
            op(1, 12, i64::MAX, OpKind::Release, OpResult::Unknown),
        ] {
            let h = vec![claim(1, 0, 10, 0), end, claim(2, 20, 30, 50)];
            assert_eq!(check_all(&h), vec![]);
        }
        // A renewal concurrent with the claim likewise committed before it.
        let renewed = vec![
            claim(1, 0, 10, 0),
            op(
                1,
                18,
                40,
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
    }

    #[test]
    fn overlap_is_checked_against_every_earlier_lease() {
        // Token 2's claim is missing from the log (its process died before logging it);
        // token 3 is still compared with token 1.
        let h = vec![claim(1, 0, 10, 0), claim(3, 20, 30, 50)];
        assert!(matches!(
            check_all(&h)[..],
            [Violation::OverlappingLeases {
                live: 1,
                claimed: 3,
                ..
            }]
        ));
    }

    #[test]
    fn detects_a_token_issued_to_two_executions() {
        let mut other = claim(1, 20, 30, 500);
        other.execution = "f".into();
        let v = check_all(&[claim(1, 0, 10, 0), other]);
        assert!(
            matches!(&v[..], [Violation::TokenReused { token: 1, .. }]),
            "{v:?}"
        );
    }

    #[test]
    fn detects_a_delivery_ended_twice() {
        let h = vec![
            claim(1, 0, 10, 0),
            ack(1, 20, 30, "suspended", OpResult::Accepted),
            op(1, 40, 50, OpKind::Release, OpResult::Accepted),
        ];
        assert!(matches!(
            check_all(&h)[..],
            [Violation::EndedTwice { token: 1, .. }]
        ));
    }

    #[test]
    fn detects_anything_accepted_after_a_terminal_outcome() {
        // Even concurrent with the acknowledgement: one of the two must have been refused.
        let h = vec![
            claim(1, 0, 10, 0),
            ack(1, 20, 60, "completed:1", OpResult::Accepted),
            claim(2, 30, 40, 500),
            write(2, 70, 80, "v", OpResult::Accepted),
        ];
        let v = check_all(&h);
        assert_eq!(
            v.iter()
                .filter(|v| matches!(
                    v,
                    Violation::AfterOutcome {
                        outcome_token: 1,
                        token: 2,
                        ..
                    }
                ))
                .count(),
            2,
            "{v:?}"
        );
    }

    #[test]
    fn detects_a_corrupt_outcome() {
        let expected = |_: &str| Some("completed:1".to_string());
        let h = vec![
            claim(1, 0, 10, 0),
            ack(1, 20, 30, "completed:2", OpResult::Accepted),
        ];
        let v = check(
            &h,
            &CheckOptions {
                expected_outcome: Some(&expected),
                ..CheckOptions::default()
            },
        );
        assert!(matches!(v[..], [Violation::OutcomeCorrupt { .. }]), "{v:?}");
    }

    #[test]
    fn detects_a_step_or_outcome_that_disappeared() {
        let read_step = |start, value: Option<&str>| {
            op(
                0,
                start,
                start + 5,
                OpKind::ReadStep {
                    step_key: "charge".into(),
                    step_attempt: 0,
                    value: value.map(str::to_owned),
                },
                OpResult::Accepted,
            )
        };
        let read_outcome = |start, outcome: Option<&str>| {
            op(
                0,
                start,
                start + 5,
                OpKind::ReadOutcome {
                    outcome: outcome.map(str::to_owned),
                },
                OpResult::Accepted,
            )
        };
        let h = vec![
            claim(1, 0, 10, 0),
            // Concurrent with the write: may have read before it committed.
            read_step(25, None),
            write(1, 20, 30, "v", OpResult::Accepted),
            ack(1, 40, 50, "completed:1", OpResult::Accepted),
            read_outcome(45, None),
            read_step(60, None),
            read_outcome(60, None),
        ];
        let v = check_all(&h);
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(v.iter().any(|v| matches!(
            v,
            Violation::StepChanged { other, .. } if other == MISSING
        )));
        assert!(v.iter().any(|v| matches!(
            v,
            Violation::OutcomeChanged { other, .. } if other == MISSING
        )));
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
