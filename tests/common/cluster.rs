//! A Redis Cluster for one test: three masters with one replica each, six
//! `redis-server` processes on free loopback ports joined by `redis-cli --cluster
//! create`, each in its own temporary directory, all killed when dropped. Nodes can be
//! killed or frozen to make the cluster fail over, a killed node started again (it
//! rejoins as a replica), and a node frozen too briefly for a failover.
//!
//! The cluster's state is read from `CLUSTER NODES`, not `CLUSTER SLOTS` or `CLUSTER
//! SHARDS`: those two leave out (or call "loading") a replica whose replication offset
//! is still 0, which on a fresh cluster lasts until the first write or the master's
//! replication ping 10 s later.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::ops::{Range, RangeInclusive};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;

use super::blocking::{connect, poll_until, query};
use super::server::{binaries, RedisServer, INSTALL_HINT};

/// The number of hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;
/// The `cluster-node-timeout` of [`Cluster::start`], in ms: a node that does not answer
/// for this long is suspected, and a killed master is replaced within about 3 s.
pub const NODE_TIMEOUT_MS: u64 = 1000;
/// How long the cluster may take to form, and a failover to complete.
pub const SETTLE: Duration = Duration::from_secs(30);
/// How many times [`Cluster::start`] starts a cluster that does not form.
pub const FORM_ATTEMPTS: usize = 2;

/// The number of nodes of [`Cluster::start`]: three masters and their replicas.
pub const NODES: usize = 6;
const MASTERS: usize = 3;
const POLL: Duration = Duration::from_millis(20);
/// Client ports are drawn from here; the cluster bus port (`port + 10000`) is then in
/// 22000..32000. Both stay below the ephemeral range (32768..) that port-0 binds and
/// outgoing connections use.
const PORTS: Range<u16> = 12000..22000;
const BUS_OFFSET: u16 = 10000;

/// Client ports handed out in this process, never handed out twice.
static RESERVED: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// Variables set for one node's process.
pub type NodeEnv = Vec<(OsString, OsString)>;

/// A node's role as a live node sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Master,
    Replica,
}

/// What the harness did to a node's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Running,
    /// Frozen by [`Cluster::pause`].
    Paused,
    /// Killed by [`Cluster::kill`].
    Killed,
}

/// One node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub port: u16,
    pub pid: u32,
    /// As a live node sees it; a killed node keeps its last role.
    pub role: Role,
    pub state: State,
}

/// A master that serves slots, as a live node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Master {
    pub port: u16,
    /// Its slot ranges, in order.
    pub slots: Vec<RangeInclusive<u16>>,
    /// The ports of its replicas, in order.
    pub replicas: Vec<u16>,
}

impl Master {
    /// Whether it serves `slot`.
    pub fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|range| range.contains(&slot))
    }
}

/// A running Redis Cluster of three masters with one replica each on 127.0.0.1, with
/// no persistence. Dropping it kills every node.
#[derive(Debug)]
pub struct Cluster {
    procs: Mutex<Vec<Proc>>,
    /// The replicas a node had when it was killed or paused, for [`Cluster::wait_failover`].
    lost_replicas: Mutex<HashMap<u16, Vec<u16>>>,
    /// The nodes' `cluster-node-timeout`, in ms.
    node_timeout_ms: u64,
}

impl Cluster {
    /// Starts a cluster with a [`NODE_TIMEOUT_MS`] node timeout and waits until it is
    /// fully formed; panics with the nodes' logs (or [`INSTALL_HINT`]) on failure.
    /// Takes about 2 s: a master reports `cluster_state:ok` no sooner than 2 s after it
    /// started (Redis's `CLUSTER_WRITABLE_DELAY`).
    pub fn start() -> Self {
        Self::start_with_node_timeout(NODE_TIMEOUT_MS)
    }

    /// [`start`](Self::start) with another `cluster-node-timeout`, in ms.
    pub fn start_with_node_timeout(node_timeout_ms: u64) -> Self {
        Self::start_with_env(node_timeout_ms, &[])
    }

