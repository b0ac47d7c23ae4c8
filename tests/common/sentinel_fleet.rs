//! The fault suite's worker processes (`examples/fault_worker.rs`) against a primary
//! under Sentinel (`sentinel.rs`), checked by the referee: each worker's mutex is over a
//! `SentinelConnection`, and the primary is killed or frozen while they work (and,
//! for the long run, workers are killed or frozen too).

use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::process::{Child, ChildStdin};

use super::events::{now_us, Log};
use super::fleet::{launch, signal, worker_command, Spec};
use super::record::{FaultKind, FaultRecord, Target};
use super::referee::Referee;
use super::report::Report;
use super::sentinel::Sentinels;
use super::RedisServer;

/// A worker process: its name, pid, process and stdin (closed to stop it).
#[derive(Debug)]
struct Member {
    name: String,
    pid: i32,
    child: Child,
    stdin: Option<ChildStdin>,
    alive: bool,
}

/// The deployment, the referee, the workers and the failovers so far.
pub struct SentinelFleet {
    pub deployment: Sentinels,
    referee_server: RedisServer,
    referee: Referee,
    pub log: Log,
    workers: Vec<Member>,
    /// Every fault injected so far.
    pub faults: Vec<FaultRecord>,
    ttl_ms: u64,
    started_us: u64,
}

impl SentinelFleet {
    /// Starts the deployment and the referee; no workers yet.
    pub async fn start(ttl_ms: u64) -> Self {
        let deployment = Sentinels::start();
        let referee_server = RedisServer::start();
        let referee = Referee::connect(&referee_server.url())
            .await
            .expect("connect to the referee");
        Self {
            deployment,
            referee_server,
            referee,
            log: Log::default(),
            workers: Vec::new(),
            faults: Vec::new(),
            ttl_ms,
            started_us: now_us(),
        }
    }

    /// Starts worker `name` with `spec` over the Sentinels, `replicas` of which must
    /// acknowledge each acquire and renewal.
    pub async fn spawn(&mut self, name: &str, spec: &Spec, replicas: usize) {
        let mut command = worker_command(name, spec, self.ttl_ms, "faults");
        command
            .env("FW_LOCK_URL", self.deployment.sentinel_urls().join(","))
            .env("FW_SENTINEL", self.deployment.master_name())
            .env("FW_REPLICAS", replicas.to_string())
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
        self.workers
            .iter()
            .filter(|w| w.alive)
            .map(|w| w.name.clone())
            .collect()
    }

    fn member(&mut self, name: &str) -> &mut Member {
        self.workers
            .iter_mut()
            .find(|w| w.name == name)
            .unwrap_or_else(|| panic!("no worker {name}"))
    }

    /// Records a fault from `start_us` to now.
    fn record(&mut self, kind: FaultKind, target: Target, start_us: u64) {
        self.faults.push(FaultRecord {
            kind,
            target,
            start_us,
            end_us: now_us(),
        });
    }

    /// SIGKILLs worker `name` and removes its registrations on the referee.
    pub async fn kill_worker(&mut self, name: &str) {
        let start_us = now_us();
        let worker = self.member(name);
        signal(worker.pid, Signal::SIGKILL);
        let _ = worker.child.wait().await;
        worker.alive = false;
        self.referee
            .evict(name)
            .await
            .expect("evict on the referee");
        self.record(FaultKind::KillWorker, Target::Worker(name.into()), start_us);
    }

    /// Freezes worker `name` with SIGSTOP for `d`.
    pub async fn freeze_worker(&mut self, name: &str, d: Duration) {
        let start_us = now_us();
        let pid = self.member(name).pid;
        signal(pid, Signal::SIGSTOP);
        tokio::time::sleep(d).await;
        // Ends before the signal: the worker may print before this returns.
        self.record(
            FaultKind::FreezeWorker,
            Target::Worker(name.into()),
            start_us,
        );
        signal(pid, Signal::SIGCONT);
    }

    /// Freezes the primary for `d`, shorter than `down-after-milliseconds`: no failover,
    /// requests wait and renewals may fail; recorded as a pause of the server.
    pub async fn pause_primary(&mut self, d: Duration) {
        let start_us = now_us();
        let primary = self.deployment.freeze_primary();
        tokio::time::sleep(d).await;
        self.deployment.thaw(primary);
        self.record(FaultKind::PauseServer, Target::Server, start_us);
    }

    /// Freezes the primary until Sentinel has promoted a replica, thaws it (a master
    /// still, taking writes, until a Sentinel demotes it) and waits until the deployment
    /// settles with it as a replica; recorded as a long pause of the server.
    pub async fn freeze_primary_past_failover(&mut self) {
        let start_us = now_us();
        let frozen = self.deployment.freeze_primary();
        self.deployment.failover().await;
        self.deployment.thaw(frozen);
        self.deployment.settle().await;
        self.record(FaultKind::PauseServerLong, Target::Server, start_us);
    }

    /// Kills the primary, waits for Sentinel to promote a replica and starts the old
    /// primary again as a replica; recorded as a fault of the server.
    pub async fn kill_primary(&mut self) {
        let start_us = now_us();
        let killed = self.deployment.kill_primary();
        self.deployment.failover().await;
        self.record(FaultKind::KillServer, Target::Server, start_us);
        self.deployment.restart_as_replica(killed).await;
    }

    /// Stops the workers (stdin closed; SIGKILL after 10 s), waits a TTL, and reads
    /// everything into the report, which it prints.
    pub async fn finish(&mut self, label: &str) -> Report {
        for worker in &mut self.workers {
            worker.stdin = None;
        }
        for worker in self.workers.iter_mut().filter(|w| w.alive) {
            signal(worker.pid, Signal::SIGCONT);
            if tokio::time::timeout(Duration::from_secs(10), worker.child.wait())
                .await
                .is_err()
            {
                eprintln!("{} did not stop; killing it", worker.name);
                let _ = worker.child.kill().await;
            }
            worker.alive = false;
        }
        tokio::time::sleep(Duration::from_millis(self.ttl_ms + 300)).await;
        let primary = self
            .deployment
            .server(self.deployment.primary())
            .conn()
            .await;
        let keys: Vec<String> = super::raw::cmd(&primary, "KEYS", &["*"]).await;
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
        report.keys_left = keys
            .into_iter()
            .filter(|key| !key.ends_with(":fence"))
            .collect();
        println!("{report}");
        report
    }
}
