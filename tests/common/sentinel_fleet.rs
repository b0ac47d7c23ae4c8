//! The fault suite's worker processes (`examples/fault_worker.rs`) against a primary
//! under Sentinel (`sentinel.rs`), checked by the referee: each worker's mutex is over a
//! `SentinelConnection`, and the primary is killed while they work.

use std::time::Duration;

use tokio::process::{Child, ChildStdin};

use super::events::{now_us, Log};
use super::fleet::{launch, worker_command, Spec};
use super::record::{FaultKind, FaultRecord, Target};
use super::referee::Referee;
use super::report::Report;
use super::sentinel::Sentinels;
use super::RedisServer;

/// The deployment, the referee, the workers and the failovers so far.
pub struct SentinelFleet {
    pub deployment: Sentinels,
    referee_server: RedisServer,
    referee: Referee,
    pub log: Log,
    workers: Vec<(String, Child, Option<ChildStdin>)>,
    faults: Vec<FaultRecord>,
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
        let (child, _pid, stdin) = launch(command, name, &self.log).await;
        self.workers.push((name.to_owned(), child, stdin));
    }

    /// Kills the primary, waits for Sentinel to promote a replica and starts the old
    /// primary again as a replica; recorded as a fault of the server.
    pub async fn kill_primary(&mut self) {
        let start_us = now_us();
        let killed = self.deployment.kill_primary();
        self.deployment.failover().await;
        self.faults.push(FaultRecord {
            kind: FaultKind::KillServer,
            target: Target::Server,
            start_us,
            end_us: now_us(),
        });
        self.deployment.restart_as_replica(killed).await;
    }

    /// Stops the workers (stdin closed; SIGKILL after 10 s), waits a TTL, and reads
    /// everything into the report, which it prints.
    pub async fn finish(&mut self, label: &str) -> Report {
        for (_, _, stdin) in &mut self.workers {
            *stdin = None;
        }
        for (name, child, _) in &mut self.workers {
            if tokio::time::timeout(Duration::from_secs(10), child.wait())
                .await
                .is_err()
            {
                eprintln!("{name} did not stop; killing it");
                let _ = child.kill().await;
            }
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
