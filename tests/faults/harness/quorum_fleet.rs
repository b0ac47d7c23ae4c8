//! The fault suite in quorum mode: three independent `redis-server` nodes, a [`Proxy`] in
//! front of each (every worker reaches node `n` through proxy `n`, so a fault on a proxy
//! cuts that node off from everyone), a referee server, and worker processes
//! (`examples/fault_worker.rs` given the three proxy URLs, so each builds a `Quorum`).
//! Faults hit one node at a time ([`NodeFault`]): a partition (blackhole), a slow node,
//! connections cut again and again, a freeze (SIGSTOP), and a restart on the same port
//! within quorum mode's preconditions (the quorum guide, `redismutex::guide::quorum`):
//! empty after the node stayed down past the longest TTL, or at once from its append-only
//! file on nodes run with `appendonly yes` and `appendfsync always`
//! ([`QuorumFleet::start_aof`]). The run ends in a [`QuorumReport`]: the fleet [`Report`]
//! plus what quorum mode adds (tokens in the order the lock passed, work done during
//! faults, the lock keys left on each node).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use nix::sys::signal::Signal;
use redis::aio::MultiplexedConnection;

use super::fleet::{worker_command, Fleet, Spec};
use super::order::{guard_overlaps, out_of_order};
use super::report::Report;
use crate::common::clock::ServerClock;
use crate::common::crew::{dump_with, Crew};
use crate::common::events::{now_us, Event};
use crate::common::proxy::{Fault, Proxy};
use crate::common::record::{FaultKind, FaultRecord, HeldLock, Target};
use crate::common::RedisServer;

/// How many nodes the quorum has.
pub const NODES: usize = 3;

/// How much longer than the TTL a node restarted empty stays down, at least: every key
/// it held has expired by the time it answers again.
pub const RESTART_MARGIN: Duration = Duration::from_millis(200);

/// The arguments of durable nodes ([`QuorumFleet::start_aof`]): every write is in the
/// append-only file, fsynced, before its reply.
pub const AOF_ALWAYS: &[&str] = &["--appendonly", "yes", "--appendfsync", "always"];

/// One fault on one node, healed before [`QuorumFleet::inject`] returns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NodeFault {
    /// The node's proxy blackholes every connection for this long, then resets them.
    Partition(Duration),
    /// The node's proxy holds every chunk 150–200 ms each way (past the per-node bound
    /// of a tenth of the TTL) for this long: calls time out, then run late on the node.
    Slow(Duration),
    /// The node's proxy resets every connection every 150 ms for this long.
    Cut(Duration),
    /// The node's `redis-server` is SIGSTOPped for this long (queued calls run late).
    Freeze(Duration),
    /// The node's `redis-server` is SIGKILLed, stays down this long, and starts again
    /// empty on the same port (its append-only file removed, if any). Within quorum
    /// mode's preconditions only: at least the TTL plus [`RESTART_MARGIN`] (checked).
    RestartEmpty(Duration),
    /// The node's `redis-server` is SIGKILLed and starts again at once on the same port
    /// from its append-only file: every write it acknowledged is back. Only on a fleet
    /// of durable nodes ([`QuorumFleet::start_aof`]; checked).
    RestartFromAof,
}

impl NodeFault {
    /// How the fault is counted in the report, for a TTL of `ttl_ms`.
    pub fn kind(self, ttl_ms: u64) -> FaultKind {
        match self {
            NodeFault::Partition(_) => FaultKind::PartitionNode,
            NodeFault::Slow(_) => FaultKind::SlowNode,
            NodeFault::Cut(_) => FaultKind::CutNode,
            NodeFault::Freeze(d) if d.as_millis() > u128::from(ttl_ms) => FaultKind::FreezeNodeLong,
            NodeFault::Freeze(_) => FaultKind::FreezeNode,
            NodeFault::RestartEmpty(_) => FaultKind::RestartNodeEmpty,
            NodeFault::RestartFromAof => FaultKind::RestartNodeAof,
        }
    }
}

