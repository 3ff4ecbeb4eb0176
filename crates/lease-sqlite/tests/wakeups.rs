//! Wake-ups across processes: a write in another OS process reaches this process's
//! receivers through the wake log and the data_version watcher, with its instant; this
//! process's own writes are signalled once, in process.

use std::time::Duration;

use lease_core::{Admission, ExecutionClient, ExecutionId, Timestamp, WakeReceiver};
use lease_sqlite::{SqliteBackend, SqliteConfig};

const CHILD_ENV: &str = "LEASE_SQLITE_WAKE_CHILD_DB";
/// The instant the child schedules its admission at (a fixed past instant: due at once).
const CHILD_AT: i64 = 2_000;
const OWN_AT: i64 = 1_000;

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("valid id")
}

async fn recv(rx: &WakeReceiver, what: &str) -> Timestamp {
    match tokio::time::timeout(Duration::from_secs(20), rx.recv()).await {
        Ok(at) => at,
        Err(_) => panic!("{what}: no wake-up within 20 s"),
    }
}

/// The child role: admit one scheduled execution on the file, then exit.
async fn run_child(path: String) {
    let b = SqliteBackend::open(SqliteConfig::file(path))
        .await
        .expect("child open");
    b.admit(&Admission::new(id("from-child")).not_before(Timestamp::from_millis(CHILD_AT)))
        .await
        .expect("child admit");
}

/// A handle in another process (this test binary re-executed with [`CHILD_ENV`] set) shares
/// no hub with this one: its admission arrives here only through the watcher.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_s_admission_wakes_this_process() {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        run_child(path).await;
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("wake.db");
    let b = SqliteBackend::open(SqliteConfig::file(&path))
        .await
        .expect("open");
    let rx = b.wakeups().expect("SQLite sends wake-ups");
    assert_eq!(
        recv(&rx, "the watcher connecting").await,
        Timestamp::MIN,
        "a watcher that (re)connects signals now"
    );
    b.admit(&Admission::new(id("own")).not_before(Timestamp::from_millis(OWN_AT)))
        .await
        .expect("admit");
    assert_eq!(
        recv(&rx, "own admission").await,
        Timestamp::from_millis(OWN_AT)
    );

    let exe = std::env::current_exe().expect("test binary");
    let child = std::process::Command::new(exe)
        .args([
            "another_process_s_admission_wakes_this_process",
            "--exact",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &path)
        .output()
        .expect("run child");
    assert!(
        child.status.success(),
        "child failed: {}\n{}",
        child.status,
        String::from_utf8_lossy(&child.stderr)
    );
    // Had the watcher signalled this process's own row again, the earlier OWN_AT would
    // come out first (a receiver keeps the earliest instant).
    assert_eq!(
        recv(&rx, "the child's admission").await,
        Timestamp::from_millis(CHILD_AT)
    );
    assert!(b.get(&id("from-child")).await.expect("get").is_some());
}

/// Within a process every handle on one file and namespace shares the hub: a peer's write
/// reaches a receiver of another handle; another namespace's does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_in_one_process_share_a_hub_per_namespace() {
    let b = SqliteBackend::open(SqliteConfig::in_memory())
        .await
        .expect("open");
    let rx = b.wakeups().expect("wake-ups");
    let peer = b.peer().await.expect("peer");
    peer.admit(&Admission::new(id("a")).not_before(Timestamp::from_millis(5)))
        .await
        .expect("admit");
    assert_eq!(recv(&rx, "peer admission").await, Timestamp::from_millis(5));
    peer.admit(&Admission::new(id("a")).not_before(Timestamp::from_millis(1)))
        .await
        .expect("admit again");
    let batch = [
        Admission::new(id("b")).not_before(Timestamp::from_millis(9)),
        Admission::new(id("c")).not_before(Timestamp::from_millis(7)),
    ];
    peer.admit_batch(&batch).await.expect("admit_batch");
    // The existing id woke nothing; the batch woke once at its earliest new instant.
    assert_eq!(recv(&rx, "batch").await, Timestamp::from_millis(7));
    assert_eq!(rx.try_recv(), None);
}