    /// [`start_with_node_timeout`](Self::start_with_node_timeout), with node `i` (in
    /// start order, see [`nodes`](Self::nodes)) started with the variables `envs[i]` set
    /// for its process, and again at each restart (nodes past the end of `envs` with
    /// none): each node on a clock of its own, say.
    ///
    /// A cluster that does not form within [`SETTLE`] is killed and started again on new
    /// ports, up to [`FORM_ATTEMPTS`] times in all, each failure printed with the nodes'
    /// view and logs: a harness fault (a port another test's process took meanwhile, a
    /// machine too loaded to gossip) is not the test's.
    pub fn start_with_env(node_timeout_ms: u64, envs: &[NodeEnv]) -> Self {
        let mut failures = Vec::new();
        for attempt in 1..=FORM_ATTEMPTS {
            let cluster = Self {
                procs: Mutex::new(spawn_nodes(node_timeout_ms, envs)),
                lost_replicas: Mutex::new(HashMap::new()),
                node_timeout_ms,
            };
            match cluster.create().and_then(|()| cluster.wait_formed()) {
                Ok(()) => return cluster,
                Err(why) => {
                    let why = format!("attempt {attempt}: {why}\n{}", cluster.logs());
                    eprintln!("{why}\n(the cluster is started again on new ports)");
                    failures.push(why);
                }
            }
        }
        panic!(
            "the cluster did not form in {FORM_ATTEMPTS} attempts:\n{}",
            failures.join("\n")
        )
    }

    /// Joins the nodes with `redis-cli --cluster create`.
    fn create(&self) -> Result<(), String> {
        let addresses = self
            .ports()
            .into_iter()
            .map(|port| format!("127.0.0.1:{port}"));
        let cli = binaries::redis_cli();
        let output = Command::new(&cli)
            .args(["--cluster", "create"])
            .args(addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|err| panic!("cannot run {cli:?}: {err}\n{INSTALL_HINT}"));
        if !output.status.success() {
            return Err(format!(
                "redis-cli --cluster create failed ({}):\n{}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr),
            ));
        }
        Ok(())
    }

    /// Waits until every node reports `cluster_state:ok` and the same three masters
    /// covering every slot, each with one replica whose link to it is up; the error
    /// says what was still missing, with `CLUSTER NODES`.
    fn wait_formed(&self) -> Result<(), String> {
        let ports = self.live_ports();
        poll_until(SETTLE, POLL, || formed(&ports))
            .map(drop)
            .map_err(|why| {
                format!(
                    "the cluster did not form within {SETTLE:?}: {why}\n{}",
                    self.describe()
                )
            })
    }

    /// The nodes' `cluster-node-timeout`.
    pub fn node_timeout(&self) -> Duration {
        Duration::from_millis(self.node_timeout_ms)
    }

    /// Every node, in start order, with its role as a live node sees it.
    pub fn nodes(&self) -> Vec<Node> {
        let view = self.view();
        self.procs()
            .iter()
            .map(|proc| Node {
                port: proc.port(),
                pid: proc.server.pid(),
                role: view
                    .role(proc.port())
                    .unwrap_or_else(|| panic!("{} is not in CLUSTER NODES", proc.port())),
                state: proc.state,
            })
            .collect()
    }

    /// The masters serving slots as a live node sees them now, ordered by their first
    /// slot. Right after a kill this still includes the killed master.
    pub fn masters(&self) -> Vec<Master> {
        self.view().masters()
    }

    /// The port of the master serving `slot` as a live node sees it now.
    pub fn master_of_slot(&self, slot: u16) -> u16 {
        self.masters()
            .iter()
            .find(|master| master.serves(slot))
            .map(|master| master.port)
            .unwrap_or_else(|| panic!("no master serves slot {slot}\n{}", self.describe()))
    }

    /// A lock name `{<prefix><n>}`, all hash tag, whose slot master `i` (of
    /// [`masters`](Self::masters)) serves; the smallest such `n`.
    pub fn name_on_master(&self, i: usize, prefix: &str) -> String {
        let masters = self.masters();
        let master = masters
            .get(i)
            .unwrap_or_else(|| panic!("there are {} masters, not {}", masters.len(), i + 1));
        (0u32..)
            .map(|n| format!("{{{prefix}{n}}}"))
            .find(|name| master.serves(slot(name)))
            .expect("some name lands on every master")
    }

    /// `redis://127.0.0.1:<port>/`
    pub fn url(&self, port: u16) -> String {
        node_url(port)
    }

