//! Negative controls of rule 11: crafted histories of attempts the checker must flag, and
//! valid or ambiguous ones it must pass.

use rstest::rstest;

use super::{CheckOptions, Op, OpKind, OpResult, Violation, check};

fn op(token: u64, span: (i64, i64), kind: OpKind, result: OpResult) -> Op {
    Op {
        process: 1,
        execution: "e1".into(),
        token,
        start_us: span.0,
        end_us: span.1,
        kind,
        result,
    }
}

/// An accepted claim of e1 with `token`, invoked at `at` µs (backend ms = `at`).
fn claim(token: u64, at: i64) -> Op {
    let kind = OpKind::Claim {
        expires_at: at + 100,
        duration_ms: 100,
        first_delivery: false,
    };
    op(token, (at, at + 1), kind, OpResult::Accepted)
}

/// How the delivery of a claim invoked at `at` ends, 5 µs later.
#[derive(Debug, Clone, Copy)]
enum End {
    /// Released failed (an attempt).
    Failed,
    /// Released unstarted (no attempt), with this result.
    Unstarted(OpResult),
    /// Acknowledged suspended, with this result.
    Suspended(OpResult),
    /// Nothing logged: the lease expired or its process died (an attempt).
    Expired,
}

fn delivery(token: u64, at: i64, end: End) -> Vec<Op> {
    let release = |unstarted, result| {
        op(
            token,
            (at + 5, at + 6),
            OpKind::Release { unstarted },
            result,
        )
    };
    let ended = match end {
        End::Failed => Some(release(false, OpResult::Accepted)),
        End::Unstarted(r) => Some(release(true, r)),
        End::Suspended(r) => Some(op(
            token,
            (at + 5, at + 6),
            OpKind::Acknowledge {
                outcome: "suspended".into(),
            },
            r,
        )),
        End::Expired => None,
    };
    std::iter::once(claim(token, at)).chain(ended).collect()
}

/// The default attempt limit set to `limit` before everything.
fn limit(limit: u32) -> Op {
    Op {
        execution: String::new(),
        ..op(
            0,
            (-20, -10),
            OpKind::SetAttemptLimit {
                workflow: None,
                limit: Some(limit),
            },
            OpResult::Accepted,
        )
    }
}

/// A history of deliveries 10 µs apart (tokens 1, 2, ..) under `limit`.
fn deliveries(limit_of: Option<u32>, ends: &[End]) -> Vec<Op> {
    let mut h: Vec<Op> = limit_of.map(limit).into_iter().collect();
    for (i, end) in ends.iter().enumerate() {
        let n = i as i64;
        h.extend(delivery(n as u64 + 1, 100 + 10 * n, *end));
    }
    h
}

fn rule_11(h: &[Op]) -> Vec<Violation> {
    check(h, &CheckOptions::default())
        .into_iter()
        .filter(|v| {
            matches!(
                v,
                Violation::ClaimedAfterAttempts { .. } | Violation::AcceptedAfterDead { .. }
            )
        })
        .collect()
}

#[test]
fn a_claim_after_the_last_attempt_is_flagged() {
    let h = deliveries(Some(2), &[End::Failed, End::Expired, End::Failed]);
    assert_eq!(
        rule_11(&h),
        vec![Violation::ClaimedAfterAttempts {
            execution: "e1".into(),
            token: 3,
            attempts: 2,
            limit: 2,
        }]
    );
}

#[test]
fn anything_accepted_after_the_dying_release_is_flagged() {
    let mut h = deliveries(Some(2), &[End::Expired, End::Failed]);
    // A step write of the second (dead) delivery's token, invoked after its release.
    h.push(op(
        2,
        (200, 201),
        OpKind::WriteStep {
            step_key: "s0".into(),
            step_attempt: 1,
            written: "x".into(),
            recorded: Some("x".into()),
        },
        OpResult::Accepted,
    ));
    assert_eq!(
        rule_11(&h),
        vec![Violation::AcceptedAfterDead {
            execution: "e1".into(),
            token: 2,
            op: "write_step s0".into(),
        }]
    );
}

#[test]
fn anything_accepted_after_a_read_found_it_dead_is_flagged() {
    let mut h = deliveries(Some(5), &[End::Failed]);
    h.push(op(0, (50, 60), OpKind::ReadDead, OpResult::Accepted));
    let flagged: Vec<String> = rule_11(&h)
        .into_iter()
        .filter_map(|v| match v {
            Violation::AcceptedAfterDead { op, .. } => Some(op),
            _ => None,
        })
        .collect();
    assert_eq!(
        flagged,
        ["claim", "release"],
        "both invoked after the read returned"
    );
}

