//! Stops what a run started, also when it is interrupted.
//!
//! Every throwaway server registers a cleanup action here and keeps a [`Guard`]; dropping
//! the guard runs the action. On Ctrl-C, SIGTERM or SIGHUP the handler stops the running
//! cargo child, runs every action still registered, and exits with status 130. A SIGKILL
//! cannot be caught: then a throwaway cluster's temp dir stays behind (its path is printed
//! when it is created).

use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

type Action = Box<dyn FnOnce() + Send>;

/// Registered actions, in registration order.
static ACTIONS: Mutex<Vec<(u64, String, Action)>> = Mutex::new(Vec::new());
/// Held while an action runs, so the interrupt handler waits for one in progress.
static RUNNING: Mutex<()> = Mutex::new(());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// Process id of the cargo child currently running, if any.
static CHILD: Mutex<Option<u32>> = Mutex::new(None);

/// Runs its action when dropped (unless the interrupt handler already did).
#[derive(Debug)]
pub struct Guard {
    id: u64,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        let action = {
            let mut actions = ACTIONS.lock().unwrap_or_else(|e| e.into_inner());
            actions
                .iter()
                .position(|(id, _, _)| *id == self.id)
                .map(|i| actions.remove(i))
        };
        if let Some((_, label, action)) = action {
            eprintln!("xtask: cleanup: {label}");
            action();
        }
    }
}

/// Registers `action` (described by `label`) and returns the guard that runs it.
pub fn register(label: impl Into<String>, action: impl FnOnce() + Send + 'static) -> Guard {
    let id = NEXT_ID.fetch_add(1, Ordering::SeqCst);
    ACTIONS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((id, label.into(), Box::new(action)));
    Guard { id }
}

/// Runs every registered action, newest first.
fn run_all() {
    let _running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
    let actions = std::mem::take(&mut *ACTIONS.lock().unwrap_or_else(|e| e.into_inner()));
    for (_, label, action) in actions.into_iter().rev() {
        eprintln!("xtask: cleanup: {label}");
        action();
    }
}

/// Remembers the running cargo child so the handler can stop it (`None` when it ended).
pub fn set_child(pid: Option<u32>) {
    *CHILD.lock().unwrap_or_else(|e| e.into_inner()) = pid;
}

/// Runs `cmd` to its end as the tracked cargo child (the handler stops it on an interrupt).
pub fn run_child(cmd: &mut Command) -> std::io::Result<std::process::ExitStatus> {
    let mut child = cmd.spawn()?;
    set_child(Some(child.id()));
    let status = child.wait();
    set_child(None);
    status
}

/// Installs the Ctrl-C / SIGTERM / SIGHUP handler. Failing to install it is not fatal.
pub fn install_interrupt_handler() {
    let installed = ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            return;
        }
        eprintln!("\nxtask: interrupted; stopping the running step and cleaning up");
        // A terminal Ctrl-C already reached cargo (same process group); a SIGTERM sent to
        // xtask alone did not.
        let child = *CHILD.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pid) = child {
            let _ = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        run_all();
        std::process::exit(130);
    });
    if let Err(e) = installed {
        eprintln!(
            "xtask: warning: no interrupt handler ({e}); an interrupted run may leave servers behind"
        );
    }
}