    /// The URLs of every node, in start order, killed and paused ones too.
    pub fn urls(&self) -> Vec<String> {
        self.ports().into_iter().map(node_url).collect()
    }

    /// A cluster client speaking RESP3 (sharded Pub/Sub needs its push messages),
    /// seeded with the running nodes; otherwise redis-rs's defaults.
    pub fn client(&self) -> ClusterClient {
        ClusterClientBuilder::new(self.live_urls())
            .use_protocol(redis::ProtocolVersion::RESP3)
            .build()
            .expect("valid urls")
    }

    /// A cluster client with redis-rs's defaults (RESP2), seeded with the running nodes.
    pub fn client_resp2(&self) -> ClusterClient {
        ClusterClient::new(self.live_urls()).expect("valid urls")
    }

    /// A new cluster connection from [`client`](Self::client).
    pub async fn conn(&self) -> ClusterConnection {
        self.client()
            .get_async_connection()
            .await
            .unwrap_or_else(|err| panic!("connect to the cluster: {err}\n{}", self.describe()))
    }

    /// A plain connection to the node on `port` alone, for raw checks there. Its
    /// response timeout is 10 s, not redis-rs's 500 ms: `CLUSTER SETSLOT` writes and
    /// fsyncs the node's config file, which a busy disk can hold up past half a second.
    pub async fn node_conn(&self, port: u16) -> MultiplexedConnection {
        let mut conn = redis::Client::open(node_url(port))
            .expect("valid url")
            .get_multiplexed_async_connection()
            .await
            .unwrap_or_else(|err| panic!("connect to {port}: {err}\n{}", self.log(port)));
        conn.set_response_timeout(Duration::from_secs(10));
        conn
    }

    /// How many keys the whole cluster holds (the masters' `DBSIZE`).
    pub async fn key_count(&self) -> i64 {
        let mut total = 0;
        for master in self.masters() {
            let mut node = self.node_conn(master.port).await;
            total += redis::cmd("DBSIZE")
                .query_async::<i64>(&mut node)
                .await
                .unwrap();
        }
        total
    }

    /// Sends `SCRIPT FLUSH` to every running node.
    pub async fn script_flush_all(&self) {
        for port in self.live_ports() {
            let _: () = redis::cmd("SCRIPT")
                .arg("FLUSH")
                .query_async(&mut self.node_conn(port).await)
                .await
                .unwrap_or_else(|err| panic!("SCRIPT FLUSH on {port}: {err}"));
        }
    }

    /// Kills the node on `port` with SIGKILL and waits for it to exit. The cluster
    /// stays usable: if it was a master, its replica takes over (see
    /// [`wait_failover`](Self::wait_failover)).
    pub fn kill(&self, port: u16) {
        self.remember_replicas(port);
        let mut procs = self.procs();
        let proc = find(&mut procs, port);
        proc.resume();
        proc.server.stop();
        proc.state = State::Killed;
    }

    /// Freezes the node on `port` with SIGSTOP: connections stay open, nothing is
    /// answered. A master frozen for longer than the node timeout is failed over.
    pub fn pause(&self, port: u16) {
        self.remember_replicas(port);
        let mut procs = self.procs();
        let proc = find(&mut procs, port);
        proc.server.pause();
        proc.state = State::Paused;
    }

    /// Thaws a node frozen by [`pause`](Self::pause).
    pub fn resume(&self, port: u16) {
        find(&mut self.procs(), port).resume();
    }

    /// Freezes the node on `port` for `d`, at most half the node timeout, and thaws it;
    /// then waits until the cluster is formed as before. No failover can start: a node
    /// is suspected only once a ping to it has gone unanswered for the node timeout, and
    /// the other half is the margin for a loaded machine. Panics if the masters, their
    /// slots or the cluster's epoch (which every election raises) changed, or if the
    /// cluster does not settle within [`SETTLE`].
    pub async fn pause_for(&self, port: u16, d: Duration) {
        assert!(
            d * 2 <= self.node_timeout(),
            "a {d:?} freeze is not well under the {:?} node timeout",
            self.node_timeout()
        );
        let before = self.settled().await;
        self.pause(port);
        tokio::time::sleep(d).await;
        self.resume(port);
        let after = self.settled().await;
        assert!(
            before == after,
            "{port} frozen for {d:?}: the cluster changed from {before:?} to {after:?}\n{}",
            self.describe()
        );
    }

