//! Negative controls of rules 6 and 7: crafted histories the checker must flag, and valid
//! ones on the boundaries it must pass.

use super::{CheckOptions, Op, OpKind, OpResult, Violation, check};

/// An operation of execution `e`, process 1.
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

/// An accepted claim of `e` at backend ms `at_ms` for 100 ms.
fn claim(e: &str, token: u64, span: (i64, i64), at_ms: i64) -> Op {
    let kind = OpKind::Claim {
        expires_at: at_ms + 100,
        duration_ms: 100,
        first_delivery: false,
    };
    op(e, token, span, kind, OpResult::Accepted)
}

/// The accepted admission of `e` with `key`, long before everything else.
fn admit(e: &str, key: Option<&str>) -> Op {
    let kind = OpKind::Admit {
        key: key.map(str::to_owned),
        priority: 0,
        due_at: None,
        workflow: None,
    };
    op(e, 0, (-100, -90), kind, OpResult::Accepted)
}

/// A limit set (`key` `None`: the default) in `span`.
fn set_limit(key: Option<&str>, limit: Option<u32>, span: (i64, i64)) -> Op {
    let kind = OpKind::SetLimit {
        key: key.map(str::to_owned),
        limit,
    };
    op("", 0, span, kind, OpResult::Accepted)
}

fn end(e: &str, token: u64, span: (i64, i64), kind: OpKind, result: OpResult) -> Op {
    op(e, token, span, kind, result)
}

/// e1 and e2 under key `a` with a default limit of `limit`, then `rest`.
fn keyed(limit: u32, rest: Vec<Op>) -> Vec<Op> {
    let mut h = vec![
        admit("e1", Some("a")),
        admit("e2", Some("a")),
        set_limit(None, Some(limit), (-200, -150)),
    ];
    h.extend(rest);
    h
}

fn too_many(h: &[Op]) -> Vec<Violation> {
    check(h, &CheckOptions::default())
        .into_iter()
        .filter(|v| matches!(v, Violation::TooManyLiveLeases { .. }))
        .collect()
}

#[test]
fn rule_7_flags_a_second_live_lease_of_a_key_limited_to_one() {
    let h = keyed(
        1,
        vec![claim("e1", 1, (0, 10), 0), claim("e2", 2, (20, 30), 50)],
    );
    let v = too_many(&h);
    assert_eq!(
        v,
        vec![Violation::TooManyLiveLeases {
            key: "a".into(),
            limit: 1,
            claimed: vec!["e2#2".into()],
            live: vec!["e1#1".into()],
        }]
    );
    // The whole checker reports only that.
    assert_eq!(check(&h, &CheckOptions::default()), v);
    // With a limit of 2 the same history is valid.
    let two = keyed(
        2,
        vec![claim("e1", 1, (0, 10), 0), claim("e2", 2, (20, 30), 50)],
    );
    assert_eq!(check(&two, &CheckOptions::default()), vec![]);
}

#[test]
fn rule_7_flags_one_claim_call_taking_more_than_the_limit() {
    let batch = vec![claim("e1", 1, (0, 10), 0), claim("e2", 2, (0, 10), 0)];
    let v = too_many(&keyed(1, batch.clone()));
    assert!(
        matches!(&v[..], [Violation::TooManyLiveLeases { claimed, live, .. }]
            if claimed.len() == 2 && live.is_empty()),
        "{v:?}"
    );
    assert_eq!(too_many(&keyed(2, batch)), vec![]);
}

#[test]
fn rule_7_counts_only_what_was_certainly_live() {
    let e1 = || claim("e1", 1, (0, 10), 0);
    let ack = |span, result| {
        let kind = OpKind::Acknowledge {
            outcome: "completed:1".into(),
        };
        end("e1", 1, span, kind, result)
    };
    let cancel = |result: OpResult| {
        let kind = OpKind::Cancel {
            result: "cancelled".into(),
        };
        end("e1", 0, (12, 25), kind, result)
    };
    for clean in [
        // Expired exactly at the claim's instant: not live (the backends count `> now`).
        vec![e1(), claim("e2", 2, (20, 30), 100)],
        // Concurrent claims: either may have committed first.
        vec![claim("e1", 1, (0, 25), 0), claim("e2", 2, (20, 30), 50)],
        // Ended by an acknowledgement invoked before the claim returned, whatever its reply.
        vec![
            e1(),
            ack((25, 40), OpResult::Accepted),
            claim("e2", 2, (20, 30), 50),
        ],
        vec![
            e1(),
            ack((12, i64::MAX), OpResult::Unknown),
            claim("e2", 2, (20, 30), 50),
        ],
        vec![
            e1(),
            ack((12, 14), OpResult::Lost),
            claim("e2", 2, (20, 30), 50),
        ],
        vec![
            e1(),
            end(
                "e1",
                1,
                (12, 14),
                OpKind::Release { unstarted: false },
                OpResult::Accepted,
            ),
            claim("e2", 2, (20, 30), 50),
        ],
        // Cancelled (or maybe cancelled) before.
        vec![
            e1(),
            cancel(OpResult::Accepted),
            claim("e2", 2, (20, 30), 50),
        ],
        vec![
            e1(),
            cancel(OpResult::Unknown),
            claim("e2", 2, (20, 30), 50),
        ],
        // A renewal concurrent with the claim may have committed after it.
        vec![e1(), renew((15, 25), 300), claim("e2", 2, (20, 30), 200)],
        // A different key, and an execution without one, never count.
        vec![
            e1(),
            claim("e3", 3, (20, 30), 50),
            claim("e4", 4, (20, 30), 50),
        ],
    ] {
        let mut h = keyed(1, clean);
        h.push(admit("e3", Some("b")));
        h.push(admit("e4", None));
        assert_eq!(too_many(&h), vec![], "{h:?}");
    }
    // A renewal that returned before the claim was invoked keeps the lease live.
    let renewed = keyed(
        1,
        vec![e1(), renew((12, 14), 300), claim("e2", 2, (20, 30), 200)],
    );
    assert_eq!(too_many(&renewed).len(), 1);
    // A failed acknowledgement ended nothing.
    let failed = keyed(
        1,
        vec![
            e1(),
            ack((12, 14), OpResult::Failed),
            claim("e2", 2, (20, 30), 50),
        ],
    );
    assert_eq!(too_many(&failed).len(), 1);
}

