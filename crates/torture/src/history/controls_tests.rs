//! Negative controls of rules 8 to 10: crafted histories the checker must flag, and valid
//! or ambiguous ones on the boundaries it must pass.

use rstest::rstest;

use super::{CheckOptions, Op, OpKind, OpResult, Violation, check};

fn op(e: &str, token: u64, span: (i64, i64), kind: OpKind, result: OpResult) -> Op {
    Op {
        process: 1,
        execution: e.into(),
        token,
        start_us: span.0,
        end_us: span.1,
        kind,
        result,
    }
}

/// An accepted claim of `e` at backend ms `at_ms`, showing a first delivery or not.
fn claim(e: &str, token: u64, span: (i64, i64), at_ms: i64, first: bool) -> Op {
    let kind = OpKind::Claim {
        expires_at: at_ms + 100,
        duration_ms: 100,
        first_delivery: first,
    };
    op(e, token, span, kind, OpResult::Accepted)
}

/// The accepted admission of `e` at priority `priority`, due at backend ms `due_ms`.
fn admit(e: &str, priority: i32, key: Option<&str>, due_ms: i64) -> Op {
    let kind = OpKind::Admit {
        key: key.map(str::to_owned),
        priority,
        due_at: Some(due_ms),
        workflow: None,
    };
    op(e, 0, (-100, -90), kind, OpResult::Accepted)
}

fn control(kind: OpKind, span: (i64, i64), result: OpResult) -> Op {
    op("", 0, span, kind, result)
}

fn rule(h: &[Op], options: &CheckOptions<'_>, of_rule: fn(&Violation) -> bool) -> Vec<Violation> {
    check(h, options).into_iter().filter(of_rule).collect()
}

fn paused(h: &[Op]) -> Vec<Violation> {
    rule(h, &CheckOptions::default(), |v| {
        matches!(v, Violation::ClaimedWhilePaused { .. })
    })
}

fn priority(h: &[Op]) -> Vec<Violation> {
    rule(h, &CheckOptions::default(), |v| {
        matches!(v, Violation::LowerPriorityClaimed { .. })
    })
}

/// A pause in 0..10 and a claim of e1 in 20..30, then `rest`.
fn pause_then_claim(rest: Vec<Op>) -> Vec<Op> {
    let mut h = vec![
        control(OpKind::Pause, (0, 10), OpResult::Accepted),
        claim("e1", 1, (20, 30), 5, true),
    ];
    h.extend(rest);
    h
}

#[test]
fn rule_8_flags_a_claim_invoked_after_a_pause_returned() {
    assert_eq!(
        paused(&pause_then_claim(vec![])),
        vec![Violation::ClaimedWhilePaused {
            execution: "e1".into(),
            token: 1,
            paused_at_us: 10,
        }]
    );
}

#[rstest]
#[case::resumed_before_the_claim(vec![control(OpKind::Resume, (12, 15), OpResult::Accepted)], 0)]
#[case::resume_concurrent_with_the_claim(vec![control(OpKind::Resume, (25, 40), OpResult::Accepted)], 0)]
#[case::resume_concurrent_with_the_pause(vec![control(OpKind::Resume, (5, 12), OpResult::Accepted)], 0)]
#[case::unknown_resume_sent_before_the_pause(vec![control(OpKind::Resume, (-20, -10), OpResult::Unknown)], 0)]
#[case::resume_done_before_the_pause(vec![control(OpKind::Resume, (-20, -10), OpResult::Accepted)], 1)]
#[case::failed_resume(vec![control(OpKind::Resume, (12, 15), OpResult::Failed)], 1)]
#[case::resume_invoked_after_the_claim_returned(vec![control(OpKind::Resume, (31, 35), OpResult::Unknown)], 1)]
fn rule_8_reads_resumes_by_their_intervals(#[case] rest: Vec<Op>, #[case] flagged: usize) {
    let h = pause_then_claim(rest);
    assert_eq!(paused(&h).len(), flagged, "{h:?}");
}

#[rstest]
#[case::pause_of_unknown_result(OpResult::Unknown, (0, 10))]
#[case::pause_concurrent_with_the_claim(OpResult::Accepted, (0, 25))]
fn rule_8_needs_a_certain_pause_before_the_claim(
    #[case] result: OpResult,
    #[case] span: (i64, i64),
) {
    let h = vec![
        control(OpKind::Pause, span, result),
        claim("e1", 1, (20, 30), 5, true),
    ];
    assert!(paused(&h).is_empty(), "{h:?}");
}

