//! The fault suite's worker processes (`examples/fault_worker.rs`) against a Redis
//! Cluster (`cluster.rs`), checked by the referee: each worker's mutex is over a
//! `ClusterConnection` with hash-tagged lock keys (`faults:{k0}`, `faults:{k1}`, ...), so
//! the keys spread over the three masters. The faults: a master killed (its replica takes
//! over, then it comes back as that replica's replica), a master frozen too briefly for
//! a failover, and a worker killed or frozen.

use std::time::Duration;

use futures_util::future::join_all;
use nix::sys::signal::Signal;
use redis::cluster_async::ClusterConnection;
use tokio::process::{Child, ChildStdin};

use super::cluster::{Cluster, State};
use super::events::{now_us, Log};
use super::fleet::{launch, signal, worker_command, Spec};
use super::record::{FaultKind, FaultRecord, HeldLock, Target};
use super::referee::Referee;
use super::report::Report;
use super::RedisServer;

/// The workers' mutex name.
pub const MUTEX: &str = "faults";
/// The bound on [`ClusterFleet::held`]: a frozen master's keys are left out after it.
pub const HELD_TIMEOUT: Duration = Duration::from_millis(400);

/// One worker process.
struct Member {
    name: String,
    pid: i32,
    child: Child,
    stdin: Option<ChildStdin>,
    alive: bool,
}

/// The cluster, the referee, the workers and the faults so far.
pub struct ClusterFleet {
    /// The cluster the workers lock on.
    pub cluster: Cluster,
    /// Every worker's events.
    pub log: Log,
    referee_server: RedisServer,
    referee: Referee,
    /// The fleet's own connection, for [`held`](Self::held).
    conn: ClusterConnection,
    workers: Vec<Member>,
    faults: Vec<FaultRecord>,
    ttl_ms: u64,
    /// How many lock keys the workers use at most.
    keys: u64,
    /// The master the next master fault hits, by its place in `Cluster::masters`.
    next_master: usize,
    started_us: u64,
}

impl ClusterFleet {
    /// Starts the cluster (node timeout 1 s) and the referee; no workers yet.
    pub async fn start(ttl_ms: u64) -> Self {
        let cluster = tokio::task::spawn_blocking(Cluster::start)
            .await
            .expect("the cluster starts");
        let referee_server = RedisServer::start();
        let referee = Referee::connect(&referee_server.url())
            .await
            .expect("connect to the referee");
        let conn = cluster.conn().await;
        Self {
            cluster,
            log: Log::default(),
            referee_server,
            referee,
            conn,
            workers: Vec::new(),
            faults: Vec::new(),
            ttl_ms,
            keys: 1,
            next_master: 0,
            started_us: now_us(),
        }
    }

    /// Starts worker `name` with `spec` over the cluster (seeded with its running
    /// nodes), and a task that logs its events.
    pub async fn spawn(&mut self, name: &str, spec: &Spec) {
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
            .env("FW_LOCK_URL", seeds.join(","))
            .env("FW_REFEREE_URL", self.referee_server.url());
        let (child, pid, stdin) = launch(command, name, &self.log).await;
        self.workers.push(Member {
            name: name.to_owned(),
            pid,
            child,
            stdin,
            alive: true,
        });
    }

    /// The names of the live workers.
    pub fn live(&self) -> Vec<String> {
        let live = self.workers.iter().filter(|w| w.alive);
        live.map(|w| w.name.clone()).collect()
    }

    /// The faults injected so far.
    pub fn faults(&self) -> &[FaultRecord] {
        &self.faults
    }

    /// SIGKILLs worker `name` and removes its registrations on the referee (a dead
    /// process cannot leave).
    pub async fn kill_worker(&mut self, name: &str) {
        let index = self.begin(FaultKind::KillWorker, Target::Worker(name.to_owned()));
        let worker = self.member(name);
        signal(worker.pid, Signal::SIGKILL);
        let _ = worker.child.wait().await;
        worker.alive = false;
        self.referee
            .evict(name)
            .await
            .expect("evict on the referee");
        self.end(index);
    }

    /// Freezes worker `name` with SIGSTOP for `d`. A worker frozen between its check and
    /// its leave may overlap the next holder: see `Report::overlaps_explained`.
    pub async fn freeze_worker(&mut self, name: &str, d: Duration) {
        let index = self.begin(FaultKind::FreezeWorker, Target::Worker(name.to_owned()));
        let pid = self.member(name).pid;
        signal(pid, Signal::SIGSTOP);
        tokio::time::sleep(d).await;
        // Ends before the signal: the worker may print before this returns.
        self.end(index);
        signal(pid, Signal::SIGCONT);
    }