fn renew(span: (i64, i64), expires_at: i64) -> Op {
    let kind = OpKind::Renew {
        expires_at: Some(expires_at),
    };
    op("e1", 1, span, kind, OpResult::Accepted)
}

#[test]
fn rule_7_takes_the_highest_limit_that_may_have_been_in_force() {
    let two_live = || vec![claim("e1", 1, (0, 10), 0), claim("e2", 2, (20, 30), 50)];
    let with = |sets: Vec<Op>| {
        let mut h = vec![admit("e1", Some("a")), admit("e2", Some("a"))];
        h.extend(sets);
        h.extend(two_live());
        too_many(&h)
    };
    // No limit set: unlimited.
    assert_eq!(with(vec![]), vec![]);
    // The key's own limit stands before the default.
    let own_two = vec![
        set_limit(None, Some(1), (-200, -150)),
        set_limit(Some("a"), Some(2), (-200, -150)),
    ];
    assert_eq!(with(own_two.clone()), vec![]);
    let own_one = vec![
        set_limit(None, Some(2), (-200, -150)),
        set_limit(Some("a"), Some(1), (-200, -150)),
    ];
    assert_eq!(with(own_one).len(), 1);
    // Removing the own limit falls back to the default.
    let mut removed = own_two.clone();
    removed.push(set_limit(Some("a"), None, (-140, -130)));
    assert_eq!(with(removed).len(), 1);
    // A raise concurrent with the claim may have committed first; one invoked after the
    // claim returned did not.
    let mut concurrent = vec![set_limit(None, Some(1), (-200, -150))];
    concurrent.push(set_limit(None, Some(2), (25, 35)));
    assert_eq!(with(concurrent), vec![]);
    let mut later = vec![set_limit(None, Some(1), (-200, -150))];
    later.push(set_limit(None, Some(2), (31, 35)));
    assert_eq!(with(later).len(), 1);
}

#[test]
fn rule_6_boundaries() {
    let cancel = |span, result: &str, r| {
        let kind = OpKind::Cancel {
            result: result.into(),
        };
        op("e", 0, span, kind, r)
    };
    let write = |start: i64| {
        let kind = OpKind::WriteStep {
            step_key: "s".into(),
            step_attempt: 0,
            written: "v".into(),
            recorded: Some("v".into()),
        };
        op("e", 1, (start, start + 5), kind, OpResult::Accepted)
    };
    let e1 = || claim("e", 1, (0, 10), 0);
    // Invoked exactly when the cancel returned: may have committed first.
    let at = vec![
        e1(),
        cancel((20, 30), "cancelled", OpResult::Accepted),
        write(30),
    ];
    assert_eq!(check(&at, &CheckOptions::default()), vec![]);
    let after = vec![
        e1(),
        cancel((20, 30), "cancelled", OpResult::Accepted),
        write(31),
    ];
    assert!(matches!(
        check(&after, &CheckOptions::default())[..],
        [Violation::AcceptedAfterCancel { token: 1, .. }]
    ));
    // A cancel of unknown result, or one that found it cancelled already, proves nothing.
    for c in [
        cancel((20, 30), "", OpResult::Unknown),
        cancel((20, 30), "already_cancelled", OpResult::Accepted),
    ] {
        let h = vec![e1(), c, write(40)];
        assert_eq!(check(&h, &CheckOptions::default()), vec![], "{h:?}");
    }
    // A claim granted after the cancel returned is flagged even for a new token.
    let reclaimed = vec![
        e1(),
        cancel((20, 30), "cancelled", OpResult::Accepted),
        claim("e", 2, (31, 40), 500),
    ];
    assert!(
        check(&reclaimed, &CheckOptions::default())
            .iter()
            .any(|v| matches!(v, Violation::ClaimedAfterCancel { token: 2, .. }))
    );
}

#[test]
fn the_peak_counts_a_keys_certainly_live_leases_at_a_claim() {
    let h = keyed(
        2,
        vec![claim("e1", 1, (0, 10), 0), claim("e2", 2, (20, 30), 50)],
    );
    assert_eq!(super::peak_live_leases(&h), 2);
    // Once e1's lease expired before e2's claim instant, only one was live.
    let expired = keyed(
        2,
        vec![claim("e1", 1, (0, 10), 0), claim("e2", 2, (20, 30), 100)],
    );
    assert_eq!(super::peak_live_leases(&expired), 1);
    assert_eq!(super::peak_live_leases(&[]), 0);
}
