//! The console's accept loop (docs/decisions/0043-console.md, "Access and transport"), in place of
//! `axum::serve`, which bounds neither how long a client may take to send its headers nor how
//! many connections it holds: each connection takes one of `--max-connections` slots (one
//! more is answered 503 and closed), finishes its TLS handshake and sends each request's
//! headers within `--header-timeout` (an idle keep-alive connection is closed after as long),
//! each write must make progress within `--write-timeout` ([`WriteDeadline`]: a client that
//! sends requests and never reads the answers is closed, its slot freed), and its requests
//! carry the peer address ([`Peer`]).

use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Sleep;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;

use super::guard::Peer;

/// The answer to a connection past the cap.
const BUSY: &str = "refused: too many connections (--max-connections)\n";
/// The pause before accepting again when out of file descriptors.
const DESCRIPTOR_BACKOFF: Duration = Duration::from_millis(50);
/// How long a refused connection is given to read its 503.
const REFUSAL_TIME: Duration = Duration::from_secs(1);

/// What bounds the connections.
#[derive(Clone)]
pub struct Bounds {
    pub header_timeout: Duration,
    pub write_timeout: Duration,
    pub max_connections: usize,
    pub tls: Option<TlsAcceptor>,
}

/// Serves `app` on `listener` until an accept fails for good.
pub async fn serve(listener: TcpListener, app: Router, bounds: Bounds) -> io::Error {
    let slots = Arc::new(Semaphore::new(bounds.max_connections));
    // Refusals are bounded too: past as many in flight, an extra connection is just closed.
    let refusals = Arc::new(Semaphore::new(bounds.max_connections));
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) if out_of_descriptors(&e) => {
                // Connections ending free some: wait a little rather than spin.
                tokio::time::sleep(DESCRIPTOR_BACKOFF).await;
                continue;
            }
            Err(e) if one_connection(&e) => continue,
            Err(e) if listener_broken(&e) => return e,
            Err(e) => {
                // Anything else (a network error left by one connection, a passing shortage of
                // buffers or memory) must not end the console: report it, pause, go on.
                eprintln!("lease ui: accept failed, going on: {e}");
                tokio::time::sleep(DESCRIPTOR_BACKOFF).await;
                continue;
            }
        };
        let bounds = bounds.clone();
        match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => {
                let app = app.clone();
                tokio::spawn(async move {
                    let _slot = slot;
                    connection(tcp, Peer(peer), app, &bounds).await;
                });
            }
            Err(_) => {
                if let Ok(refusal) = Arc::clone(&refusals).try_acquire_owned() {
                    tokio::spawn(async move {
                        let _refusal = refusal;
                        refuse(tcp, &bounds).await;
                    });
                }
            }
        }
    }
}

/// An accept error that concerns one connection only (it went away before it was accepted).
fn one_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

/// The listening socket itself is unusable (`EBADF`, `EINVAL`, `ENOTSOCK`): accepting again
/// cannot succeed, so the console stops with the error.
fn listener_broken(e: &io::Error) -> bool {
    e.raw_os_error()
        .is_some_and(|code| code == 9 || code == 22 || code == 88)
}

/// The process or the system is out of file descriptors (`EMFILE`, `ENFILE`).
fn out_of_descriptors(e: &io::Error) -> bool {
    e.raw_os_error()
        .is_some_and(|code| code == 23 || code == 24)
}

/// One connection: TLS within the header timeout when configured, then HTTP/1.1; every
/// write (the handshake's too) under the write deadline.
async fn connection(tcp: TcpStream, peer: Peer, app: Router, bounds: &Bounds) {
    let tcp = WriteDeadline::new(tcp, bounds.write_timeout);
    match &bounds.tls {
        None => http(tcp, peer, app, bounds.header_timeout).await,
        Some(tls) => {
            if let Ok(Ok(stream)) =
                tokio::time::timeout(bounds.header_timeout, tls.accept(tcp)).await
            {
                http(stream, peer, app, bounds.header_timeout).await;
            }
        }
    }
}

/// HTTP/1.1 on `io`, each request's headers due within `header_timeout`.
async fn http<S>(io: S, peer: Peer, app: Router, header_timeout: Duration)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(peer);
        app.clone().oneshot(request)
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(TokioIo::new(io), service)
        .await;
}

/// A stream whose writes fail (`TimedOut`) once one has waited `limit` without progress: a
/// peer that stops reading, with the socket's buffers full, cannot hold its connection (and
/// its slot) forever, while a slow reader that keeps reading is never cut. Time spent with
/// nothing to write (an event stream between events, a connection waiting for a request)
/// does not count.
pub struct WriteDeadline<S> {
    io: S,
    limit: Duration,
    /// Armed when a write first waits; cleared by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteDeadline<S> {
    pub fn new(io: S, limit: Duration) -> Self {
        WriteDeadline {
            io,
            limit,
            stalled: None,
        }
    }

    /// What a write that returned `poll` answers: its result on progress (the deadline
    /// cleared), `TimedOut` once it has waited `limit`, else pending (the deadline armed).
    fn bound<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.stalled = None;
            return poll;
        }
        let limit = self.limit;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing within --write-timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write(cx, buf);
        self.bound(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.bound(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.io).poll_flush(cx);
        self.bound(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.io).poll_shutdown(cx);
        self.bound(cx, poll)
    }
}

/// A connection past the cap: 503 (after the handshake under TLS), then closed; within
/// [`REFUSAL_TIME`] and the header timeout.
async fn refuse(tcp: TcpStream, bounds: &Bounds) {
    let limit = REFUSAL_TIME.min(bounds.header_timeout);
    let _ = tokio::time::timeout(limit, async {
        match &bounds.tls {
            None => answer_busy(tcp).await,
            Some(tls) => {
                if let Ok(stream) = tls.accept(tcp).await {
                    answer_busy(stream).await;
                }
            }
        }
    })
    .await;
}

/// Writes [`BUSY`], then reads what the client sent until it closes (closing with unread
/// bytes would reset the connection, and the client could lose the answer).
async fn answer_busy<S: AsyncRead + AsyncWrite + Unpin>(mut io: S) {
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: \
         close\r\nContent-Length: {}\r\n\r\n{BUSY}",
        BUSY.len()
    );
    if io.write_all(answer.as_bytes()).await.is_err() || io.shutdown().await.is_err() {
        return;
    }
    let mut sink = [0u8; 1024];
    while matches!(io.read(&mut sink).await, Ok(n) if n > 0) {}
}
