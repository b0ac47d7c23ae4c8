//! Network namespaces for one fault test: one for the lock server and one per worker,
//! each worker's joined to the server's by a veth pair of its own, so that the kernel,
//! not a proxy, cuts off or slows one worker's link ([`NetFault`]).
//!
//! Link `i` is the pair `w<i>` (in the server's namespace, address `10.77.<i>.1/30`) ↔
//! `srv` (in worker `i`'s namespace, `10.77.<i>.2/30`). Both ends are made inside their
//! namespaces (never in the root one), and the addresses exist only there, so nothing
//! is routed anywhere else and parallel test processes cannot collide on them; the
//! namespaces are named `rmxt<pid>-<n>s` and `rmxt<pid>-<n>w<i>`, unique per process
//! and per [`Netns`]. Everything goes when the [`Netns`] is dropped (a panicking test
//! too); namespaces left by a process that died without dropping are removed by the
//! next [`Netns::create`].
//!
//! Making namespaces needs root (or the capabilities) and iproute2 (`ip`, `tc`);
//! [`Netns::create`] says when the machine refuses them, and the tests that use it skip
//! (`needs_root.rs`; they fail instead with `REDISMUTEX_REQUIRE_ROOT_TESTS=1`).

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::record::FaultKind;

/// The start of every namespace name the harness makes.
const PREFIX: &str = "rmxt";

/// Where `ip netns` keeps the names of the namespaces.
const NETNS_DIR: &str = "/run/netns";

/// Namespaces made by this process so far, for unique names.
static MADE: AtomicUsize = AtomicUsize::new(0);

/// How one worker's link is broken; each is undone by [`Netns::heal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetFault {
    /// The server's end of the pair set down (`ip link set w<i> down`): the worker's
    /// end loses its carrier, packets either way vanish, established connections stall
    /// and the worker's new connections time out.
    Down,
    /// A `blackhole` route to the other end on both sides: established connections
    /// stall (the kernel drops every segment, no reset), and the worker's new
    /// connections fail at once (`EINVAL` from its own kernel).
    Drop,
    /// Both ends shaped by `tbf` to `rate_kbit` kbit/s with a burst of 1600 bytes,
    /// packets queued at most `latency_ms` (then dropped, so TCP retransmits).
    Slow { rate_kbit: u32, latency_ms: u32 },
}

impl NetFault {
    /// The fault's kind in the crew's record.
    pub fn kind(self) -> FaultKind {
        match self {
            NetFault::Down => FaultKind::NetnsDown,
            NetFault::Drop => FaultKind::NetnsDrop,
            NetFault::Slow { .. } => FaultKind::NetnsSlow,
        }
    }
}

/// The namespaces of one test; removed on drop.
#[derive(Debug)]
pub struct Netns {
    /// The lock server's namespace.
    pub server: String,
    /// Worker namespaces, by link index.
    workers: Vec<String>,
    /// `rmxt<pid>-<n>`: the start of every name here.
    tag: String,
}