/// Nodes, proxies, referee, workers, their events and the faults injected so far.
#[derive(Debug)]
pub struct QuorumFleet {
    pub nodes: Vec<RedisServer>,
    pub proxies: Vec<Proxy>,
    /// The workers, their events, the referee and the faults so far.
    pub crew: Crew,
    pub ttl_ms: u64,
    pub mutex: String,
    /// How many lock keys the workers use at most.
    pub keys: u64,
    /// Who held which lock key on each node right before each node fault: `(µs, node,
    /// lock key, id)`.
    pub snapshots: Vec<(u64, usize, String, String)>,
    /// Faults whose effect was checked on the node (see [`inject`](Self::inject)).
    pub verified: usize,
    /// Faults whose effect could not be seen, described.
    pub unverified: Vec<String>,
    /// Whether the nodes run with `appendonly yes` and `appendfsync always`.
    pub aof: bool,
}

impl QuorumFleet {
    /// Starts the nodes (without persistence), their proxies and the referee; no workers
    /// yet.
    pub async fn start(ttl_ms: u64) -> QuorumFleet {
        Self::start_nodes(ttl_ms, false).await
    }

    /// The same with durable nodes: each runs with [`AOF_ALWAYS`] in a directory that
    /// outlives its restarts, so [`NodeFault::RestartFromAof`] brings its data back.
    pub async fn start_aof(ttl_ms: u64) -> QuorumFleet {
        Self::start_nodes(ttl_ms, true).await
    }

    /// The same with each node on a wall clock of its own, which the test moves (see
    /// `clock.rs`): the clocks, by node.
    pub async fn start_on_clocks(ttl_ms: u64) -> (QuorumFleet, Vec<ServerClock>) {
        let clocks: Vec<ServerClock> = (0..NODES).map(|_| ServerClock::new()).collect();
        let nodes = clocks
            .iter()
            .map(|clock| {
                RedisServer::try_start_with_env(&[], &clock.env())
                    .unwrap_or_else(|err| panic!("{err}"))
            })
            .collect();
        (Self::start_with(nodes, ttl_ms, false).await, clocks)
    }

    async fn start_nodes(ttl_ms: u64, aof: bool) -> QuorumFleet {
        let args: &[&str] = if aof { AOF_ALWAYS } else { &[] };
        let nodes: Vec<RedisServer> = (0..NODES).map(|_| RedisServer::start_with(args)).collect();
        Self::start_with(nodes, ttl_ms, aof).await
    }

    /// The fleet over `nodes`, started by the caller.
    async fn start_with(nodes: Vec<RedisServer>, ttl_ms: u64, aof: bool) -> QuorumFleet {
        let mut proxies = Vec::new();
        for node in &nodes {
            proxies.push(Proxy::start(node.port()).await);
        }
        QuorumFleet {
            nodes,
            proxies,
            crew: Crew::start().await,
            ttl_ms,
            mutex: "faults".to_string(),
            keys: 1,
            snapshots: Vec::new(),
            verified: 0,
            unverified: Vec::new(),
            aof,
        }
    }

    /// The proxies' URLs, comma-separated: a worker's `FW_LOCK_URL` in quorum mode.
    pub fn lock_urls(&self) -> String {
        let urls: Vec<String> = self.proxies.iter().map(Proxy::url).collect();
        urls.join(",")
    }