#[rstest]
#[case::within_the_limit(Some(3), vec![End::Failed, End::Expired, End::Failed])]
#[case::no_limit(None, vec![End::Failed; 5])]
#[case::unstarted_releases_are_no_attempts(
    Some(2),
    vec![End::Failed, End::Unstarted(OpResult::Accepted), End::Unstarted(OpResult::Accepted), End::Failed]
)]
#[case::an_unstarted_release_of_unknown_result_may_be_none(
    Some(2),
    vec![End::Failed, End::Unstarted(OpResult::Unknown), End::Failed]
)]
#[case::a_suspension_starts_the_count_again(
    Some(2),
    vec![End::Failed, End::Suspended(OpResult::Accepted), End::Failed, End::Failed]
)]
#[case::a_suspension_of_unknown_result_may_have(
    Some(2),
    vec![End::Failed, End::Suspended(OpResult::Unknown), End::Failed, End::Failed]
)]
fn valid_or_ambiguous_attempts_pass(#[case] limit_of: Option<u32>, #[case] ends: Vec<End>) {
    let h = deliveries(limit_of, &ends);
    assert!(rule_11(&h).is_empty(), "{h:?}");
}

#[rstest]
#[case::a_refused_unstarted_release_is_an_attempt(End::Unstarted(OpResult::Lost))]
#[case::a_failed_suspension_is_an_attempt(End::Suspended(OpResult::Failed))]
fn refused_ends_count_as_attempts(#[case] end: End) {
    let h = deliveries(Some(2), &[End::Failed, end, End::Failed]);
    assert_eq!(rule_11(&h).len(), 1, "{h:?}");
}

#[test]
fn a_limit_set_while_the_claim_ran_may_not_have_applied() {
    let mut h = deliveries(None, &[End::Failed, End::Failed]);
    // Set while the second claim was in flight: it may have committed after it.
    h.push(Op {
        execution: String::new(),
        ..op(
            0,
            (105, 125),
            OpKind::SetAttemptLimit {
                workflow: None,
                limit: Some(1),
            },
            OpResult::Accepted,
        )
    });
    assert!(rule_11(&h).is_empty(), "{h:?}");
}

/// The accepted set of `workflow`'s own attempt limit before everything.
fn workflow_limit(workflow: &str, limit: Option<u32>) -> Op {
    Op {
        execution: String::new(),
        ..op(
            0,
            (-20, -10),
            OpKind::SetAttemptLimit {
                workflow: Some(workflow.into()),
                limit,
            },
            OpResult::Accepted,
        )
    }
}

/// The accepted admission of e1 naming `workflow`.
fn admitted(workflow: Option<&str>) -> Op {
    let kind = OpKind::Admit {
        key: None,
        priority: 0,
        due_at: None,
        workflow: workflow.map(str::to_owned),
    };
    op(0, (-40, -30), kind, OpResult::Accepted)
}

/// Four failed deliveries of e1 (claims flagged: those past the limit that applied) under a default limit of 2 and workflow `w`'s own limit
/// `own`, e1 admitted naming `workflow`.
fn under_own_limit(workflow: Option<&str>, own: Option<u32>) -> Vec<Op> {
    let mut h = deliveries(Some(2), &[End::Failed; 4]);
    h.push(workflow_limit("w", own));
    h.push(admitted(workflow));
    h
}

#[rstest]
#[case::the_workflows_own_limit_applies(Some("w"), Some(4), 0)]
#[case::a_lower_own_limit_applies_too(Some("w"), Some(1), 3)]
#[case::a_removed_own_limit_falls_back_to_the_default(Some("w"), None, 2)]
#[case::another_workflows_limit_does_not_apply(Some("v"), Some(4), 2)]
#[case::no_workflow_named_takes_the_default(None, Some(4), 2)]
fn the_limit_that_applied_is_the_workflows_own_else_the_default(
    #[case] workflow: Option<&str>,
    #[case] own: Option<u32>,
    #[case] claims_flagged: usize,
) {
    let h = under_own_limit(workflow, own);
    let claims = rule_11(&h)
        .into_iter()
        .filter(|v| matches!(v, Violation::ClaimedAfterAttempts { .. }))
        .count();
    assert_eq!(claims, claims_flagged, "{:?}", rule_11(&h));
}
