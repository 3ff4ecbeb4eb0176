//! Negative controls of rules 12 (rates) and 13 (ordered keys): crafted histories the
//! checker must flag, and valid or ambiguous ones on the boundaries it must pass.

use rstest::rstest;

use super::{CheckOptions, Op, OpKind, OpResult, Rate, Violation, check};

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

/// An accepted claim of `e` invoked at `at` µs, at backend ms `at` for 100 ms.
fn claim(e: &str, token: u64, at: i64) -> Op {
    let kind = OpKind::Claim {
        expires_at: at + 100,
        duration_ms: 100,
        first_delivery: false,
    };
    op(e, token, (at, at + 1), kind, OpResult::Accepted)
}

fn admit(e: &str, key: &str, span: (i64, i64)) -> Op {
    let kind = OpKind::Admit {
        key: Some(key.to_owned()),
        priority: 0,
        due_at: None,
        workflow: None,
    };
    op(e, 0, span, kind, OpResult::Accepted)
}

fn control(kind: OpKind, span: (i64, i64)) -> Op {
    op("", 0, span, kind, OpResult::Accepted)
}

fn set_rate(key: Option<&str>, rate: Option<(u32, i64)>, span: (i64, i64)) -> Op {
    let kind = OpKind::SetRateLimit {
        key: key.map(str::to_owned),
        rate: rate.map(|(starts, period_ms)| Rate { starts, period_ms }),
    };
    control(kind, span)
}

fn set_order(key: Option<&str>, ordered: bool, span: (i64, i64)) -> Op {
    let kind = OpKind::SetKeyOrdering {
        key: key.map(str::to_owned),
        ordered,
    };
    control(kind, span)
}

fn violations(h: &[Op], of_rule: fn(&Violation) -> bool) -> Vec<Violation> {
    check(h, &CheckOptions::default())
        .into_iter()
        .filter(of_rule)
        .collect()
}

fn rate(h: &[Op]) -> Vec<Violation> {
    violations(h, |v| matches!(v, Violation::RateExceeded { .. }))
}

fn order(h: &[Op]) -> Vec<Violation> {
    violations(h, |v| {
        matches!(
            v,
            Violation::OrderedKeyOverlap { .. } | Violation::OrderedOutOfTurn { .. }
        )
    })
}

/// e1..e3 under key `a` (e4 under `b`), a default rate of 2 per 100 ms, then `rest`.
fn rated(rest: Vec<Op>) -> Vec<Op> {
    let mut h = vec![
        set_rate(None, Some((2, 100)), (-300, -250)),
        admit("e1", "a", (-100, -90)),
        admit("e2", "a", (-100, -90)),
        admit("e3", "a", (-100, -90)),
        admit("e4", "b", (-100, -90)),
    ];
    h.extend(rest);
    h
}

#[test]
fn rule_12_flags_a_third_claim_inside_one_window() {
    let h = rated(vec![
        claim("e1", 1, 0),
        claim("e2", 2, 50),
        claim("e3", 3, 99),
    ]);
    assert_eq!(
        rate(&h),
        vec![Violation::RateExceeded {
            key: "a".into(),
            starts: 2,
            period_ms: 100,
            at_ms: 99,
            claims: vec!["e1#1".into(), "e2#2".into(), "e3#3".into()],
        }]
    );
}

#[test]
fn rule_12_flags_two_claims_of_one_call_over_a_rate_of_one() {
    let mut h = rated(vec![claim("e1", 1, 0), claim("e2", 2, 0)]);
    h.push(set_rate(Some("a"), Some((1, 1000)), (-240, -230)));
    assert_eq!(rate(&h).len(), 2, "each claim ends a window holding both");
}

#[rstest]
#[case::the_window_is_half_open(vec![claim("e1", 1, 0), claim("e2", 2, 50), claim("e3", 3, 100)])]
#[case::other_keys_count_apart(vec![claim("e1", 1, 0), claim("e2", 2, 50), claim("e4", 3, 60)])]
#[case::a_key_own_rate_overrides_the_default(vec![
    set_rate(Some("a"), Some((3, 100)), (-240, -230)),
    claim("e1", 1, 0), claim("e2", 2, 50), claim("e3", 3, 99),
])]
#[case::a_rate_set_concurrently_may_not_apply(vec![
    set_rate(Some("a"), Some((3, 100)), (-5, 200)),
    claim("e1", 1, 0), claim("e2", 2, 50), claim("e3", 3, 99),
])]
#[case::claims_before_the_set_returned_do_not_count(vec![
    set_rate(Some("a"), Some((2, 100)), (-240, 10)),
    claim("e1", 1, 0), claim("e2", 2, 50), claim("e3", 3, 99),
])]
fn rule_12_passes_valid_or_ambiguous_windows(#[case] rest: Vec<Op>) {
    let h = rated(rest);
    assert!(rate(&h).is_empty(), "{h:?}");
}

#[test]
fn rule_12_reads_a_removed_own_rate_as_the_default() {
    let h = rated(vec![
        set_rate(Some("a"), Some((9, 100)), (-240, -230)),
        set_rate(Some("a"), None, (-220, -210)),
        claim("e1", 1, 0),
        claim("e2", 2, 50),
        claim("e3", 3, 99),
    ]);
    assert_eq!(rate(&h).len(), 1, "{h:?}");
}

