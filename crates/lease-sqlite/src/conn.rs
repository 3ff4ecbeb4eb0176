//! One connection per handle family, owned by a [`Mutex`] that a dedicated OS thread and
//! inline callers share. rusqlite blocks, so nothing that can wait (for another
//! connection's lock, for a disk) runs where it would stall other tasks.
//!
//! * **On the worker when quiet.** On a multi-thread tokio runtime, a light library write
//!   ([`Weight::Light`]: a few statements on a few executions) whose connection is idle
//!   (nothing queued for or running on the thread, the lock free, the last turn not
//!   contended) runs on the calling async worker itself: no channel hop, no thread wake-up,
//!   no `block_in_place` hand-over of the worker (each a futex round, most of an operation's
//!   cost at low concurrency). It must not wait, so it is one attempt with the busy handler
//!   off: on `SQLITE_BUSY` (another connection's write lock) the untouched operation goes to
//!   the thread, which waits for the lock as for any queued job; a WAL checkpoint its commit
//!   makes due is sent to the thread too ([`crate::checkpoint`]). Not with
//!   `synchronous = FULL` on a file (the default), whose every COMMIT syncs the WAL: there
//!   light writes run inline in `block_in_place` as below.
//! * **Inline in `block_in_place` when idle.** Other jobs (reads, which may wait out a WAL
//!   recovery; large batches; the application's fenced SQL) on an idle connection run on
//!   the calling thread inside `tokio::task::block_in_place`, which hands the worker's other
//!   tasks to another thread. That saves the channel hop and thread wake-up (about 24 us).
//! * **Queued otherwise.** When the connection is busy or jobs are queued, on a
//!   current_thread runtime (where `block_in_place` is not allowed) and outside tokio, a job
//!   goes over a channel to the connection's thread and its caller awaits a oneshot reply.
//!   Mutating jobs found queued together run as one group commit ([`crate::group`]).
//! * **Contention sticks to the queue.** While the thread's turns keep finding more than
//!   one job waiting, or a job on a worker finds others queued when it ends, jobs queue even
//!   when the connection is momentarily idle: an inline job between two groups is one more
//!   commit, and at a dispatcher concurrency of 64 going inline whenever idle cost about 15%
//!   of its throughput. The first turn that finds a job alone switches back to inline.
//! * **Order.** A job runs inline only when every job submitted before it has finished, so
//!   jobs run in submission order on either path (a job handed to the thread is queued
//!   before the connection is released).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError, mpsc};
use std::time::Duration;

use lease_core::{LeaseError, Result};
use rusqlite::Connection;
use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::oneshot;

use crate::checkpoint;
use crate::error::{BACKEND, OpResult, thread_gone};
use crate::group::{self, MAX_GROUP, Member, Op, Pending, Woken};
use crate::wakeup::Wakes;

/// Most executions a [`Weight::Light`] operation touches (the claim limit, the batch size).
pub(crate) const LIGHT_ITEMS: usize = 8;

/// How much a mutating operation may do: what decides whether it may run on an async
/// worker itself (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Weight {
    /// A library operation on at most [`LIGHT_ITEMS`] executions: a few statements.
    Light,
    /// A larger batch, or the application's own SQL (a fenced transaction): on an async
    /// worker only inside `block_in_place`.
    Heavy,
}

impl Weight {
    /// The weight of an operation touching up to `items` executions.
    pub(crate) fn of(items: usize) -> Self {
        if items <= LIGHT_ITEMS {
            Weight::Light
        } else {
            Weight::Heavy
        }
    }
}