    /// Starts the node on `port`, killed by [`kill`](Self::kill), again on the same
    /// port in the same directory, with its cluster config file (`nodes.conf`): it comes
    /// back with its node id and its view of the cluster, learns that its slots moved to
    /// the replica that took over, and rejoins as that replica's replica, empty (no
    /// persistence) until it has synced. So a killed master may be restarted only after
    /// [`wait_failover`](Self::wait_failover): this panics if it still serves slots.
    /// Waits until it is a replica with its link to its master up and the cluster is
    /// formed again (three masters with one attached replica each, every node healthy);
    /// returns its master's port. Panics after [`SETTLE`].
    pub async fn restart(&self, port: u16) -> u16 {
        if self.masters().iter().any(|master| master.port == port) {
            panic!(
                "{port} still serves slots: restarted empty, it would lose them\n{}",
                self.describe()
            );
        }
        {
            let mut procs = self.procs();
            let proc = find(&mut procs, port);
            assert_eq!(proc.state, State::Killed, "restart of a node not killed");
            // Its `nodes.conf` is still in its directory.
            proc.server.restart();
            proc.state = State::Running;
        }
        let live = self.live_ports();
        let rejoined = self
            .poll(move || {
                let masters = formed(&live)?;
                masters
                    .iter()
                    .find(|master| master.replicas.contains(&port))
                    .map(|master| master.port)
                    .ok_or_else(|| format!("{port} is no replica: {masters:?}"))
            })
            .await;
        rejoined.unwrap_or_else(|why| {
            panic!(
                "{port} did not rejoin as a replica within {SETTLE:?}: {why}\n{}\n{}",
                self.describe(),
                self.logs()
            )
        })
    }

    /// Waits until the running nodes form the cluster (see [`restart`](Self::restart));
    /// its masters and its current epoch. Panics after [`SETTLE`].
    pub async fn settled(&self) -> (Vec<Master>, u64) {
        let live = self.live_ports();
        let settled = self
            .poll(move || {
                let masters = formed(&live)?;
                Ok((masters, current_epoch(&live)?))
            })
            .await;
        settled.unwrap_or_else(|why| {
            panic!(
                "the cluster did not settle within {SETTLE:?}: {why}\n{}",
                self.describe()
            )
        })
    }

