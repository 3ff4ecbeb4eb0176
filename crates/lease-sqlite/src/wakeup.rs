//! Wake-ups: telling dispatchers at once that something became claimable.
//!
//! * **One hub per database and namespace in a process.** Every handle on one file (by
//!   canonical path) or one in-memory database (by its memdb name) and namespace shares one
//!   [`Wakes`], found in a process-global registry. A write that made something claimable
//!   signals its hub right after its transaction (or its group's COMMIT) succeeded, never
//!   before and never for a rolled-back operation.
//! * **Other processes: a wake log and a data_version watcher.** For a file, the same
//!   transaction appends one row to `lease_wake_log` (namespace, sequence number, the
//!   writing hub's random origin id, the instant). While a hub has receivers, one watcher
//!   thread polls `PRAGMA data_version` on its own idle connection every
//!   [`crate::SqliteConfig::wake_poll`]; the version changes only when another connection
//!   committed, and only then the watcher reads the log rows after the last sequence number it
//!   saw, ignores its own origin's (already signalled in process) and signals the earliest
//!   instant of the rest. A gap in the sequence (the log is pruned to its last
//!   [`LOG_KEEP`] rows) or a log that went backwards signals "now".
//! * **Failures.** A watcher whose connection fails reopens it with a backoff and signals
//!   "now" on every (re)connect, the first included, since writes may have been missed.
//!   Correctness never rests on a wake-up: the dispatcher keeps its backstop poll.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use lease_core::{LeaseError, Result, Timestamp, WakeHub, WakeReceiver};
use rusqlite::{Connection, OpenFlags, Transaction, params};

use crate::config::Location;

/// Rows of the wake log kept per namespace; older ones are pruned.
pub(crate) const LOG_KEEP: i64 = 1024;
/// Pruning runs when a sequence number is a multiple of this.
const PRUNE_EVERY: i64 = 256;
/// The origin of wake-log rows written inside the application's own transaction
/// ([`crate::SqliteBackend::admit_in_tx`]): no hub's (theirs are odd), so every watcher,
/// this process's included, signals them once that transaction committed.
const APP_ORIGIN: i64 = 0;
/// Longest pause between reconnect attempts of a failed watcher.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// `$1 namespace, $2 origin, $3 at` -> the sequence number of the wake-log row appended.
const RECORD: &str = include_str!("wakeup/record.sql");
/// `$1 namespace, $2 seq`: drops the log up to `seq`.
const PRUNE: &str = include_str!("wakeup/prune.sql");
/// `$1 namespace` -> the last sequence number logged (0: none).
const LAST_SEQ: &str = include_str!("wakeup/last_seq.sql");
/// `$1 namespace, $2 seq` -> (seq, origin, at) of the rows logged after `seq`.
const SINCE: &str = include_str!("wakeup/since.sql");

/// Which hub a handle belongs to: the database (canonical path or memdb name) and namespace.
type Key = (String, String);

fn registry() -> &'static Mutex<HashMap<Key, Weak<Wakes>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<Key, Weak<Wakes>>>> = OnceLock::new();
    REGISTRY.get_or_init(Mutex::default)
}

/// The wake-ups of one database and namespace in this process (see the module docs).
#[derive(Debug)]
pub(crate) struct Wakes {
    key: Key,
    hub: WakeHub,
    namespace: String,
    /// Random id written with this hub's log rows, so its watcher skips them.
    origin: i64,
    /// The database file when other processes may write it (log + watcher).
    file: Option<PathBuf>,
    poll: Duration,
    /// A watcher thread runs (only while the hub has receivers).
    watching: Mutex<bool>,
    /// Test hook: the watcher's next poll fails as if its connection broke.
    #[cfg(test)]
    pub(crate) fail_next_poll: std::sync::atomic::AtomicBool,
}

