//! The end of a run: the final reads, the history, application-row and effect checks, the
//! timeline and the report.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use lease_core::{ExecutionId, LeaseBackend};
use tokio::time::Instant;

use super::state::Controller;
use crate::appcheck::{self, AppViolation};
use crate::controls::ControlFigures;
use crate::effectcheck::{self, EffectFigures, EffectViolation};
use crate::effects;
use crate::history::{self, CheckOptions, Op, OpKind, OpResult, Violation};
use crate::lostlease::{self, LateFigures};
use crate::netns::{self, NetworkFigures};
use crate::opcount;
use crate::oplog::{self, now_us};
use crate::report::Report;
use crate::skew::Skewer;
use crate::timeline;
use crate::workflow;

/// What the checks of a run found.
struct Checked {
    violations: Vec<Violation>,
    app_violations: Vec<AppViolation>,
    effect_violations: Vec<EffectViolation>,
    effects: EffectFigures,
    late_side_effects: LateFigures,
    network: Option<NetworkFigures>,
    torn_lines: usize,
    app_rows: u64,
}

impl Checked {
    /// Violations of every checker.
    fn total(&self) -> usize {
        self.violations.len() + self.app_violations.len() + self.effect_violations.len()
    }
}

/// The run's times and schedule, for the report.
struct RunFigures<'a> {
    started: Instant,
    elapsed: f64,
    drain_s: f64,
    fingerprint: &'a str,
}

impl Controller {
    /// Final reads, the check, the report.
    pub(super) async fn finish(
        &mut self,
        started: Instant,
        faults_end: i64,
        fingerprint: &str,
    ) -> Result<Report, String> {
        let elapsed = started.elapsed().as_secs_f64();
        let drain_s = self.drain_seconds(started);
        // Occurrences admitted since the last poll are executions of the run too.
        self.poll_logs();
        let settled = self.settled_occurrences().await?;
        self.record_final_state().await;
        let (keyed, torn) = self.read_logs()?;
        let ops: Vec<Op> = keyed.iter().map(|(_, op)| op.clone()).collect();
        let rows = self.app.rows().await?;
        let app_violations = appcheck::check(&rows, &keyed, &workflow::is_app_step);
        let violations = self.check_history(&ops, faults_end, settled);
        let ids: Vec<String> = self.admitted.keys().cloned().collect();
        let (effect_violations, effects, effect_torn) =
            effectcheck::check_run(&self.backend, &ids, &self.logs, &ops).await?;
        let (late_side_effects, network) = self.lost_lease_figures(&ops);
        let checked = Checked {
            violations,
            app_violations,
            effect_violations,
            effects,
            late_side_effects,
            network,
            torn_lines: torn + effect_torn,
            app_rows: rows.len() as u64,
        };
        self.keep_violations(&checked);
        self.draw_timeline(&ops, fingerprint, checked.total());
        let run = RunFigures {
            started,
            elapsed,
            drain_s,
            fingerprint,
        };
        Ok(self.report(&run, &ops, checked))
    }

    /// Seconds from the end of the faults to the last completion, when every admitted
    /// execution completed (NaN otherwise).
    fn drain_seconds(&self, started: Instant) -> f64 {
        if self.done.len() == self.admitted.len() {
            self.last_done_at
                .saturating_duration_since(started + self.a.duration)
                .as_secs_f64()
        } else {
            f64::NAN
        }
    }

    /// Reads every admitted execution's final state into the controller's log.
    async fn record_final_state(&mut self) {
        eprintln!(
            "lease-torture: reading the final state of {} executions",
            self.admitted.len()
        );
        let backend = self.backend.clone();
        let ids: Vec<String> = self.admitted.keys().cloned().collect();
        let reads: Vec<Vec<Op>> = futures::stream::iter(ids)
            .map(|id| final_reads(backend.clone(), id))
            .buffer_unordered(16)
            .collect()
            .await;
        for op in reads.into_iter().flatten() {
            let seq = self.control.next_seq();
            self.control.record(seq, op);
        }
    }

    /// Every runtime's log and the controller's, merged: the keyed operations and the
    /// number of torn lines.
    fn read_logs(&self) -> Result<(Vec<(u64, Op)>, usize), String> {
        let mut keyed = Vec::new();
        let mut torn = 0;
        for path in self.logs.iter().chain([&self.dir.join("controller.jsonl")]) {
            let (o, t) = oplog::read_keyed(path).map_err(|e| format!("{}: {e}", path.display()))?;
            keyed.extend(o);
            torn += t;
        }
        Ok((keyed, torn))
    }