impl Netns {
    /// Makes the server's namespace, with no links yet, or says why the machine cannot
    /// (`Err`): no `ip`, or `ip netns add` refused for want of privilege (`Permission
    /// denied`, `Operation not permitted`: not root, no capability). Panics when `ip`
    /// fails otherwise: that is no reason to skip.
    pub fn create() -> Result<Netns, String> {
        sweep_stale();
        let n = MADE.fetch_add(1, Ordering::SeqCst);
        let tag = format!("{PREFIX}{}-{n}", std::process::id());
        let server = format!("{tag}s");
        let out = match Command::new("ip").args(["netns", "add", &server]).output() {
            Ok(out) => out,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(format!("there is no `ip` ({err})"));
            }
            Err(err) => panic!("cannot run ip: {err}"),
        };
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let stderr = stderr.trim();
            let refused = ["Permission denied", "Operation not permitted"];
            if refused.iter().any(|why| stderr.contains(why)) {
                return Err(format!("`ip netns add` was refused ({stderr})"));
            }
            panic!("`ip netns add {server}` failed: {stderr}");
        }
        Ok(Netns {
            server,
            workers: Vec::new(),
            tag,
        })
    }

    /// Makes worker namespace `i` (the next link index) joined to the server's by a
    /// veth pair, both ends up; returns `i`. Panics if `ip` refuses.
    pub fn add_worker(&mut self) -> usize {
        let i = self.workers.len();
        let ns = format!("{}w{i}", self.tag);
        ip(&["netns", "add", &ns]);
        self.workers.push(ns.clone());
        let server_end = format!("w{i}");
        // Both ends are made inside their namespaces, never in the root one.
        ip(&[
            "link",
            "add",
            &server_end,
            "netns",
            &self.server,
            "type",
            "veth",
            "peer",
            "name",
            "srv",
            "netns",
            &ns,
        ]);
        let (server_addr, worker_addr) =
            (format!("{}/30", addr(i, 1)), format!("{}/30", addr(i, 2)));
        ip(&[
            "-n",
            &self.server,
            "addr",
            "add",
            &server_addr,
            "dev",
            &server_end,
        ]);
        ip(&["-n", &ns, "addr", "add", &worker_addr, "dev", "srv"]);
        ip(&["-n", &self.server, "link", "set", &server_end, "up"]);
        ip(&["-n", &ns, "link", "set", "srv", "up"]);
        i
    }

    /// The name of worker namespace `i`.
    pub fn worker(&self, i: usize) -> &str {
        &self.workers[i]
    }

    /// The server's address on link `i`, which worker `i` connects to.
    pub fn server_addr(&self, i: usize) -> String {
        addr(i, 1)
    }

    /// Breaks link `i` with `fault`. Panics if `ip` or `tc` refuses.
    pub fn cut(&self, i: usize, fault: NetFault) {
        let (server, worker, server_end) = (&self.server, &self.workers[i], format!("w{i}"));
        match fault {
            NetFault::Down => ip(&["-n", server, "link", "set", &server_end, "down"]),
            NetFault::Drop => {
                ip(&["-n", server, "route", "add", "blackhole", &addr(i, 2)]);
                ip(&["-n", worker, "route", "add", "blackhole", &addr(i, 1)]);
            }
            NetFault::Slow {
                rate_kbit,
                latency_ms,
            } => {
                let (rate, latency) = (format!("{rate_kbit}kbit"), format!("{latency_ms}ms"));
                for (ns, dev) in [(server, server_end.as_str()), (worker, "srv")] {
                    let args = ["qdisc", "add", "dev", dev, "root", "tbf", "rate", &rate];
                    let tail = ["burst", "1600", "latency", &latency];
                    tc(ns, &[&args[..], &tail[..]].concat());
                }
            }
        }
    }

    /// Undoes `fault` on link `i`. Panics if `ip` or `tc` refuses.
    pub fn heal(&self, i: usize, fault: NetFault) {
        let (server, worker, server_end) = (&self.server, &self.workers[i], format!("w{i}"));
        match fault {
            NetFault::Down => ip(&["-n", server, "link", "set", &server_end, "up"]),
            NetFault::Drop => {
                ip(&["-n", server, "route", "del", "blackhole", &addr(i, 2)]);
                ip(&["-n", worker, "route", "del", "blackhole", &addr(i, 1)]);
            }
            NetFault::Slow { .. } => {
                tc(server, &["qdisc", "del", "dev", &server_end, "root"]);
                tc(worker, &["qdisc", "del", "dev", "srv", "root"]);
            }
        }
    }

    /// Packets the `tbf` shapers of link `i` held back or dropped so far (`overlimits`
    /// plus `dropped` of `tc -s qdisc`, both ends): above 0 once a [`NetFault::Slow`]
    /// has slowed traffic.
    pub fn shaped(&self, i: usize) -> u64 {
        let ends = [
            (&self.server, format!("w{i}")),
            (&self.workers[i], "srv".into()),
        ];
        ends.iter()
            .map(|(ns, dev)| {
                let out = run("tc", &["-n", ns, "-s", "qdisc", "show", "dev", dev])
                    .unwrap_or_else(|err| panic!("{err}"));
                counter(&out, "overlimits ") + counter(&out, "dropped ")
            })
            .sum()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting a namespace deletes its veth ends, and so their peers.
        for ns in self.workers.iter().chain([&self.server]) {
            if let Err(err) = run("ip", &["netns", "del", ns]) {
                eprintln!("{err}");
            }
        }
    }
}

/// `10.77.<i>.<host>`: host 1 is the server's end of link `i`, 2 the worker's.
fn addr(i: usize, host: u8) -> String {
    assert!(i < 256, "at most 256 links");
    format!("10.77.{i}.{host}")
}

/// The number after the first `label` in `text`, 0 if none.
fn counter(text: &str, label: &str) -> u64 {
    text.split(label)
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Runs `ip args...`; panics with its error output if it fails.
fn ip(args: &[&str]) {
    run("ip", args).unwrap_or_else(|err| panic!("{err}"));
}

/// Runs `tc -n ns args...`; panics with its error output if it fails.
fn tc(ns: &str, args: &[&str]) {
    let args = [&["-n", ns][..], args].concat();
    run("tc", &args).unwrap_or_else(|err| panic!("{err}"));
}

/// Runs `program args...`: its standard output, or what failed.
fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|err| format!("cannot run {program}: {err}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!("`{program} {}` failed: {stderr}", args.join(" ")));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Removes the namespaces of processes that are gone (a test killed before its drop).
fn sweep_stale() {
    let Ok(entries) = std::fs::read_dir(NETNS_DIR) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        if !std::path::Path::new("/proc").join(pid).exists() {
            let _ = run("ip", &["netns", "del", &name]);
        }
    }
}
