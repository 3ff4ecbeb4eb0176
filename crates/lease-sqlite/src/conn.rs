//! One connection, one OS thread: rusqlite is blocking, so it never runs on the async
//! runtime's threads. Jobs reach the thread through a channel and answer on a oneshot.
//! Mutating jobs found queued together run as one group commit ([`crate::group`]).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;

use lease_core::{LeaseError, Result};
use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::error::{BACKEND, OpResult, thread_gone};
use crate::group::{self, MAX_GROUP, Member, Op};

enum Job {
    /// Anything run on its own (reads).
    Alone(Box<dyn FnOnce(&mut Connection) + Send + 'static>),
    /// A mutating operation, grouped with the mutating operations queued behind it.
    Write(Box<dyn Member>),
}

/// The connection thread's loop: runs jobs in arrival order until every handle is gone.
fn serve(conn: &mut Connection, queue: &mpsc::Receiver<Job>) {
    let mut next = None;
    loop {
        let job = match next.take() {
            Some(job) => job,
            None => match queue.recv() {
                Ok(job) => job,
                Err(_) => return,
            },
        };
        match job {
            Job::Alone(f) => guarded(|| f(conn)),
            Job::Write(first) => {
                let mut members = vec![first];
                while members.len() < MAX_GROUP {
                    match queue.try_recv() {
                        Ok(Job::Write(m)) => members.push(m),
                        Ok(other) => {
                            next = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                guarded(|| group::run(conn, members));
            }
        }
    }
}

/// A job that panics has already rolled its transaction back (rusqlite's Transaction rolls
/// back on drop) and dropped its reply senders, so its callers see Unavailable; the
/// connection stays usable for the next job.
fn guarded(f: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        tracing::error!("a lease-sqlite job panicked; its transaction was rolled back");
    }
}

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
                serve(&mut conn, &queue);
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
        let job = Job::Alone(Box::new(move |conn| {
            let _ = reply_tx.send(f(conn));
        }));
        self.jobs.send(job).map_err(|_| thread_gone(operation))?;
        reply_rx.await.map_err(|_| thread_gone(operation))?
    }

    /// Runs a mutating operation in the next group commit. `f` may run more than once (the
    /// group is retried on contention) and must only touch the database.
    pub(crate) async fn write<T: Send + 'static>(
        &self,
        operation: &'static str,
        f: impl FnMut(&rusqlite::Transaction<'_>) -> OpResult<T> + Send + 'static,
    ) -> Result<T> {
        let (reply_tx, reply_rx) = oneshot::channel();
        let job = Job::Write(Box::new(Op::new(operation, f, reply_tx)));
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
