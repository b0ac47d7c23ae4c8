//! The fault suite's worker processes (`examples/fault_worker.rs`) against a Redis
//! Cluster (`cluster.rs`), checked by the referee: each worker's mutex is over a
//! `ClusterConnection` with hash-tagged lock keys (`faults:{k0}`, `faults:{k1}`, ...), so
//! the keys spread over the three masters. The faults: a master killed (its replica takes
//! over, then it comes back as that replica's replica), a master frozen too briefly for
//! a failover, and a worker killed or frozen.

use std::time::Duration;

use futures_util::future::join_all;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use redis::cluster_async::ClusterConnection;

use super::cluster_clocks::NodeClocks;
use super::fleet::{kept, read_data_counters, worker_command, Fleet, Spec};
use super::paused_note::PausedNote;
use crate::common::cluster::{slot, Cluster, State};
use crate::common::crew::Crew;
use crate::common::record::{FaultKind, HeldLock, Target};

/// The workers' mutex name.
pub const MUTEX: &str = "faults";
/// The bound on [`ClusterFleet::held`]: a frozen master's keys are left out after it.
pub const HELD_TIMEOUT: Duration = Duration::from_millis(400);

/// The cluster, the referee, the workers and the faults so far.
pub struct ClusterFleet {
    /// The cluster the workers lock on.
    pub cluster: Cluster,
    /// The workers, their events, the referee and the faults so far.
    pub crew: Crew,
    /// The fleet's own connection, for [`held`](Self::held).
    conn: ClusterConnection,
    ttl_ms: u64,
    /// How many lock keys the workers use at most.
    keys: u64,
    /// The master the next master fault hits, by its place in `Cluster::masters`.
    next_master: usize,
}

impl ClusterFleet {
    /// Starts the cluster (node timeout 1 s) and the referee; no workers yet.
    pub async fn start(ttl_ms: u64) -> Self {
        let cluster = tokio::task::spawn_blocking(Cluster::start)
            .await
            .expect("the cluster starts");
        Self::start_with(cluster, ttl_ms).await
    }

    /// [`start`](Self::start) with a node timeout of `node_timeout_ms`: a master may
    /// then be frozen for up to half of it without a failover
    /// ([`freeze_master_at`](Self::freeze_master_at)).
    pub async fn start_with_node_timeout(ttl_ms: u64, node_timeout_ms: u64) -> Self {
        let start = move || Cluster::start_with_node_timeout(node_timeout_ms);
        let cluster = tokio::task::spawn_blocking(start)
            .await
            .expect("the cluster starts");
        Self::start_with(cluster, ttl_ms).await
    }

    /// [`start`](Self::start) with every node on a clock of its own (see
    /// [`Cluster::start_on_clocks`]), for the clock faults on a master.
    pub async fn start_on_clocks(ttl_ms: u64) -> (Self, NodeClocks) {
        let (cluster, clocks) = tokio::task::spawn_blocking(Cluster::start_on_clocks)
            .await
            .expect("the cluster starts");
        (Self::start_with(cluster, ttl_ms).await, clocks)
    }

    /// Starts the referee, with `cluster` (started by the caller) as the deployment.
    async fn start_with(cluster: Cluster, ttl_ms: u64) -> Self {
        let conn = cluster.conn().await;
        Self {
            cluster,
            crew: Crew::start().await,
            conn,
            ttl_ms,
            keys: 1,
            next_master: 0,
        }
    }

    /// SIGKILLs the next master in turn, waits until its replica has taken over, and
    /// starts it again as that replica's replica; recorded as [`FaultKind::KillMaster`]
    /// from the kill until it is back. Takes about 2–3 s.
    pub async fn kill_master(&mut self) {
        let victim = self.next_master();
        let index = self.crew.begin(FaultKind::KillMaster, Target::Server);
        self.cluster.kill(victim);
        self.cluster.wait_failover(victim).await;
        self.cluster.restart(victim).await;
        self.crew.end(index);
    }

    /// Freezes the next master in turn with SIGSTOP for `d`, at most half the node
    /// timeout (no failover: `Cluster::pause_for` panics if one happens); recorded as
    /// [`FaultKind::FreezeMaster`] until the cluster is checked after the thaw.
    pub async fn freeze_master(&mut self, d: Duration) {
        let victim = self.next_master();
        let index = self.crew.begin(FaultKind::FreezeMaster, Target::Server);
        self.cluster.pause_for(victim, d).await;
        self.crew.end(index);
    }

