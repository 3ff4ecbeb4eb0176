//! WAL checkpoints, kept off the async runtime's workers.
//!
//! SQLite checkpoints a WAL file from inside the COMMIT that grew it past
//! [`WAL_PAGES`] pages (its auto-checkpoint), and with `synchronous = NORMAL` a checkpoint
//! is where the fsyncs happen. An operation that runs on an async worker ([`crate::conn`])
//! must not wait for a disk, so every connection has this module's WAL hook instead of
//! SQLite's (the hook replaces it): on the connection's own thread, or on any thread that
//! may block, it checkpoints exactly as SQLite would (`PASSIVE`, which never waits for
//! other connections); inside [`on_worker`] it only notes that a checkpoint is due, and
//! the caller sends one to the connection's thread.

use std::cell::Cell;
use std::ffi::c_int;

use rusqlite::Connection;
use rusqlite::hooks::Wal;

/// SQLite's default auto-checkpoint threshold (pages in the WAL after a commit).
pub(crate) const WAL_PAGES: c_int = 1000;

thread_local! {
    /// This thread is an async worker running an operation: defer checkpoints.
    static ON_WORKER: Cell<bool> = const { Cell::new(false) };
    /// A commit on this thread (inside [`on_worker`]) made a checkpoint due.
    static DUE: Cell<bool> = const { Cell::new(false) };
}

/// Replaces SQLite's auto-checkpoint on `conn` with [`after_commit`] (same threshold).
pub(crate) fn install(conn: &Connection) {
    conn.wal_hook(Some(after_commit));
}

/// The WAL hook: runs after every commit of this connection in WAL mode. Always `Ok`: an
/// error here would make the COMMIT that already happened report a failure.
fn after_commit(wal: &Wal, pages: c_int) -> rusqlite::Result<()> {
    if pages < WAL_PAGES {
        return Ok(());
    }
    if ON_WORKER.get() {
        DUE.set(true);
        return Ok(());
    }
    if let Err(e) = wal.checkpoint() {
        tracing::debug!(error = %e, "sqlite checkpoint did not complete");
    }
    Ok(())
}

/// Runs `f` with checkpoints deferred; also returns whether one became due meanwhile.
pub(crate) fn on_worker<R>(f: impl FnOnce() -> R) -> (R, bool) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            ON_WORKER.set(false);
        }
    }
    DUE.set(false);
    ON_WORKER.set(true);
    let reset = Reset;
    let value = f();
    drop(reset);
    (value, DUE.replace(false))
}

/// A deferred checkpoint, run on the connection's thread (`PASSIVE`, as SQLite's own).
pub(crate) fn run(conn: &Connection) {
    if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
        tracing::debug!(error = %e, "sqlite checkpoint did not complete");
    }
}
