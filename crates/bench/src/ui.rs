//! The operator console's cost: `lease ui` as its own process over a store of
//! [`STORED`] executions, and of [`LARGE`] (each [`stored::fill`]'s `running` shape: 10,000
//! live leases, the rest completed, then [`crate::raw::Raw::vacuum`]ed as autovacuum would
//! soon after such a fill), measured from outside over loopback HTTP:
//!
//! * `ui namespace page` / `ui execution page` / `ui executions page` (the newest page of
//!   the executions list), and the same pages at [`LARGE`] (`ui 10^6 namespace page`, ...):
//!   pages served per second, one request at a time, each a fresh connection
//!   (`Connection: close`), for one round; the target is a page in under 200 ms, i.e. more
//!   than [`crate::row::UI_PAGES_PER_SEC`];
//! * `ui idle cpu` / `ui idle io` (at [`STORED`] only): the console with nobody watching,
//!   over one round: its CPU
//!   time (ms of CPU per second, `/proc/PID/stat`) and the bytes it read and wrote per
//!   second (`/proc/PID/io`, sockets included: a query to the store would show there). Both
//!   should be 0: without a watcher the console reads nothing.
//!
//! The `lease` binary is the one built beside this one (`cargo xtask bench` builds it), or
//! `LEASE_BENCH_LEASE_BIN`. No raw bound: the console has no raw counterpart.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use crate::args::{Kind, Options};
use crate::error::{BenchError, Result};
use crate::fixture::{Fixture, StoreSpec};
use crate::measure::Sample;
use crate::raw::clone_id;
use crate::row::Row;
use crate::stored::{self, Shape};

/// The pages measured: (name after `ui ` and the size, path).
const PAGES: [(&str, &str); 3] = [
    ("namespace page", "/"),
    ("execution page", "/execution?id="),
    ("executions page", "/executions"),
];

/// The idle rows (at [`STORED`] only).
const IDLE: [&str; 2] = ["ui idle cpu", "ui idle io"];

/// Executions in the measured store.
pub const STORED: u64 = 100_000;

/// Executions in the larger store (when `--stored-max` allows it).
pub const LARGE: u64 = 1_000_000;

/// The rows measured on a store of `n` executions, in report order (the idle rows only at
/// the first size).
pub fn names(n: u64) -> Vec<String> {
    let first = n < LARGE;
    let mut out: Vec<String> = PAGES
        .iter()
        .map(|(page, _)| match first {
            true => format!("ui {page}"),
            false => format!("ui {} {page}", stored::size_name(n)),
        })
        .collect();
    if first {
        out.extend(IDLE.iter().map(|n| (*n).to_owned()));
    }
    out
}

/// Appends the console rows of `kind` (none when no row is selected): at [`STORED`] (or
/// `--stored-max` when smaller), then at [`LARGE`] when `--stored-max` allows it.
pub async fn rows(kind: Kind, options: &Options, rows: &mut Vec<Row>) {
    let mut sizes = vec![STORED.min(options.stored_max)];
    if options.stored_max >= LARGE {
        sizes.push(LARGE);
    }
    for n in sizes {
        if names(n).iter().any(|name| options.selected(name)) {
            size_rows(kind, options, n, rows).await;
        }
    }
}

/// The selected rows of one store of `n` executions.
async fn size_rows(kind: Kind, options: &Options, n: u64, rows: &mut Vec<Row>) {
    let load = crate::load::one_minute();
    match measure(kind, options, n).await {
        Ok(samples) => {
            for (name, unit, sample) in samples {
                let row = Row::new(kind, name, unit, Some(sample), None, load, None);
                crate::progress::print(&row);
                rows.push(row);
            }
        }
        Err(e) => {
            let row = Row::new(
                kind,
                format!("ui ({})", stored::size_name(n)),
                "-",
                None,
                None,
                load,
                Some(e.to_string()),
            );
            crate::progress::print(&row);
            rows.push(row);
        }
    }
}

/// (row name, unit, sample) of every selected row, on one store filled with `n`.
async fn measure(
    kind: Kind,
    options: &Options,
    n: u64,
) -> Result<Vec<(String, &'static str, Sample)>> {
    let fx = Fixture::new(kind, options).await?;
    let result = async {
        let raw = fx.raw_client().await?;
        let started = Instant::now();
        stored::fill(&fx, raw.as_ref(), Shape::Running, n).await?;
        raw.vacuum().await?;
        eprintln!(
            "lease-bench: {kind:?} console store of {} filled in {:.1}s",
            stored::size_name(n),
            started.elapsed().as_secs_f64()
        );
        let spec = fx
            .spec()
            .ok_or_else(|| BenchError::Setup("no store another process can open".into()))?;
        let mut console = Console::start(&spec).await?;
        let measured = console.rows(options, &names(n)).await;
        console.stop().await;
        measured
    }
    .await;
    fx.remove_after(result).await
}

