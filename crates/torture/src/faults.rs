//! The nemesis: a fault schedule drawn from a seed (the same seed and options give the same
//! schedule), and the actions that inject each fault.
//!
//! | fault | what happens |
//! |---|---|
//! | `pause` | SIGSTOP a runtime for 1.3-3x the lease, then SIGCONT: it wakes holding leases that were reclaimed |
//! | `kill` | SIGKILL a runtime, restart it after up to one lease |
//! | `drop` | kill one runtime's database connections (PostgreSQL `pg_terminate_backend`, Redis `CLIENT KILL ID`), found by its sockets |
//! | `slow-renew` | for 2-4 leases, a runtime sends each renewal 1.1-2x the lease late |
//! | `restart` | run the server restart command (a throwaway server only) |
//! | `failover` | the primary dies and its replica takes over (a throwaway pair or cluster; see [`crate::failover`]) |
//! | `partition` | cut one runtime off the database for 1.3-3x the lease, then heal (`--netns`; see [`crate::netns`]) |
//! | `loss` | drop 10-30% of one runtime's packets each way for 2-4 leases (`--netns`) |
//! | `latency` | delay one runtime's traffic by 5-25% of the lease each way for 2-4 leases (`--netns`) |

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::hash::fnv;

/// A kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// SIGSTOP past the lease, then SIGCONT.
    Pause,
    /// SIGKILL and restart.
    Kill,
    /// Kill the runtime's database connections.
    Drop,
    /// Delay renewals past expiry.
    SlowRenew,
    /// Restart the database server.
    Restart,
    /// Kill the primary, promote its replica.
    Failover,
    /// Drop every packet between one runtime and the database, then heal.
    Partition,
    /// Drop a share of one runtime's packets.
    Loss,
    /// Delay one runtime's traffic.
    Latency,
}

impl FaultKind {
    /// Every kind, in the order of the table above.
    pub const ALL: [FaultKind; 9] = [
        FaultKind::Pause,
        FaultKind::Kill,
        FaultKind::Drop,
        FaultKind::SlowRenew,
        FaultKind::Restart,
        FaultKind::Failover,
        FaultKind::Partition,
        FaultKind::Loss,
        FaultKind::Latency,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Pause => "pause",
            FaultKind::Kill => "kill",
            FaultKind::Drop => "drop",
            FaultKind::SlowRenew => "slow-renew",
            FaultKind::Restart => "restart",
            FaultKind::Failover => "failover",
            FaultKind::Partition => "partition",
            FaultKind::Loss => "loss",
            FaultKind::Latency => "latency",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FaultKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        FaultKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown fault {s:?} (pause, kill, drop, slow-renew, restart, failover, \
                     partition, loss, latency, all, none)"
                )
            })
    }
}

/// Parses `pause,kill,...`, `all` or `none`.
pub fn parse_kinds(list: &str) -> Result<BTreeSet<FaultKind>, String> {
    match list.trim() {
        "all" => Ok(FaultKind::ALL.into_iter().collect()),
        "none" | "" => Ok(BTreeSet::new()),
        l => l.split(',').map(|k| k.trim().parse()).collect(),
    }
}

/// One scheduled fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// When, from the start of the run.
    pub at: Duration,
    /// What.
    pub kind: FaultKind,
    /// Which runtime slot (unused for `restart`).
    pub target: usize,
    /// How long it lasts: pause time, kill-to-restart time, slow-renew window, the lag a
    /// failover holds the replica back for, the partition, loss or latency window.
    pub hold: Duration,
    /// The renewal delay of `slow-renew`; the added one-way delay of `latency`.
    pub delay: Duration,
    /// The share of packets `loss` drops, percent (0 for every other kind).
    pub loss_pct: u32,
}

