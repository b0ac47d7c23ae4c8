//! The fault suite's worker processes (`examples/fault_worker.rs`) against a primary
//! under Sentinel (`sentinel.rs`), checked by the referee: each worker's mutex is over a
//! `SentinelConnection`, and the primary is killed or frozen while they work (and,
//! for the long run, workers are killed or frozen too).

use std::time::Duration;

use super::fleet::{kept, read_data_counters, worker_command, Fleet, Spec};
use crate::common::crew::Crew;
use crate::common::record::{FaultKind, Target};
use crate::common::sentinel::Sentinels;

/// The deployment and the crew of workers (with the referee and the faults so far).
pub struct SentinelFleet {
    pub deployment: Sentinels,
    pub crew: Crew,
    ttl_ms: u64,
    /// How many replicas must acknowledge each acquire and renewal of the workers
    /// spawned from now on: 1 unless set.
    pub replicas: usize,
}

impl SentinelFleet {
    /// Starts the deployment and the referee; no workers yet.
    pub async fn start(ttl_ms: u64) -> Self {
        Self::start_with(Sentinels::start(), ttl_ms).await
    }

    /// [`start`](Self::start) with the Sentinels' `down-after-milliseconds` at
    /// `down_after_ms`: the primary may then be frozen for less without a failover.
    pub async fn start_with_down_after(ttl_ms: u64, down_after_ms: u64) -> Self {
        let deployment =
            tokio::task::spawn_blocking(move || Sentinels::start_with_down_after(down_after_ms))
                .await
                .expect("the Sentinel deployment starts");
        Self::start_with(deployment, ttl_ms).await
    }

    /// Starts the referee, with `deployment` (started by the caller) to lock on.
    async fn start_with(deployment: Sentinels, ttl_ms: u64) -> Self {
        Self {
            deployment,
            crew: Crew::start().await,
            ttl_ms,
            replicas: 1,
        }
    }

    /// Freezes the primary for `d`, shorter than `down-after-milliseconds`: no failover,
    /// requests wait and renewals may fail; recorded as a pause of the server.
    pub async fn pause_primary(&mut self, d: Duration) {
        let index = self.crew.begin(FaultKind::PauseServer, Target::Server);
        let primary = self.deployment.freeze_primary();
        tokio::time::sleep(d).await;
        self.deployment.thaw(primary);
        self.crew.end(index);
    }

    /// Freezes the primary until Sentinel has promoted a replica, thaws it (a master
    /// still, taking writes, until a Sentinel demotes it) and waits until the deployment
    /// settles with it as a replica; recorded as a long pause of the server.
    pub async fn freeze_primary_past_failover(&mut self) {
        let index = self.crew.begin(FaultKind::PauseServerLong, Target::Server);
        let frozen = self.deployment.freeze_primary();
        self.deployment.failover().await;
        self.deployment.thaw(frozen);
        self.deployment.settle().await;
        self.crew.end(index);
    }

    /// Kills the primary, waits for Sentinel to promote a replica and starts the old
    /// primary again as a replica; recorded as a fault of the server.
    pub async fn kill_primary(&mut self) {
        let index = self.crew.begin(FaultKind::KillServer, Target::Server);
        let killed = self.deployment.kill_primary();
        self.deployment.failover().await;
        self.crew.end(index);
        self.deployment.restart_as_replica(killed).await;
    }
}

impl Fleet for SentinelFleet {
    fn crew(&self) -> &Crew {
        &self.crew
    }

    fn crew_mut(&mut self) -> &mut Crew {
        &mut self.crew
    }

    fn ttl_ms(&self) -> u64 {
        self.ttl_ms
    }

    /// Starts worker `name` over the Sentinels, [`replicas`](SentinelFleet::replicas) of
    /// which must acknowledge each acquire and renewal.
    async fn spawn(&mut self, name: &str, spec: &Spec) {
        let mut command = worker_command(name, spec, self.ttl_ms, "faults");
        command
            .env("FW_LOCK_URL", self.deployment.sentinel_urls().join(","))
            .env("FW_SENTINEL", self.deployment.master_name())
            .env("FW_REPLICAS", self.replicas.to_string());
        self.crew.launch(name, command).await;
    }

    /// The keys on the primary now, but fence and data counters.
    async fn keys_left(&self) -> Vec<String> {
        let primary = self.deployment.primary();
        let conn = self.deployment.server(primary).conn().await;
        let keys: Vec<String> = crate::common::raw::cmd(&conn, "KEYS", &["*"]).await;
        let keys = keys.into_iter().filter(|key| !kept(key));
        keys.collect()
    }

    /// The data counters on the primary now.
    async fn data_counters(&self) -> Vec<(String, i64)> {
        let primary = self.deployment.primary();
        let conn = self.deployment.server(primary).conn().await;
        let keys: Vec<String> = crate::common::raw::cmd(&conn, "KEYS", &["*:data"]).await;
        read_data_counters(&conn, &keys).await
    }
}
