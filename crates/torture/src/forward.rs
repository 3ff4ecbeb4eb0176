//! The per-slot TCP forwarder of the namespace mode (`--netns`, [`crate::netns`]): a runtime
//! in its own network namespace cannot reach a server that listens on loopback only, so the
//! controller listens on the slot's host-side veth address and forwards each connection to
//! the real server. It is also where two faults act:
//!
//! - **latency**: every chunk read from either side is written to the other side `delay`
//!   after it was read (order preserved; one queue per direction), so each round trip takes
//!   at least twice the delay (the kernel here has no `sch_netem`; see docs/decisions/0045-torture-and-history-checker.md);
//! - **drop**: every connection of the slot is closed at once, as `pg_terminate_backend` or
//!   `CLIENT KILL` close them without the namespace mode.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::Instant;

/// Chunks queued per direction before the reader waits (backpressure under latency).
const QUEUE: usize = 256;
/// Bytes read at once.
const CHUNK: usize = 16 * 1024;

/// What the forwarder of one slot shares with its connections.
#[derive(Debug, Default)]
struct Link {
    /// Added one-way delay, microseconds.
    delay_us: AtomicU64,
    /// The connections still open (finished ones are pruned on each accept and drop).
    conns: Mutex<Vec<AbortHandle>>,
    /// Connections accepted.
    accepted: AtomicU64,
    /// Connections closed by [`Forwarder::drop_connections`].
    dropped: AtomicU64,
}

/// A listener forwarding every connection to `upstream`.
#[derive(Debug)]
pub struct Forwarder {
    local: SocketAddr,
    link: Arc<Link>,
    accept: JoinHandle<()>,
}

impl Forwarder {
    /// Listens on `listen` (port 0: any free port) and forwards to `upstream` (`host:port`).
    pub async fn start(listen: SocketAddr, upstream: String) -> Result<Forwarder, String> {
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|e| format!("forwarder: cannot listen on {listen}: {e}"))?;
        let local = listener
            .local_addr()
            .map_err(|e| format!("forwarder: {e}"))?;
        let link = Arc::new(Link::default());
        let accept = tokio::spawn(accept_loop(listener, upstream, link.clone()));
        Ok(Forwarder {
            local,
            link,
            accept,
        })
    }

    /// The address the runtime connects to.
    pub fn local(&self) -> SocketAddr {
        self.local
    }

    /// Sets the added one-way delay (zero: none).
    pub fn set_delay(&self, delay: Duration) {
        let us = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.link.delay_us.store(us, Ordering::SeqCst);
    }

    /// Closes every open connection of the slot; returns how many there were.
    pub fn drop_connections(&self) -> u64 {
        let mut conns = self.link.conns.lock().unwrap_or_else(|p| p.into_inner());
        conns.retain(|c| !c.is_finished());
        let n = conns.len() as u64;
        for c in conns.drain(..) {
            c.abort();
        }
        self.link.dropped.fetch_add(n, Ordering::SeqCst);
        n
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.link.accepted.load(Ordering::SeqCst)
    }

    /// Connections closed by the drop fault so far.
    pub fn dropped(&self) -> u64 {
        self.link.dropped.load(Ordering::SeqCst)
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.accept.abort();
        let conns = self.link.conns.lock().unwrap_or_else(|p| p.into_inner());
        for c in conns.iter() {
            c.abort();
        }
    }
}

async fn accept_loop(listener: TcpListener, upstream: String, link: Arc<Link>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            // A transient accept error (out of descriptors): the runtime retries.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        link.accepted.fetch_add(1, Ordering::SeqCst);
        let task = tokio::spawn(connection(client, upstream.clone(), link.clone()));
        let mut conns = link.conns.lock().unwrap_or_else(|p| p.into_inner());
        conns.retain(|c| !c.is_finished());
        conns.push(task.abort_handle());
    }
}

/// Forwards one connection until both sides closed or either failed (then both are
/// dropped, which closes them).
async fn connection(client: TcpStream, upstream: String, link: Arc<Link>) {
    let connect = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(&upstream));
    let Ok(Ok(server)) = connect.await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let _ = tokio::try_join!(pipe(cr, sw, link.clone()), pipe(sr, cw, link.clone()));
}

/// One direction: a reader stamping each chunk with its due time, a writer waiting for it.
async fn pipe<R, W>(mut from: R, mut to: W, link: Arc<Link>) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(QUEUE);
    let read = async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = from.read(&mut buf).await?;
            let delay = Duration::from_micros(link.delay_us.load(Ordering::SeqCst));
            // An empty chunk is the end of the stream.
            let chunk = buf[..n].to_vec();
            if tx.send((Instant::now() + delay, chunk)).await.is_err() || n == 0 {
                return Ok::<(), std::io::Error>(());
            }
        }
    };
    let write = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if chunk.is_empty() {
                break;
            }
            to.write_all(&chunk).await?;
        }
        to.shutdown().await
    };
    tokio::try_join!(read, write).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn echo_server() -> (SocketAddr, JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        (addr, task)
    }

    async fn round_trip(s: &mut TcpStream, bytes: &[u8]) -> Vec<u8> {
        s.write_all(bytes).await.expect("write");
        let mut got = vec![0u8; bytes.len()];
        s.read_exact(&mut got).await.expect("read");
        got
    }

    #[tokio::test]
    async fn forwards_delays_in_order_and_drops() {
        let (server, _task) = echo_server().await;
        let f = Forwarder::start("127.0.0.1:0".parse().expect("addr"), server.to_string())
            .await
            .expect("forwarder");
        let mut s = TcpStream::connect(f.local()).await.expect("connect");
        assert_eq!(round_trip(&mut s, b"hello").await, b"hello");
        f.set_delay(Duration::from_millis(60));
        let started = std::time::Instant::now();
        assert_eq!(round_trip(&mut s, b"slow").await, b"slow");
        let rtt = started.elapsed();
        assert!(
            rtt >= Duration::from_millis(120),
            "two delayed legs: {rtt:?}"
        );
        f.set_delay(Duration::ZERO);
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(round_trip(&mut s, &big).await, big, "order preserved");
        assert_eq!((f.accepted(), f.drop_connections(), f.dropped()), (1, 1, 1));
        let mut rest = Vec::new();
        let n = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest)).await;
        assert!(
            matches!(n, Ok(Ok(0)) | Ok(Err(_))),
            "the dropped connection is closed: {n:?}"
        );
        assert_eq!(f.drop_connections(), 0, "nothing left to drop");
    }
}