    /// Injects `fault` on node `node`, records it, and heals it: when this returns every
    /// node is up and every proxy passes. It also checks on the node that the fault took
    /// effect, counting it in [`verified`](Self::verified) or
    /// [`unverified`](Self::unverified): a partitioned node processed no command but
    /// this check's own, a cut node saw new connections, a frozen node was in state `T`,
    /// a restarted node has a new run id (and, restarted from its append-only file, every
    /// fence counter it had, none lower).
    pub async fn inject(&mut self, node: usize, fault: NodeFault) {
        self.snapshot().await;
        let index = self.crew.begin(fault.kind(self.ttl_ms), Target::Node(node));
        let seen = match fault {
            NodeFault::Partition(d) => {
                self.proxies[node].set(Fault::Blackhole);
                // What was on its way to the node before the blackhole is let through.
                let settle = Duration::from_millis(50).min(d);
                tokio::time::sleep(settle).await;
                // The workers' scripts (`EVALSHA`) that ran on the node meanwhile: a
                // watcher's reads on connections of its own (`EVAL`) do not count.
                let direct = self.nodes[node].conn().await;
                let before = evalsha_calls(&direct).await;
                tokio::time::sleep(d - settle).await;
                let during = evalsha_calls(&direct).await - before;
                self.proxies[node].set(Fault::Pass);
                (during == 0)
                    .then_some(())
                    .ok_or(format!("{during} scripts ran"))
            }
            NodeFault::Slow(d) => {
                let bound = self.ttl_ms / 10;
                self.proxies[node].set(Fault::Delay {
                    base: Duration::from_millis(bound + bound / 2),
                    jitter: Duration::from_millis(bound / 2),
                });
                tokio::time::sleep(d).await;
                self.proxies[node].set(Fault::Pass);
                Ok(())
            }
            NodeFault::Cut(d) => {
                let direct = self.nodes[node].conn().await;
                let before = node_stat(&direct, "total_connections_received").await;
                let until = tokio::time::Instant::now() + d;
                while tokio::time::Instant::now() < until {
                    self.proxies[node].reset_all();
                    tokio::time::sleep(Duration::from_millis(150)).await;
                }
                let new = node_stat(&direct, "total_connections_received").await - before;
                (new > 0).then_some(()).ok_or("no reconnection".to_string())
            }
            NodeFault::Freeze(d) => {
                self.nodes[node].pause();
                tokio::time::sleep(Duration::from_millis(20)).await;
                let state = process_state(self.nodes[node].pid());
                tokio::time::sleep(d.saturating_sub(Duration::from_millis(20))).await;
                self.nodes[node].resume();
                (state == 'T')
                    .then_some(())
                    .ok_or(format!("state {state:?}"))
            }
            NodeFault::RestartEmpty(down) => {
                let least = Duration::from_millis(self.ttl_ms) + RESTART_MARGIN;
                assert!(
                    down >= least,
                    "an empty restart after {down:?} is outside quorum mode's preconditions \
                     (down past the TTL, {least:?} here): no test of its safety"
                );
                let before = self.run_id(node).await;
                let aof = self.aof;
                let server = &mut self.nodes[node];
                tokio::task::block_in_place(|| server.stop());
                if aof {
                    server.remove_aof();
                }
                tokio::time::sleep(down).await;
                // `restart` waits for PING on a blocking sleep: not on a runtime thread
                // the proxies need.
                tokio::task::block_in_place(|| server.restart());
                let after = self.run_id(node).await;
                (after != before)
                    .then_some(())
                    .ok_or("same run id".to_string())
            }
            NodeFault::RestartFromAof => {
                assert!(
                    self.aof,
                    "a restart from the AOF needs a fleet from start_aof"
                );
                let before = self.run_id(node).await;
                let counters = self.fence_counters(node).await;
                let server = &mut self.nodes[node];
                tokio::task::block_in_place(|| server.restart());
                let after = self.run_id(node).await;
                let back = self.fence_counters(node).await;
                let lower: Vec<String> = counters
                    .iter()
                    .filter(|(key, value)| back.get(*key).is_none_or(|now| now < *value))
                    .map(|(key, value)| format!("{key} {value} -> {:?}", back.get(key)))
                    .collect();
                if after == before {
                    Err("same run id".to_string())
                } else if counters.is_empty() {
                    Err("no fence counter before the kill".to_string())
                } else if !lower.is_empty() {
                    Err(format!("fence counters not back from the AOF: {lower:?}"))
                } else {
                    Ok(())
                }
            }
        };
        self.crew.end(index);
        match seen {
            Ok(()) => self.verified += 1,
            Err(why) => self
                .unverified
                .push(format!("{fault:?} on node {node}: {why}")),
        }
    }

