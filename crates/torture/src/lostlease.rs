//! What runtimes did after losing a lease, from the merged op log and the
//! effect logs:
//!
//! - **late side effects**: fenced writes (step writes, acknowledgements) and provider calls
//!   a runtime *started* after its lease was lost: after the lease's expiry at the backend,
//!   or after another holder's claim with a higher token had returned. Only what the logs
//!   prove counts: the expiry is the latest one any accepted renewal invoked before the start
//!   could have set (an unknown renewal could have extended it by a lease from its return).
//!   Expiry alone does not fence a write (docs/decisions/0002-one-clock-per-backend.md), so one accepted after
//!   expiry with no new holder is legal; one accepted after a takeover is a violation (the
//!   history checker reports it as `stale_accepted`). The dispatcher's local deadline is what
//!   keeps these rare: it stops a delivery a tenth of the lease before its expiry.
//! - **partition figures**: leases of a partitioned slot taken over by another slot during
//!   the partition (or one lease after it), the partitioned slot's operations refused
//!   (`Lost`) from the partition's start until five leases after its heal, and those it
//!   invoked during the partition whose reply never came or failed (`unknown`, `failed`: the
//!   dispatcher's deadline cancels a delivery's calls, so its late writes are mostly never
//!   sent rather than refused).

use std::collections::BTreeMap;

use crate::history::{Op, OpKind, OpResult};
use serde::Serialize;

use crate::effects::EffectEvent;
use crate::faults::FaultKind;
use crate::timeline::{FaultEvent, slot_of};

/// Side effects started after their lease was lost.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct LateFigures {
    /// Step writes, acknowledgements and provider calls started after the lease was lost.
    pub started: u64,
    /// Of the writes: refused (`Lost`).
    pub refused: u64,
    /// Of the writes: failed or of unknown outcome.
    pub failed_or_unknown: u64,
    /// Of the writes: accepted after the expiry, with no newer holder yet (legal).
    pub accepted_after_expiry: u64,
    /// Of the writes: accepted after a newer holder's claim had returned (a violation).
    pub accepted_after_takeover: u64,
    /// Provider calls (an external side effect nothing can refuse).
    pub provider_calls: u64,
    /// The latest start after the lease was lost, ms (0 when none).
    pub max_lateness_ms: f64,
    /// How many of each kind (`write_step`, `acknowledge`, `provider_call`).
    pub by_kind: BTreeMap<String, u64>,
}

/// What partitions did.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PartitionFigures {
    /// Leases of the partitioned slot taken over by another slot.
    pub takeovers: u64,
    /// Operations of the partitioned slot refused (`Lost`).
    pub refused: u64,
    /// Operations the partitioned slot invoked during the partition that failed or whose
    /// outcome stayed unknown.
    pub cut_off: u64,
}

/// One lease as the log shows it.
#[derive(Debug, Default)]
struct Lease {
    /// Claim expiry, µs.
    expires_us: i64,
    duration_us: i64,
    /// Renewals: (invoked at, the latest expiry it could have set).
    renewals: Vec<(i64, i64)>,
}

/// Every lease by (execution, token), and each execution's accepted claims (token, return).
struct Leases<'a> {
    by_token: BTreeMap<(&'a str, u64), Lease>,
    claims: BTreeMap<&'a str, Vec<(u64, i64)>>,
}

impl<'a> Leases<'a> {
    fn of(ops: &'a [Op]) -> Self {
        let mut by_token: BTreeMap<(&str, u64), Lease> = BTreeMap::new();
        let mut claims: BTreeMap<&str, Vec<(u64, i64)>> = BTreeMap::new();
        for op in ops.iter().filter(|o| o.result == OpResult::Accepted) {
            if let OpKind::Claim {
                expires_at,
                duration_ms,
                ..
            } = op.kind
            {
                let lease = by_token.entry((&op.execution, op.token)).or_default();
                lease.expires_us = expires_at.saturating_mul(1000);
                lease.duration_us = duration_ms.saturating_mul(1000);
                claims
                    .entry(&op.execution)
                    .or_default()
                    .push((op.token, op.end_us));
            }
        }
        for op in ops {
            let OpKind::Renew { expires_at } = op.kind else {
                continue;
            };
            let Some(lease) = by_token.get_mut(&(op.execution.as_str(), op.token)) else {
                continue;
            };
            let bound = match (op.result, expires_at) {
                (OpResult::Accepted, Some(at)) => at.saturating_mul(1000),
                (OpResult::Unknown, _) => op.end_us.saturating_add(lease.duration_us),
                _ => continue,
            };
            lease.renewals.push((op.start_us, bound));
        }
        Leases { by_token, claims }
    }

