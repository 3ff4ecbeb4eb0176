//! Orchestrating runtime processes: start `lease-worker` processes, collect their JSON
//! event lines, and kill, freeze (SIGSTOP), resume (SIGCONT) or stop them. Used by the
//! process tests and the order-42 demo.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::args::WorkerArgs;

/// One event line of one process.
#[derive(Debug, Clone)]
pub struct Event {
    /// The process's worker name.
    pub worker: String,
    /// The whole JSON object.
    pub json: Value,
}

impl Event {
    /// The event name (`msg`).
    pub fn msg(&self) -> &str {
        self.json["msg"].as_str().unwrap_or("")
    }

    /// A string field.
    pub fn str(&self, key: &str) -> &str {
        self.json[key].as_str().unwrap_or("")
    }

    /// An integer field.
    pub fn int(&self, key: &str) -> Option<i64> {
        self.json[key].as_i64()
    }

    /// The execution id of the delivery the event belongs to.
    pub fn execution(&self) -> &str {
        self.str("execution_id")
    }

    /// The token of the delivery the event belongs to.
    pub fn token(&self) -> Option<u64> {
        self.json["token"].as_u64()
    }

    /// When the process emitted it (this machine's clock, ms since the epoch).
    pub fn ts(&self) -> i64 {
        self.int("ts_ms").unwrap_or(0)
    }
}

#[derive(Default)]
struct Log {
    events: Mutex<Vec<Event>>,
    changed: Condvar,
}

impl Log {
    fn lock(&self) -> MutexGuard<'_, Vec<Event>> {
        self.events.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct Proc {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    reader: Option<std::thread::JoinHandle<()>>,
}

/// A set of runtime processes and the merged log of their events.
pub struct Cluster {
    exe: PathBuf,
    prefix: Vec<String>,
    log: Arc<Log>,
    procs: Vec<Proc>,
}

impl Cluster {
    /// Processes run `exe` with `prefix` before their options (the demo re-executes itself
    /// with `worker`; the tests run the `lease-worker` binary with no prefix).
    pub fn new(exe: impl Into<PathBuf>, prefix: &[&str]) -> Self {
        Cluster {
            exe: exe.into(),
            prefix: prefix.iter().map(|s| (*s).to_owned()).collect(),
            log: Arc::default(),
            procs: Vec::new(),
        }
    }

    /// Starts a process and waits until it reports `ready` (or fails to start).
    pub fn spawn(&mut self, args: &WorkerArgs) -> Result<u32, String> {
        let mut child = Command::new(&self.exe)
            .args(&self.prefix)
            .args(args.to_args())
            .envs(args.to_env())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("spawning {}: {e}", self.exe.display()))?;
        let pid = child.id();
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        let log = self.log.clone();
        let name = args.name.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let json = serde_json::from_str(&line)
                    .unwrap_or_else(|_| serde_json::json!({ "msg": "output", "line": line }));
                log.lock().push(Event {
                    worker: name.clone(),
                    json,
                });
                log.changed.notify_all();
            }
        });
        self.procs.push(Proc {
            name: args.name.clone(),
            stdin: child.stdin.take(),
            child,
            reader: Some(reader),
        });
        let name = args.name.clone();
        self.wait_for(Duration::from_secs(30), |events| {
            events
                .iter()
                .any(|e| e.worker == name && matches!(e.msg(), "ready" | "failed"))
        })
        .map_err(|_| format!("worker {name} did not start"))?;
        if self
            .events()
            .iter()
            .any(|e| e.worker == args.name && e.msg() == "failed")
        {
            return Err(format!("worker {} failed to start", args.name));
        }
        Ok(pid)
    }

    /// Adds the orchestrator's own line to the log (worker `demo`, event `note`).
    pub fn note(&self, text: &str) {
        self.log.lock().push(Event {
            worker: "demo".to_owned(),
            json: serde_json::json!({
                "msg": "note",
                "text": text,
                "ts_ms": crate::events::wall_ms(),
            }),
        });
        self.log.changed.notify_all();
    }

    /// A copy of every event so far, in arrival order.
    pub fn events(&self) -> Vec<Event> {
        self.log.lock().clone()
    }

    /// Waits until `done(events)` holds; `Err` after `timeout`.
    pub fn wait_for(
        &self,
        timeout: Duration,
        mut done: impl FnMut(&[Event]) -> bool,
    ) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let mut events = self.log.lock();
        loop {
            if done(&events) {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("timed out after {timeout:?}"));
            }
            events = self
                .log
                .changed
                .wait_timeout(events, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Waits for the first event that satisfies `pred`; returns it.
    pub fn wait_event(
        &self,
        timeout: Duration,
        pred: impl Fn(&Event) -> bool,
    ) -> Result<Event, String> {
        let mut found = None;
        self.wait_for(timeout, |events| {
            found = events.iter().find(|e| pred(e)).cloned();
            found.is_some()
        })?;
        found.ok_or_else(|| "no event".to_owned())
    }

    fn proc(&mut self, name: &str) -> Result<&mut Proc, String> {
        self.procs
            .iter_mut()
            .find(|p| p.name == name)
            .ok_or_else(|| format!("no process {name}"))
    }

    /// The process id of `name`.
    pub fn pid(&mut self, name: &str) -> Result<u32, String> {
        Ok(self.proc(name)?.child.id())
    }

    /// SIGKILL: the process dies at once, holding whatever leases it held.
    pub fn kill(&mut self, name: &str) -> Result<(), String> {
        let p = self.proc(name)?;
        p.child.kill().map_err(|e| format!("kill {name}: {e}"))?;
        p.child.wait().map_err(|e| format!("wait {name}: {e}"))?;
        Ok(())
    }

    /// SIGSTOP: the process freezes; nothing in it runs, nothing renews.
    pub fn freeze(&mut self, name: &str) -> Result<(), String> {
        let pid = self.pid(name)?;
        signal("-STOP", pid)
    }

    /// SIGCONT: the frozen process resumes where it stopped.
    pub fn resume(&mut self, name: &str) -> Result<(), String> {
        let pid = self.pid(name)?;
        signal("-CONT", pid)
    }

    /// Closes the process's stdin (graceful shutdown) and waits for it to exit.
    pub fn stop(&mut self, name: &str) -> Result<(), String> {
        let p = self.proc(name)?;
        drop(p.stdin.take());
        let status = p.child.wait().map_err(|e| format!("wait {name}: {e}"))?;
        if let Some(reader) = p.reader.take() {
            let _ = reader.join();
        }
        if status.success() {
            Ok(())
        } else {
            Err(format!("worker {name} exited with {status}"))
        }
    }

    /// Stops every process still running; kills those that do not stop.
    pub fn stop_all(&mut self) -> Result<(), String> {
        let names: Vec<String> = self
            .procs
            .iter_mut()
            .filter_map(|p| matches!(p.child.try_wait(), Ok(None)).then(|| p.name.clone()))
            .collect();
        let mut result = Ok(());
        for name in names {
            if let Err(e) = self.stop(&name) {
                result = Err(e);
            }
        }
        result
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for p in &mut self.procs {
            if matches!(p.child.try_wait(), Ok(None)) {
                let _ = p.child.kill();
                let _ = p.child.wait();
            }
        }
    }
}

fn signal(sig: &str, pid: u32) -> Result<(), String> {
    let status = Command::new("kill")
        .arg(sig)
        .arg(pid.to_string())
        .status()
        .map_err(|e| format!("kill {sig} {pid}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill {sig} {pid} exited with {status}"))
    }
}
