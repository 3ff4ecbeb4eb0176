//! Rule 1: tokens strictly increase, per execution (distinct, and real-time order implies
//! token order), and a token is issued to one execution only (one counter per namespace).

use std::collections::BTreeMap;

use super::op::{Op, OpKind, OpResult};
use super::violation::Violation;

/// Rule 1: two claims of `execution` never share a token, and a claim that began after
/// another returned carries a higher token.
pub(super) fn tokens_increase(execution: &str, claims: &[&Op], out: &mut Vec<Violation>) {
    let mut seen: BTreeMap<u64, &Op> = BTreeMap::new();
    for c in claims {
        if seen.insert(c.token, c).is_some() {
            out.push(Violation::TokenNotIncreasing {
                execution: execution.into(),
                earlier: c.token,
                later: c.token,
            });
        }
    }
    for a in claims {
        for b in claims {
            if a.end_us < b.start_us && a.token >= b.token && a.token != b.token {
                out.push(Violation::TokenNotIncreasing {
                    execution: execution.into(),
                    earlier: a.token,
                    later: b.token,
                });
            }
        }
    }
}

/// Tokens are unique across executions (one counter per namespace): a claim token issued
/// to a second execution.
pub(super) fn tokens_not_reused(ops: &[Op], out: &mut Vec<Violation>) {
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
}