/// Draws the schedule: faults every `every` on average (uniform in 0.5..1.5 of it) within
/// `duration`, each of a kind from `kinds` on a random runtime. `restart` and `failover`
/// faults are each at least 4 leases apart (a closer one is dropped, deterministically).
pub fn schedule(
    seed: u64,
    duration: Duration,
    every: Duration,
    processes: usize,
    kinds: &BTreeSet<FaultKind>,
    lease: Duration,
) -> Vec<Fault> {
    let kinds: Vec<FaultKind> = kinds.iter().copied().collect();
    let mut out = Vec::new();
    if kinds.is_empty() || processes == 0 {
        return out;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let every_ms = every.as_millis().max(2) as u64;
    let lease_ms = lease.as_millis() as u64;
    let end_ms = duration.as_millis() as u64;
    let mut t = 0u64;
    let mut last_restart: Option<u64> = None;
    let mut last_failover: Option<u64> = None;
    loop {
        t += rng.random_range(every_ms / 2..=every_ms * 3 / 2);
        if t >= end_ms {
            break;
        }
        let kind = kinds[rng.random_range(0..kinds.len())];
        let target = rng.random_range(0..processes);
        let factor = rng.random_range(0..1000u64);
        let factor2 = rng.random_range(0..1000u64);
        let (hold, delay) = match kind {
            FaultKind::Pause => (lease_ms * 13 / 10 + lease_ms * 17 * factor / 10_000, 0),
            FaultKind::Kill | FaultKind::Failover => (lease_ms * factor / 1000, 0),
            FaultKind::Drop | FaultKind::Restart => (0, 0),
            FaultKind::SlowRenew => (
                2 * lease_ms + 2 * lease_ms * factor / 1000,
                lease_ms * 11 / 10 + lease_ms * 9 * factor2 / 10_000,
            ),
            FaultKind::Partition => (lease_ms * 13 / 10 + lease_ms * 17 * factor / 10_000, 0),
            FaultKind::Loss => (2 * lease_ms + 2 * lease_ms * factor / 1000, 0),
            FaultKind::Latency => (
                2 * lease_ms + 2 * lease_ms * factor / 1000,
                lease_ms / 20 + lease_ms * factor2 / 5000,
            ),
        };
        let loss_pct = if kind == FaultKind::Loss {
            u32::try_from(10 + 20 * factor2 / 1000).unwrap_or(10)
        } else {
            0
        };
        if kind == FaultKind::Restart {
            if last_restart.is_some_and(|r| t < r + 4 * lease_ms) {
                continue;
            }
            last_restart = Some(t);
        }
        if kind == FaultKind::Failover {
            if last_failover.is_some_and(|r| t < r + 4 * lease_ms) {
                continue;
            }
            last_failover = Some(t);
        }
        out.push(Fault {
            at: Duration::from_millis(t),
            kind,
            target,
            hold: Duration::from_millis(hold),
            delay: Duration::from_millis(delay),
            loss_pct,
        });
    }
    out
}

/// A short fingerprint of a schedule, printed so two runs can be compared. A schedule
/// without `loss` faults hashes as before `loss_pct` existed (the fingerprints in
/// docs/BENCHMARKS.md stay valid).
pub fn fingerprint(faults: &[Fault]) -> String {
    /// The fields a fault had before the network faults, under the same name.
    #[derive(Debug)]
    #[allow(dead_code)] // read through Debug only
    struct Fault {
        at: Duration,
        kind: FaultKind,
        target: usize,
        hold: Duration,
        delay: Duration,
    }
    let view: Vec<Fault> = faults
        .iter()
        .map(|f| Fault {
            at: f.at,
            kind: f.kind,
            target: f.target,
            hold: f.hold,
            delay: f.delay,
        })
        .collect();
    let mut text = format!("{view:?}");
    let losses: Vec<u32> = faults
        .iter()
        .map(|f| f.loss_pct)
        .filter(|p| *p > 0)
        .collect();
    if !losses.is_empty() {
        text.push_str(&format!(" loss {losses:?}"));
    }
    format!("{:016x}", fnv(&[&text]))
}

/// Faults per kind.
pub fn count(faults: &[Fault]) -> BTreeMap<FaultKind, usize> {
    let mut m = BTreeMap::new();
    for f in faults {
        *m.entry(f.kind).or_insert(0) += 1;
    }
    m
}

/// Sends `signal` (`STOP`, `CONT`, `KILL`) to `pid` with kill(1) (the workspace forbids
/// `unsafe`, so no libc call). kill(1)'s own message is dropped (a paused runtime's resume
/// timer may fire after the runtime was killed); a failure is the returned error.
pub async fn signal(signal: &str, pid: u32) -> Result<(), String> {
    let status = tokio::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .stderr(std::process::Stdio::null())
        .status()
        .await
        .map_err(|e| format!("kill -{signal} {pid}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill -{signal} {pid}: {status}"))
    }
}

/// The local TCP ports of `pid`'s sockets connected to `server_port`, from /proc: the
/// socket inodes among its open files, looked up in /proc/net/tcp{,6}.
pub fn client_ports(pid: u32, server_port: u16) -> Vec<u16> {
    let mut inodes = BTreeSet::new();
    if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for entry in dir.flatten() {
            if let Ok(target) = std::fs::read_link(entry.path())
                && let Some(inode) = target
                    .to_string_lossy()
                    .strip_prefix("socket:[")
                    .and_then(|s| s.strip_suffix(']'))
            {
                inodes.insert(inode.to_owned());
            }
        }
    }
    let mut ports = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() < 10 || !inodes.contains(cols[9]) {
                continue;
            }
            let port = |addr: &str| {
                addr.rsplit_once(':')
                    .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
            };
            if port(cols[2]) == Some(server_port)
                && let Some(local) = port(cols[1])
            {
                ports.push(local);
            }
        }
    }
    ports
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_schedule() {
        let kinds = parse_kinds("all").expect("all");
        let lease = Duration::from_millis(1500);
        let s = |seed| {
            schedule(
                seed,
                Duration::from_secs(120),
                Duration::from_secs(2),
                3,
                &kinds,
                lease,
            )
        };
        assert_eq!(s(7), s(7));
        assert_ne!(s(7), s(8));
        let a = s(7);
        assert!(a.len() > 40, "{}", a.len());
        assert_eq!(count(&a).len(), 9, "every kind drawn: {:?}", count(&a));
        assert!(
            a.iter()
                .all(|f| f.target < 3 && f.at < Duration::from_secs(120))
        );
        for f in a.iter().filter(|f| f.kind == FaultKind::Pause) {
            assert!(f.hold > lease, "a pause outlasts the lease");
        }
        for f in a.iter().filter(|f| f.kind == FaultKind::SlowRenew) {
            assert!(f.delay > lease, "a slow renewal arrives after expiry");
        }
        for f in a.iter().filter(|f| f.kind == FaultKind::Partition) {
            assert!(f.hold > lease, "a partition outlasts the lease");
        }
        for f in &a {
            let lossy = f.kind == FaultKind::Loss;
            assert_eq!(lossy, (10..=30).contains(&f.loss_pct), "{f:?}");
            if f.kind == FaultKind::Latency {
                assert!(f.delay >= lease / 20 && f.delay <= lease / 4, "{f:?}");
            }
        }
        assert!(parse_kinds("pause,nope").is_err());
        assert_eq!(parse_kinds("none").expect("none").len(), 0);
    }
}
