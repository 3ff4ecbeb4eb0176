//! The effect checker: after a run, the effect logs of every process
//! ([`crate::effects`]: `begin`, `settle` and provider calls as they happened) and the
//! controller's final reads (each execution's effect and its effect step's record) are
//! checked per effect id. Every broken rule is reported, not just the first:
//!
//! 1. One effect: at most one `begin` reported creating it ([`EffectViolation::CreatedTwice`]);
//!    an effect that was begun, called, settled or has a step record exists at the end
//!    ([`EffectViolation::Missing`]) and is owned by its execution
//!    ([`EffectViolation::WrongOwner`]).
//! 2. A settled result never changes: at most one `settle` reported `Recorded`
//!    ([`EffectViolation::RecordedTwice`]), and every settled value anyone was shown (a
//!    `begin` or `settle` answer, the recorded offer) is the final kept result
//!    ([`EffectViolation::ResultChanged`]).
//! 3. A conflict is reported and never applied: a `settle` whose offer differs from the kept
//!    result answered `Conflict` ([`EffectViolation::ConflictNotReported`]), a `Conflict`
//!    carries a kept result that differs from its offer ([`EffectViolation::SpuriousConflict`]),
//!    and no conflicting offer became the kept result ([`EffectViolation::ConflictApplied`]).
//! 4. The step's recorded result is the effect's kept result
//!    ([`EffectViolation::StepDiffers`]); a recorded step has a settled effect
//!    ([`EffectViolation::StepWithoutEffect`]).
//! 5. The provider is called only through the effect: each call follows a `begin` by the
//!    same process that answered pending, with no later `begin` of that process answering
//!    otherwise ([`EffectViolation::CallWithoutBegin`]).

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::effects::{BeginResult, EffectEvent, SettleResult};

/// A broken effect invariant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EffectViolation {
    /// More than one `begin` reported creating the effect.
    CreatedTwice {
        /// Effect id.
        effect: String,
        /// `begin`s that reported `created`.
        creates: usize,
    },
    /// The effect was used but does not exist at the end.
    Missing {
        /// Effect id.
        effect: String,
    },
    /// The effect is owned by another execution.
    WrongOwner {
        /// Effect id.
        effect: String,
        /// Its execution.
        execution: String,
        /// The owner found.
        owner: String,
    },
    /// More than one `settle` reported `Recorded`.
    RecordedTwice {
        /// Effect id.
        effect: String,
        /// `settle`s that reported `Recorded`.
        recorded: usize,
    },
    /// A settled value someone was shown is not the final kept result.
    ResultChanged {
        /// Effect id.
        effect: String,
        /// Where the value was seen (`begin`, `settle`, `recorded offer`).
        seen_in: &'static str,
        /// The value seen.
        seen: String,
        /// The final kept result (`<pending>` if none).
        kept: String,
    },
    /// A differing offer was answered `Recorded`/`AlreadySettled` instead of `Conflict`.
    ConflictNotReported {
        /// Effect id.
        effect: String,
        /// The offer.
        offered: String,
        /// The kept result.
        kept: String,
    },
    /// A `Conflict` whose kept result equals its offer.
    SpuriousConflict {
        /// Effect id.
        effect: String,
        /// The offer (and kept result).
        offered: String,
    },
    /// A conflicting offer became the final kept result.
    ConflictApplied {
        /// Effect id.
        effect: String,
        /// The offer.
        offered: String,
    },
    /// The effect step's record is not the effect's kept result.
    StepDiffers {
        /// Effect id.
        effect: String,
        /// The step record's value.
        step: String,
        /// The kept result.
        kept: String,
    },
    /// The effect step is recorded but the effect is missing or pending.
    StepWithoutEffect {
        /// Effect id.
        effect: String,
        /// The step record's value.
        step: String,
    },
    /// A provider call not preceded by a pending `begin` of its process.
    CallWithoutBegin {
        /// Effect id.
        effect: String,
        /// Calling process.
        process: u32,
        /// The caller's token.
        token: u64,
    },
}

impl fmt::Display for EffectViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match serde_json::to_string(self) {
            Ok(s) => f.write_str(&s),
            Err(_) => write!(f, "{self:?}"),
        }
    }
}

