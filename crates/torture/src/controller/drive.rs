//! The run loop: the fault window and the drain, with admissions, log polling and progress.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use lease_core::{ExecutionClient, ExecutionId, ExecutionRecord, ExecutionStatus};
use tokio::time::Instant;

use super::state::{Controller, execution_name};
use crate::faults::Fault;
use crate::history::{Op, OpKind, OpResult};
use crate::oplog::now_us;
use crate::recorder::terminal_text;
use crate::schedules;

/// The operations a read of `record` (invoked at `start_us`, returned at `end_us`) logs:
/// its outcome, and [`OpKind::ReadDead`] when its attempts ran out.
pub(super) fn read_ops(id: &str, start_us: i64, end_us: i64, record: &ExecutionRecord) -> Vec<Op> {
    let op = |kind| Op {
        process: 0,
        execution: id.to_owned(),
        token: record.token.get(),
        start_us,
        end_us,
        kind,
        result: OpResult::Accepted,
    };
    let mut ops = vec![op(OpKind::ReadOutcome {
        outcome: record.outcome.as_ref().map(terminal_text),
    })];
    if record.status == ExecutionStatus::Dead {
        ops.push(op(OpKind::ReadDead));
    }
    ops
}

impl Controller {
    /// Runs the fault window and the drain. Returns the start and the end of the faults.
    pub(super) async fn drive(&mut self, schedule: &[Fault]) -> Result<(Instant, i64), String> {
        if self.a.controls.schedule {
            let now = self
                .backend
                .now()
                .await
                .map_err(|e| format!("backend clock: {e}"))?;
            let window = i64::try_from(self.a.duration.as_millis()).unwrap_or(i64::MAX);
            self.schedule_until_ms = Some(now.as_millis().saturating_add(window));
        }
        for slot in 0..self.slots.len() {
            self.spawn(slot)?;
        }
        let started = Instant::now();
        let deadline = started + self.a.duration;
        let mut next_fault = 0;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut last_poll = Instant::now();
        let mut last_progress = Instant::now();
        let mut last_line = Instant::now();
        let tty = std::io::stderr().is_terminal();
        self.admit_more().await;
        while Instant::now() < deadline {
            tick.tick().await;
            while next_fault < schedule.len() && started + schedule[next_fault].at <= Instant::now()
            {
                let f = schedule[next_fault].clone();
                self.inject(&f).await;
                next_fault += 1;
            }
            self.run_later(false).await?;
            self.reap()?;
            self.poll_logs();
            if last_poll.elapsed() >= Duration::from_secs(2) {
                self.poll_outstanding(Duration::from_secs(5), 32).await;
                last_poll = Instant::now();
            }
            self.admit_more().await;
            self.cancel_some().await;
            self.pause_some().await;
            if last_progress.elapsed() >= Duration::from_millis(250) {
                let line = !tty && last_line.elapsed() >= Duration::from_secs(10);
                if tty || line {
                    self.progress(started, "faults", false);
                    last_line = Instant::now();
                }
                last_progress = Instant::now();
            }
        }
        // Faults stop: resume, restart and speed up everything, then drain.
        self.run_later(true).await?;
        self.end_pause().await;
        let faults_end = now_us();
        let drain_deadline = Instant::now() + self.a.liveness;
        while self.done.len() < self.admitted.len() && Instant::now() < drain_deadline {
            tick.tick().await;
            self.reap()?;
            self.poll_logs();
            if last_poll.elapsed() >= Duration::from_secs(1) {
                self.poll_outstanding(Duration::ZERO, 256).await;
                last_poll = Instant::now();
            }
            if last_progress.elapsed() >= Duration::from_millis(250) {
                let line = !tty && last_line.elapsed() >= Duration::from_secs(10);
                if tty || line {
                    self.progress(started, "drain", false);
                    last_line = Instant::now();
                }
                last_progress = Instant::now();
            }
        }
        self.progress(started, "end", true);
        Ok((started, faults_end))
    }