    /// Calls `check` every [`POLL`] until it succeeds, for at most [`SETTLE`], on a
    /// blocking thread.
    async fn poll<T: Send + 'static>(
        &self,
        check: impl FnMut() -> Result<T, String> + Send + 'static,
    ) -> Result<T, String> {
        tokio::task::spawn_blocking(move || poll_until(SETTLE, POLL, check))
            .await
            .expect("the cluster check does not panic")
    }

    /// Waits until a former replica of the master on `old_master` (killed or paused)
    /// serves slots as a master and every running node reports `cluster_state:ok`, all
    /// seeing the same new master; returns its port. Panics after [`SETTLE`].
    pub async fn wait_failover(&self, old_master: u16) -> u16 {
        let former = self.former_replicas(old_master);
        let deadline = Instant::now() + SETTLE;
        loop {
            let (live, former) = (self.live_ports(), former.clone());
            let promoted = tokio::task::spawn_blocking(move || promoted(&live, &former))
                .await
                .expect("the failover check does not panic");
            match promoted {
                Ok(port) => return port,
                Err(why) if Instant::now() >= deadline => panic!(
                    "no replica of {old_master} took over within {SETTLE:?}: {why}\n{}",
                    self.describe()
                ),
                Err(_) => tokio::time::sleep(POLL).await,
            }
        }
    }

    /// The log of the node on `port` so far, for failure messages.
    pub fn log(&self, port: u16) -> String {
        find(&mut self.procs(), port).server.log()
    }

    /// The last lines of every node's log.
    fn logs(&self) -> String {
        self.ports()
            .into_iter()
            .map(|port| {
                format!(
                    "--- log of {port} (last 30 lines):\n{}",
                    tail(&self.log(port), 30)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// `CLUSTER NODES` of the first running node that answers, for failure messages.
    pub fn describe(&self) -> String {
        self.live_ports()
            .into_iter()
            .find_map(|port| {
                let nodes = query::<String>(port, redis::cmd("CLUSTER").arg("NODES")).ok()?;
                Some(format!("CLUSTER NODES on {port}:\n{nodes}"))
            })
            .unwrap_or_else(|| "(no running node answers CLUSTER NODES)".into())
    }

    /// The cluster as the first running node that answers sees it.
    fn view(&self) -> View {
        let ports = self.live_ports();
        ports
            .iter()
            .find_map(|&port| query::<String>(port, redis::cmd("CLUSTER").arg("NODES")).ok())
            .map(|text| View::parse(&text))
            .unwrap_or_else(|| panic!("none of the running nodes {ports:?} answers CLUSTER NODES"))
    }

    fn remember_replicas(&self, port: u16) {
        let replicas = self.view().replicas_of(port);
        lock(&self.lost_replicas).insert(port, replicas);
    }

    fn former_replicas(&self, master: u16) -> Vec<u16> {
        let remembered = lock(&self.lost_replicas).get(&master).cloned();
        remembered.unwrap_or_else(|| self.view().replicas_of(master))
    }

    fn procs(&self) -> MutexGuard<'_, Vec<Proc>> {
        lock(&self.procs)
    }

    fn ports(&self) -> Vec<u16> {
        self.procs().iter().map(Proc::port).collect()
    }

    fn live_ports(&self) -> Vec<u16> {
        let procs = self.procs();
        let live = procs.iter().filter(|proc| proc.state == State::Running);
        live.map(Proc::port).collect()
    }

    fn live_urls(&self) -> Vec<String> {
        self.live_ports().into_iter().map(node_url).collect()
    }
}

/// The slot of `key`, as Redis computes it: CRC16 (XMODEM) modulo 16384 of the key, or
/// of its hash tag, the text between the first `{` and the first `}` after it when that
/// is not empty.
pub fn slot(key: &str) -> u16 {
    crc16(hash_tag(key.as_bytes())) % SLOTS
}

fn hash_tag(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&byte| byte == b'{') else {
        return key;
    };
    let rest = &key[open + 1..];
    match rest.iter().position(|&byte| byte == b'}') {
        Some(close) if close > 0 => &rest[..close],
        _ => key,
    }
}

/// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, no reflection.
fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0, |crc, &byte| {
        (0..8).fold(crc ^ (u16::from(byte) << 8), |crc, _| {
            if crc & 0x8000 == 0 {
                crc << 1
            } else {
                (crc << 1) ^ 0x1021
            }
        })
    })
}

/// One `redis-server` of the cluster, and what the harness did to it.
#[derive(Debug)]
struct Proc {
    server: RedisServer,
    state: State,
}

impl Proc {
    /// Starts a cluster node on `port` in a directory of its own, where it keeps its
    /// cluster config file (`nodes.conf`, found again on a restart), and waits until it
    /// answers PING; fails at once if it exits (its port was taken).
    fn spawn(
        port: u16,
        node_timeout_ms: u64,
        env: &[(OsString, OsString)],
    ) -> Result<Self, String> {
        let node_timeout = node_timeout_ms.to_string();
        let args = [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            &node_timeout,
            // A replica's first sync would otherwise wait 5 s for more replicas.
            "--repl-diskless-sync-delay",
            "0",
        ];
        Ok(Self {
            server: RedisServer::try_start_on_with_env(port, &args, env)?,
            state: State::Running,
        })
    }

    fn port(&self) -> u16 {
        self.server.port()
    }

    fn resume(&mut self) {
        if self.state == State::Paused {
            self.server.resume();
            self.state = State::Running;
        }
    }
}

impl Drop for Proc {
    /// Thaws a frozen node; the server is killed when it drops.
    fn drop(&mut self) {
        self.resume();
    }
}

/// Six nodes answering PING, node `i` with the variables `envs[i]`, retrying on new
/// ports when one is taken meanwhile.
fn spawn_nodes(node_timeout_ms: u64, envs: &[NodeEnv]) -> Vec<Proc> {
    let mut last = String::new();
    for _ in 0..5 {
        match try_spawn_nodes(node_timeout_ms, envs) {
            Ok(procs) => return procs,
            Err(err) if err == INSTALL_HINT => panic!("{err}"),
            Err(err) => last = err,
        }
    }
    panic!("cannot start the cluster's nodes: {last}")
}

