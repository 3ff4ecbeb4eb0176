//! The namespace mode (`lease-torture run --netns`): every runtime slot
//! runs in its own network namespace, joined to the host by a veth pair, so the nemesis can
//! cut one runtime off the database (`partition`), drop a share of its packets (`loss`) or
//! slow its link (`latency`), and heal.
//!
//! - Addresses: 198.18.0.0/15 (RFC 2544, benchmarking) only. A run takes the /24 number
//!   `pid % 512` of that range; slot `i` is the /30 at `4i`: host side `.4i+1`, namespace
//!   side `.4i+2`. The run fails, naming the interface, when an address of its /24 is already
//!   on the host (another run whose pid has the same remainder).
//! - Names: namespace `lt<pid>s<slot>`, veth `lt<pid>h<slot>` (host) and `lt<pid>n<slot>`
//!   (moved into the namespace), at most 12 characters. Leftovers of a run that was killed
//!   (its pid is gone, or is this process's: a reused pid) are removed before a run starts.
//! - The servers listen on loopback, which a namespace cannot reach: each slot has a
//!   [`Forwarder`] on its host-side address, and the runtime's URL names it.
//! - Partition and loss are nftables rules inside the slot's namespace (table `inet
//!   lease_torture`), dropping silently in both directions, so TCP retransmits as through a
//!   real partition; latency is the forwarder's (the kernel has no `sch_netem`).
//! - Teardown (at the end, on an error, on Ctrl-C, on drop) deletes each host-side veth (its
//!   peer goes with it) and namespace; rules live inside the namespaces and go with them.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::backend::Kind;
use crate::faults::FaultKind;
use crate::forward::Forwarder;
use crate::lostlease::PartitionFigures;
use crate::nemesis;

/// The fault kinds that need the namespace mode.
pub const KINDS: [FaultKind; 3] = [FaultKind::Partition, FaultKind::Loss, FaultKind::Latency];

/// The nftables table of a slot's namespace.
const TABLE: &str = "inet lease_torture";

/// Removes the network kinds `faults` cannot have (no `--netns`, or SQLite); returns a note
/// for each one removed. Fails when `--netns` is combined with `failover` (a cluster's
/// redirects and a pair's second host name loopback addresses the forwarder does not serve).
pub fn restrict(
    faults: &mut BTreeSet<FaultKind>,
    netns: bool,
    kind: Kind,
) -> Result<Vec<String>, String> {
    let why = match (netns, kind) {
        (_, Kind::Sqlite) => "SQLite is an embedded file: no network",
        (false, _) => "needs --netns",
        (true, _) if faults.contains(&FaultKind::Failover) => {
            return Err(
                "--netns cannot be combined with the failover fault (its servers \
                        are reached by loopback addresses the forwarder does not serve)"
                    .to_owned(),
            );
        }
        (true, _) => return Ok(Vec::new()),
    };
    Ok(KINDS
        .into_iter()
        .filter(|k| faults.remove(k))
        .map(|k| format!("{k} ({why})"))
        .collect())
}

/// What the nemesis does to one slot's link; several may be active at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Impairment {
    /// Every packet dropped.
    Partition,
    /// This percentage of packets dropped, each way.
    Loss(u32),
    /// This delay added each way.
    Latency(Duration),
}

/// One slot's namespace, link and forwarder.
#[derive(Debug)]
struct SlotNet {
    ns: String,
    host_ip: Ipv4Addr,
    url: String,
    forwarder: Forwarder,
    /// Active impairments by fault id.
    active: Vec<(u64, Impairment)>,
}

/// What the namespace mode reports.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NetworkFigures {
    /// Connections the runtimes opened through the forwarders.
    pub connections: u64,
    /// Connections closed by the drop fault.
    pub connections_dropped: u64,
    /// Leases of a partitioned slot taken over by another slot.
    pub partition_takeovers: u64,
    /// Operations of a partitioned slot refused (`Lost`) until 5 leases after the heal.
    pub partition_refused: u64,
    /// Operations a partitioned slot invoked during the partition that failed or whose
    /// outcome stayed unknown.
    pub partition_cut_off: u64,
}

/// The namespaces of a run; torn down on [`Network::teardown`] or drop.
#[derive(Debug)]
pub struct Network {
    slots: Vec<SlotNet>,
    /// What is still to be removed: (namespace, host-side veth).
    created: Vec<(String, String)>,
}

/// The /24 of this run: `198.18.0.0/15` split in 512.
fn run_prefix(pid: u32) -> [u8; 3] {
    let index = pid % 512;
    [198, 18 + (index / 256) as u8, (index % 256) as u8]
}

