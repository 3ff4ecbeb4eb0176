//! Fault injection: one scheduled fault at a time, and what a fault schedules for later
//! (resume, respawn, fast renewals, heal).

use tokio::time::Instant;

use super::state::{Controller, Later};
use crate::failover;
use crate::faults::{self, Fault, FaultKind};
use crate::nemesis;
use crate::netns::Impairment;
use crate::oplog::now_us;
use crate::timeline::FaultEvent;

impl Controller {
    pub(super) fn count_fault(&mut self, kind: FaultKind) {
        *self.faults_done.entry(kind.name().to_owned()).or_default() += 1;
    }

    /// Injects one scheduled fault and, when it took effect, notes it for the timeline.
    pub(super) async fn inject(&mut self, f: &Fault) {
        let before: u64 = self.faults_done.values().sum();
        let at_us = now_us();
        self.inject_one(f).await;
        if self.faults_done.values().sum::<u64>() > before {
            self.fault_events.push(FaultEvent {
                at_us,
                until_us: None,
                kind: f.kind,
                slot: (f.kind != FaultKind::Restart).then_some(f.target),
            });
        }
    }

    /// Injects one scheduled fault: on a live runtime only, for the faults aimed at one.
    pub(super) async fn inject_one(&mut self, f: &Fault) {
        let now = Instant::now();
        let slot = f.target;
        let live = !self.slots[slot].down && self.slots[slot].pid.is_some();
        match f.kind {
            FaultKind::Pause | FaultKind::Kill | FaultKind::Drop | FaultKind::SlowRenew
                if !live =>
            {
                self.faults_skipped += 1;
            }
            FaultKind::Pause => self.pause(f, now).await,
            FaultKind::Kill => self.kill(f, now).await,
            FaultKind::Drop if self.net.is_some() => {
                match self.net.as_ref().map(|n| n.drop_connections(slot)) {
                    Some(0) | None => self.faults_skipped += 1,
                    Some(_) => self.count_fault(f.kind),
                }
            }
            FaultKind::Partition | FaultKind::Loss | FaultKind::Latency => {
                self.impair(f).await;
            }
            FaultKind::Drop => self.drop_connections(f).await,
            FaultKind::SlowRenew => {
                self.send(slot, &format!("slow {}", f.delay.as_millis()))
                    .await;
                self.count_fault(f.kind);
                let incarnation = self.slots[slot].incarnation;
                self.later
                    .push((now + f.hold, Later::Fast { slot, incarnation }));
            }
            FaultKind::Failover => self.fail_over(f).await,
            FaultKind::Restart => self.restart_server(f).await,
        }
    }

    /// SIGSTOP of the target runtime; its SIGCONT comes the hold after `now` from a timer
    /// task of its own, not from the controller's loop: the controller can block behind a
    /// call the paused runtime holds up (a lock it holds, its server's queue), and a resume
    /// that waited for the controller would then come only when that call gave up (a
    /// PostgreSQL run once stalled for 18 minutes that way). A runtime killed while paused
    /// is gone and its pid's SIGCONT is harmless.
    async fn pause(&mut self, f: &Fault, now: Instant) {
        let slot = f.target;
        let pid = self.slots[slot].pid.unwrap_or(0);
        match faults::signal("STOP", pid).await {
            Ok(()) => {
                self.count_fault(f.kind);
                let until = now + f.hold;
                tokio::spawn(async move {
                    tokio::time::sleep_until(until).await;
                    let _ = faults::signal("CONT", pid).await;
                });
            }
            Err(e) => {
                eprintln!("\nlease-torture: pause: {e}");
                self.faults_skipped += 1;
            }
        }
    }

    /// SIGKILL of the target runtime; its restart is scheduled the hold after `now`.
    async fn kill(&mut self, f: &Fault, now: Instant) {
        let slot = f.target;
        let s = &mut self.slots[slot];
        s.down = true;
        s.stdin = None;
        if let Some(mut child) = s.child.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
        s.pid = None;
        self.count_fault(f.kind);
        self.later.push((now + f.hold, Later::Respawn { slot }));
    }