#[test]
fn rule_8_opens_a_second_window_after_a_second_pause() {
    let h = vec![
        control(OpKind::Pause, (0, 10), OpResult::Accepted),
        control(OpKind::Resume, (12, 15), OpResult::Accepted),
        claim("e1", 1, (20, 30), 5, true),
        control(OpKind::Pause, (40, 50), OpResult::Accepted),
        claim("e2", 2, (60, 70), 9, true),
    ];
    let v = paused(&h);
    assert!(
        matches!(&v[..], [Violation::ClaimedWhilePaused { execution, paused_at_us: 50, .. }] if execution == "e2"),
        "{v:?}"
    );
}

/// e-low (priority 0) claimed in 10..20 at backend ms 5 while e-high (priority 1, due at
/// 0) waited; e-high's first delivery was claimed in `high_claim`, then `rest`.
fn low_before_high(high_claim: Op, rest: Vec<Op>) -> Vec<Op> {
    let mut h = vec![
        admit("e-low", 0, None, 0),
        admit("e-high", 1, None, 0),
        claim("e-low", 1, (10, 20), 5, true),
        high_claim,
    ];
    h.extend(rest);
    h
}

#[test]
fn rule_9_flags_a_lower_priority_claimed_over_a_due_unheld_higher_one() {
    let h = low_before_high(claim("e-high", 2, (30, 40), 25, true), vec![]);
    assert_eq!(
        priority(&h),
        vec![Violation::LowerPriorityClaimed {
            execution: "e-low".into(),
            token: 1,
            priority: 0,
            passed_over: "e-high".into(),
            passed_over_priority: 1,
        }]
    );
    let skip_locked = CheckOptions {
        claims_skip_locked: true,
        ..CheckOptions::default()
    };
    assert!(
        rule(&h, &skip_locked, |v| matches!(
            v,
            Violation::LowerPriorityClaimed { .. }
        ))
        .is_empty(),
        "not judged where claims skip locked rows"
    );
}

#[rstest]
#[case::its_first_claim_concurrent(claim("e-high", 2, (15, 40), 25, true))]
#[case::an_earlier_delivery_not_ruled_out(claim("e-high", 2, (30, 40), 25, false))]
#[case::taken_by_the_same_call(claim("e-high", 2, (10, 20), 5, true))]
fn rule_9_passes_a_higher_one_that_may_have_been_held(#[case] high_claim: Op) {
    let h = low_before_high(high_claim, vec![]);
    assert!(priority(&h).is_empty(), "{h:?}");
}

/// e-high was held by an earlier claim and released unstarted: its later claim still shows
/// a first delivery, but the earliest claim is what proves it unclaimed.
#[test]
fn rule_9_passes_a_higher_one_held_earlier_and_released_unstarted() {
    let h = low_before_high(
        claim("e-high", 2, (1, 5), 0, true),
        vec![
            op(
                "e-high",
                2,
                (25, 26),
                OpKind::Release { unstarted: false },
                OpResult::Accepted,
            ),
            claim("e-high", 3, (30, 40), 25, true),
        ],
    );
    assert!(priority(&h).is_empty(), "{h:?}");
}

#[rstest]
#[case::due_after_the_claim_instant(admit("e-high", 1, None, 6), vec![])]
#[case::admitted_during_the_claim(op("e-high", 0, (5, 12), OpKind::Admit { key: None, priority: 1, due_at: Some(0), workflow: None }, OpResult::Accepted), vec![])]
#[case::due_time_unknown(op("e-high", 0, (-100, -90), OpKind::Admit { key: None, priority: 1, due_at: None, workflow: None }, OpResult::Accepted), vec![])]
#[case::keyed_with_limits(admit("e-high", 1, Some("a"), 0), vec![control(OpKind::SetLimit { key: None, limit: Some(1) }, (-200, -150), OpResult::Unknown)])]
#[case::same_priority(admit("e-high", 0, None, 0), vec![])]
fn rule_9_passes_a_higher_one_not_certainly_claimable(
    #[case] high_admit: Op,
    #[case] rest: Vec<Op>,
) {
    let mut h = vec![
        admit("e-low", 0, None, 0),
        high_admit,
        claim("e-low", 1, (10, 20), 5, true),
        claim("e-high", 2, (30, 40), 25, true),
    ];
    h.extend(rest);
    assert!(priority(&h).is_empty(), "{h:?}");
}