/// The host-side and namespace-side addresses of `slot`.
fn slot_addresses(prefix: [u8; 3], slot: usize) -> (Ipv4Addr, Ipv4Addr) {
    let base = (slot * 4) as u8;
    let [a, b, c] = prefix;
    (
        Ipv4Addr::new(a, b, c, base + 1),
        Ipv4Addr::new(a, b, c, base + 2),
    )
}

/// Runs a command to completion; its standard output, or an error naming it.
fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = std::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                format!("--netns needs `{program}` on PATH (Debian packages iproute2 and nftables)")
            }
            _ => format!("{program}: {e}"),
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let hint = if err.contains("Operation not permitted") || err.contains("ermission") {
            " (--netns needs root, or CAP_NET_ADMIN and CAP_SYS_ADMIN)"
        } else {
            ""
        };
        Err(format!(
            "{program} {}: {}{hint}",
            args.join(" "),
            err.trim()
        ))
    }
}

/// Whether a name is `lt<pid><tag><slot>`; its pid.
fn owner_pid(name: &str, tag: char) -> Option<u32> {
    let rest = name.strip_prefix("lt")?;
    let (pid, slot) = rest.split_once(tag)?;
    if slot.is_empty() || !slot.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Whether a leftover of `pid` is stale: that process is gone, or it is this one (which has
/// created nothing yet: the pid was reused).
fn stale(pid: u32) -> bool {
    pid == std::process::id() || !Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes the namespaces and veths of runs that no longer exist.
fn sweep_stale() -> Result<(), String> {
    for line in run("ip", &["netns", "list"])?.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        if owner_pid(name, 's').is_some_and(stale) {
            eprintln!("lease-torture: removing stale network namespace {name}");
            run("ip", &["netns", "del", name])?;
        }
    }
    for line in run("ip", &["-o", "link", "show"])?.lines() {
        let name = line.split(':').nth(1).unwrap_or("").trim();
        let name = name.split('@').next().unwrap_or("");
        if owner_pid(name, 'h')
            .or_else(|| owner_pid(name, 'n'))
            .is_some_and(stale)
        {
            eprintln!("lease-torture: removing stale interface {name}");
            run("ip", &["link", "del", name])?;
        }
    }
    Ok(())
}

/// Fails when an address of `prefix` is already on the host.
fn check_free(prefix: [u8; 3]) -> Result<(), String> {
    let [a, b, c] = prefix;
    let net = format!("{a}.{b}.{c}.");
    for line in run("ip", &["-o", "-4", "addr", "show"])?.lines() {
        if line.contains(&format!("inet {net}")) {
            let dev = line.split_whitespace().nth(1).unwrap_or("?");
            return Err(format!(
                "--netns: {net}0/24, this run's addresses (from its pid {}), is in use on \
                 {dev}: another lease-torture run whose pid has the same remainder mod 512? \
                 Try again (a new pid), or remove {dev}",
                std::process::id()
            ));
        }
    }
    Ok(())
}

/// The runtime's URL naming the forwarder at `local`, and the server it forwards to
/// (`host:port`).
pub fn forwarded_url(url: &str, kind: Kind, local: SocketAddr) -> Result<(String, String), String> {
    let bad = |why: &str| {
        format!(
            "--netns cannot forward {}: {why}",
            lease_core::redact_url(url)
        )
    };
    let s = url.find("://").ok_or_else(|| bad("no scheme"))? + 3;
    let rest = &url[s..];
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let (user, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if hostport.is_empty() || rest[end..].contains("host=") {
        return Err(bad("not a TCP host (a Unix socket?)"));
    }
    if hostport.contains(',') {
        return Err(bad("several hosts"));
    }
    let has_port = match hostport.strip_prefix('[') {
        Some(v6) => v6.contains("]:"),
        None => hostport.contains(':'),
    };
    let upstream = if has_port {
        hostport.to_owned()
    } else {
        format!("{hostport}:{}", nemesis::server_port(url, kind))
    };
    let user = user.map(|u| format!("{u}@")).unwrap_or_default();
    let new = format!("{}{user}{local}{}", &url[..s], &rest[end..]);
    Ok((new, upstream))
}

impl Network {
    /// Creates a namespace, a veth pair and a forwarder for each of `slots` runtime slots.
    pub async fn create(slots: usize, url: &str, kind: Kind) -> Result<Network, String> {
        run("ip", &["-V"])?;
        run("nft", &["--version"])?;
        sweep_stale()?;
        let pid = std::process::id();
        let prefix = run_prefix(pid);
        check_free(prefix)?;
        let mut net = Network {
            slots: Vec::new(),
            created: Vec::new(),
        };
        for slot in 0..slots {
            let s = net.add_slot(pid, prefix, slot, url, kind).await?;
            net.slots.push(s);
        }
        let [a, b, c] = prefix;
        eprintln!(
            "lease-torture: --netns: {slots} namespaces lt{pid}s0.. on {a}.{b}.{c}.0/24, \
             each runtime through its forwarder"
        );
        Ok(net)
    }

    async fn add_slot(
        &mut self,
        pid: u32,
        prefix: [u8; 3],
        slot: usize,
        url: &str,
        kind: Kind,
    ) -> Result<SlotNet, String> {
        let ns = format!("lt{pid}s{slot}");
        let host_if = format!("lt{pid}h{slot}");
        let ns_if = format!("lt{pid}n{slot}");
        let (host_ip, ns_ip) = slot_addresses(prefix, slot);
        run("ip", &["netns", "add", &ns])?;
        self.created.push((ns.clone(), host_if.clone()));
        run(
            "ip",
            &[
                "link", "add", &host_if, "type", "veth", "peer", "name", &ns_if,
            ],
        )?;
        run("ip", &["link", "set", &ns_if, "netns", &ns])?;
        run(
            "ip",
            &["addr", "add", &format!("{host_ip}/30"), "dev", &host_if],
        )?;
        run("ip", &["link", "set", &host_if, "up"])?;
        let in_ns = |args: &[&str]| {
            let mut all = vec!["-n", ns.as_str()];
            all.extend_from_slice(args);
            run("ip", &all)
        };
        in_ns(&["addr", "add", &format!("{ns_ip}/30"), "dev", &ns_if])?;
        in_ns(&["link", "set", &ns_if, "up"])?;
        in_ns(&["link", "set", "lo", "up"])?;
        nft(
            &ns,
            &format!(
                "table {TABLE} {{\n chain input {{ type filter hook input priority 0; policy accept; }}\n \
                 chain output {{ type filter hook output priority 0; policy accept; }}\n}}\n"
            ),
        )
        .await?;
        let probe = SocketAddr::from((host_ip, 0));
        let (_, upstream) = forwarded_url(url, kind, probe)?;
        let forwarder = Forwarder::start(probe, upstream).await?;
        let (url, _) = forwarded_url(url, kind, forwarder.local())?;
        Ok(SlotNet {
            ns,
            host_ip,
            url,
            forwarder,
            active: Vec::new(),
        })
    }

    /// The URL the runtime of `slot` connects with.
    pub fn url(&self, slot: usize) -> &str {
        &self.slots[slot].url
    }

    /// A command running `exe` inside the namespace of `slot` (`ip netns exec` execs it, so
    /// the child's pid is the runtime's: pause and kill reach it).
    pub fn command(&self, slot: usize, exe: &Path) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.slots[slot].ns]).arg(exe);
        cmd
    }

    /// Adds impairment `what` (fault `id`) to the link of `slot`.
    pub async fn impair(&mut self, slot: usize, id: u64, what: Impairment) -> Result<(), String> {
        self.slots[slot].active.push((id, what));
        self.apply(slot).await
    }

    /// Ends the impairment of fault `id` on `slot`.
    pub async fn heal(&mut self, slot: usize, id: u64) -> Result<(), String> {
        self.slots[slot].active.retain(|(i, _)| *i != id);
        self.apply(slot).await
    }

    /// Sets the rules and the forwarder's delay from the active impairments: a partition if
    /// any, the highest loss, the longest delay.
    async fn apply(&self, slot: usize) -> Result<(), String> {
        let s = &self.slots[slot];
        let mut partition = false;
        let mut loss = 0;
        let mut delay = Duration::ZERO;
        for (_, what) in &s.active {
            match *what {
                Impairment::Partition => partition = true,
                Impairment::Loss(p) => loss = loss.max(p),
                Impairment::Latency(d) => delay = delay.max(d),
            }
        }
        s.forwarder.set_delay(delay);
        nft(&s.ns, &rules(s.host_ip, partition, loss)).await
    }

    /// Closes every connection of `slot`'s runtime (the drop fault); how many.
    pub fn drop_connections(&self, slot: usize) -> u64 {
        self.slots[slot].forwarder.drop_connections()
    }

    /// The run's figures: the forwarders' connections and what partitions did.
    pub fn figures(&self, partitions: &PartitionFigures) -> NetworkFigures {
        NetworkFigures {
            connections: self.slots.iter().map(|s| s.forwarder.accepted()).sum(),
            connections_dropped: self.slots.iter().map(|s| s.forwarder.dropped()).sum(),
            partition_takeovers: partitions.takeovers,
            partition_refused: partitions.refused,
            partition_cut_off: partitions.cut_off,
        }
    }

    /// Removes every namespace and veth of the run (idempotent); prints what failed.
    pub fn teardown(&mut self) {
        self.slots.clear();
        for (ns, host_if) in std::mem::take(&mut self.created) {
            // Deleting the host side deletes its peer at once; the namespace goes after it.
            let _ = run("ip", &["link", "del", &host_if]);
            if let Err(e) = run("ip", &["netns", "del", &ns]) {
                eprintln!("lease-torture: warning: {e}");
            }
        }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// The rule set of a slot's chains: partition drops everything to and from the host side,
/// loss a random `loss` percent of it.
fn rules(host: Ipv4Addr, partition: bool, loss: u32) -> String {
    let mut s = format!("flush chain {TABLE} input\nflush chain {TABLE} output\n");
    let mut add = |cond: &str| {
        s.push_str(&format!(
            "add rule {TABLE} output ip daddr {host} {cond}drop\n"
        ));
        s.push_str(&format!(
            "add rule {TABLE} input ip saddr {host} {cond}drop\n"
        ));
    };
    if partition {
        add("");
    }
    if loss > 0 {
        add(&format!("numgen random mod 100 < {loss} "));
    }
    s
}

/// Loads an nftables script inside namespace `ns` (one transaction: all or nothing).
async fn nft(ns: &str, script: &str) -> Result<(), String> {
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("ip netns exec {ns} nft: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(script.as_bytes())
            .await
            .map_err(|e| format!("nft in {ns}: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| format!("nft in {ns}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "nft in {ns}: {} (script: {script:?})",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_names_and_urls() {
        assert_eq!(run_prefix(5), [198, 18, 5]);
        assert_eq!(run_prefix(512 + 300), [198, 19, 44]);
        let (h, n) = slot_addresses([198, 19, 255], 63);
        assert_eq!(
            (h.to_string(), n.to_string()),
            ("198.19.255.253".into(), "198.19.255.254".into())
        );
        assert!(
            format!("lt{}h63", 4_194_304).len() <= 15,
            "interface names fit IFNAMSIZ"
        );
        assert_eq!(owner_pid("lt123s4", 's'), Some(123));
        assert_eq!(owner_pid("lt123h4", 'h'), Some(123));
        assert_eq!(owner_pid("lt123s", 's'), None);
        assert_eq!(owner_pid("eth0", 's'), None);
        let local: SocketAddr = "198.18.1.1:4000".parse().expect("addr");
        let (u, up) = forwarded_url(
            "postgres://postgres:pw@127.0.0.1:5433/test?sslmode=disable",
            Kind::Postgres,
            local,
        )
        .expect("pg");
        assert_eq!(
            u,
            "postgres://postgres:pw@198.18.1.1:4000/test?sslmode=disable"
        );
        assert_eq!(up, "127.0.0.1:5433");
        let (u, up) = forwarded_url("redis://127.0.0.1", Kind::Redis, local).expect("redis");
        assert_eq!(
            (u.as_str(), up.as_str()),
            ("redis://198.18.1.1:4000", "127.0.0.1:6379")
        );
        let (_, up) = forwarded_url("redis://[::1]/0", Kind::Redis, local).expect("v6");
        assert_eq!(up, "[::1]:6379");
        assert!(
            forwarded_url(
                "postgres:///test?host=/run/postgresql",
                Kind::Postgres,
                local
            )
            .is_err()
        );
        assert!(forwarded_url("postgres://a:1,b:2/test", Kind::Postgres, local).is_err());
    }

    #[test]
    fn rules_and_restrictions() {
        let host = Ipv4Addr::new(198, 18, 0, 1);
        let r = rules(host, true, 20);
        assert!(r.contains("output ip daddr 198.18.0.1 drop"), "{r}");
        assert!(
            r.contains("input ip saddr 198.18.0.1 numgen random mod 100 < 20 drop"),
            "{r}"
        );
        assert_eq!(
            rules(host, false, 0).lines().count(),
            2,
            "healed: only the flushes"
        );
        let mut all: BTreeSet<FaultKind> = FaultKind::ALL.into_iter().collect();
        let notes = restrict(&mut all.clone(), false, Kind::Postgres).expect("notes");
        assert_eq!(notes.len(), 3);
        assert!(
            restrict(&mut all, true, Kind::Redis).is_err(),
            "failover refused"
        );
        all.remove(&FaultKind::Failover);
        assert!(
            restrict(&mut all, true, Kind::Redis)
                .expect("ok")
                .is_empty()
        );
        assert!(all.contains(&FaultKind::Partition));
        assert_eq!(
            restrict(&mut all, true, Kind::Sqlite)
                .expect("sqlite")
                .len(),
            3
        );
        assert!(!all.contains(&FaultKind::Loss));
    }
}