    /// Notes who holds which lock key on each node now, for the evidence.
    pub async fn snapshot(&mut self) {
        for (n, node) in self.nodes.iter().enumerate() {
            for held in HeldLock::read(&node.conn().await, &self.mutex, self.keys).await {
                self.snapshots.push((held.read_us, n, held.key, held.id));
            }
        }
    }

    /// The nodes on which lock id `id` holds lock key `key` now.
    pub async fn held_on(&self, key: &str, id: &str) -> Vec<usize> {
        let mut on = Vec::new();
        for (n, node) in self.nodes.iter().enumerate() {
            let held = HeldLock::read(&node.conn().await, &self.mutex, self.keys).await;
            if held.iter().any(|h| h.key == key && h.id == id) {
                on.push(n);
            }
        }
        on
    }

    /// The fence counters on node `node` now, by key.
    async fn fence_counters(&self, node: usize) -> BTreeMap<String, u64> {
        let mut conn = self.nodes[node].conn().await;
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}*:fence", self.mutex))
            .query_async(&mut conn)
            .await
            .expect("KEYS");
        let mut counters = BTreeMap::new();
        for key in keys {
            let value: Option<u64> = redis::cmd("GET")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .expect("GET a fence counter");
            if let Some(value) = value {
                counters.insert(key, value);
            }
        }
        counters
    }

    /// The run id of node `node`: a new one each time it starts.
    async fn run_id(&self, node: usize) -> String {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut self.nodes[node].conn().await)
            .await
            .expect("INFO server");
        info.lines()
            .find_map(|line| line.strip_prefix("run_id:"))
            .map(|id| id.trim().to_string())
            .expect("run_id in INFO")
    }

    /// Sections completed (`RELEASED ... held=true`) after `us`.
    pub fn released_after(&self, us: u64) -> usize {
        self.crew
            .log
            .count(|e| e.is("RELEASED") && e.us > us && e.last() == "held=true")
    }

    /// Stops the workers, waits a TTL, and reads everything into the fleet's report
    /// (printed by [`Fleet::finish`]), then adds what quorum mode checks, which it
    /// prints too.
    pub async fn finish(&mut self, label: &str) -> QuorumReport {
        let fleet = Fleet::finish(self, label).await;
        let crew = &self.crew;
        let events = crew.log.all();
        let report = QuorumReport {
            out_of_order: out_of_order(&events),
            guard_overlaps: guard_overlaps(&events, &crew.faults),
            during_faults: during_faults(&events, &crew.faults),
            losses: events.iter().filter(|e| e.is_loss()).cloned().collect(),
            verified: self.verified,
            unverified: self.unverified.clone(),
            fleet,
        };
        print!("{}", report.quorum_lines());
        report
    }

    /// Every event and fault from `from_us` to `to_us`, and who held which lock key on
    /// each node before each node fault, one a line, in ms since the start.
    pub fn dump_between(&self, from_us: u64, to_us: u64) -> String {
        let within = |us: u64| (from_us..=to_us).contains(&us);
        let mut events = self.crew.log.all();
        let all = events.clone();
        events.retain(|event| within(event.us));
        let faults: Vec<FaultRecord> = (self.crew.faults.iter())
            .filter(|fault| fault.end_us >= from_us && fault.start_us <= to_us)
            .cloned()
            .collect();
        let mut holders = Vec::new();
        for (us, node, key, id) in &self.snapshots {
            if within(*us) {
                let whose = all
                    .iter()
                    .find(|e| e.is("ACQUIRED") && e.id() == id)
                    .map_or(format!("id {id}"), |e| {
                        format!("{}/{} token {}", e.worker, e.field(0), e.token())
                    });
                holders.push((*us, format!("node {node}: {key} held by {whose}")));
            }
        }
        dump_with(&events, &faults, self.crew.started_us, holders)
    }

    /// The evidence around each violation the report names: the events and faults of
    /// the 3 s before it and 0.5 s after (empty when there is none).
    pub fn evidence(&self, report: &QuorumReport) -> String {
        let r = &report.fleet.referee;
        let mut out = String::new();
        let lines = r
            .violation_log
            .iter()
            .chain(&r.token_order_log)
            .chain(&report.out_of_order)
            .chain(&report.guard_overlaps);
        for line in lines {
            let at: u64 = line
                .split_whitespace()
                .next()
                .and_then(|us| us.parse().ok())
                .unwrap_or(0);
            out.push_str(&format!("--- around: {line}\n"));
            out.push_str(&self.dump_between(at.saturating_sub(3_000_000), at + 500_000));
            out.push('\n');
        }
        out
    }
}