    /// The history checker over `ops`, with liveness by the end of the faults plus
    /// `--liveness` and the workflow's derived steps and outcomes.
    fn check_history(
        &self,
        ops: &[Op],
        faults_end: i64,
        settled_occurrences: BTreeSet<String>,
    ) -> Vec<Violation> {
        let lease_ms = self.a.lease_ms;
        let expected_step = workflow::expected_step;
        let expected_outcome = move |e: &str| workflow::expected_outcome(e, lease_ms);
        let options = CheckOptions {
            must_complete: self.admitted.keys().cloned().collect(),
            complete_by_us: Some(
                faults_end + i64::try_from(self.a.liveness.as_micros()).unwrap_or(i64::MAX),
            ),
            expected_step: Some(&expected_step),
            expected_outcome: Some(&expected_outcome),
            claims_skip_locked: self.kind == crate::backend::Kind::Postgres,
            settled_occurrences,
        };
        history::check(ops, &options)
    }

    /// The occurrences the run's schedule settled (`--schedule`; rule 10), read after the
    /// runtimes stopped.
    async fn settled_occurrences(&self) -> Result<BTreeSet<String>, String> {
        if self.schedule_until_ms.is_none() {
            return Ok(BTreeSet::new());
        }
        crate::schedules::settled_occurrences(&*self.backend).await
    }

    /// Writes every violation to `violations.json` in the work dir, when there are any.
    fn keep_violations(&self, c: &Checked) {
        if c.total() > 0 {
            let path = self.dir.join("violations.json");
            let text = serde_json::to_string_pretty(&(
                &c.violations,
                &c.app_violations,
                &c.effect_violations,
            ))
            .unwrap_or_default();
            let _ = std::fs::write(&path, text);
        }
    }

    /// Executions done (seen completing, or terminal in the final reads) and those terminal
    /// in the final reads.
    fn completions(&self, ops: &[Op]) -> (u64, u64) {
        let final_done = ops
            .iter()
            .filter(|op| {
                op.result == OpResult::Accepted
                    && match &op.kind {
                        OpKind::ReadOutcome { outcome } => outcome.is_some(),
                        _ => false,
                    }
            })
            .map(|op| op.execution.as_str())
            .collect::<BTreeSet<_>>();
        let done_in_final_state = final_done.len() as u64;
        let done = self
            .done
            .iter()
            .map(String::as_str)
            .chain(final_done)
            .collect::<BTreeSet<_>>()
            .len() as u64;
        (done, done_in_final_state)
    }

    /// The report of the run from what the checks found.
    fn report(&self, run: &RunFigures<'_>, ops: &[Op], c: Checked) -> Report {
        let counts = opcount::count_ops(ops);
        let lost = |kinds: &[&str]| -> u64 {
            kinds
                .iter()
                .filter_map(|k| counts.get(k).and_then(|r| r.get("lost")))
                .sum()
        };
        let (done, done_in_final_state) = self.completions(ops);
        let active = self
            .last_done_at
            .saturating_duration_since(run.started)
            .as_secs_f64();
        let (stale_writes_refused, stale_renewals_refused) = (
            lost(&["write_step", "acknowledge"]),
            lost(&["renew", "release"]),
        );
        Report {
            backend: self.kind.name().to_owned(),
            seed: self.a.seed,
            schedule: run.fingerprint.to_owned(),
            processes: self.a.processes,
            concurrency: self.a.concurrency,
            lease_ms: self.a.lease_ms,
            duration_s: self.a.duration.as_secs_f64(),
            elapsed_s: run.elapsed,
            drain_s: run.drain_s,
            admitted: self.admitted.len() as u64,
            done,
            done_in_final_state,
            executions_per_s: done as f64 / active.max(0.001),
            faults: self.faults_done.clone(),
            faults_skipped: self.faults_skipped,
            restarts: self.restarts,
            unexpected_exits: self.unexpected_exits,
            stale_writes_refused,
            stale_renewals_refused,
            ops: counts,
            torn_lines: c.torn_lines,
            app_write: self.a.app_write.name().to_owned(),
            app_rows: c.app_rows,
            violations: c.total(),
            history_violations: c.violations.len(),
            app_violations: c.app_violations.len(),
            effect_violations: c.effect_violations.len(),
            first_violations: c.violations.into_iter().take(20).collect(),
            first_app_violations: c.app_violations.into_iter().take(20).collect(),
            effect_mode: self.a.effects.name().to_owned(),
            effects: c.effects,
            first_effect_violations: c.effect_violations.into_iter().take(20).collect(),
            clock_skew: self.skew.as_ref().map(Skewer::figures),
            late_side_effects: c.late_side_effects,
            network: c.network,
            controls: ControlFigures::of(&self.a.controls, ops),
        }
    }