/// What a run did with effects.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EffectFigures {
    /// Effects that exist at the end.
    pub effects: u64,
    /// Provider calls.
    pub calls: u64,
    /// Effects by their number of provider calls (`calls -> effects`).
    pub calls_per_effect: BTreeMap<u64, u64>,
    /// `begin` calls logged.
    pub begins: u64,
    /// `settle` calls logged.
    pub settles: u64,
    /// `settle`s answered `Conflict` (reported, not applied).
    pub conflicts: u64,
}

/// Everything logged about one effect.
#[derive(Default)]
struct Effect<'a> {
    execution: Option<&'a str>,
    /// `begin`s by process: (returned at, result).
    begins: BTreeMap<u32, Vec<(i64, &'a BeginResult)>>,
    /// Calls: (process, token, at).
    calls: Vec<(u32, u64, i64)>,
    /// `settle`s: (offered, result).
    settles: Vec<(&'a str, &'a SettleResult)>,
    /// The final read: (owner, kept), if it was read.
    read: Option<(Option<&'a str>, Option<&'a str>)>,
}

impl Effect<'_> {
    /// Whether the log shows the effect exists: an answered `begin` or `settle`, or a call
    /// (a `begin` that failed, possibly before applying, does not count).
    fn used(&self) -> bool {
        let begun = self
            .begins
            .values()
            .flatten()
            .any(|(_, r)| !matches!(r, BeginResult::Error { .. }));
        let settled = self
            .settles
            .iter()
            .any(|(_, r)| !matches!(r, SettleResult::Error { .. }));
        begun || settled || !self.calls.is_empty()
    }
}

fn index(events: &[EffectEvent]) -> BTreeMap<&str, Effect<'_>> {
    let mut m: BTreeMap<&str, Effect<'_>> = BTreeMap::new();
    for event in events {
        match event {
            EffectEvent::Begin {
                process,
                execution,
                effect,
                end_us,
                result,
                ..
            } => {
                let e = m.entry(effect.as_str()).or_default();
                e.execution = Some(execution.as_str());
                e.begins
                    .entry(*process)
                    .or_default()
                    .push((*end_us, result));
            }
            EffectEvent::Call {
                process,
                execution,
                effect,
                token,
                at_us,
                ..
            } => {
                let e = m.entry(effect.as_str()).or_default();
                e.execution = Some(execution.as_str());
                e.calls.push((*process, *token, *at_us));
            }
            EffectEvent::Settle {
                execution,
                effect,
                offered,
                result,
                ..
            } => {
                let e = m.entry(effect.as_str()).or_default();
                e.execution = Some(execution.as_str());
                e.settles.push((offered, result));
            }
            EffectEvent::Final {
                execution,
                effect,
                owner,
                kept,
            } => {
                let e = m.entry(effect.as_str()).or_default();
                e.execution = Some(execution.as_str());
                e.read = Some((owner.as_deref(), kept.as_deref()));
            }
        }
    }
    m
}

/// Checks the effect events of a run against the final effect-step records `steps`
/// (effect id -> the step's recorded JSON text).
pub fn check(
    events: &[EffectEvent],
    steps: &BTreeMap<String, String>,
) -> (Vec<EffectViolation>, EffectFigures) {
    let mut index = index(events);
    for effect in steps.keys() {
        index.entry(effect.as_str()).or_default();
    }
    let mut out = Vec::new();
    let mut figures = EffectFigures::default();
    for (id, e) in &index {
        count(e, &mut figures);
        let kept = check_existence(id, e, steps.contains_key(*id), &mut out);
        check_begins(id, e, kept, &mut out);
        check_settles(id, e, kept, &mut out);
        check_calls(id, e, &mut out);
        if let Some(step) = steps.get(*id) {
            match kept {
                None => out.push(EffectViolation::StepWithoutEffect {
                    effect: (*id).to_owned(),
                    step: step.clone(),
                }),
                Some(k) if k != step => out.push(EffectViolation::StepDiffers {
                    effect: (*id).to_owned(),
                    step: step.clone(),
                    kept: k.to_owned(),
                }),
                Some(_) => {}
            }
        }
    }
    (out, figures)
}