enum Job {
    /// Anything run on its own (reads, deferred checkpoints).
    Alone(Box<dyn FnOnce(&mut Connection) + Send + 'static>),
    /// A mutating operation (with its busy-wait deadline, counted from its submission),
    /// grouped with the mutating operations queued behind it.
    Write(Pending, Weight),
}

impl Job {
    /// Runs the job by itself (the inline path: a write is a group of one).
    fn run(self, conn: &mut Connection, shared: &Shared) {
        match self {
            Job::Alone(f) => guarded(|| f(conn)),
            Job::Write(pending, _) => shared.run_group(conn, vec![pending]),
        }
    }
}

/// What the handles and the connection thread share.
#[derive(Debug)]
struct Shared {
    /// The connection: the thread holds it for a job or group, an inline caller for a job.
    conn: Mutex<Connection>,
    /// Jobs sent to the thread that it has not taken yet. The thread takes jobs while it
    /// holds `conn`, so with `conn` locked and `queued == 0` every job sent earlier has
    /// finished.
    queued: AtomicUsize,
    /// The thread's last turn found more than one job waiting: callers are concurrent, so
    /// new jobs queue too and keep sharing commits. A turn that finds one job clears it.
    contended: AtomicBool,
    /// The connection's configured `busy_timeout`: one write's whole busy-wait budget.
    busy_timeout: Duration,
    /// Light writes may run on an async worker: their COMMIT does not wait for the disk (in
    /// memory, or `synchronous = NORMAL`; with `FULL` every COMMIT syncs the WAL, so they
    /// run in `block_in_place` like other jobs).
    worker_writes: bool,
    /// Whole-group retries on contention so far (test support: the busy-wait bound is
    /// checked by counting them, since a timed check fails on a slow machine).
    busy_retries: AtomicU64,
    /// How jobs ran, for tests.
    #[cfg(test)]
    counts: Counts,
}

impl Shared {
    /// The thread took `n` jobs (holding `conn`): they no longer count as queued, and the
    /// turn was contended when more than one job was waiting.
    fn take(&self, n: usize) {
        let waiting = self.queued.fetch_sub(n, Ordering::SeqCst);
        self.contended.store(waiting > 1, Ordering::SeqCst);
    }