    /// When the lease (`execution`, `token`) was provably lost before `start`, and whether
    /// by a newer holder's claim; `None` while it may still have been live.
    fn lost_before(&self, execution: &str, token: u64, start: i64) -> Option<(i64, bool)> {
        let lease = self.by_token.get(&(execution, token))?;
        let expiry = lease
            .renewals
            .iter()
            .filter(|(invoked, _)| *invoked < start)
            .map(|(_, bound)| *bound)
            .fold(lease.expires_us, i64::max);
        let takeover = self
            .claims
            .get(execution)
            .into_iter()
            .flatten()
            .filter(|(t, end)| *t > token && *end < start)
            .map(|(_, end)| *end)
            .min();
        let lost = takeover.map_or(expiry, |t| t.min(expiry));
        (start > lost).then_some((lost, takeover.is_some()))
    }
}

/// Counts the side effects of runtime processes started after their lease was lost.
pub fn late_side_effects(ops: &[Op], effects: &[EffectEvent]) -> LateFigures {
    let leases = Leases::of(ops);
    let mut f = LateFigures::default();
    let lateness = |f: &mut LateFigures, kind: &str, start: i64, lost: i64| {
        f.started += 1;
        *f.by_kind.entry(kind.to_owned()).or_default() += 1;
        f.max_lateness_ms = f.max_lateness_ms.max((start - lost) as f64 / 1000.0);
    };
    for op in ops.iter().filter(|o| slot_of(o.process).is_some()) {
        if !matches!(
            op.kind,
            OpKind::WriteStep { .. } | OpKind::Acknowledge { .. }
        ) {
            continue;
        }
        let Some((lost, takeover)) = leases.lost_before(&op.execution, op.token, op.start_us)
        else {
            continue;
        };
        lateness(
            &mut f,
            crate::opcount::kind_name(&op.kind),
            op.start_us,
            lost,
        );
        match (op.result, takeover) {
            (OpResult::Lost, _) => f.refused += 1,
            (OpResult::Accepted, true) => f.accepted_after_takeover += 1,
            (OpResult::Accepted, false) => f.accepted_after_expiry += 1,
            (OpResult::Failed | OpResult::Unknown, _) => f.failed_or_unknown += 1,
        }
    }
    for e in effects {
        if let EffectEvent::Call {
            execution,
            token,
            at_us,
            ..
        } = e
            && let Some((lost, _)) = leases.lost_before(execution, *token, *at_us)
        {
            lateness(&mut f, "provider_call", *at_us, lost);
            f.provider_calls += 1;
        }
    }
    f
}