impl Fleet for QuorumFleet {
    fn crew(&self) -> &Crew {
        &self.crew
    }

    fn crew_mut(&mut self) -> &mut Crew {
        &mut self.crew
    }

    fn ttl_ms(&self) -> u64 {
        self.ttl_ms
    }

    /// Starts worker `name` over the quorum, reaching node `n` through proxy `n`.
    async fn spawn(&mut self, name: &str, spec: &Spec) {
        self.keys = self.keys.max(spec.first_key + spec.keys);
        let mut command = worker_command(name, spec, self.ttl_ms, &self.mutex);
        command.env("FW_LOCK_URL", self.lock_urls());
        self.crew.launch(name, command).await;
    }

    /// The lock keys (not fence counters nor granted tokens) left on each node, as
    /// `node n: key`.
    async fn keys_left(&self) -> Vec<String> {
        let mut left = Vec::new();
        for (n, node) in self.nodes.iter().enumerate() {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg("*")
                .query_async(&mut node.conn().await)
                .await
                .expect("KEYS");
            left.extend(
                keys.into_iter()
                    .filter(|k| !super::fleet::kept(k))
                    .map(|k| format!("node {n}: {k}")),
            );
        }
        left
    }

    /// Every event and fault, and who held which lock key on each node before each
    /// node fault.
    fn dump(&self) -> String {
        self.dump_between(0, u64::MAX)
    }
}

impl Drop for QuorumFleet {
    fn drop(&mut self) {
        // A node left frozen would not die with its SIGKILL until thawed.
        for node in &self.nodes {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(i32::try_from(node.pid()).expect("pid fits i32")),
                Signal::SIGCONT,
            );
        }
    }
}

/// A counter from `INFO` over `conn`, a direct connection to a node.
async fn node_stat(conn: &MultiplexedConnection, name: &str) -> i64 {
    let info: String = redis::cmd("INFO")
        .query_async(&mut conn.clone())
        .await
        .expect("INFO");
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{name}:")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in INFO"))
}

/// How many `EVALSHA` the node behind `conn` has run (`INFO commandstats`).
async fn evalsha_calls(conn: &MultiplexedConnection) -> i64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn.clone())
        .await
        .expect("INFO commandstats");
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|calls| calls.parse().ok())
        .unwrap_or(0)
}

/// The state letter of process `pid` in `/proc/<pid>/stat` (`T` when stopped).
fn process_state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')')
        .next()
        .and_then(|rest| rest.trim().chars().next())
        .unwrap_or('?')
}

/// What a quorum run measured, beyond the fleet [`Report`].
#[derive(Debug, Clone)]
pub struct QuorumReport {
    pub fleet: Report,
    /// Acquisitions whose token is not above every token the lock had before them (a
    /// writer's), or not above the last writer's (a reader's), in the order the workers
    /// printed `ACQUIRED`: `<us> <key> <worker>/<mode> token T ...`.
    pub out_of_order: Vec<String>,
    /// Acquisitions made while another guard on the key, which one of them a writer,
    /// still believed it held the lock (between its `ACQUIRED` and its `FIRED`):
    /// `<us> <key> <worker>/<mode> token T acquired while ...`.
    pub guard_overlaps: Vec<String>,
    /// Sections completed while a fault was on, by fault kind.
    pub during_faults: BTreeMap<String, usize>,
    /// Tokens fired as `Lost` or `Expired`.
    pub losses: Vec<Event>,
    /// Node faults whose effect was seen on the node.
    pub verified: usize,
    /// Node faults whose effect was not seen, described.
    pub unverified: Vec<String>,
}

