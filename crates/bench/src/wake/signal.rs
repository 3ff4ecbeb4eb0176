//! The raw bounds of pickup: how fast each backend's bare change signal travels, with no
//! library in the path, measured in this process on one pair of connections.
//!
//! - PostgreSQL: `SELECT pg_notify(channel, payload)` on one connection -> the payload
//!   arriving on another connection that runs `LISTEN channel` (sqlx `PgListener`).
//! - Redis: `PUBLISH channel payload` on one connection -> the message on a `SUBSCRIBE`d
//!   connection.
//! - SQLite (file): an autocommit `INSERT` on one connection -> another connection polling
//!   `PRAGMA data_version` every [`SQLITE_WAKE_POLL`] (what the backend's cross-process
//!   watcher does) seeing it change.
//!
//! Each sample is the time from the start of the signalling call to the receiver seeing it,
//! one signal every [`super::PICKUP_EVERY`], on `Instant` (same process).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::mpsc;

use super::series::WARMUP;
use crate::error::{BenchError, Result, raw};

/// The SQLite backend's default watcher poll.
pub const SQLITE_WAKE_POLL: Duration = lease_sqlite::DEFAULT_WAKE_POLL;

/// Latencies (ms) of `n` bare NOTIFY -> LISTEN deliveries.
pub async fn postgres(url: &str, n: usize, every: Duration) -> Result<Vec<f64>> {
    let channel = format!("bench_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let mut listener = sqlx::postgres::PgListener::connect(url)
        .await
        .map_err(|e| raw("postgres", "listen", e))?;
    listener
        .listen(&channel)
        .await
        .map_err(|e| raw("postgres", "listen", e))?;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .map_err(|e| raw("postgres", "connect", e))?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let reader = tokio::spawn(async move {
        while let Ok(n) = listener.recv().await {
            if tx.send((n.payload().to_owned(), Instant::now())).is_err() {
                break;
            }
        }
    });
    let result = async {
        let mut out = Vec::with_capacity(n);
        let mut tick = ticker(every);
        for i in 0..n + WARMUP {
            tick.tick().await;
            let payload = i.to_string();
            let sent = Instant::now();
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(&channel)
                .bind(&payload)
                .execute(&pool)
                .await
                .map_err(|e| raw("postgres", "notify", e))?;
            let got = receive(&mut rx, &payload).await?;
            if i >= WARMUP {
                out.push(ms(got - sent));
            }
        }
        Ok(out)
    }
    .await;
    reader.abort();
    pool.close().await;
    result
}

/// Latencies (ms) of `n` bare PUBLISH -> SUBSCRIBE deliveries.
pub async fn redis(url: &str, n: usize, every: Duration) -> Result<Vec<f64>> {
    let channel = format!("bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let client = redis::Client::open(url).map_err(|e| raw("redis", "connect", e))?;
    let mut pubsub = client
        .get_async_pubsub()
        .await
        .map_err(|e| raw("redis", "subscribe", e))?;
    pubsub
        .subscribe(&channel)
        .await
        .map_err(|e| raw("redis", "subscribe", e))?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| raw("redis", "connect", e))?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let reader = tokio::spawn(async move {
        let mut messages = pubsub.on_message();
        while let Some(m) = messages.next().await {
            let payload: String = m.get_payload().unwrap_or_default();
            if tx.send((payload, Instant::now())).is_err() {
                break;
            }
        }
    });
    let result = async {
        let mut out = Vec::with_capacity(n);
        let mut tick = ticker(every);
        for i in 0..n + WARMUP {
            tick.tick().await;
            let payload = i.to_string();
            let sent = Instant::now();
            let _: i64 = redis::cmd("PUBLISH")
                .arg(&channel)
                .arg(&payload)
                .query_async(&mut conn)
                .await
                .map_err(|e| raw("redis", "publish", e))?;
            let got = receive(&mut rx, &payload).await?;
            if i >= WARMUP {
                out.push(ms(got - sent));
            }
        }
        Ok(out)
    }
    .await;
    reader.abort();
    result
}

/// Latencies (ms) of `n` commits seen by a `PRAGMA data_version` poll loop on `file`.
pub async fn sqlite(file: &Path, n: usize, every: Duration) -> Result<Vec<f64>> {
    let open = || {
        lease_sqlite::raw::open(file, Duration::from_secs(5)).map_err(|e| raw("sqlite", "open", e))
    };
    let writer = open()?;
    writer
        .execute_batch("CREATE TABLE IF NOT EXISTS bench_signal (n INTEGER)")
        .map_err(|e| raw("sqlite", "create", e))?;
    let poller = open()?;
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let watching = stop.clone();
    let watcher = std::thread::spawn(move || -> Result<()> {
        let version = |c: &rusqlite::Connection| -> Result<i64> {
            c.query_row("PRAGMA data_version", [], |r| r.get(0))
                .map_err(|e| raw("sqlite", "data_version", e))
        };
        let mut last = version(&poller)?;
        while !watching.load(Ordering::SeqCst) {
            std::thread::sleep(SQLITE_WAKE_POLL);
            let v = version(&poller)?;
            if v != last {
                last = v;
                let _ = tx.send((String::new(), Instant::now()));
            }
        }
        Ok(())
    });
    let writer = Arc::new(std::sync::Mutex::new(writer));
    let result = async {
        let mut out = Vec::with_capacity(n);
        let mut tick = ticker(every);
        for i in 0..n + WARMUP {
            tick.tick().await;
            while rx.try_recv().is_ok() {}
            let w = writer.clone();
            let sent = Instant::now();
            tokio::task::spawn_blocking(move || {
                w.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .execute("INSERT INTO bench_signal (n) VALUES (?1)", [i as i64])
                    .map_err(|e| raw("sqlite", "insert", e))
            })
            .await
            .map_err(|e| BenchError::Setup(e.to_string()))??;
            let got = receive(&mut rx, "").await?;
            if i >= WARMUP {
                out.push(ms(got.saturating_duration_since(sent)));
            }
        }
        Ok(out)
    }
    .await;
    stop.store(true, Ordering::SeqCst);
    let watched = watcher
        .join()
        .map_err(|_| BenchError::Setup("data_version watcher panicked".into()))?;
    let out = result?;
    watched?;
    Ok(out)
}

fn ticker(every: Duration) -> tokio::time::Interval {
    let mut t = tokio::time::interval(every);
    t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    t
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Waits (up to 5 s) for `payload` on `rx`, skipping others.
async fn receive(
    rx: &mut mpsc::UnboundedReceiver<(String, Instant)>,
    payload: &str,
) -> Result<Instant> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some((p, at))) if p == payload => return Ok(at),
            Ok(Some(_)) => {}
            _ => return Err(BenchError::Setup("a raw signal never arrived".into())),
        }
    }
}