/// The store's URL with its namespace, as `lease --url` takes it.
pub fn console_url(spec: &StoreSpec) -> String {
    let (url, namespace) = spec.url();
    let joint = if url.contains('?') { '&' } else { '?' };
    format!("{url}{joint}namespace={namespace}")
}

/// The `lease` binary: `LEASE_BENCH_LEASE_BIN`, else beside this executable.
fn lease_binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("LEASE_BENCH_LEASE_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().map_err(|e| BenchError::Setup(format!("own path: {e}")))?;
    let path = exe.with_file_name("lease");
    if path.is_file() {
        Ok(path)
    } else {
        Err(BenchError::Setup(format!(
            "no {} (cargo build --release -p lease-cli, or set LEASE_BENCH_LEASE_BIN)",
            path.display()
        )))
    }
}

/// The access token the bench gives the console (sent as a bearer header: no session).
const TOKEN: &str = "lease-bench-console-token";

/// A running `lease ui` and the address it serves.
struct Console {
    child: Child,
    addr: String,
    /// Kept open: a console writing to a closed pipe would fail.
    _stdout: BufReader<tokio::process::ChildStdout>,
}

impl Console {
    /// Starts `lease ui` on an ephemeral loopback port and reads the address it prints.
    async fn start(spec: &StoreSpec) -> Result<Console> {
        let mut child = Command::new(lease_binary()?)
            .arg("--url")
            .arg(console_url(spec))
            .args(["ui", "--listen", "127.0.0.1:0"])
            .env("LEASE_UI_TOKEN", TOKEN)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| BenchError::Setup(format!("start lease ui: {e}")))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| BenchError::Setup("lease ui: no stdout".into()))?;
        let mut line = String::new();
        let mut stdout = BufReader::new(stdout);
        let read = stdout.read_line(&mut line);
        tokio::time::timeout(Duration::from_secs(60), read)
            .await
            .map_err(|_| BenchError::Setup("lease ui printed no address in 60 s".into()))?
            .map_err(|e| BenchError::Setup(format!("lease ui stdout: {e}")))?;
        let addr = served_address(&line)
            .ok_or_else(|| BenchError::Setup(format!("lease ui said {line:?}")))?
            .to_owned();
        Ok(Console {
            child,
            addr,
            _stdout: stdout,
        })
    }

    /// Every selected row of `names` ([`names`]): the pages, then the idle window.
    async fn rows(
        &mut self,
        options: &Options,
        names: &[String],
    ) -> Result<Vec<(String, &'static str, Sample)>> {
        let mut out = Vec::new();
        for (name, (_, path)) in names.iter().zip(PAGES) {
            if options.selected(name) {
                let path = match path.ends_with('=') {
                    true => format!("{path}{}", clone_id("r", 0)),
                    false => path.to_owned(),
                };
                let sample = pages(&self.addr, &path, options.round()).await?;
                out.push((name.clone(), "pages/s", sample));
            }
        }
        let idle = &names[PAGES.len()..];
        if idle.iter().any(|n| options.selected(n)) {
            let (cpu, io) = self.idle(options.round()).await?;
            out.push((IDLE[0].to_owned(), "CPU ms/s", cpu));
            out.push((IDLE[1].to_owned(), "bytes/s", io));
        }
        Ok(out)
    }

    /// CPU milliseconds and bytes read + written by the console over `window` untouched.
    async fn idle(&self, window: Duration) -> Result<(Sample, Sample)> {
        let pid = self
            .child
            .id()
            .ok_or_else(|| BenchError::Setup("lease ui exited".into()))?;
        let before = ProcUsage::read(pid)?;
        let started = Instant::now();
        tokio::time::sleep(window).await;
        let after = ProcUsage::read(pid)?;
        let secs = started.elapsed().as_secs_f64();
        let cpu = Sample {
            count: after.cpu_ms.saturating_sub(before.cpu_ms),
            secs,
        };
        let io = Sample {
            count: after.io_bytes.saturating_sub(before.io_bytes),
            secs,
        };
        Ok((cpu, io))
    }

    async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// The `ADDR` of `lease ui: serving http://ADDR/ (...)`.
pub fn served_address(line: &str) -> Option<&str> {
    let rest = line.split("serving http://").nth(1)?;
    let addr = rest.split('/').next()?;
    (!addr.is_empty()).then_some(addr)
}

/// GETs `path` from `addr` one request at a time for `window` (at least three requests):
/// pages served and the time they took. Anything but `200` is an error.
async fn pages(addr: &str, path: &str, window: Duration) -> Result<Sample> {
    get(addr, path).await?; // warm: first statements prepared, caches filled
    let started = Instant::now();
    let mut count = 0;
    while count < 3 || started.elapsed() < window {
        get(addr, path).await?;
        count += 1;
    }
    Ok(Sample {
        count,
        secs: started.elapsed().as_secs_f64(),
    })
}