/// Takeovers and refusals around each partition in `faults` (`lease_us`: the lease).
pub fn partition_figures(ops: &[Op], faults: &[FaultEvent], lease_us: i64) -> PartitionFigures {
    let mut claims: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    let mut ended: BTreeMap<(&str, u64), i64> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.result == OpResult::Accepted) {
        match op.kind {
            OpKind::Claim { .. } => claims.entry(&op.execution).or_default().push(op),
            OpKind::Acknowledge { .. } | OpKind::Release { .. } => {
                let at = ended.entry((&op.execution, op.token)).or_insert(i64::MAX);
                *at = (*at).min(op.end_us);
            }
            _ => {}
        }
    }
    // A takeover: a claim whose previous lease its holder never ended before it.
    let mut takeovers = Vec::new();
    for (execution, mut list) in claims {
        list.sort_by_key(|o| o.token);
        for pair in list.windows(2) {
            let (prev, next) = (pair[0], pair[1]);
            let holder_ended = ended
                .get(&(execution, prev.token))
                .is_some_and(|at| *at < next.start_us);
            if !holder_ended && slot_of(prev.process) != slot_of(next.process) {
                takeovers.push((slot_of(prev.process), prev.end_us, next.start_us));
            }
        }
    }
    let mut f = PartitionFigures::default();
    for p in faults.iter().filter(|e| e.kind == FaultKind::Partition) {
        let until = p.until_us.unwrap_or(p.at_us);
        f.takeovers += takeovers
            .iter()
            .filter(|(slot, claimed, taken)| {
                *slot == p.slot && *claimed < until && (p.at_us..=until + lease_us).contains(taken)
            })
            .count() as u64;
        f.refused += ops
            .iter()
            .filter(|o| {
                o.result == OpResult::Lost
                    && slot_of(o.process) == p.slot
                    && (p.at_us..=until + 5 * lease_us).contains(&o.end_us)
            })
            .count() as u64;
        f.cut_off += ops
            .iter()
            .filter(|o| {
                matches!(o.result, OpResult::Unknown | OpResult::Failed)
                    && slot_of(o.process) == p.slot
                    && (p.at_us..=until).contains(&o.start_us)
            })
            .count() as u64;
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::tests::op;

    fn claim(process: u32, token: u64, at: i64, expires_ms: i64) -> Op {
        let kind = OpKind::Claim {
            expires_at: expires_ms,
            duration_ms: 1000,
            first_delivery: false,
        };
        op(process, token, at, at + 100, kind, OpResult::Accepted)
    }

    fn write(process: u32, token: u64, at: i64, result: OpResult) -> Op {
        let kind = OpKind::WriteStep {
            step_key: "s0".into(),
            step_attempt: 1,
            written: "v".into(),
            recorded: None,
        };
        op(process, token, at, at + 100, kind, result)
    }

    /// Slot 1 holds token 1 until 1.0 s (renewed to 2.0 s); slot 2 claims token 2 at 2.5 s.
    fn history() -> Vec<Op> {
        let renew = OpKind::Renew {
            expires_at: Some(2_000),
        };
        vec![
            claim(1001, 1, 0, 1_000),
            op(1001, 1, 500_000, 501_000, renew, OpResult::Accepted),
            write(1001, 1, 900_000, OpResult::Accepted),
            write(1001, 1, 2_100_000, OpResult::Accepted),
            claim(2001, 2, 2_500_000, 3_500),
            write(1001, 1, 2_800_000, OpResult::Lost),
            write(2001, 2, 2_900_000, OpResult::Accepted),
        ]
    }

    #[test]
    fn writes_started_after_expiry_or_takeover_are_counted_with_their_lateness() {
        let call = EffectEvent::Call {
            process: 1001,
            execution: "e1".into(),
            effect: "x".into(),
            token: 1,
            offered: "{}".into(),
            at_us: 3_000_000,
        };
        let f = late_side_effects(&history(), &[call]);
        assert_eq!(
            f,
            LateFigures {
                started: 3,
                refused: 1,
                failed_or_unknown: 0,
                accepted_after_expiry: 1,
                accepted_after_takeover: 0,
                provider_calls: 1,
                max_lateness_ms: 1000.0,
                by_kind: [("provider_call".into(), 1), ("write_step".into(), 2)].into(),
            }
        );
        let mut stale = history();
        stale.push(write(1001, 1, 3_200_000, OpResult::Accepted));
        assert_eq!(late_side_effects(&stale, &[]).accepted_after_takeover, 1);
    }

    #[test]
    fn an_unknown_renewal_may_have_extended_the_lease() {
        let mut ops = vec![claim(1001, 1, 0, 1_000)];
        let renew = OpKind::Renew { expires_at: None };
        ops.push(op(1001, 1, 800_000, 900_000, renew, OpResult::Unknown));
        ops.push(write(1001, 1, 1_500_000, OpResult::Accepted));
        assert_eq!(late_side_effects(&ops, &[]).started, 0, "1.9 s bound");
        ops.push(write(1001, 1, 2_000_000, OpResult::Accepted));
        assert_eq!(late_side_effects(&ops, &[]).accepted_after_expiry, 1);
    }

    #[test]
    fn a_partition_of_the_holder_counts_the_takeover_and_the_refusal() {
        let partition = |slot| FaultEvent {
            at_us: 1_200_000,
            until_us: Some(2_600_000),
            kind: FaultKind::Partition,
            slot: Some(slot),
        };
        let mut ops = history();
        ops.push(write(1001, 1, 1_300_000, OpResult::Unknown));
        let f = partition_figures(&ops, &[partition(0)], 1_000_000);
        assert_eq!((f.takeovers, f.refused, f.cut_off), (1, 1, 1));
        let f = partition_figures(&ops, &[partition(1)], 1_000_000);
        assert_eq!(
            (f.takeovers, f.refused, f.cut_off),
            (0, 0, 0),
            "the other slot was cut off"
        );
    }
}
