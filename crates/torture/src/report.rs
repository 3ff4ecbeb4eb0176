//! The end-of-run report: what ran, what was injected, what the checker found.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::appcheck::AppViolation;
use crate::controls::ControlFigures;
use crate::effectcheck::{EffectFigures, EffectViolation};
use crate::history::Violation;
use crate::lostlease::LateFigures;
use crate::netns::NetworkFigures;
use crate::opcount::OpCounts;
use crate::skew::SkewFigures;

/// Everything a run reports.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Backend name.
    pub backend: String,
    /// Seed of the fault schedule.
    pub seed: u64,
    /// Fingerprint of the fault schedule.
    pub schedule: String,
    /// Runtime processes.
    pub processes: usize,
    /// Dispatcher concurrency per process.
    pub concurrency: usize,
    /// Lease duration, ms.
    pub lease_ms: u64,
    /// Fault window, seconds.
    pub duration_s: f64,
    /// Whole run, seconds (including the drain after the faults).
    pub elapsed_s: f64,
    /// Time from the end of the faults until the last execution completed, seconds.
    pub drain_s: f64,
    /// Executions admitted.
    pub admitted: u64,
    /// Executions that reached a terminal outcome.
    pub done: u64,
    /// Executions whose terminal outcome the final reads found.
    pub done_in_final_state: u64,
    /// Completed executions per second of run time.
    pub executions_per_s: f64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Scheduled faults skipped (their runtime was down or the kind does not apply).
    pub faults_skipped: u64,
    /// Runtime processes started after a kill.
    pub restarts: u64,
    /// Runtime processes that exited without being killed.
    pub unexpected_exits: u64,
    /// Operations by kind and result.
    pub ops: OpCounts,
    /// Step writes and acknowledgements refused with `Lost` (stale holders fenced off).
    pub stale_writes_refused: u64,
    /// Renewals and releases refused with `Lost`.
    pub stale_renewals_refused: u64,
    /// Torn log lines (a SIGKILL mid-write).
    pub torn_lines: usize,
    /// How the application rows were written (`fenced`; `unfenced` is the negative control).
    pub app_write: String,
    /// Application rows committed (one per application step).
    pub app_rows: u64,
    /// Violations found, history and application rows (must be 0).
    pub violations: usize,
    /// Violations of the history checker.
    pub history_violations: usize,
    /// Violations of the application-row checker.
    pub app_violations: usize,
    /// The first violations of the history checker.
    pub first_violations: Vec<Violation>,
    /// The first violations of the application-row checker.
    pub first_app_violations: Vec<AppViolation>,
    /// How the effect step called its provider (`helper`; `unfenced` is the negative control).
    pub effect_mode: String,
    /// What the run did with effects.
    pub effects: EffectFigures,
    /// Violations of the effect checker.
    pub effect_violations: usize,
    /// The first violations of the effect checker.
    pub first_effect_violations: Vec<EffectViolation>,
    /// The runtimes' clock skews, drawn and observed (`--clock-skew`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_skew: Option<SkewFigures>,
    /// Side effects started after their lease was lost.
    pub late_side_effects: LateFigures,
    /// The namespace mode's figures (`--netns`); `None` without it.
    pub network: Option<NetworkFigures>,
    /// Cancels, keys, limits and priorities (history rules 6 and 7).
    pub controls: ControlFigures,
}

impl Report {
    /// No violation, and every sampled clock skew took effect as drawn.
    pub fn passed(&self) -> bool {
        self.violations == 0 && self.clock_skew.as_ref().is_none_or(|s| s.mismatched == 0)
    }
}