    /// Side effects started after their lease was lost, and the namespace mode's figures.
    pub(super) fn lost_lease_figures(
        &self,
        ops: &[Op],
    ) -> (lostlease::LateFigures, Option<netns::NetworkFigures>) {
        let paths: Vec<PathBuf> = self.logs.iter().map(|l| effects::log_path(l)).collect();
        let events = effects::read(&paths).map(|(e, _)| e).unwrap_or_default();
        let late = lostlease::late_side_effects(ops, &events);
        let lease_us = i64::try_from(self.a.lease_ms).unwrap_or(i64::MAX / 1000) * 1000;
        let network = self.net.as_ref().map(|n| {
            n.figures(&lostlease::partition_figures(
                ops,
                &self.fault_events,
                lease_us,
            ))
        });
        (late, network)
    }

    /// Writes `timeline.svg` to the work dir (and to `--timeline FILE`), and the injected
    /// faults as `faults.json`.
    pub(super) fn draw_timeline(&self, ops: &[Op], fingerprint: &str, violations: usize) {
        let faults: Vec<String> = self
            .faults_done
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        let summary = [
            format!(
                "lease-torture {} seed {} (schedule {fingerprint}), {} processes x {}, lease {} ms",
                self.kind.name(),
                self.a.seed,
                self.a.processes,
                self.a.concurrency,
                self.a.lease_ms
            ),
            format!(
                "executions admitted {}, faults {}, violations {violations}",
                self.admitted.len(),
                if faults.is_empty() {
                    "none".to_owned()
                } else {
                    faults.join(", ")
                }
            ),
            format!(
                "the {} executions with the most claims; one lane per runtime slot",
                timeline::SAMPLE
            ),
        ];
        let events = serde_json::to_string_pretty(&self.fault_events).unwrap_or_default();
        let _ = std::fs::write(self.dir.join("faults.json"), events);
        let picture = timeline::svg(ops, &self.fault_events, self.a.processes, &summary);
        for path in [Some(self.dir.join("timeline.svg")), self.a.timeline.clone()]
            .into_iter()
            .flatten()
        {
            match std::fs::write(&path, &picture) {
                Ok(()) => eprintln!("lease-torture: timeline in {}", path.display()),
                Err(e) => eprintln!("lease-torture: timeline {}: {e}", path.display()),
            }
        }
    }
}

/// The final state of one execution as read operations: its outcome and every step.
async fn final_reads(backend: Arc<dyn LeaseBackend>, id: String) -> Vec<Op> {
    let Ok(eid) = ExecutionId::new(id.clone()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for attempt in 0..5 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let start_us = now_us();
        let (Ok(record), Ok(steps)) = (backend.get(&eid).await, backend.list_steps(&eid).await)
        else {
            continue;
        };
        let end_us = now_us();
        let op = |kind, token| Op {
            process: 0,
            execution: id.clone(),
            token,
            start_us,
            end_us,
            kind,
            result: OpResult::Accepted,
        };
        match &record {
            // Token 0, as before: the final outcome read names no delivery.
            Some(r) => out.extend(
                super::drive::read_ops(&id, start_us, end_us, r)
                    .into_iter()
                    .map(|o| Op { token: 0, ..o }),
            ),
            None => out.push(op(OpKind::ReadOutcome { outcome: None }, 0)),
        }
        let mut keys: BTreeSet<String> = workflow::step_keys(&id);
        for s in steps {
            keys.remove(s.step_key.as_str());
            // The record's token, as the recorder logs step reads (the application-row
            // check compares it with the row's).
            out.push(op(
                OpKind::ReadStep {
                    step_key: s.step_key.as_str().to_owned(),
                    step_attempt: s.step_attempt,
                    value: Some(s.response.as_str().to_owned()),
                },
                s.token.get(),
            ));
        }
        // Steps the workflow may have written but the store does not hold: the checker
        // reports any that an accepted write or an earlier read had seen.
        for key in keys {
            out.push(op(
                OpKind::ReadStep {
                    step_key: key,
                    step_attempt: lease_runtime::STEP_ATTEMPT,
                    value: None,
                },
                0,
            ));
        }
        break;
    }
    out
}