fn count(e: &Effect<'_>, f: &mut EffectFigures) {
    if matches!(e.read, Some((Some(_), _))) {
        f.effects += 1;
    }
    let calls = e.calls.len() as u64;
    f.calls += calls;
    if calls > 0 {
        *f.calls_per_effect.entry(calls).or_default() += 1;
    }
    f.begins += e.begins.values().map(|b| b.len() as u64).sum::<u64>();
    f.settles += e.settles.len() as u64;
    f.conflicts += e
        .settles
        .iter()
        .filter(|(_, r)| matches!(r, SettleResult::Conflict { .. }))
        .count() as u64;
}

/// Rule 1 (existence, owner); returns the final kept result.
fn check_existence<'a>(
    id: &str,
    e: &Effect<'a>,
    has_step: bool,
    out: &mut Vec<EffectViolation>,
) -> Option<&'a str> {
    let (owner, kept) = e.read.unwrap_or((None, None));
    match owner {
        None if e.used() || has_step => out.push(EffectViolation::Missing {
            effect: id.to_owned(),
        }),
        Some(owner) if Some(owner) != e.execution => out.push(EffectViolation::WrongOwner {
            effect: id.to_owned(),
            execution: e.execution.unwrap_or_default().to_owned(),
            owner: owner.to_owned(),
        }),
        _ => {}
    }
    kept
}

fn changed(id: &str, seen_in: &'static str, seen: &str, kept: Option<&str>) -> EffectViolation {
    EffectViolation::ResultChanged {
        effect: id.to_owned(),
        seen_in,
        seen: seen.to_owned(),
        kept: kept.unwrap_or("<pending>").to_owned(),
    }
}

/// Rules 1 and 2 for `begin`: one creation; a settled answer shows the kept result.
fn check_begins(id: &str, e: &Effect<'_>, kept: Option<&str>, out: &mut Vec<EffectViolation>) {
    let all = || e.begins.values().flatten().map(|(_, r)| *r);
    let creates = all().filter(|r| **r == BeginResult::Created).count();
    if creates > 1 {
        out.push(EffectViolation::CreatedTwice {
            effect: id.to_owned(),
            creates,
        });
    }
    for r in all() {
        if let BeginResult::Settled { kept: seen } = r
            && Some(seen.as_str()) != kept
        {
            out.push(changed(id, "begin", seen, kept));
        }
    }
}

/// Rules 2 and 3 for `settle`.
fn check_settles(id: &str, e: &Effect<'_>, kept: Option<&str>, out: &mut Vec<EffectViolation>) {
    let recorded = e
        .settles
        .iter()
        .filter(|(_, r)| **r == SettleResult::Recorded)
        .count();
    if recorded > 1 {
        out.push(EffectViolation::RecordedTwice {
            effect: id.to_owned(),
            recorded,
        });
    }
    for (offered, r) in &e.settles {
        match r {
            SettleResult::Recorded if Some(*offered) != kept => {
                out.push(changed(id, "recorded offer", offered, kept));
            }
            SettleResult::AlreadySettled { kept: seen } => {
                if Some(seen.as_str()) != kept {
                    out.push(changed(id, "settle", seen, kept));
                }
                if seen != offered {
                    out.push(EffectViolation::ConflictNotReported {
                        effect: id.to_owned(),
                        offered: (*offered).to_owned(),
                        kept: seen.clone(),
                    });
                }
            }
            SettleResult::Conflict { kept: seen } => {
                if Some(seen.as_str()) != kept {
                    out.push(changed(id, "settle", seen, kept));
                }
                if seen == offered {
                    out.push(EffectViolation::SpuriousConflict {
                        effect: id.to_owned(),
                        offered: (*offered).to_owned(),
                    });
                } else if Some(*offered) == kept {
                    out.push(EffectViolation::ConflictApplied {
                        effect: id.to_owned(),
                        offered: (*offered).to_owned(),
                    });
                }
            }
            SettleResult::Recorded | SettleResult::Error { .. } => {}
        }
    }
}