impl QuorumReport {
    /// The lines this report adds to the fleet's.
    pub fn quorum_lines(&self) -> QuorumLines<'_> {
        QuorumLines(self)
    }

    /// How many faults of `kind` were injected.
    pub fn faults(&self, kind: FaultKind) -> usize {
        self.fleet
            .faults
            .get(&format!("{kind:?}"))
            .copied()
            .unwrap_or(0)
    }
}

impl fmt::Display for QuorumReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.fleet, self.quorum_lines())
    }
}

/// What a [`QuorumReport`] adds to the fleet's report, as lines of text.
pub struct QuorumLines<'a>(&'a QuorumReport);

impl fmt::Display for QuorumLines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let report = self.0;
        writeln!(
            f,
            "   quorum             tokens out of acquisition order {}, sections during faults {:?}, \
             tokens fired as lost {}",
            report.out_of_order.len(),
            report.during_faults,
            report.losses.len()
        )?;
        writeln!(
            f,
            "   node faults seen   {} (not seen: {:?})",
            report.verified, report.unverified
        )?;
        for line in &report.out_of_order {
            writeln!(f, "     out of order: {line}")?;
        }
        writeln!(
            f,
            "   guards overlapping {} (an acquisition while another guard still held the key)",
            report.guard_overlaps.len()
        )?;
        for line in &report.guard_overlaps {
            writeln!(f, "     guard overlap: {line}")?;
        }
        for event in &report.losses {
            writeln!(f, "     fired: {event:?}")?;
        }
        Ok(())
    }
}

/// Sections completed (`RELEASED ... held=true`) while a fault was on, by fault kind.
fn during_faults(events: &[Event], faults: &[FaultRecord]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for fault in faults {
        let done = events
            .iter()
            .filter(|e| {
                e.is("RELEASED")
                    && e.last() == "held=true"
                    && fault.start_us <= e.us
                    && e.us <= fault.end_us
            })
            .count();
        *out.entry(format!("{:?}", fault.kind)).or_default() += done;
    }
    out
}

/// The checks every quorum run must pass, with the evidence on failure: no overlap (of
/// sections at the referee, or of guards in the log), no lost update, no holder entering
/// with a token not above the last writer's, no token out of the order the lock passed in,
/// no fenced write accepted with another acquisition's token, no section's fenced write
/// refused, and no lock key left on any node once a TTL passed.
pub fn assert_quorum_safe(fleet: &QuorumFleet, report: &QuorumReport) {
    let r = &report.fleet.referee;
    let broken = r.violations != 0
        || r.lost_updates != 0
        || r.token_order != 0
        || r.stale_accepted != 0
        || report.fleet.rejected_writes != 0
        || !report.out_of_order.is_empty()
        || !report.guard_overlaps.is_empty();
    if broken {
        let path = std::env::temp_dir().join(format!(
            "faults_quorum-{}-{}.log",
            std::process::id(),
            now_us()
        ));
        let _ = std::fs::write(&path, fleet.dump_between(0, u64::MAX));
        panic!(
            "quorum safety broken: overlaps {}, lost updates {}, entered out of token order {}, \
             stale fenced writes accepted {}, section writes refused {}, tokens out of \
             acquisition order {}, guards overlapping {}\n{report}\nevidence (every event \
             in {path:?}):\n{}",
            r.violations,
            r.lost_updates,
            r.token_order,
            r.stale_accepted,
            report.fleet.rejected_writes,
            report.out_of_order.len(),
            report.guard_overlaps.len(),
            fleet.evidence(report)
        );
    }
    assert!(
        report.fleet.keys_left.is_empty(),
        "lock keys left a TTL after the workers stopped: {:?}",
        report.fleet.keys_left
    );
}