/// e1 then e2 admitted under key `a`, ordered before everything, then `rest`.
fn ordered(rest: Vec<Op>) -> Vec<Op> {
    let mut h = vec![
        set_order(Some("a"), true, (-300, -250)),
        admit("e1", "a", (-100, -90)),
        admit("e2", "a", (-80, -70)),
    ];
    h.extend(rest);
    h
}

fn ended(e: &str, token: u64, at: i64, kind: OpKind) -> Op {
    op(e, token, (at, at + 1), kind, OpResult::Accepted)
}

fn released(e: &str, token: u64, at: i64) -> Op {
    ended(e, token, at, OpKind::Release { unstarted: false })
}

fn completed(e: &str, token: u64, at: i64) -> Op {
    let kind = OpKind::Acknowledge {
        outcome: "completed:1".into(),
    };
    ended(e, token, at, kind)
}

#[test]
fn rule_13_flags_a_second_live_lease_of_an_ordered_key() {
    let h = ordered(vec![claim("e1", 1, 0), claim("e2", 2, 10)]);
    assert_eq!(
        order(&h),
        vec![Violation::OrderedKeyOverlap {
            key: "a".into(),
            claimed: vec!["e2#2".into()],
            live: vec!["e1#1".into()],
        }]
    );
}

#[test]
fn rule_13_flags_a_later_admission_claimed_first() {
    let h = ordered(vec![
        claim("e2", 1, 0),
        released("e2", 1, 5),
        claim("e1", 2, 20),
    ]);
    assert_eq!(
        order(&h),
        vec![Violation::OrderedOutOfTurn {
            key: "a".into(),
            execution: "e2".into(),
            token: 1,
            waiting: "e1".into(),
        }]
    );
}

#[test]
fn rule_13_still_orders_an_unmarked_key_while_the_default_is_set() {
    let mut h = ordered(vec![claim("e1", 1, 0), claim("e2", 2, 10)]);
    h.push(set_order(None, true, (-240, -230)));
    h.push(set_order(Some("a"), false, (-220, -210)));
    assert_eq!(order(&h).len(), 1, "{h:?}");
}

#[rstest]
#[case::one_at_a_time_in_order(vec![
    claim("e1", 1, 0), released("e1", 1, 5), claim("e1", 2, 10), completed("e1", 2, 15),
    claim("e2", 3, 20),
])]
#[case::a_lease_ended_before_the_next_claim(vec![
    claim("e1", 1, 0), completed("e1", 1, 5), claim("e2", 2, 10),
])]
#[case::an_earlier_admission_never_claimed_again(vec![claim("e2", 1, 0)])]
fn rule_13_passes_valid_or_ambiguous_lines(#[case] rest: Vec<Op>) {
    let h = ordered(rest);
    assert!(order(&h).is_empty(), "{h:?}");
}

#[test]
fn rule_13_judges_only_keys_certainly_ordered() {
    let h = vec![
        set_order(Some("a"), true, (-300, 50)),
        admit("e1", "a", (-100, -90)),
        admit("e2", "a", (-80, -70)),
        claim("e2", 1, 0),
        released("e2", 1, 5),
        claim("e1", 2, 20),
    ];
    assert!(order(&h).is_empty(), "{h:?}");
}

#[test]
fn rule_13_takes_concurrent_admissions_in_either_order() {
    let h = vec![
        set_order(Some("a"), true, (-300, -250)),
        admit("e1", "a", (-100, -60)),
        admit("e2", "a", (-80, -70)),
        claim("e2", 1, 0),
        released("e2", 1, 5),
        claim("e1", 2, 20),
    ];
    assert!(order(&h).is_empty(), "{h:?}");
}

#[test]
fn rule_13_leaves_other_keys_alone() {
    let h = vec![
        set_order(Some("b"), true, (-300, -250)),
        admit("e1", "a", (-100, -90)),
        admit("e2", "a", (-80, -70)),
        claim("e2", 1, 0),
        claim("e1", 2, 20),
    ];
    assert!(order(&h).is_empty(), "{h:?}");
}

#[test]
fn the_ordered_backlog_counts_claims_with_an_admitted_one_waiting() {
    // e2 was admitted before e1's claim and first claimed after e1 completed: held back once.
    let h = ordered(vec![
        claim("e1", 1, 0),
        completed("e1", 1, 5),
        claim("e2", 2, 10),
    ]);
    assert_eq!(super::ordered_backlog(&h), (1, 1));
    // The same line on a key that is not ordered holds nothing back by ordering.
    let unordered: Vec<Op> = h
        .into_iter()
        .filter(|op| !matches!(op.kind, OpKind::SetKeyOrdering { .. }))
        .collect();
    assert_eq!(super::ordered_backlog(&unordered), (0, 0));
    // Claimed in one call (e2 not waiting after e1's claim returned): no wait counted.
    let together = ordered(vec![claim("e1", 1, 0), claim("e2", 2, 0)]);
    assert_eq!(super::ordered_backlog(&together), (0, 0));
}