#[test]
fn rule_9_flags_a_keyed_higher_one_when_no_limit_exists() {
    let h = vec![
        admit("e-low", 0, None, 0),
        admit("e-high", 1, Some("a"), 0),
        claim("e-low", 1, (10, 20), 5, false),
        claim("e-high", 2, (30, 40), 25, true),
    ];
    assert_eq!(priority(&h).len(), 1, "{h:?}");
}

fn occurrences(h: &[Op], settled: &[&str]) -> Vec<Violation> {
    let options = CheckOptions {
        settled_occurrences: settled.iter().map(|s| (*s).to_owned()).collect(),
        ..CheckOptions::default()
    };
    rule(h, &options, |v| {
        matches!(
            v,
            Violation::OccurrenceMissing { .. } | Violation::OccurrenceAdmittedTwice { .. }
        )
    })
}

#[test]
fn rule_10_flags_a_settled_occurrence_never_admitted() {
    let h = vec![admit("schedule:t:1000", 0, None, 1000)];
    assert_eq!(
        occurrences(&h, &["schedule:t:1000", "schedule:t:2000"]),
        vec![Violation::OccurrenceMissing {
            execution: "schedule:t:2000".into(),
        }]
    );
}

#[rstest]
#[case::admitted(admit("schedule:t:2000", 0, None, 2000))]
#[case::claimed(claim("schedule:t:2000", 1, (10, 20), 2000, true))]
#[case::read_after_the_run(op("schedule:t:2000", 1, (30, 40), OpKind::ReadOutcome { outcome: None }, OpResult::Accepted))]
fn rule_10_takes_any_accepted_sign_of_an_occurrence(#[case] seen: Op) {
    assert!(occurrences(&[seen], &["schedule:t:2000"]).is_empty());
}

#[test]
fn rule_10_does_not_take_an_admission_of_unknown_result() {
    let unknown = op(
        "schedule:t:2000",
        0,
        (0, i64::MAX),
        OpKind::Admit {
            key: None,
            priority: 0,
            due_at: None,
            workflow: None,
        },
        OpResult::Unknown,
    );
    assert_eq!(occurrences(&[unknown], &["schedule:t:2000"]).len(), 1);
}

#[test]
fn rule_10_flags_an_occurrence_delivered_first_twice() {
    let h = vec![
        admit("schedule:t:1000", 0, None, 1000),
        claim("schedule:t:1000", 1, (10, 20), 1000, true),
        started("schedule:t:1000", 1, (21, 22)),
        claim("schedule:t:1000", 5, (50, 60), 1040, false),
        claim("schedule:t:1000", 9, (90, 99), 1090, true),
        acknowledged("schedule:t:1000", 9, (100, 101)),
    ];
    assert_eq!(
        occurrences(&h, &["schedule:t:1000"]),
        vec![Violation::OccurrenceAdmittedTwice {
            execution: "schedule:t:1000".into(),
            first_deliveries: 2,
        }]
    );
}

/// A lease released unstarted leaves the next claim a first delivery too: only first
/// deliveries a worker started (wrote a step, acknowledged) count.
#[test]
fn rule_10_passes_a_first_delivery_released_unstarted() {
    let h = vec![
        admit("schedule:t:1000", 0, None, 1000),
        claim("schedule:t:1000", 1, (10, 20), 1000, true),
        op(
            "schedule:t:1000",
            1,
            (30, 31),
            OpKind::Release { unstarted: false },
            OpResult::Accepted,
        ),
        claim("schedule:t:1000", 2, (40, 50), 1040, true),
        started("schedule:t:1000", 2, (51, 52)),
        acknowledged("schedule:t:1000", 2, (53, 54)),
    ];
    assert!(occurrences(&h, &["schedule:t:1000"]).is_empty(), "{h:?}");
}

/// An accepted step write of `e` under `token`: a worker started that delivery.
fn started(e: &str, token: u64, span: (i64, i64)) -> Op {
    let kind = OpKind::WriteStep {
        step_key: "s1".into(),
        step_attempt: 1,
        written: "1".into(),
        recorded: Some("1".into()),
    };
    op(e, token, span, kind, OpResult::Accepted)
}

/// An accepted acknowledgement of `e` under `token`.
fn acknowledged(e: &str, token: u64, span: (i64, i64)) -> Op {
    let kind = OpKind::Acknowledge {
        outcome: "{}".into(),
    };
    op(e, token, span, kind, OpResult::Accepted)
}