    /// SIGKILLs the next master in turn, waits until its replica has taken over, and
    /// starts it again as that replica's replica; recorded as [`FaultKind::KillMaster`]
    /// from the kill until it is back. Takes about 2–3 s.
    pub async fn kill_master(&mut self) {
        let victim = self.next_master();
        let index = self.begin(FaultKind::KillMaster, Target::Server);
        self.cluster.kill(victim);
        self.cluster.wait_failover(victim).await;
        self.cluster.restart(victim).await;
        self.end(index);
    }

    /// Freezes the next master in turn with SIGSTOP for `d`, at most half the node
    /// timeout (no failover: `Cluster::pause_for` panics if one happens); recorded as
    /// [`FaultKind::FreezeMaster`] until the cluster is checked after the thaw.
    pub async fn freeze_master(&mut self, d: Duration) {
        let victim = self.next_master();
        let index = self.begin(FaultKind::FreezeMaster, Target::Server);
        self.cluster.pause_for(victim, d).await;
        self.end(index);
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

    /// Stops the workers (stdin closed; SIGKILL after 10 s), waits a TTL, and reads
    /// everything into the report, which it prints (every event and fault too when
    /// `FAULTS_DUMP` is set). Keys left are every key but fence counters on every master,
    /// as `<port>: <key>`.
    pub async fn finish(&mut self, label: &str) -> Report {
        self.stop_all().await;
        tokio::time::sleep(Duration::from_millis(self.ttl_ms + 300)).await;
        let keys_left = self.keys_left().await;
        let referee = self.referee.report().await.expect("read the referee");
        let secs = (now_us() - self.started_us) as f64 / 1e6;
        let mut report = Report::build(
            label,
            &self.log,
            &self.faults,
            &[],
            self.ttl_ms,
            referee,
            secs,
        );
        report.keys_left = keys_left;
        if std::env::var_os("FAULTS_DUMP").is_some() {
            self.dump();
        }
        println!("{report}");
        report
    }

    /// Closes every live worker's stdin, so it stops after its current section, and
    /// waits for it to exit (thawed first; SIGKILL after 10 s).
    async fn stop_all(&mut self) {
        for worker in &mut self.workers {
            worker.stdin = None;
        }
        for worker in self.workers.iter_mut().filter(|w| w.alive) {
            signal(worker.pid, Signal::SIGCONT);
            let waited = tokio::time::timeout(Duration::from_secs(10), worker.child.wait()).await;
            if waited.is_err() {
                eprintln!("{} did not stop; killing it", worker.name);
                let _ = worker.child.kill().await;
            }
            worker.alive = false;
        }
    }

    /// Every key but fence counters on every master, as `<port>: <key>`.
    async fn keys_left(&self) -> Vec<String> {
        let mut left = Vec::new();
        for master in self.cluster.masters() {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg("*")
                .query_async(&mut self.cluster.node_conn(master.port).await)
                .await
                .expect("KEYS");
            let keys = keys.into_iter().filter(|key| !key.ends_with(":fence"));
            left.extend(keys.map(|key| format!("{}: {key}", master.port)));
        }
        left
    }

    /// Prints every event and fault, in ms since the start.
    fn dump(&self) {
        let ms = |us: u64| us.saturating_sub(self.started_us) as f64 / 1000.0;
        for event in self.log.all() {
            let at = ms(event.us);
            println!(
                "{at:>9.1} {} {} {:?}",
                event.worker, event.kind, event.fields
            );
        }
        for fault in &self.faults {
            let (start, end) = (ms(fault.start_us), ms(fault.end_us));
            println!(
                "fault {:?} {:?} {start:.1}..{end:.1}",
                fault.kind, fault.target
            );
        }
    }

    /// The port of the master whose turn it is, by slot order.
    fn next_master(&mut self) -> u16 {
        let masters = self.cluster.masters();
        let port = masters[self.next_master % masters.len()].port;
        self.next_master += 1;
        port
    }

    fn member(&mut self, name: &str) -> &mut Member {
        let member = self.workers.iter_mut().find(|w| w.name == name && w.alive);
        member.unwrap_or_else(|| panic!("no live worker {name}"))
    }

    fn begin(&mut self, kind: FaultKind, target: Target) -> usize {
        let now = now_us();
        self.faults.push(FaultRecord {
            kind,
            target,
            start_us: now,
            end_us: now,
        });
        self.faults.len() - 1
    }

    fn end(&mut self, index: usize) {
        self.faults[index].end_us = now_us();
    }
}

impl Drop for ClusterFleet {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            let _ = worker.child.start_kill();
        }
    }
}