fn try_spawn_nodes(node_timeout_ms: u64, envs: &[NodeEnv]) -> Result<Vec<Proc>, String> {
    let none = NodeEnv::new();
    reserve_ports(NODES)
        .into_iter()
        .enumerate()
        .map(|(i, port)| Proc::spawn(port, node_timeout_ms, envs.get(i).unwrap_or(&none)))
        .collect()
}

/// `n` client ports in [`PORTS`], free with their bus ports, not handed out before. A
/// port another test process's node holds, free to the OS while that node is killed for
/// a restart, is not taken from it: each node claims its port (`port_claim.rs`), so
/// starting a node there fails and [`spawn_nodes`] tries new ports.
fn reserve_ports(n: usize) -> Vec<u16> {
    let mut reserved = lock(&RESERVED);
    let mut ports = Vec::with_capacity(n);
    while ports.len() < n {
        let port = rand::random_range(PORTS);
        if is_free(port) && is_free(port + BUS_OFFSET) && reserved.insert(port) {
            ports.push(port);
        }
    }
    ports
}

fn is_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

fn find(procs: &mut [Proc], port: u16) -> &mut Proc {
    let proc = procs.iter_mut().find(|proc| proc.port() == port);
    proc.unwrap_or_else(|| panic!("no node of this cluster has port {port}"))
}

fn node_url(port: u16) -> String {
    format!("redis://127.0.0.1:{port}/")
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// What one node says about the cluster and itself.
#[derive(Debug)]
struct Report {
    state_ok: bool,
    view: View,
    /// `role:slave` with `master_link_status:up`.
    attached: bool,
}

fn report(port: u16) -> Result<Report, String> {
    let (info, nodes, replication): (String, String, String) = redis::pipe()
        .cmd("CLUSTER")
        .arg("INFO")
        .cmd("CLUSTER")
        .arg("NODES")
        .cmd("INFO")
        .arg("replication")
        .query(&mut connect(port)?)
        .map_err(|err| format!("{port}: {err}"))?;
    Ok(Report {
        state_ok: info.contains("cluster_state:ok"),
        view: View::parse(&nodes),
        attached: replication.contains("role:slave")
            && replication.contains("master_link_status:up"),
    })
}

/// The masters every node on `ports` agrees on, when the cluster is fully formed.
fn formed(ports: &[u16]) -> Result<Vec<Master>, String> {
    let mut agreed: Option<Vec<Master>> = None;
    for &port in ports {
        let report = report(port)?;
        let masters = report.view.masters();
        check_node(port, &report)?;
        if agreed.get_or_insert_with(|| masters.clone()) != &masters {
            return Err(format!("{port} sees other masters: {masters:?}"));
        }
    }
    let masters = agreed.ok_or("no nodes")?;
    check_layout(&masters)?;
    Ok(masters)
}

fn check_node(port: u16, report: &Report) -> Result<(), String> {
    if !report.state_ok {
        return Err(format!("{port}: cluster_state is not ok"));
    }
    if report.view.entries.len() != NODES || !report.view.all_healthy() {
        return Err(format!("{port} does not see {NODES} healthy nodes"));
    }
    if report.view.role(port) == Some(Role::Replica) && !report.attached {
        return Err(format!("replica {port}: its link to its master is not up"));
    }
    Ok(())
}

/// Three masters with one replica each, covering every slot once.
fn check_layout(masters: &[Master]) -> Result<(), String> {
    if masters.len() != MASTERS || masters.iter().any(|master| master.replicas.len() != 1) {
        return Err(format!(
            "not {MASTERS} masters with one replica each: {masters:?}"
        ));
    }
    let mut ranges: Vec<_> = masters
        .iter()
        .flat_map(|master| master.slots.clone())
        .collect();
    ranges.sort_by_key(|range| *range.start());
    let mut next = 0u32;
    for range in ranges {
        if u32::from(*range.start()) != next {
            return Err(format!("slot {next} is not covered exactly once"));
        }
        next = u32::from(*range.end()) + 1;
    }
    if next != u32::from(SLOTS) {
        return Err(format!("slots from {next} are not covered"));
    }
    Ok(())
}

/// The highest `cluster_current_epoch` the nodes on `ports` report.
fn current_epoch(ports: &[u16]) -> Result<u64, String> {
    let mut highest = 0;
    for &port in ports {
        let info: String = query(port, redis::cmd("CLUSTER").arg("INFO"))?;
        let epoch = info
            .lines()
            .find_map(|line| line.strip_prefix("cluster_current_epoch:"))
            .and_then(|epoch| epoch.trim().parse().ok())
            .ok_or_else(|| format!("{port}: no cluster_current_epoch in CLUSTER INFO"))?;
        highest = highest.max(epoch);
    }
    Ok(highest)
}

/// The port of the one former replica every running node sees serving slots as a
/// master, with every running node reporting `cluster_state:ok`.
fn promoted(live: &[u16], former: &[u16]) -> Result<u16, String> {
    let mut agreed = None;
    for &port in live {
        let report = report(port)?;
        if !report.state_ok {
            return Err(format!("{port}: cluster_state is not ok"));
        }
        let masters = report.view.masters();
        let new = masters
            .iter()
            .find(|master| former.contains(&master.port))
            .ok_or_else(|| format!("{port} sees none of {former:?} as a master"))?;
        if *agreed.get_or_insert(new.port) != new.port {
            return Err(format!(
                "nodes disagree on the new master: {agreed:?}, {}",
                new.port
            ));
        }
    }
    agreed.ok_or_else(|| "no running node".into())
}

/// One node's `CLUSTER NODES`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct View {
    entries: Vec<Entry>,
}