impl Report {
    /// The run: backend, seed and schedule, sizes, times, completions and faults.
    fn write_run(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "torture report: {}", self.backend)?;
        writeln!(
            f,
            "  seed {} (schedule {}), {} processes x concurrency {}, lease {} ms",
            self.seed, self.schedule, self.processes, self.concurrency, self.lease_ms
        )?;
        writeln!(
            f,
            "  faults for {:.0} s, run {:.1} s, drain after faults {:.1} s",
            self.duration_s, self.elapsed_s, self.drain_s
        )?;
        writeln!(
            f,
            "  executions done {} / admitted {} (terminal in the final state: {}), {:.1} executions/s",
            self.done, self.admitted, self.done_in_final_state, self.executions_per_s
        )?;
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        writeln!(
            f,
            "  faults {} ({}), skipped {}, runtime restarts {}, unexpected exits {}",
            self.faults.values().sum::<u64>(),
            faults.join(", "),
            self.faults_skipped,
            self.restarts,
            self.unexpected_exits
        )?;
        Ok(())
    }

    /// The operations by kind and result, the stale calls refused, torn log lines.
    fn write_operations(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  operations:")?;
        for (kind, results) in &self.ops {
            let r: Vec<String> = results.iter().map(|(k, v)| format!("{k} {v}")).collect();
            writeln!(
                f,
                "    {kind:<13} {:>8}  ({})",
                results.values().sum::<u64>(),
                r.join(", ")
            )?;
        }
        writeln!(
            f,
            "  stale writes refused (step writes + acknowledgements Lost): {}",
            self.stale_writes_refused
        )?;
        writeln!(
            f,
            "  stale renewals/releases refused: {}",
            self.stale_renewals_refused
        )?;
        writeln!(f, "  torn log lines: {}", self.torn_lines)?;
        Ok(())
    }

    /// The clock skews, the application rows and the effects.
    fn write_rows_and_effects(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(skew) = &self.clock_skew {
            write!(f, "{skew}")?;
        }
        writeln!(
            f,
            "  application rows ({}): {}",
            self.app_write, self.app_rows
        )?;
        let per_effect: Vec<String> = self
            .effects
            .calls_per_effect
            .iter()
            .map(|(calls, n)| format!("{n} x {calls}"))
            .collect();
        writeln!(
            f,
            "  effects ({}): {} effects, {} provider calls (effects x calls: {}), {} begins, \
         {} settles, {} conflicts reported",
            self.effect_mode,
            self.effects.effects,
            self.effects.calls,
            per_effect.join(", "),
            self.effects.begins,
            self.effects.settles,
            self.effects.conflicts
        )?;
        Ok(())
    }

    /// Side effects started after their lease was lost, and the network figures.
    fn write_late_effects(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = &self.late_side_effects;
        writeln!(
            f,
            "  side effects started after their lease was lost: {} (writes refused {}, \
         failed/unknown {}, accepted after expiry with no new holder {}, accepted after a \
         takeover {}; provider calls {}), latest {:.1} ms after the loss{}",
            l.started,
            l.refused,
            l.failed_or_unknown,
            l.accepted_after_expiry,
            l.accepted_after_takeover,
            l.provider_calls,
            l.max_lateness_ms,
            if l.by_kind.is_empty() {
                String::new()
            } else {
                let kinds: Vec<String> =
                    l.by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
                format!(" (by kind: {})", kinds.join(", "))
            }
        )?;
        if let Some(n) = &self.network {
            writeln!(
                f,
                "  network (--netns): {} connections through the forwarders, {} dropped; \
             partitions: {} leases taken over, operations of the cut-off slot: {} refused, \
             {} failed or unknown",
                n.connections,
                n.connections_dropped,
                n.partition_takeovers,
                n.partition_refused,
                n.partition_cut_off
            )?;
        }
        Ok(())
    }

    /// The violation counts, then the first violations of each checker.
    fn write_violations(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "  violations: {} (history {}, application rows {}, effects {})",
            self.violations, self.history_violations, self.app_violations, self.effect_violations
        )?;
        for v in &self.first_violations {
            writeln!(f, "    {v}")?;
        }
        for v in &self.first_app_violations {
            writeln!(f, "    {v}")?;
        }
        for v in &self.first_effect_violations {
            writeln!(f, "    {v}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_run(f)?;
        self.write_operations(f)?;
        self.write_rows_and_effects(f)?;
        self.write_late_effects(f)?;
        write!(f, "{}", self.controls)?;
        self.write_violations(f)
    }
}