    /// Freezes master `i` (of `Cluster::masters`) with SIGSTOP for `d`, at most half the
    /// node timeout, after an exact note of lock keys `names` (all on that master, see
    /// [`PausedNote`]); recorded as [`FaultKind::FreezeMaster`] until the cluster is
    /// checked after the thaw. Panics if the cluster changed (a failover); the locks
    /// noted.
    pub async fn freeze_master_noted(
        &mut self,
        i: usize,
        d: Duration,
        names: &[String],
    ) -> Vec<HeldLock> {
        let node_timeout = self.cluster.node_timeout();
        assert!(
            d * 2 <= node_timeout,
            "a {d:?} freeze is not well under {node_timeout:?}"
        );
        let victim = self.cluster.masters()[i].port;
        let conn = self.cluster.node_conn(victim).await;
        let before = self.cluster.settled().await;
        let index = self.crew.begin(FaultKind::FreezeMaster, Target::Server);
        let node = self.cluster.nodes().into_iter().find(|n| n.port == victim);
        let pid = Pid::from_raw(i32::try_from(node.expect("the master").pid).expect("a pid"));
        let note = PausedNote::take(&conn, names, true).await;
        // Signalled directly: `Cluster::pause` asks the cluster for the replicas first,
        // which can take longer than the clients are paused.
        kill(pid, Signal::SIGSTOP).expect("SIGSTOP the master");
        let held = note.valid();
        tokio::time::sleep(d).await;
        kill(pid, Signal::SIGCONT).expect("SIGCONT the master");
        let after = self.cluster.settled().await;
        assert!(
            before == after,
            "{victim} frozen for {d:?}: the cluster changed from {before:?} to {after:?}\n{}",
            self.cluster.describe()
        );
        self.crew.end(index);
        held
    }

    /// The first `n` worker keys (`k<k>`, see [`Spec::first_key`]) whose lock keys
    /// master `i` (of `Cluster::masters`) serves, not necessarily consecutive.
    pub fn keys_served_by(&self, i: usize, n: usize) -> Vec<u64> {
        let master = &self.cluster.masters()[i];
        (0..)
            .filter(|&k| master.serves(slot(&format!("{MUTEX}:{{k{k}}}"))))
            .take(n)
            .collect()
    }

    /// The first of `n` consecutive worker keys (`k<first>` .. `k<first + n - 1>`, see
    /// [`Spec::first_key`]) whose lock keys master `i` (of `Cluster::masters`) all
    /// serves: the smallest such.
    pub fn keys_on_master(&self, i: usize, n: u64) -> u64 {
        let master = &self.cluster.masters()[i];
        let on_it = |k: u64| master.serves(slot(&format!("{MUTEX}:{{k{k}}}")));
        (0..)
            .find(|&first| (first..first + n).all(on_it))
            .expect("some keys land on every master")
    }

    /// Who holds each lock key the workers may use (`faults:{k0}` ..), each key read by
    /// a script of its own on its master, all at once; with the key's `PEXPIRETIME`.
    /// Keys not read within [`HELD_TIMEOUT`] (a frozen or dead master's) are left out.
    pub async fn held(&self) -> Vec<HeldLock> {
        let reads = (0..self.keys).map(|k| {
            let mut conn = self.conn.clone();
            async move {
                let key = format!("{MUTEX}:{{k{k}}}");
                let read = HeldLock::read_key(&mut conn, &key);
                tokio::time::timeout(HELD_TIMEOUT, read).await
            }
        });
        let mut held = Vec::new();
        for read in join_all(reads).await {
            if let Ok(Ok(locks)) = read {
                held.extend(locks);
            }
        }
        held
    }

    /// The port of the master whose turn it is, by slot order.
    fn next_master(&mut self) -> u16 {
        let masters = self.cluster.masters();
        let port = masters[self.next_master % masters.len()].port;
        self.next_master += 1;
        port
    }
}

impl Fleet for ClusterFleet {
    fn crew(&self) -> &Crew {
        &self.crew
    }

    fn crew_mut(&mut self) -> &mut Crew {
        &mut self.crew
    }

    fn ttl_ms(&self) -> u64 {
        self.ttl_ms
    }

    /// Starts worker `name` over the cluster, seeded with its running nodes.
    async fn spawn(&mut self, name: &str, spec: &Spec) {
        self.keys = self.keys.max(spec.first_key + spec.keys);
        let seeds: Vec<String> = self
            .cluster
            .nodes()
            .into_iter()
            .filter(|node| node.state == State::Running)
            .map(|node| self.cluster.url(node.port))
            .collect();
        let mut command = worker_command(name, spec, self.ttl_ms, MUTEX);
        command
            .env("FW_CLUSTER", "1")
            .env("FW_LOCK_URL", seeds.join(","));
        self.crew.launch(name, command).await;
    }

    /// Every key but fence and data counters on every master, as `<port>: <key>`.
    async fn keys_left(&self) -> Vec<String> {
        let mut left = Vec::new();
        for master in self.cluster.masters() {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg("*")
                .query_async(&mut self.cluster.node_conn(master.port).await)
                .await
                .expect("KEYS");
            let keys = keys.into_iter().filter(|key| !kept(key));
            left.extend(keys.map(|key| format!("{}: {key}", master.port)));
        }
        left
    }

    /// The data counters on every master.
    async fn data_counters(&self) -> Vec<(String, i64)> {
        let mut counters = Vec::new();
        for master in self.cluster.masters() {
            let conn = self.cluster.node_conn(master.port).await;
            let keys: Vec<String> = crate::common::raw::cmd(&conn, "KEYS", &["*:data"]).await;
            counters.extend(read_data_counters(&conn, &keys).await);
        }
        counters
    }
}