/// Rule 5: each call follows a pending `begin` of its process, the latest before it.
fn check_calls(id: &str, e: &Effect<'_>, out: &mut Vec<EffectViolation>) {
    for &(process, token, at) in &e.calls {
        let latest = e.begins.get(&process).and_then(|b| {
            b.iter()
                .filter(|(end, _)| *end <= at)
                .max_by_key(|(end, _)| *end)
        });
        let covered = matches!(
            latest,
            Some((_, BeginResult::Created | BeginResult::Pending))
        );
        if !covered {
            out.push(EffectViolation::CallWithoutBegin {
                effect: id.to_owned(),
                process,
                token,
            });
        }
    }
}

/// The effect check of a finished run: reads the effect logs beside `op_logs`, reads each
/// of `executions`' effect from `backend`, takes the effect steps' final records from the
/// controller's final reads in `ops` (process 0), and checks them. Returns the violations,
/// the figures and the torn log lines.
pub async fn check_run(
    backend: &std::sync::Arc<dyn lease_core::LeaseBackend>,
    executions: &[String],
    op_logs: &[std::path::PathBuf],
    ops: &[crate::history::Op],
) -> Result<(Vec<EffectViolation>, EffectFigures, usize), String> {
    use crate::history::OpKind;
    let paths: Vec<_> = op_logs
        .iter()
        .map(|p| crate::effects::log_path(p))
        .collect();
    let (mut events, torn) =
        crate::effects::read(&paths).map_err(|e| format!("effect logs: {e}"))?;
    events.extend(crate::effects::final_reads(backend, executions).await);
    let mut steps = BTreeMap::new();
    for op in ops {
        if let (
            0,
            OpKind::ReadStep {
                step_key,
                value: Some(value),
                ..
            },
        ) = (op.process, &op.kind)
            && crate::effects::is_effect_step(step_key)
            && let Some(id) = effect_id(&op.execution)
        {
            steps.insert(id, value.clone());
        }
    }
    let (violations, figures) = check(&events, &steps);
    Ok((violations, figures, torn))
}