/// The hub of `location` and `namespace` in this process: the existing one, or a new one.
/// The first handle's `poll` interval is the one its watcher uses.
pub(crate) fn shared(location: &Location, namespace: &str, poll: Duration) -> Arc<Wakes> {
    let (db, file) = match location {
        Location::File(path) => {
            let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
            (canonical.display().to_string(), Some(canonical))
        }
        Location::Memory(name) => (format!("memdb:{name}"), None),
    };
    let key = (db, namespace.to_owned());
    let mut hubs = registry().lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(existing) = hubs.get(&key).and_then(Weak::upgrade) {
        return existing;
    }
    let wakes = Arc::new(Wakes::new(key.clone(), namespace, file, poll));
    hubs.insert(key, Arc::downgrade(&wakes));
    wakes
}

impl Wakes {
    /// A hub outside the registry (the registry and tests call this).
    pub(crate) fn new(key: Key, namespace: &str, file: Option<PathBuf>, poll: Duration) -> Self {
        let (high, _) = uuid::Uuid::new_v4().as_u64_pair();
        Wakes {
            key,
            hub: WakeHub::new(),
            namespace: namespace.to_owned(),
            // Odd, so never the application's origin.
            origin: i64::from_ne_bytes(high.to_ne_bytes()) | 1,
            file,
            poll,
            watching: Mutex::new(false),
            #[cfg(test)]
            fail_next_poll: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// A new receiver of this hub's signals; starts the watcher of other processes' writes
    /// if none runs.
    pub(crate) fn subscribe(self: &Arc<Self>) -> WakeReceiver {
        let mut watching = self.watching.lock().unwrap_or_else(PoisonError::into_inner);
        let receiver = self.hub.subscribe();
        if let Some(path) = &self.file
            && !*watching
        {
            let weak = Arc::downgrade(self);
            let path = path.clone();
            match std::thread::Builder::new()
                .name("lease-sqlite-watch".to_owned())
                .spawn(move || watch(&weak, &path))
            {
                Ok(_) => *watching = true,
                Err(e) => tracing::warn!(
                    error = %e,
                    "cannot start the wake-up watcher; other processes' writes are seen at the poll"
                ),
            }
        }
        receiver
    }

    /// Signals this process's receivers (after the write that makes `at` claimable
    /// committed).
    pub(crate) fn signal(&self, at: Timestamp) {
        self.hub.signal(at);
    }

    /// Inside the signalling write's transaction: appends the wake-log row other
    /// processes' watchers read (files only), pruning old rows now and then.
    pub(crate) fn record(&self, tx: &Transaction<'_>, at: Timestamp) -> rusqlite::Result<()> {
        self.record_as(tx, self.origin, at)
    }

    /// Inside a transaction no group of ours commits (the application's own): appends a
    /// wake-log row that every watcher signals after that commit, this process's included.
    /// Files only: an in-memory database has no watcher.
    pub(crate) fn record_for_watchers(
        &self,
        tx: &Transaction<'_>,
        at: Timestamp,
    ) -> rusqlite::Result<()> {
        self.record_as(tx, APP_ORIGIN, at)
    }

    /// The canonical path of the database file (`None`: in memory).
    pub(crate) fn file(&self) -> Option<&std::path::Path> {
        self.file.as_deref()
    }

    fn record_as(&self, tx: &Transaction<'_>, origin: i64, at: Timestamp) -> rusqlite::Result<()> {
        if self.file.is_none() {
            return Ok(());
        }
        let seq: i64 = tx
            .prepare_cached(RECORD)?
            .query_row(params![self.namespace, origin, at.as_millis()], |row| {
                row.get(0)
            })?;
        if seq % PRUNE_EVERY == 0 {
            tx.prepare_cached(PRUNE)?
                .execute(params![self.namespace, seq - LOG_KEEP])?;
        }
        Ok(())
    }

    /// False (and the watcher is marked stopped) once the hub has no receivers.
    fn keep_watching(&self) -> bool {
        let mut watching = self.watching.lock().unwrap_or_else(PoisonError::into_inner);
        if self.hub.receivers() == 0 {
            *watching = false;
            return false;
        }
        true
    }
}

impl Drop for Wakes {
    fn drop(&mut self) {
        let mut hubs = registry().lock().unwrap_or_else(PoisonError::into_inner);
        if hubs.get(&self.key).is_some_and(|w| w.strong_count() == 0) {
            hubs.remove(&self.key);
        }
    }
}

/// The watcher's connection and what it has seen.
struct Watch {
    conn: Connection,
    data_version: i64,
    last_seq: i64,
}

impl Watch {
    /// Opens the watcher's connection (never creating the file) and takes the current log
    /// position as seen.
    fn open(path: &std::path::Path, namespace: &str) -> rusqlite::Result<Watch> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(Duration::from_millis(100))?;
        let data_version = conn.query_row("PRAGMA data_version", [], |row| row.get(0))?;
        let last_seq = conn
            .prepare_cached(LAST_SEQ)?
            .query_row([namespace], |row| row.get(0))?;
        Ok(Watch {
            conn,
            data_version,
            last_seq,
        })
    }

    /// One look: `None` unless another connection committed wake-log rows of another
    /// origin (their earliest instant) or the log lost rows we had not seen (`MIN`: now).
    fn poll(&mut self, namespace: &str, origin: i64) -> rusqlite::Result<Option<Timestamp>> {
        let version: i64 = self
            .conn
            .query_row("PRAGMA data_version", [], |row| row.get(0))?;
        if version == self.data_version {
            return Ok(None);
        }
        self.data_version = version;
        let rows: Vec<(i64, i64, i64)> = self
            .conn
            .prepare_cached(SINCE)?
            .query_map(params![namespace, self.last_seq], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        let Some(&(first, _, _)) = rows.first() else {
            let last: i64 = self
                .conn
                .prepare_cached(LAST_SEQ)?
                .query_row([namespace], |row| row.get(0))?;
            if last < self.last_seq {
                // The log went backwards (a restored file): whatever happened is unknown.
                self.last_seq = last;
                return Ok(Some(Timestamp::MIN));
            }
            return Ok(None);
        };
        let mut earliest = (first > self.last_seq + 1).then_some(Timestamp::MIN);
        for (seq, from, at) in rows {
            self.last_seq = seq;
            if from != origin {
                let at = Timestamp::from_millis(at);
                earliest = Some(earliest.map_or(at, |e| e.min(at)));
            }
        }
        Ok(earliest)
    }
}

/// The watcher thread: polls while the hub lives and has receivers.
fn watch(wakes: &Weak<Wakes>, path: &std::path::Path) {
    let mut conn: Option<Watch> = None;
    let mut failures: u32 = 0;
    loop {
        let Some(w) = wakes.upgrade() else { return };
        if !w.keep_watching() {
            return;
        }
        let pause = match &mut conn {
            None => match Watch::open(path, &w.namespace) {
                Ok(opened) => {
                    conn = Some(opened);
                    failures = 0;
                    // Writes between the subscription (or the failure) and now are unseen.
                    w.signal(Timestamp::MIN);
                    w.poll
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    warn_failure(failures, &e);
                    backoff(w.poll, failures)
                }
            },
            Some(open) => match poll_once(&w, open) {
                Ok(Some(at)) => {
                    w.signal(at);
                    w.poll
                }
                Ok(None) => w.poll,
                Err(e) => {
                    conn = None;
                    failures = 1;
                    warn_failure(failures, &e);
                    w.poll
                }
            },
        };
        drop(w);
        std::thread::sleep(pause);
    }
}

fn poll_once(w: &Wakes, open: &mut Watch) -> rusqlite::Result<Option<Timestamp>> {
    #[cfg(test)]
    if w.fail_next_poll
        .swap(false, std::sync::atomic::Ordering::SeqCst)
    {
        return Err(rusqlite::Error::InvalidQuery);
    }
    open.poll(&w.namespace, w.origin)
}

/// Logs the first failure of a streak, and then every 64th.
fn warn_failure(failures: u32, e: &rusqlite::Error) {
    if failures == 1 || failures.is_multiple_of(64) {
        tracing::warn!(failures, error = %e, "the wake-up watcher's connection failed; reopening");
    }
}

fn backoff(poll: Duration, failures: u32) -> Duration {
    poll.saturating_mul(1 << failures.min(10)).min(MAX_BACKOFF)
}

/// Checks a configured watcher poll interval: 1 ms ..= 1 s.
pub(crate) fn check_poll(poll: Duration) -> Result<()> {
    if poll < Duration::from_millis(1) || poll > Duration::from_secs(1) {
        return Err(LeaseError::invalid(
            "wake poll interval",
            format!("{poll:?} is outside 1 ms ..= 1 s"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;

    /// A wake-log row past a gap in the sequence.
    const INSERT_GAP: &str = include_str!("wakeup/test_insert_gap.sql");
    /// Empties the wake log.
    const CLEAR_LOG: &str = include_str!("wakeup/test_clear_log.sql");

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    async fn recv(rx: &WakeReceiver) -> Timestamp {
        tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("a signal within 20 s")
    }

    /// Appends a log row as another process's hub would.
    fn write_from(conn: &mut Connection, other: &Wakes, at: Timestamp) {
        let tx = conn.transaction().expect("tx");
        other.record(&tx, at).expect("record");
        tx.commit().expect("commit");
    }

    fn hub_on(path: &std::path::Path) -> Arc<Wakes> {
        Arc::new(Wakes::new(
            (path.display().to_string(), "default".to_owned()),
            "default",
            Some(path.to_path_buf()),
            Duration::from_millis(2),
        ))
    }

    #[tokio::test]
    async fn the_watcher_survives_its_connection_failing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("watch.db");
        let mut conn = crate::migrate::open(&Location::File(path.clone()), Duration::from_secs(1))
            .expect("open");
        let mine = hub_on(&path);
        let other = hub_on(&path);
        let rx = mine.subscribe();
        assert_eq!(recv(&rx).await, Timestamp::MIN, "connected: signals now");
        write_from(&mut conn, &other, t(500));
        assert_eq!(recv(&rx).await, t(500));
        write_from(&mut conn, &mine, t(400));
        write_from(&mut conn, &other, t(700));
        assert_eq!(recv(&rx).await, t(700), "its own origin's row is skipped");

        mine.fail_next_poll.store(true, Ordering::SeqCst);
        write_from(&mut conn, &other, t(800));
        // The failed poll reconnects and signals now (the row may have been missed) ...
        assert_eq!(recv(&rx).await, Timestamp::MIN);
        // ... and later writes still arrive.
        write_from(&mut conn, &other, t(900));
        assert_eq!(recv(&rx).await, t(900));
    }

    #[tokio::test]
    async fn a_pruned_gap_signals_now() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("gap.db");
        let conn = crate::migrate::open(&Location::File(path.clone()), Duration::from_secs(1))
            .expect("open");
        let mut watch = Watch::open(&path, "default").expect("watch");
        conn.execute(INSERT_GAP, []).expect("insert");
        assert_eq!(
            watch.poll("default", 2).expect("poll"),
            Some(Timestamp::MIN)
        );
        assert_eq!(watch.poll("default", 2).expect("poll"), None, "nothing new");
        conn.execute(CLEAR_LOG, []).expect("delete");
        assert_eq!(
            watch.poll("default", 2).expect("poll"),
            Some(Timestamp::MIN),
            "a log that went backwards"
        );
    }

    #[test]
    fn handles_on_one_database_and_namespace_share_a_hub() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("shared.db");
        std::fs::write(&path, b"").expect("create");
        let poll = Duration::from_millis(5);
        let a = shared(&Location::File(path.clone()), "ns", poll);
        let b = shared(
            &Location::File(dir.path().join(".").join("shared.db")),
            "ns",
            poll,
        );
        let other_ns = shared(&Location::File(path.clone()), "other", poll);
        assert!(Arc::ptr_eq(&a, &b), "one canonical path, one hub");
        assert!(!Arc::ptr_eq(&a, &other_ns));
        let m1 = shared(&Location::Memory("x-1".into()), "ns", poll);
        let m2 = shared(&Location::Memory("x-2".into()), "ns", poll);
        assert!(!Arc::ptr_eq(&m1, &m2));
        let key = a.key.clone();
        drop((a, b));
        assert!(
            !registry()
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains_key(&key),
            "the last handle removes its entry"
        );
    }
}