/// One line of `CLUSTER NODES`:
/// `<id> <ip:port@cport> <flags> <master id or -> <ping> <pong> <epoch> <link> <slots>...`
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    id: String,
    port: u16,
    flags: Vec<String>,
    master_id: Option<String>,
    slots: Vec<RangeInclusive<u16>>,
}

impl View {
    fn parse(text: &str) -> Self {
        let entries = text.lines().filter_map(Entry::parse).collect();
        Self { entries }
    }

    fn entry(&self, port: u16) -> Option<&Entry> {
        self.entries.iter().find(|entry| entry.port == port)
    }

    fn role(&self, port: u16) -> Option<Role> {
        let entry = self.entry(port)?;
        if entry.has_flag("master") {
            Some(Role::Master)
        } else {
            entry.has_flag("slave").then_some(Role::Replica)
        }
    }

    /// No node failing, suspected, or still in the handshake.
    fn all_healthy(&self) -> bool {
        let bad = ["fail", "fail?", "handshake", "noaddr"];
        self.entries
            .iter()
            .all(|entry| !bad.iter().any(|flag| entry.has_flag(flag)))
    }

    fn masters(&self) -> Vec<Master> {
        let mut masters: Vec<Master> = self
            .entries
            .iter()
            .filter(|entry| entry.has_flag("master") && !entry.slots.is_empty())
            .map(|entry| Master {
                port: entry.port,
                slots: entry.slots.clone(),
                replicas: self.replicas_of(entry.port),
            })
            .collect();
        masters.sort_by_key(|master| *master.slots[0].start());
        masters
    }

    fn replicas_of(&self, port: u16) -> Vec<u16> {
        let Some(master) = self.entry(port) else {
            return Vec::new();
        };
        let mut replicas: Vec<u16> = self
            .entries
            .iter()
            .filter(|entry| entry.master_id.as_deref() == Some(master.id.as_str()))
            .map(|entry| entry.port)
            .collect();
        replicas.sort_unstable();
        replicas
    }
}

impl Entry {
    fn parse(line: &str) -> Option<Self> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let address = fields.get(1)?.split(['@', ',']).next()?;
        Some(Self {
            id: fields.first()?.to_string(),
            port: address.rsplit(':').next()?.parse().ok()?,
            flags: fields.get(2)?.split(',').map(str::to_string).collect(),
            master_id: fields
                .get(3)
                .filter(|id| **id != "-")
                .map(|id| id.to_string()),
            slots: fields
                .iter()
                .skip(8)
                .filter_map(|field| parse_range(field))
                .collect(),
        })
    }

    fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|own| own == flag)
    }
}

/// `5461-10922` or `7`; `None` for a migrating or importing slot (`[7->-id]`).
fn parse_range(field: &str) -> Option<RangeInclusive<u16>> {
    match field.split_once('-') {
        _ if field.starts_with('[') => None,
        Some((start, end)) => Some(start.parse().ok()?..=end.parse().ok()?),
        None => field.parse().ok().map(|slot| slot..=slot),
    }
}