    /// Reads new log lines: counts completions and stale refusals.
    pub(super) fn poll_logs(&mut self) {
        for tail in &mut self.tails {
            for op in tail.poll() {
                match (&op.kind, op.result) {
                    (OpKind::Acknowledge { outcome }, OpResult::Accepted)
                        if outcome != "suspended" && self.done.insert(op.execution.clone()) =>
                    {
                        self.last_done_at = Instant::now();
                    }
                    (OpKind::WriteStep { .. } | OpKind::Acknowledge { .. }, OpResult::Lost) => {
                        self.stale_refused += 1;
                    }
                    // A scheduled occurrence is one of the run's executions once an
                    // admission of it returned (one whose reply was lost may never have
                    // committed, and no scheduler may admit it again after the last tick).
                    (OpKind::Admit { .. }, OpResult::Accepted)
                        if schedules::is_occurrence(&op.execution)
                            && !self.admitted.contains_key(&op.execution) =>
                    {
                        self.admitted.insert(op.execution.clone(), Instant::now());
                    }
                    _ => {}
                }
            }
        }
    }

    /// Reads the executions (admitted at least `older` ago) not yet seen completing, at
    /// most `limit` of them: an acknowledgement whose log line died with its process is
    /// found this way. Terminal ones are logged as final reads.
    pub(super) async fn poll_outstanding(&mut self, older: Duration, limit: usize) {
        let now = Instant::now();
        let ids: Vec<String> = self
            .admitted
            .iter()
            .filter(|(id, at)| !self.done.contains(*id) && now.duration_since(**at) >= older)
            .map(|(id, _)| id.clone())
            .take(limit)
            .collect();
        for id in ids {
            let Some(read) = self.read_outcome(&id).await else {
                continue;
            };
            // A dead execution is settled too: its attempts ran out (history rule 11).
            let settled = read.iter().any(|op| {
                op.kind == OpKind::ReadDead
                    || matches!(op.kind, OpKind::ReadOutcome { outcome: Some(_) })
            });
            if settled {
                for op in read {
                    let seq = self.control.next_seq();
                    self.control.record(seq, op);
                }
                self.done.insert(id);
                self.last_done_at = Instant::now();
            }
        }
    }

    /// A read of `id`: its outcome, and a `ReadDead` when it is dead.
    pub(super) async fn read_outcome(&self, id: &str) -> Option<Vec<Op>> {
        let eid = ExecutionId::new(id).ok()?;
        let start_us = now_us();
        let record = self.backend.get(&eid).await.ok()??;
        Some(read_ops(id, start_us, now_us(), &record))
    }

    /// Admits executions up to the window.
    pub(super) async fn admit_more(&mut self) {
        let in_flight = self.admitted.len() - self.done.len();
        let want = self.a.window.saturating_sub(in_flight);
        for _ in 0..want {
            if self.a.max_executions.is_some_and(|m| self.next_id > m) {
                return;
            }
            let id = execution_name(self.next_id);
            let Ok(eid) = ExecutionId::new(id.clone()) else {
                return;
            };
            // Admission is idempotent by identity: retrying an unknown outcome is safe.
            let Ok(admission) = self.a.controls.admission(eid) else {
                return;
            };
            if self.recorded.admit(&admission).await.is_err() {
                return;
            }
            self.admitted.insert(id, Instant::now());
            self.next_id += 1;
        }
    }

    pub(super) fn progress(&self, started: Instant, phase: &str, force_line: bool) {
        let elapsed = started.elapsed().as_secs_f64();
        let done = self.done.len();
        let rate = done as f64 / elapsed.max(0.001);
        let faults: u64 = self.faults_done.values().sum();
        let total = self.a.duration.as_secs_f64();
        let width = 20usize;
        let filled = ((elapsed / total.max(0.001)).min(1.0) * width as f64) as usize;
        let bar = format!("{}{}", "=".repeat(filled), " ".repeat(width - filled));
        let line = format!(
            "[{bar}] {elapsed:>5.0}s/{total:.0}s {phase} | done {done} / admitted {} | {rate:.1}/s | faults {faults} | stale refused {}",
            self.admitted.len(),
            self.stale_refused
        );
        let mut err = std::io::stderr();
        if err.is_terminal() && !force_line {
            let _ = write!(err, "\r\x1b[2K{line}");
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }
}