    /// Drops the target runtime's server connections (without `--netns`).
    async fn drop_connections(&mut self, f: &Fault) {
        let pid = self.slots[f.target].pid.unwrap_or(0);
        let port = self.server_port;
        if let Some(d) = self.dropper.as_mut() {
            match d.drop_connections(pid, port).await {
                Ok(0) => self.faults_skipped += 1,
                Ok(_) => self.count_fault(f.kind),
                Err(e) => {
                    eprintln!("\nlease-torture: drop: {e}");
                    self.faults_skipped += 1;
                }
            }
        }
    }

    /// Fails the server's primary over to its replica (`--failover-cmd`).
    async fn fail_over(&mut self, f: &Fault) {
        let o = self.a.failover.clone();
        let (dir, url, ns) = (self.dir.clone(), self.url.clone(), self.namespace.clone());
        match failover::inject(&o, f, &dir, &url, self.kind, &ns).await {
            Ok(_) => self.count_fault(f.kind),
            Err(e) => {
                eprintln!("\nlease-torture: failover: {e}");
                self.faults_skipped += 1;
            }
        }
    }

    /// Restarts the server (`--restart-cmd`).
    async fn restart_server(&mut self, f: &Fault) {
        let Some(cmd) = self.a.restart_cmd.clone() else {
            self.faults_skipped += 1;
            return;
        };
        match nemesis::restart(&cmd, &self.dir.join("restart.log")).await {
            Ok(_) => self.count_fault(f.kind),
            Err(e) => {
                eprintln!("\nlease-torture: restart: {e}");
                self.faults_skipped += 1;
            }
        }
    }

    /// Starts a network fault on its slot's link and schedules its heal (`--netns`).
    pub(super) async fn impair(&mut self, f: &Fault) {
        let what = match f.kind {
            FaultKind::Partition => Impairment::Partition,
            FaultKind::Loss => Impairment::Loss(f.loss_pct),
            _ => Impairment::Latency(f.delay),
        };
        // The fault's id is the index its timeline event gets (`inject` pushes it next).
        let event = self.fault_events.len();
        let Some(net) = self.net.as_mut() else {
            self.faults_skipped += 1;
            return;
        };
        match net.impair(f.target, event as u64, what).await {
            Ok(()) => {
                self.count_fault(f.kind);
                let slot = f.target;
                self.later
                    .push((Instant::now() + f.hold, Later::Heal { slot, event }));
            }
            Err(e) => {
                eprintln!("\nlease-torture: {}: {e}", f.kind);
                self.faults_skipped += 1;
            }
        }
    }

    /// Ends the network fault of timeline event `event` on `slot`; notes the heal time.
    pub(super) async fn heal(&mut self, slot: usize, event: usize) {
        let Some(net) = self.net.as_mut() else {
            return;
        };
        if let Err(e) = net.heal(slot, event as u64).await {
            eprintln!("\nlease-torture: heal: {e}");
        }
        if let Some(ev) = self.fault_events.get_mut(event) {
            ev.until_us = Some(now_us());
        }
    }

    /// Runs what is due in `later` (all of it when `all`, which also resumes every paused
    /// runtime at once rather than at its timer).
    pub(super) async fn run_later(&mut self, all: bool) -> Result<(), String> {
        if all {
            for pid in self.slots.iter().filter_map(|s| s.pid) {
                let _ = faults::signal("CONT", pid).await;
            }
        }
        let now = Instant::now();
        let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.later)
            .into_iter()
            .partition(|(at, _)| all || *at <= now);
        self.later = keep;
        for (_, what) in due {
            match what {
                Later::Respawn { slot } => {
                    if self.slots[slot].down {
                        self.spawn(slot)?;
                        self.restarts += 1;
                    }
                }
                Later::Fast { slot, incarnation } => {
                    if self.slots[slot].incarnation == incarnation {
                        self.send(slot, "fast").await;
                    }
                }
                Later::Heal { slot, event } => self.heal(slot, event).await,
            }
        }
        Ok(())
    }
}
