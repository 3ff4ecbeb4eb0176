//! The operation log: one JSON line per backend call, appended by each runtime process to
//! its own file, merged and checked by the controller (the log format of
//! [`crate::history`]).
//!
//! A fenced call that ends a delivery (release, acknowledge) is logged twice: an `invoke`
//! line before the call and the result after it. A process killed in between leaves only
//! the invoke line, which reads back as [`OpResult::Unknown`] (the release may have
//! committed), so a lost reply can never make the checker believe a lease was still live.
//! Every line is written with one `write` call on an `O_APPEND` file, so a SIGKILL loses at
//! most the line in flight, and a torn last line is skipped when read.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::history::{Op, OpResult};
use serde::{Deserialize, Serialize};

use crate::trueclock;

/// Microseconds since the Unix epoch: the machine-wide clock every process logs with. It is
/// the machine's true clock ([`trueclock::realtime_us`]), which libfaketime cannot fake, so
/// the logs of runtimes with skewed clocks (`--clock-skew`) still order in real time; the
/// library under test sees the faked one.
pub fn now_us() -> i64 {
    trueclock::realtime_us()
}

/// One line of a log file.
#[derive(Debug, Serialize, Deserialize)]
struct Line {
    /// Per-file sequence number pairing an invoke line with its result.
    seq: u64,
    /// True for the line written before the call.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    invoke: bool,
    op: Op,
}

/// An append-only log file of one process.
#[derive(Debug)]
pub struct OpLog {
    file: Mutex<File>,
    seq: AtomicU64,
    path: PathBuf,
}

impl OpLog {
    /// Creates (or appends to) the log at `path`.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(OpLog {
            file: Mutex::new(file),
            seq: AtomicU64::new(1),
            path: path.to_path_buf(),
        })
    }

    /// A fresh sequence number for an operation about to be logged.
    pub fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst)
    }

    /// Appends the invoke line of operation `seq` (its result is not known yet).
    pub fn invoke(&self, seq: u64, op: &Op) {
        self.write(&Line {
            seq,
            invoke: true,
            op: op.clone(),
        });
    }

    /// Appends the result line of operation `seq`.
    pub fn record(&self, seq: u64, op: Op) {
        self.write(&Line {
            seq,
            invoke: false,
            op,
        });
    }

    fn write(&self, line: &Line) {
        let mut text = match serde_json::to_string(line) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("op log: cannot encode {line:?}: {e}");
                std::process::abort();
            }
        };
        text.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = file.write_all(text.as_bytes()) {
            // A history with holes cannot be checked: stop the process rather than go on.
            eprintln!("op log {}: write failed: {e}", self.path.display());
            std::process::abort();
        }
    }
}

/// Merges lines into operations: a result line replaces its invoke line; an invoke line
/// without a result becomes `Unknown` with `end_us = i64::MAX`.
#[derive(Debug, Default)]
pub struct Merger {
    ops: BTreeMap<u64, Op>,
    /// Lines that did not parse (a torn last line after a SIGKILL).
    pub torn: usize,
}

impl Merger {
    /// Adds one text line.
    pub fn add_line(&mut self, text: &str) -> Option<&Op> {
        if text.trim().is_empty() {
            return None;
        }
        let Ok(line) = serde_json::from_str::<Line>(text) else {
            self.torn += 1;
            return None;
        };
        if line.invoke {
            let mut op = line.op;
            op.result = OpResult::Unknown;
            op.end_us = i64::MAX;
            self.ops.entry(line.seq).or_insert(op);
            None
        } else {
            self.ops.insert(line.seq, line.op);
            self.ops.get(&line.seq)
        }
    }

    /// The merged operations with their sequence numbers.
    pub fn into_keyed(self) -> Vec<(u64, Op)> {
        self.ops.into_iter().collect()
    }
}

/// Reads a whole log file.
#[cfg(test)]
pub fn read(path: &Path) -> std::io::Result<(Vec<Op>, usize)> {
    let (ops, torn) = read_keyed(path)?;
    Ok((ops.into_iter().map(|(_, op)| op).collect(), torn))
}

/// Reads a whole log file: its operations with their sequence numbers (an application row
/// names its writer by process and sequence number), and the torn lines.
pub fn read_keyed(path: &Path) -> std::io::Result<(Vec<(u64, Op)>, usize)> {
    let text = std::fs::read_to_string(path)?;
    let mut m = Merger::default();
    for line in text.lines() {
        m.add_line(line);
    }
    let torn = m.torn;
    Ok((m.into_keyed(), torn))
}

/// Follows a log file as it grows, returning the result lines of complete new lines.
#[derive(Debug)]
pub struct Tail {
    path: PathBuf,
    offset: u64,
    partial: String,
}

impl Tail {
    /// Follows `path` from its start.
    pub fn new(path: PathBuf) -> Self {
        Tail {
            path,
            offset: 0,
            partial: String::new(),
        }
    }

    /// The operations whose result lines were appended since the last poll.
    pub fn poll(&mut self) -> Vec<Op> {
        let mut out = Vec::new();
        let Ok(mut file) = File::open(&self.path) else {
            return out;
        };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return out;
        }
        let mut buf = Vec::new();
        if file.read_to_end(&mut buf).is_err() {
            return out;
        }
        self.offset += buf.len() as u64;
        self.partial.push_str(&String::from_utf8_lossy(&buf));
        let complete = match self.partial.rfind('\n') {
            Some(i) => {
                let rest = self.partial.split_off(i + 1);
                std::mem::replace(&mut self.partial, rest)
            }
            None => return out,
        };
        for text in complete.lines() {
            if let Ok(line) = serde_json::from_str::<Line>(text)
                && !line.invoke
            {
                out.push(line.op);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::OpKind;

    fn op(result: OpResult) -> Op {
        Op {
            process: 1,
            execution: "e".into(),
            token: 3,
            start_us: 10,
            end_us: 20,
            kind: OpKind::Release { unstarted: false },
            result,
        }
    }

    #[test]
    fn an_invoke_without_result_reads_as_unknown_and_torn_lines_are_skipped() {
        let dir = std::env::temp_dir().join(format!("oplog-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("p.jsonl");
        let _ = std::fs::remove_file(&path);
        let log = OpLog::create(&path).expect("log");
        let (a, b) = (log.next_seq(), log.next_seq());
        log.invoke(a, &op(OpResult::Unknown));
        log.record(a, op(OpResult::Accepted));
        log.invoke(b, &op(OpResult::Unknown));
        drop(log);
        let mut f = OpenOptions::new().append(true).open(&path).expect("open");
        f.write_all(b"{\"seq\":9,\"op\":{\"proc").expect("torn");
        let (ops, torn) = read(&path).expect("read");
        assert_eq!(torn, 1);
        assert_eq!(ops.len(), 2);
        assert_eq!(ops[0].result, OpResult::Accepted);
        assert_eq!(ops[1].result, OpResult::Unknown);
        assert_eq!(ops[1].end_us, i64::MAX);
        let mut tail = Tail::new(path.clone());
        assert_eq!(
            tail.poll().len(),
            1,
            "only the result line, not the torn one"
        );
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
