//! One connection, one OS thread: rusqlite is blocking, so it never runs on the async
//! runtime's threads. Jobs reach the thread through a channel and answer on a oneshot.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;

use lease_core::{LeaseError, Result};
use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::error::{BACKEND, thread_gone};

type Job = Box<dyn FnOnce(&mut Connection) + Send + 'static>;

/// A handle on a connection thread. Clones share the connection; the thread closes the
/// connection and ends when the last handle is dropped (after finishing queued jobs).
#[derive(Clone, Debug)]
pub(crate) struct ConnHandle {
    jobs: mpsc::Sender<Job>,
}

impl ConnHandle {
    /// Starts a thread that opens its connection with `open`, and waits until it did.
    pub(crate) async fn spawn(
        open: impl FnOnce() -> Result<Connection> + Send + 'static,
    ) -> Result<Self> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = oneshot::channel::<Result<()>>();
        std::thread::Builder::new()
            .name("lease-sqlite".to_owned())
            .spawn(move || {
                let mut conn = match open() {
                    Ok(conn) => {
                        let _ = ready_tx.send(Ok(()));
                        conn
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                while let Ok(job) = queue.recv() {
                    // A job that panics has already rolled its transaction back (rusqlite's
                    // Transaction rolls back on drop) and dropped its reply sender, so its
                    // caller sees Unavailable; the connection stays usable for the next job.
                    if catch_unwind(AssertUnwindSafe(|| job(&mut conn))).is_err() {
                        tracing::error!(
                            "a lease-sqlite job panicked; its transaction was rolled back"
                        );
                    }
                }
            })
            .map_err(|e| LeaseError::Backend {
                backend: BACKEND,
                operation: "open",
                source: Box::new(e),
            })?;
        ready_rx.await.map_err(|_| thread_gone("open"))??;
        Ok(ConnHandle { jobs })
    }

    /// Runs `f` on the connection thread and returns its result. If the thread is gone the
    /// job never ran: `Unavailable`.
    pub(crate) async fn call<T: Send + 'static>(
        &self,
        operation: &'static str,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (reply_tx, reply_rx) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let _ = reply_tx.send(f(conn));
        });
        self.jobs.send(job).map_err(|_| thread_gone(operation))?;
        reply_rx.await.map_err(|_| thread_gone(operation))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    }

    #[test]
    fn a_panicking_job_is_unavailable_and_the_connection_survives() {
        runtime().block_on(async {
            let conn = ConnHandle::spawn(|| {
                Connection::open_in_memory().map_err(|e| crate::error::sqlite_error("open", e))
            })
            .await
            .expect("spawn");
            let err = conn
                .call("boom", |_| -> Result<()> { panic!("job panics") })
                .await
                .expect_err("panicked job");
            assert!(
                matches!(
                    err,
                    LeaseError::Unavailable {
                        operation: "boom",
                        ..
                    }
                ),
                "{err:?}"
            );
            let one: i64 = conn
                .call("select", |c| {
                    c.query_row("SELECT 1", [], |r| r.get(0))
                        .map_err(|e| crate::error::sqlite_error("select", e))
                })
                .await
                .expect("still works");
            assert_eq!(one, 1);
        });
    }

    #[test]
    fn a_failed_open_is_reported() {
        runtime().block_on(async {
            let err = ConnHandle::spawn(|| Err(LeaseError::invalid("test", "no")))
                .await
                .expect_err("open fails");
            assert!(matches!(err, LeaseError::InvalidInput { .. }), "{err:?}");
        });
    }
}