/// The effect id of `execution`'s effect step.
fn effect_id(execution: &str) -> Option<String> {
    let eid = lease_core::ExecutionId::new(execution).ok()?;
    let key = lease_core::StepKey::new(crate::effects::EFFECT_STEP).ok()?;
    Some(
        lease_core::EffectId::for_step(&eid, &key)
            .ok()?
            .as_str()
            .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const E: &str = "6:e00001:s1";

    fn begin(process: u32, end: i64, result: BeginResult) -> EffectEvent {
        EffectEvent::Begin {
            process,
            execution: "e00001".into(),
            effect: E.into(),
            start_us: end - 1,
            end_us: end,
            result,
        }
    }

    fn call(process: u32, token: u64, at: i64, offered: &str) -> EffectEvent {
        EffectEvent::Call {
            process,
            execution: "e00001".into(),
            effect: E.into(),
            token,
            offered: offered.into(),
            at_us: at,
        }
    }

    fn settle(process: u32, at: i64, offered: &str, result: SettleResult) -> EffectEvent {
        EffectEvent::Settle {
            process,
            execution: "e00001".into(),
            effect: E.into(),
            offered: offered.into(),
            start_us: at,
            end_us: at + 1,
            result,
        }
    }

    fn fin(kept: Option<&str>) -> EffectEvent {
        EffectEvent::Final {
            execution: "e00001".into(),
            effect: E.into(),
            owner: Some("e00001".into()),
            kept: kept.map(str::to_owned),
        }
    }

    fn steps(value: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(E.to_owned(), value.to_owned())])
    }

    /// Two holders around a takeover: the stale one began and called, the new one began,
    /// called and settled first; the stale one's settle is a conflict; a late callback too.
    fn takeover() -> Vec<EffectEvent> {
        vec![
            begin(1001, 10, BeginResult::Created),
            call(1001, 3, 11, "a"),
            begin(2001, 20, BeginResult::Pending),
            call(2001, 5, 21, "b"),
            settle(2001, 22, "b", SettleResult::Recorded),
            settle(1001, 30, "a", SettleResult::Conflict { kept: "b".into() }),
            settle(
                2001,
                40,
                "late",
                SettleResult::Conflict { kept: "b".into() },
            ),
            begin(3001, 50, BeginResult::Settled { kept: "b".into() }),
            fin(Some("b")),
        ]
    }

    /// Asserts that some violation in `$v` matches `$pat`.
    macro_rules! assert_any {
        ($v:expr, $pat:pat) => {
            assert!($v.iter().any(|x| matches!(x, $pat)), "{:?}", $v)
        };
    }

    #[test]
    fn a_takeover_with_conflicts_reported_passes() {
        let (v, f) = check(&takeover(), &steps("b"));
        assert_eq!(v, vec![]);
        assert_eq!(f.calls, 2);
        assert_eq!(f.conflicts, 2);
        assert_eq!(f.calls_per_effect, BTreeMap::from([(2, 1)]));
        assert_eq!(f.effects, 1);
    }

    #[test]
    fn detects_an_applied_conflict_and_a_changed_result() {
        let mut events = takeover();
        // The stale settle was applied: it overwrote the result.
        events[5] = settle(1001, 30, "a", SettleResult::Recorded);
        events[8] = fin(Some("a"));
        let (v, _) = check(&events, &steps("b"));
        assert!(v.contains(&EffectViolation::RecordedTwice {
            effect: E.into(),
            recorded: 2
        }));
        assert_any!(v, EffectViolation::ResultChanged { .. });
        assert_any!(v, EffectViolation::StepDiffers { .. });
    }

    #[test]
    fn detects_an_unreported_conflict_a_spurious_one_and_two_creations() {
        let events = vec![
            begin(1001, 10, BeginResult::Created),
            begin(2001, 11, BeginResult::Created),
            call(1001, 3, 12, "a"),
            settle(1001, 13, "a", SettleResult::Recorded),
            settle(
                2001,
                14,
                "b",
                SettleResult::AlreadySettled { kept: "a".into() },
            ),
            settle(2001, 15, "a", SettleResult::Conflict { kept: "a".into() }),
            fin(Some("a")),
        ];
        let (v, _) = check(&events, &steps("a"));
        assert!(v.contains(&EffectViolation::CreatedTwice {
            effect: E.into(),
            creates: 2
        }));
        assert_any!(v, EffectViolation::ConflictNotReported { .. });
        assert_any!(v, EffectViolation::SpuriousConflict { .. });
    }

    /// The negative control (`--effects unfenced`): the provider called inside a plain step,
    /// no effect at all.
    #[test]
    fn detects_the_negative_control() {
        let events = vec![
            call(1001, 3, 11, "a"),
            call(2001, 5, 21, "b"),
            EffectEvent::Final {
                execution: "e00001".into(),
                effect: E.into(),
                owner: None,
                kept: None,
            },
        ];
        let (v, f) = check(&events, &steps("b"));
        assert_eq!(f.effects, 0);
        assert!(v.contains(&EffectViolation::Missing { effect: E.into() }));
        assert_any!(v, EffectViolation::StepWithoutEffect { .. });
        let calls = v
            .iter()
            .filter(|x| matches!(x, EffectViolation::CallWithoutBegin { .. }))
            .count();
        assert_eq!(calls, 2);
    }

    /// A `begin` that failed before applying leaves no effect, and that is no violation.
    #[test]
    fn a_failed_begin_alone_needs_no_effect() {
        let events = vec![
            begin(1001, 10, BeginResult::Error { unknown: true }),
            EffectEvent::Final {
                execution: "e00001".into(),
                effect: E.into(),
                owner: None,
                kept: None,
            },
        ];
        let (v, _) = check(&events, &BTreeMap::new());
        assert_eq!(v, vec![]);
        let (v, _) = check(&events[..1], &steps("b"));
        assert!(v.contains(&EffectViolation::Missing { effect: E.into() }));
    }

    /// A call after its process's `begin` answered settled (the driver must use the result).
    #[test]
    fn detects_a_call_after_a_settled_begin() {
        let mut events = takeover();
        events.push(call(3001, 7, 51, "c"));
        let (v, _) = check(&events, &steps("b"));
        assert_eq!(
            v,
            vec![EffectViolation::CallWithoutBegin {
                effect: E.into(),
                process: 3001,
                token: 7
            }]
        );
    }
}