    /// Runs a group commit of `pending` on `conn` and counts its retries.
    fn run_group(&self, conn: &mut Connection, pending: Vec<Pending>) {
        guarded(|| {
            let retries = group::run(conn, self.busy_timeout, pending);
            self.busy_retries
                .fetch_add(u64::from(retries), Ordering::Relaxed);
        });
    }
}

/// Test counters: jobs run inline (either way), of those on the async worker itself, jobs
/// sent to the thread, groups the thread ran, checkpoints deferred to and run by the thread.
#[cfg(test)]
#[derive(Debug, Default)]
struct Counts {
    inline: AtomicUsize,
    on_worker: AtomicUsize,
    queued: AtomicUsize,
    groups: AtomicUsize,
    deferred_checkpoints: AtomicUsize,
    checkpoints: AtomicUsize,
}

/// Locks the connection. A job that panicked released the lock without poisoning it (the
/// panic is caught inside); should it ever be poisoned, the connection is still sound:
/// an interrupted transaction rolled back when it was dropped.
fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The connection thread's loop: runs queued jobs in arrival order until every handle is
/// gone.
fn serve(shared: &Shared, queue: &mpsc::Receiver<Job>) {
    let mut next = None;
    loop {
        let job = match next.take() {
            Some(job) => job,
            None => match queue.recv() {
                Ok(job) => job,
                Err(_) => return,
            },
        };
        // Waits while an inline job runs; jobs queued meanwhile join this group. The jobs
        // taken stop counting as queued under the lock, so once the lock is free again
        // `queued` counts exactly the jobs not run yet (in the channel or in `next`).
        let mut conn = lock(&shared.conn);
        match job {
            Job::Alone(f) => {
                shared.take(1);
                guarded(|| f(&mut conn));
            }
            Job::Write(first, _) => {
                let mut members = vec![first];
                while members.len() < MAX_GROUP {
                    match queue.try_recv() {
                        Ok(Job::Write(m, _)) => members.push(m),
                        Ok(other) => {
                            next = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                shared.take(members.len());
                #[cfg(test)]
                shared.counts.groups.fetch_add(1, Ordering::SeqCst);
                shared.run_group(&mut conn, members);
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

thread_local! {
    /// `block_in_place` refused this thread once: a current_thread runtime or `LocalSet`
    /// under an entered multi-thread handle, which reports the multi-thread flavour. Its
    /// jobs queue from then on.
    static REFUSED_BLOCK_IN_PLACE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// True where the calling thread may try `block_in_place`: the entered runtime is
/// multi-thread and this thread was never refused. Tokio has no way to ask whether
/// `block_in_place` is allowed, so [`run_in_place`] catches its refusal; without unwinding
/// (`panic = "abort"`) nothing could catch it, and every job queues.
fn may_block_in_place() -> bool {
    cfg!(panic = "unwind")
        && !REFUSED_BLOCK_IN_PLACE.get()
        && Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
}

/// Runs `job` inside `block_in_place`, or hands it back untouched when `block_in_place`
/// refused this thread (it panics before running anything; the panic hook reports that
/// once per thread, the caller never sees it).
fn run_in_place(job: Job, conn: &mut Connection, shared: &Shared) -> Option<Job> {
    let mut slot = Some(job);
    let ran = catch_unwind(AssertUnwindSafe(|| {
        tokio::task::block_in_place(|| {
            if let Some(job) = slot.take() {
                job.run(conn, shared);
            }
        });
    }));
    match (ran, slot) {
        (Err(_), Some(job)) => {
            REFUSED_BLOCK_IN_PLACE.set(true);
            tracing::debug!("block_in_place is not allowed on this thread; queueing its jobs");
            Some(job)
        }
        // Ran (a job catches its own panics, so it cannot unwind out of `run`).
        _ => None,
    }
}

/// One attempt of `member` alone with the busy handler off, so it never waits for another
/// connection's lock; the connection's `busy_timeout` is restored after it. `Some` hands
/// the member back, reset, when the lock was taken ([`group::try_once`]).
fn without_waiting(
    conn: &mut Connection,
    busy_timeout: Duration,
    pending: Pending,
) -> Option<Pending> {
    if let Err(e) = conn.busy_timeout(Duration::ZERO) {
        tracing::warn!(error = %e, "cannot turn the busy handler off; queueing the operation");
        return Some(pending);
    }
    let mut handed = None;
    guarded(|| handed = group::try_once(conn, pending));
    if let Err(e) = conn.busy_timeout(busy_timeout) {
        tracing::warn!(error = %e, "cannot restore the connection's busy_timeout");
    }
    handed
}

/// A handle on a connection and its thread. Clones share the connection; the thread closes
/// the connection and ends when the last handle is dropped (after finishing queued jobs).
#[derive(Clone, Debug)]
pub(crate) struct ConnHandle {
    // Declared (so dropped) before `jobs`: the thread, which ends only once every sender
    // is gone, holds the last reference and closes the connection off the runtime.
    shared: Arc<Shared>,
    jobs: mpsc::Sender<Job>,
}

impl ConnHandle {
    /// Starts a thread that opens its connection with `open`, and waits until it did.
    pub(crate) async fn spawn(
        open: impl FnOnce() -> Result<Connection> + Send + 'static,
        busy_timeout: Duration,
        worker_writes: bool,
    ) -> Result<Self> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = oneshot::channel::<Result<Arc<Shared>>>();
        std::thread::Builder::new()
            .name("lease-sqlite".to_owned())
            .spawn(move || {
                let shared = match open() {
                    Ok(conn) => Arc::new(Shared {
                        conn: Mutex::new(conn),
                        queued: AtomicUsize::new(0),
                        contended: AtomicBool::new(false),
                        busy_timeout,
                        worker_writes,
                        busy_retries: AtomicU64::new(0),
                        #[cfg(test)]
                        counts: Counts::default(),
                    }),
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                if ready_tx.send(Ok(shared.clone())).is_ok() {
                    serve(&shared, &queue);
                }
            })
            .map_err(|e| LeaseError::Backend {
                backend: BACKEND,
                operation: "open",
                source: Box::new(e),
            })?;
        let shared = ready_rx.await.map_err(|_| thread_gone("open"))??;
        Ok(ConnHandle { shared, jobs })
    }

    /// The connection if it is idle: nothing queued for or running on the thread, the
    /// thread's last turn not contended, and the lock free.
    fn idle(&self) -> Option<MutexGuard<'_, Connection>> {
        if self.shared.queued.load(Ordering::SeqCst) != 0
            || self.shared.contended.load(Ordering::SeqCst)
        {
            return None;
        }
        let conn = match self.shared.conn.try_lock() {
            Ok(conn) => conn,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        // Again under the lock: a job queued in between runs first.
        (self.shared.queued.load(Ordering::SeqCst) == 0).then_some(conn)
    }

    /// Test support: holds the connection, so jobs submitted meanwhile queue and the
    /// thread runs them as one group once it is released.
    pub(crate) fn hold(&self) -> MutexGuard<'_, Connection> {
        lock(&self.shared.conn)
    }

    /// Test support: jobs sent to the thread and not yet taken.
    pub(crate) fn queued(&self) -> usize {
        self.shared.queued.load(Ordering::SeqCst)
    }

    /// Test support: whole-group retries on contention this connection made so far.
    pub(crate) fn busy_retries(&self) -> u64 {
        self.shared.busy_retries.load(Ordering::Relaxed)
    }

    /// Runs `job` inline if the connection is idle and this thread may block, else sends it
    /// to the connection thread. Either way the job answers on its own reply channel.
    fn submit(&self, operation: &'static str, job: Job) -> Result<()> {
        if !may_block_in_place() {
            return self.enqueue(operation, job);
        }
        let Some(mut conn) = self.idle() else {
            return self.enqueue(operation, job);
        };
        let job = match job {
            Job::Write(pending, Weight::Light) if self.shared.worker_writes => {
                return self.on_worker(operation, conn, pending);
            }
            job => job,
        };
        match run_in_place(job, &mut conn, &self.shared) {
            None => {
                #[cfg(test)]
                self.shared.counts.inline.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
            Some(refused) => {
                drop(conn);
                self.enqueue(operation, refused)
            }
        }
    }

    /// Runs a light write on the calling async worker itself, holding the idle connection
    /// `conn`: one attempt with no busy wait and checkpoints deferred ([`without_waiting`]).
    /// On contention the untouched operation goes to the thread, which waits for the lock
    /// as for any queued job; it is queued before `conn` is released, so no later job
    /// overtakes it. Jobs that queued meanwhile mark the connection contended: the next
    /// ones join them until a thread turn finds a job alone.
    fn on_worker(
        &self,
        operation: &'static str,
        mut conn: MutexGuard<'_, Connection>,
        pending: Pending,
    ) -> Result<()> {
        let busy_timeout = self.shared.busy_timeout;
        let (handed, checkpoint_due) =
            checkpoint::on_worker(|| without_waiting(&mut conn, busy_timeout, pending));
        if let Some(pending) = handed {
            return self.enqueue(operation, Job::Write(pending, Weight::Light));
        }
        #[cfg(test)]
        {
            self.shared.counts.inline.fetch_add(1, Ordering::SeqCst);
            self.shared.counts.on_worker.fetch_add(1, Ordering::SeqCst);
        }
        if self.shared.queued.load(Ordering::SeqCst) != 0 {
            self.shared.contended.store(true, Ordering::SeqCst);
        }
        drop(conn);
        if checkpoint_due {
            self.defer_checkpoint();
        }
        Ok(())
    }

    /// Sends the checkpoint an operation on an async worker made due to the thread.
    fn defer_checkpoint(&self) {
        #[cfg(test)]
        let shared = {
            self.shared
                .counts
                .deferred_checkpoints
                .fetch_add(1, Ordering::SeqCst);
            self.shared.clone()
        };
        let job = Job::Alone(Box::new(move |conn| {
            checkpoint::run(conn);
            #[cfg(test)]
            shared.counts.checkpoints.fetch_add(1, Ordering::SeqCst);
        }));
        // The thread is gone only when the last handle is: its closing connection
        // checkpoints then.
        let _ = self.enqueue("checkpoint", job);
    }

    /// Sends `job` to the connection thread.
    fn enqueue(&self, operation: &'static str, job: Job) -> Result<()> {
        #[cfg(test)]
        self.shared.counts.queued.fetch_add(1, Ordering::SeqCst);
        self.shared.queued.fetch_add(1, Ordering::SeqCst);
        if self.jobs.send(job).is_err() {
            self.shared.queued.fetch_sub(1, Ordering::SeqCst);
            return Err(thread_gone(operation));
        }
        Ok(())
    }

    /// Runs `f` on the connection and returns its result. If the thread is gone the job
    /// never ran: `Unavailable`; so is a job that panicked.
    pub(crate) async fn call<T: Send + 'static>(
        &self,
        operation: &'static str,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (reply_tx, reply_rx) = oneshot::channel();
        let job = Job::Alone(Box::new(move |conn| {
            let _ = reply_tx.send(f(conn));
        }));
        self.submit(operation, job)?;
        reply_rx.await.map_err(|_| thread_gone(operation))?
    }

    /// Runs a mutating operation alone (inline) or in the next group commit. `f` may run
    /// more than once (the group is retried on contention) and must only touch the database.
    #[cfg(test)]
    pub(crate) async fn write<T: Send + 'static>(
        &self,
        operation: &'static str,
        mut f: impl FnMut(&rusqlite::Transaction<'_>) -> OpResult<T> + Send + 'static,
    ) -> Result<T> {
        self.write_waking(operation, None, Weight::Light, move |tx| {
            f(tx).map(Woken::quiet)
        })
        .await
    }

    /// [`ConnHandle::write`] for an operation that may make something claimable: the
    /// instant it reports is logged in its transaction and signalled on `wakes` right after
    /// the commit ([`crate::group`]).
    pub(crate) async fn write_waking<T: Send + 'static>(
        &self,
        operation: &'static str,
        wakes: Option<Arc<Wakes>>,
        weight: Weight,
        f: impl FnMut(&rusqlite::Transaction<'_>) -> OpResult<Woken<T>> + Send + 'static,
    ) -> Result<T> {
        let (reply_tx, reply_rx) = oneshot::channel();
        let member = Box::new(Op::new(operation, wakes, f, reply_tx));
        let job = Job::Write(Pending::now(member, self.shared.busy_timeout), weight);
        self.submit(operation, job)?;
        reply_rx.await.map_err(|_| thread_gone(operation))?
    }

    /// Runs a ready-made group member (a fenced application transaction) alone (inline, in
    /// `block_in_place`: it runs the application's SQL) or in the next group commit, and
    /// awaits the answer it sends on `reply`.
    pub(crate) async fn write_member<R>(
        &self,
        operation: &'static str,
        member: Box<dyn Member>,
        reply: oneshot::Receiver<R>,
    ) -> Result<R> {
        let pending = Pending::now(member, self.shared.busy_timeout);
        self.submit(operation, Job::Write(pending, Weight::Heavy))?;
        reply.await.map_err(|_| thread_gone(operation))
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::{Pin, pin};
    use std::task::{Context, Waker};

    use super::*;

    /// The test tables' statements (`t`: one integer column; `blobs`: 6 MB rows).
    const SELECT_ONE: &str = include_str!("conn/test_select_one.sql");
    const CREATE_T: &str = include_str!("conn/test_create_t.sql");
    const INSERT_T: &str = include_str!("conn/test_insert_t.sql");
    const INSERT_TWO: &str = include_str!("conn/test_insert_two.sql");
    const COUNT_T: &str = include_str!("conn/test_count_t.sql");
    const CREATE_BLOBS: &str = include_str!("conn/test_create_blobs.sql");
    const INSERT_BLOB: &str = include_str!("conn/test_insert_blob.sql");

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    }

    fn multi_thread() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .expect("runtime")
    }

    async fn open() -> ConnHandle {
        ConnHandle::spawn(
            || Connection::open_in_memory().map_err(|e| crate::error::sqlite_error("open", e)),
            Duration::from_secs(1),
            true,
        )
        .await
        .expect("spawn")
    }

    /// A handle on a database file, opened as the backend opens it (WAL, checkpoint hook).
    async fn open_file(path: &std::path::Path, busy_timeout: Duration) -> ConnHandle {
        let location = crate::config::Location::File(path.to_owned());
        ConnHandle::spawn(
            move || crate::migrate::open(&location, busy_timeout),
            busy_timeout,
            true,
        )
        .await
        .expect("spawn")
    }

    fn count(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::SeqCst)
    }

    /// The connection's busy_timeout as SQLite has it, in ms.
    async fn busy_timeout_ms(conn: &ConnHandle) -> i64 {
        conn.call("busy_timeout", |c| {
            c.query_row("PRAGMA busy_timeout", [], |r| r.get(0))
                .map_err(|e| crate::error::sqlite_error("busy_timeout", e))
        })
        .await
        .expect("pragma")
    }

    /// (inline, queued, groups) so far.
    fn counts(conn: &ConnHandle) -> (usize, usize, usize) {
        let c = &conn.shared.counts;
        (
            c.inline.load(Ordering::SeqCst),
            c.queued.load(Ordering::SeqCst),
            c.groups.load(Ordering::SeqCst),
        )
    }

    async fn select_one(conn: &ConnHandle) -> Result<i64> {
        conn.call("select", |c| {
            c.query_row(SELECT_ONE, [], |r| r.get(0))
                .map_err(|e| crate::error::sqlite_error("select", e))
        })
        .await
    }

    async fn insert(conn: &ConnHandle, x: i64) -> Result<usize> {
        conn.write("insert", move |tx| {
            tx.execute_batch(CREATE_T)?;
            Ok(tx.execute(INSERT_T, [x])?)
        })
        .await
    }

    /// Polls `fut` once (it submits its job): it must be waiting for the connection thread.
    fn poll_once<F: Future>(fut: Pin<&mut F>) {
        let mut cx = Context::from_waker(Waker::noop());
        assert!(
            fut.poll(&mut cx).is_pending(),
            "the job should be waiting for the connection thread"
        );
    }

    #[test]
    fn a_panicking_job_is_unavailable_and_the_connection_survives() {
        runtime().block_on(async {
            let conn = open().await;
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
            assert_eq!(select_one(&conn).await.expect("still works"), 1);
        });
    }

    #[test]
    fn a_panicking_inline_job_is_unavailable_and_the_connection_survives() {
        multi_thread().block_on(async {
            let conn = open().await;
            for _ in 0..2 {
                let err = conn
                    .write("boom", |_| -> OpResult<()> { panic!("job panics") })
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
            }
            assert_eq!(select_one(&conn).await.expect("still works"), 1);
            assert_eq!(insert(&conn, 1).await.expect("write works"), 1);
            assert_eq!(counts(&conn), (4, 0, 0), "every job ran inline");
            assert_eq!(
                count(&conn.shared.counts.on_worker),
                3,
                "the writes on the worker"
            );
            assert_eq!(busy_timeout_ms(&conn).await, 1000, "restored after a panic");
        });
    }

    #[test]
    fn a_failed_open_is_reported() {
        runtime().block_on(async {
            let err = ConnHandle::spawn(
                || Err(LeaseError::invalid("test", "no")),
                Duration::from_secs(1),
                true,
            )
            .await
            .expect_err("open fails");
            assert!(matches!(err, LeaseError::InvalidInput { .. }), "{err:?}");
        });
    }

    #[test]
    fn an_idle_connection_runs_jobs_inline_on_a_multi_thread_runtime() {
        let rt = multi_thread();
        let conn = rt.block_on(open());
        // On a worker thread, and in block_on (also allowed to block).
        let worker = conn.clone();
        rt.block_on(async {
            tokio::spawn(async move {
                assert_eq!(select_one(&worker).await.expect("read"), 1);
                assert_eq!(insert(&worker, 1).await.expect("write"), 1);
            })
            .await
            .expect("task");
            assert_eq!(insert(&conn, 2).await.expect("write"), 1);
        });
        assert_eq!(counts(&conn), (3, 0, 0));
    }

    /// Finding 17: a current_thread runtime that entered a multi-thread runtime's handle
    /// reports the multi-thread flavour, and `block_in_place` panicked there.
    #[test]
    fn a_current_thread_runtime_inside_a_multi_thread_handle_does_not_panic() {
        let mt = multi_thread();
        runtime().block_on(async {
            let _entered = mt.handle().enter();
            let conn = open().await;
            assert_eq!(insert(&conn, 1).await.expect("write"), 1);
            assert_eq!(select_one(&conn).await.expect("read"), 1);
            assert_eq!(insert(&conn, 2).await.expect("write"), 1);
            // The first write ran on the calling thread itself (that needs no
            // `block_in_place`); the read's `block_in_place` was refused and it queued, and
            // from then on every job on this thread queues.
            let (inline, queued, _) = counts(&conn);
            assert_eq!((inline, queued), (1, 2), "refused once, then queued");
            assert_eq!(count(&conn.shared.counts.on_worker), 1);
        });
    }

    #[test]
    fn a_current_thread_runtime_sends_every_job_to_the_thread() {
        runtime().block_on(async {
            let conn = open().await;
            assert_eq!(select_one(&conn).await.expect("read"), 1);
            assert_eq!(insert(&conn, 1).await.expect("write"), 1);
            assert_eq!(insert(&conn, 2).await.expect("write"), 1);
            assert_eq!(counts(&conn), (0, 3, 2));
        });
    }

    #[test]
    fn a_busy_connection_queues_and_queued_writes_share_one_group() {
        multi_thread().block_on(async {
            let conn = open().await;
            let held = lock(&conn.shared.conn);
            // The lock is taken: each write queues for the thread instead of waiting.
            let mut a = pin!(insert(&conn, 1));
            let mut b = pin!(insert(&conn, 2));
            let mut c = pin!(insert(&conn, 3));
            poll_once(a.as_mut());
            poll_once(b.as_mut());
            poll_once(c.as_mut());
            assert_eq!(counts(&conn), (0, 3, 0));
            drop(held);
            for fut in [a, b, c] {
                assert_eq!(fut.await.expect("write"), 1);
            }
            assert_eq!(counts(&conn), (0, 3, 1), "one group commit of three");
            // That turn was contended: the next job queues, although the connection is idle.
            drop(lock(&conn.shared.conn)); // the thread let go of the connection
            assert_eq!(select_one(&conn).await.expect("read"), 1);
            assert_eq!(counts(&conn), (0, 4, 1));
            // That turn found one job alone: inline again.
            drop(lock(&conn.shared.conn));
            assert_eq!(select_one(&conn).await.expect("read"), 1);
            assert_eq!(counts(&conn), (1, 4, 1));
        });
    }

    #[test]
    fn queued_jobs_go_first_even_when_the_lock_is_free() {
        multi_thread().block_on(async {
            let conn = open().await;
            // As if a job were queued but not yet picked up by the thread.
            conn.shared.queued.fetch_add(1, Ordering::SeqCst);
            assert_eq!(select_one(&conn).await.expect("read"), 1);
            assert_eq!(counts(&conn), (0, 1, 0));
            conn.shared.queued.fetch_sub(1, Ordering::SeqCst);
            // The thread's turn saw two jobs waiting (contended): the next job queues too,
            // and its turn, alone, lets the one after run inline.
            drop(lock(&conn.shared.conn)); // the thread let go of the connection
            assert_eq!(select_one(&conn).await.expect("read"), 1);
            assert_eq!(counts(&conn), (0, 2, 0));
            drop(lock(&conn.shared.conn));
            assert_eq!(select_one(&conn).await.expect("read"), 1);
            assert_eq!(counts(&conn), (1, 2, 0));
        });
    }

    #[test]
    fn a_light_write_on_an_idle_connection_runs_on_the_worker_and_others_in_place() {
        multi_thread().block_on(async {
            let conn = open().await;
            assert_eq!(insert(&conn, 1).await.expect("write"), 1);
            assert_eq!(count(&conn.shared.counts.on_worker), 1, "light write");
            assert_eq!(select_one(&conn).await.expect("read"), 1);
            let heavy = conn
                .write_waking("heavy", None, Weight::Heavy, |tx| {
                    Ok(Woken::quiet(tx.execute(INSERT_TWO, [])?))
                })
                .await;
            assert_eq!(heavy.expect("heavy write"), 1);
            assert_eq!(counts(&conn), (3, 0, 0), "all inline");
            assert_eq!(
                count(&conn.shared.counts.on_worker),
                1,
                "a read and a heavy write run inside block_in_place"
            );
            assert_eq!(busy_timeout_ms(&conn).await, 1000, "busy_timeout restored");
        });
    }

    /// The safety rule of the worker path: a write that meets another connection's write
    /// lock must not wait on the async worker. Its first poll hands the untouched job to
    /// the thread (the closure has not run) well inside the 20 s it would otherwise wait;
    /// the thread waits for the lock and the write completes once it is released.
    #[test]
    fn a_write_on_the_worker_meeting_a_lock_goes_untouched_to_the_thread() {
        const BUSY: Duration = Duration::from_secs(20);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("busy.db");
        multi_thread().block_on(async {
            let conn = open_file(&path, BUSY).await;
            assert_eq!(insert(&conn, 1).await.expect("create the table"), 1);
            let mut holder = Connection::open(&path).expect("second connection");
            let lock = holder
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .expect("take the write lock");
            let runs = Arc::new(AtomicUsize::new(0));
            let counted = runs.clone();
            let mut blocked = pin!(conn.write("insert", move |tx| {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok(tx.execute(INSERT_TWO, [])?)
            }));
            let started = std::time::Instant::now();
            poll_once(blocked.as_mut());
            let held_for = started.elapsed();
            assert!(
                held_for < BUSY / 10,
                "the worker waited {held_for:?} for another connection's lock"
            );
            assert_eq!(count(&runs), 0, "handed over untouched");
            assert_eq!(count(&conn.shared.counts.queued), 1, "sent to the thread");
            lock.commit().expect("release the lock");
            assert_eq!(blocked.await.expect("completes on the thread"), 1);
            assert_eq!(count(&runs), 1, "ran once, on the thread");
            assert_eq!(count(&conn.shared.counts.groups), 1);
            let rows: i64 = holder.query_row(COUNT_T, [], |r| r.get(0)).expect("count");
            assert_eq!(rows, 2);
            assert_eq!(
                busy_timeout_ms(&conn).await,
                20_000,
                "busy_timeout restored"
            );
        });
    }

    /// A checkpoint a write on the worker makes due (the WAL past 1000 pages) is not run
    /// there (its fsyncs would block the worker): it is sent to the connection's thread.
    #[test]
    fn a_checkpoint_due_after_a_write_on_the_worker_runs_on_the_thread() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("wal.db");
        multi_thread().block_on(async {
            let conn = open_file(&path, Duration::from_secs(5)).await;
            let big = conn.write("big", |tx| {
                tx.execute_batch(CREATE_BLOBS)?;
                Ok(tx.execute(INSERT_BLOB, [])?)
            });
            assert_eq!(big.await.expect("write"), 1);
            let c = &conn.shared.counts;
            assert_eq!(count(&c.on_worker), 1, "ran on the worker");
            assert_eq!(count(&c.deferred_checkpoints), 1, "its checkpoint deferred");
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while count(&c.checkpoints) == 0 {
                assert!(std::time::Instant::now() < deadline, "never checkpointed");
                tokio::task::yield_now().await;
            }
            // Done: the WAL starts over, so the next big write makes one due again.
            let again = conn.write("again", |tx| Ok(tx.execute(INSERT_BLOB, [])?));
            assert_eq!(again.await.expect("write"), 1);
            assert_eq!(count(&c.deferred_checkpoints), 2);
        });
    }

    /// A write on the worker that finds jobs queued when it ends marks the connection
    /// contended: the next job queues although the connection is idle.
    #[test]
    fn jobs_queued_during_a_write_on_the_worker_keep_the_next_on_the_queue() {
        multi_thread().block_on(async {
            let conn = open().await;
            let shared = conn.shared.clone();
            let during = conn.write("during", move |_| {
                // As if another caller queued a job while this one ran.
                shared.queued.fetch_add(1, Ordering::SeqCst);
                Ok(())
            });
            during.await.expect("write");
            conn.shared.queued.fetch_sub(1, Ordering::SeqCst);
            assert_eq!(counts(&conn), (1, 0, 0));
            assert_eq!(insert(&conn, 1).await.expect("write"), 1);
            assert_eq!(counts(&conn), (1, 1, 1), "queued: contended");
            drop(lock(&conn.shared.conn)); // the thread let go of the connection
            assert_eq!(insert(&conn, 2).await.expect("write"), 1);
            assert_eq!(
                counts(&conn),
                (2, 1, 1),
                "that turn was alone: the worker again"
            );
        });
    }
}
