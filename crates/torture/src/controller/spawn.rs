//! Starting, signalling, reaping and stopping the runtime processes.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};

use super::state::Controller;
use crate::faults;
use crate::mutant::Broken;
use crate::oplog::Tail;

impl Controller {
    /// Starts the runtime of `slot` (a new incarnation with its own log file).
    pub(super) fn spawn(&mut self, slot: usize) -> Result<(), String> {
        let schedule_args = self.schedule_args();
        let s = &mut self.slots[slot];
        s.incarnation += 1;
        let process = u32::try_from(slot + 1).unwrap_or(0) * 1000 + s.incarnation;
        let log = self
            .dir
            .join(format!("p{}-{}.jsonl", slot + 1, s.incarnation));
        let stderr = std::fs::File::create(self.dir.join(format!(
            "p{}-{}.stderr",
            slot + 1,
            s.incarnation
        )))
        .map_err(|e| format!("runtime stderr file: {e}"))?;
        let (incarnation, dir) = (s.incarnation, self.dir.clone());
        let skew_env = self.skew.as_mut().map(|k| k.env(slot, incarnation, &dir));
        let (mut command, url) = match &self.net {
            Some(net) => (net.command(slot, &self.exe), net.url(slot)),
            None => (Command::new(&self.exe), self.url.as_str()),
        };
        let mut child = command
            .arg("runtime")
            .env(crate::runtime::RUNTIME_URL_ENV, url)
            .args(["--namespace", &self.namespace])
            .args(["--process", &process.to_string()])
            .arg("--log")
            .arg(&log)
            .args(["--concurrency", &self.a.concurrency.to_string()])
            .args(["--lease-ms", &self.a.lease_ms.to_string()])
            .args(["--app-write", self.a.app_write.name()])
            .envs(self.a.failover.runtime_env())
            .args(["--effects", self.a.effects.name()])
            .args([
                "--failing-percent",
                &self.a.controls.failing_percent.to_string(),
            ])
            .envs(skew_env.unwrap_or_default())
            .args(schedule_args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start a runtime: {e}"))?;
        s.stdin = child.stdin.take();
        s.pid = child.id();
        s.child = Some(child);
        s.down = false;
        self.tails.push(Tail::new(log.clone()));
        self.logs.push(log);
        Ok(())
    }

    /// The runtime's scheduler options (`--schedule`, and its negative control).
    fn schedule_args(&self) -> Vec<String> {
        let Some(until) = self.schedule_until_ms else {
            return Vec::new();
        };
        let mut args = vec!["--schedule-until-ms".to_owned(), until.to_string()];
        if self.a.controls.break_control.contains(&Broken::Schedule) {
            args.push("--break-schedule".to_owned());
        }
        args
    }

    pub(super) async fn send(&mut self, slot: usize, line: &str) {
        if let Some(stdin) = self.slots[slot].stdin.as_mut() {
            let _ = stdin.write_all(format!("{line}\n").as_bytes()).await;
            let _ = stdin.flush().await;
        }
    }

    /// Restarts runtimes that exited on their own (a crash is reported, not hidden).
    pub(super) fn reap(&mut self) -> Result<(), String> {
        for slot in 0..self.slots.len() {
            let exited = match self.slots[slot].child.as_mut().map(Child::try_wait) {
                Some(Ok(Some(status))) => Some(status),
                _ => None,
            };
            if let Some(status) = exited {
                self.unexpected_exits += 1;
                let s = &self.slots[slot];
                eprintln!(
                    "\nlease-torture: runtime {} (incarnation {}) exited on its own: {status}; see {}",
                    slot + 1,
                    s.incarnation,
                    self.dir
                        .join(format!("p{}-{}.stderr", slot + 1, s.incarnation))
                        .display()
                );
                self.slots[slot].child = None;
                self.spawn(slot)?;
            }
        }
        Ok(())
    }

    /// Stops every runtime: closes its standard input (graceful shutdown), kills it after
    /// ten seconds.
    pub(super) async fn stop_all(&mut self) {
        for s in &mut self.slots {
            if let Some(pid) = s.pid {
                let _ = faults::signal("CONT", pid).await;
            }
            s.stdin = None;
        }
        for s in &mut self.slots {
            if let Some(mut child) = s.child.take()
                && tokio::time::timeout(Duration::from_secs(10), child.wait())
                    .await
                    .is_err()
            {
                let _ = child.start_kill();
                let _ = child.wait().await;
            }
            s.pid = None;
        }
    }
}