/// One `GET` on a fresh connection; the body's length.
pub async fn get(addr: &str, path: &str) -> Result<usize> {
    let failed = |e: std::io::Error| BenchError::Setup(format!("GET {path}: {e}"));
    let mut stream = TcpStream::connect(addr).await.map_err(failed)?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: \
         close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.map_err(failed)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.map_err(failed)?;
    let head = String::from_utf8_lossy(&response[..response.len().min(64)]).into_owned();
    if head.starts_with("HTTP/1.1 200") {
        Ok(response.len())
    } else {
        Err(BenchError::Setup(format!("GET {path}: {head:?}")))
    }
}

/// A process's CPU time and I/O bytes so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcUsage {
    /// User + system CPU, milliseconds.
    pub cpu_ms: u64,
    /// `rchar + wchar`: bytes through read and write calls, sockets included.
    pub io_bytes: u64,
}

impl ProcUsage {
    fn read(pid: u32) -> Result<ProcUsage> {
        let text = |file: &str| {
            std::fs::read_to_string(format!("/proc/{pid}/{file}"))
                .map_err(|e| BenchError::Setup(format!("/proc/{pid}/{file}: {e}")))
        };
        Self::parse(&text("stat")?, &text("io")?)
            .ok_or_else(|| BenchError::Setup(format!("/proc/{pid}: unexpected format")))
    }

    /// From `/proc/PID/stat` (utime and stime, fields 14 and 15, in ticks of 10 ms) and
    /// `/proc/PID/io`.
    pub fn parse(stat: &str, io: &str) -> Option<ProcUsage> {
        let after_name = stat.rsplit_once(')')?.1;
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        // Field 3 (state) is the first after the name: utime is field 14, stime 15.
        let tick = |i: usize| fields.get(i - 3)?.parse::<u64>().ok();
        let cpu_ms = (tick(14)? + tick(15)?) * 10;
        let value = |key: &str| {
            io.lines()
                .find_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok())
        };
        Some(ProcUsage {
            cpu_ms,
            io_bytes: value("rchar:")? + value("wchar:")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_console_url_carries_the_namespace() {
        let spec = StoreSpec::Postgres {
            url: "postgres://u@127.0.0.1/test?sslmode=disable".into(),
            schema: "bench_x".into(),
        };
        assert_eq!(
            console_url(&spec),
            "postgres://u@127.0.0.1/test?sslmode=disable&namespace=bench_x"
        );
        let spec = StoreSpec::Redis {
            url: "redis://127.0.0.1:6379".into(),
            namespace: "bench-y".into(),
        };
        assert_eq!(
            console_url(&spec),
            "redis://127.0.0.1:6379?namespace=bench-y"
        );
    }

    #[test]
    fn the_larger_store_has_its_own_page_rows_and_no_idle_rows() {
        assert_eq!(
            names(STORED),
            [
                "ui namespace page",
                "ui execution page",
                "ui executions page",
                "ui idle cpu",
                "ui idle io"
            ]
        );
        assert_eq!(
            names(LARGE),
            [
                "ui 10^6 namespace page",
                "ui 10^6 execution page",
                "ui 10^6 executions page"
            ]
        );
    }

    #[test]
    fn reads_the_address_lease_ui_prints() {
        let line = "lease ui: serving http://127.0.0.1:40123/ (read-only) for sqlite namespace x\n";
        assert_eq!(served_address(line), Some("127.0.0.1:40123"));
        assert_eq!(served_address("something else"), None);
    }

    #[test]
    fn parses_proc_stat_and_io() {
        let stat = "4242 (lease ui (x)) S 1 4242 4242 0 -1 4194304 900 0 0 0 12 3 0 0 20 0 9 0";
        let io = "rchar: 1000\nwchar: 234\nsyscr: 5\nsyscw: 6\n";
        assert_eq!(
            ProcUsage::parse(stat, io),
            Some(ProcUsage {
                cpu_ms: 150,
                io_bytes: 1234
            })
        );
        assert_eq!(ProcUsage::parse("4242 (x) S 1", io), None);
    }

    #[test]
    fn this_process_usage_is_readable() {
        let usage = ProcUsage::read(std::process::id()).expect("own /proc");
        assert!(usage.io_bytes > 0, "{usage:?}");
    }

    #[tokio::test]
    async fn get_reads_a_whole_response_and_refuses_other_statuses() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let server = tokio::spawn(async move {
            for reply in [
                "HTTP/1.1 200 OK\r\n\r\nhello",
                "HTTP/1.1 404 Not Found\r\n\r\n",
            ] {
                let (mut s, _) = listener.accept().await.expect("accept");
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await.expect("read request");
                s.write_all(reply.as_bytes()).await.expect("reply");
            }
        });
        assert_eq!(get(&addr, "/").await.expect("200"), 24);
        assert!(get(&addr, "/missing").await.is_err());
        server.await.expect("server");
    }
}
