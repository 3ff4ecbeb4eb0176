//! The checker's unit tests: one small history per rule, clean and broken.

use super::violation::MISSING;
use super::{CheckOptions, Op, OpKind, OpResult, Violation, check};

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
            first_delivery: false,
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

/// An accepted renewal of `token` to expiry `expires_at` (backend ms).
fn renew(token: u64, start: i64, end: i64, expires_at: i64) -> Op {
    op(
        token,
        start,
        end,
        OpKind::Renew {
            expires_at: Some(expires_at),
        },
        OpResult::Accepted,
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
        renew(1, 12, 14, 300),
        claim(2, 20, 30, 200),
    ];
    assert!(matches!(
        check_all(&renewed)[..],
        [Violation::OverlappingLeases { .. }]
    ));
    // Released before the next claim: no overlap.
    let released = vec![
        claim(1, 0, 10, 0),
        op(
            1,
            12,
            14,
            OpKind::Release { unstarted: false },
            OpResult::Accepted,
        ),
        claim(2, 20, 30, 50),
    ];
    assert_eq!(check_all(&released), vec![]);
}

#[test]
fn detects_stale_accepted_writes_acks_renewals_and_releases() {
    for stale in [
        write(1, 40, 50, "v", OpResult::Accepted),
        ack(1, 40, 50, "completed:1", OpResult::Accepted),
        renew(1, 40, 50, 999),
        op(
            1,
            40,
            50,
            OpKind::Release { unstarted: false },
            OpResult::Accepted,
        ),
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
        op(
            1,
            12,
            40,
            OpKind::Release { unstarted: false },
            OpResult::Accepted,
        ),
        ack(1, 12, 40, "suspended", OpResult::Accepted),
        op(
            1,
            12,
            i64::MAX,
            OpKind::Release { unstarted: false },
            OpResult::Unknown,
        ),
    ] {
        let h = vec![claim(1, 0, 10, 0), end, claim(2, 20, 30, 50)];
        assert_eq!(check_all(&h), vec![]);
    }
    // A renewal concurrent with the claim likewise committed before it.
    let renewed = vec![
        claim(1, 0, 10, 0),
        renew(1, 18, 40, 300),
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
        op(
            1,
            40,
            50,
            OpKind::Release { unstarted: false },
            OpResult::Accepted,
        ),
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

fn cancel(start: i64, end: i64, result: &str) -> Op {
    op(
        0,
        start,
        end,
        OpKind::Cancel {
            result: result.into(),
        },
        OpResult::Accepted,
    )
}

fn read_outcome(start: i64, outcome: Option<&str>) -> Op {
    op(
        0,
        start,
        start + 5,
        OpKind::ReadOutcome {
            outcome: outcome.map(str::to_owned),
        },
        OpResult::Accepted,
    )
}

#[test]
fn detects_fenced_operations_accepted_after_a_cancel() {
    for late in [
        write(1, 40, 50, "v", OpResult::Accepted),
        ack(1, 40, 50, "completed:1", OpResult::Accepted),
        renew(1, 40, 50, 999),
        op(
            1,
            40,
            50,
            OpKind::Release { unstarted: false },
            OpResult::Accepted,
        ),
    ] {
        let h = vec![claim(1, 0, 10, 0), cancel(20, 30, "cancelled"), late];
        let v = check_all(&h);
        assert!(
            v.iter()
                .any(|v| matches!(v, Violation::AcceptedAfterCancel { token: 1, .. })),
            "{v:?}"
        );
    }
    // Refused after the cancel, or invoked before it returned: clean.
    let clean = vec![
        claim(1, 0, 10, 0),
        write(1, 15, 35, "v", OpResult::Accepted),
        cancel(20, 30, "cancelled"),
        write(1, 40, 50, "w", OpResult::Lost),
        ack(1, 60, 70, "completed:1", OpResult::Lost),
        read_outcome(80, Some("cancelled:torture")),
    ];
    assert_eq!(check_all(&clean), vec![]);
}

#[test]
fn detects_a_claim_after_a_cancel() {
    let h = vec![
        claim(1, 0, 10, 0),
        cancel(20, 30, "cancelled"),
        claim(2, 40, 50, 500),
    ];
    let v = check_all(&h);
    assert!(
        matches!(&v[..], [Violation::ClaimedAfterCancel { token: 2, .. }]),
        "{v:?}"
    );
    // Concurrent with the cancel: may have committed before it.
    let concurrent = vec![
        claim(1, 0, 10, 0),
        cancel(20, 30, "cancelled"),
        claim(2, 25, 35, 500),
    ];
    assert_eq!(check_all(&concurrent), vec![]);
}

#[test]
fn a_cancelled_execution_reads_cancelled() {
    let expected = |_: &str| Some("completed:1".to_string());
    let options = CheckOptions {
        must_complete: ["e".to_string()].into(),
        expected_outcome: Some(&expected),
        ..CheckOptions::default()
    };
    // Rule 5 accepts the cancelled outcome with no terminal acknowledgement.
    let clean = vec![
        claim(1, 0, 10, 0),
        cancel(20, 30, "cancelled"),
        read_outcome(40, Some("cancelled:torture")),
    ];
    assert_eq!(check(&clean, &options), vec![]);
    for found in [None, Some("completed:1")] {
        let h = vec![
            claim(1, 0, 10, 0),
            cancel(20, 30, "cancelled"),
            read_outcome(40, found),
        ];
        let v = check(&h, &options);
        assert!(
            v.iter()
                .any(|v| matches!(v, Violation::NotReadCancelled { .. })),
            "{v:?}"
        );
    }
    // Without a cancel, a cancelled outcome is still not the derived one.
    let uncancelled = vec![claim(1, 0, 10, 0), read_outcome(40, Some("cancelled:x"))];
    assert!(matches!(
        check(&uncancelled, &options)[..],
        [Violation::OutcomeCorrupt { .. }]
    ));
}

#[test]
fn already_terminal_needs_a_terminal_acknowledgement() {
    let h = vec![claim(1, 0, 10, 0), cancel(20, 30, "already_terminal")];
    assert!(matches!(
        check_all(&h)[..],
        [Violation::TerminalWithoutAcknowledgement { .. }]
    ));
    let suspended = vec![
        claim(1, 0, 10, 0),
        ack(1, 12, 14, "suspended", OpResult::Accepted),
        cancel(20, 30, "already_terminal"),
    ];
    assert!(matches!(
        check_all(&suspended)[..],
        [Violation::TerminalWithoutAcknowledgement { .. }]
    ));
    let clean = vec![
        claim(1, 0, 10, 0),
        ack(1, 12, 25, "completed:1", OpResult::Accepted),
        cancel(20, 30, "already_terminal"),
        cancel(40, 50, "already_terminal"),
    ];
    assert_eq!(check_all(&clean), vec![]);
}
