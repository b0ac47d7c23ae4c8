//! The fault suite on one lock server: a `redis-server`, and a [`Crew`] of worker
//! processes (`examples/fault_worker.rs`) each reaching it through a [`Proxy`] of its
//! own, so that a proxy fault hits one worker. The faults of the server itself are done
//! on [`lock`](ServerFleet::lock) (paused, stopped and restarted) or here (`CLIENT
//! KILL`, a lock key deleted); it notes who holds which lock right as a fault starts,
//! for the report's fire lead.

use std::time::Duration;

use redis::aio::MultiplexedConnection;

use super::fleet::{data_counters_on, keys_left_on, worker_command, Fleet, Spec};
use crate::common::crew::Crew;
use crate::common::proxy::Proxy;
use crate::common::record::{FaultKind, HeldLock, Target};
use crate::common::RedisServer;

/// The lock server, the workers behind their proxies, and the locks noted held.
#[derive(Debug)]
pub struct ServerFleet {
    pub lock: RedisServer,
    /// The workers, their events, the referee and the faults so far.
    pub crew: Crew,
    /// Locks seen held right as a fault started, with their server expiry.
    pub held: Vec<HeldLock>,
    pub ttl_ms: u64,
    pub mutex: String,
    /// How many lock keys the workers use at most.
    pub keys: u64,
}

impl ServerFleet {
    /// Starts the lock server and the referee; no workers yet.
    pub async fn start(ttl_ms: u64) -> ServerFleet {
        Self::start_on(RedisServer::start(), ttl_ms).await
    }

    /// Starts the referee, with `lock` (started by the caller: on a clock of its own, say)
    /// as the lock server; no workers yet.
    pub async fn start_on(lock: RedisServer, ttl_ms: u64) -> ServerFleet {
        ServerFleet {
            lock,
            crew: Crew::start().await,
            held: Vec::new(),
            ttl_ms,
            mutex: "faults".to_string(),
            keys: 1,
        }
    }

    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms)
    }

    /// A direct connection to the lock server.
    pub async fn lock_conn(&self) -> MultiplexedConnection {
        self.lock.conn().await
    }

    /// Reads who holds each lock key and when the key expires on the server, keeping
    /// only the locks of `worker` if given, and notes them for the report's fire lead.
    pub async fn note_held(&mut self, worker: Option<&str>) -> Vec<HeldLock> {
        let mut held = HeldLock::read(&self.lock_conn().await, &self.mutex, self.keys).await;
        if let Some(worker) = worker {
            let crew = &self.crew;
            held.retain(|h| crew.acquired(&h.id).is_some_and(|e| e.worker == worker));
        }
        self.held.extend(held.iter().cloned());
        held
    }

    /// Deletes lock key `key` (`<mutex>:k0`, ...) on the lock server, directly, if lock id `id`
    /// holds it (one script: the check and the `DEL` at one instant), as a
    /// [`FaultKind::DeleteLockKey`] aimed at `worker`; whether it did.
    pub async fn delete_lock_key(&mut self, worker: &str, key: &str, id: &str) -> bool {
        const DEL_IF_HELD: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
            return redis.call('DEL', KEYS[1]) end return 0";
        let fault = self
            .crew
            .begin(FaultKind::DeleteLockKey, Target::Worker(worker.into()));
        let deleted: i64 = redis::cmd("EVAL")
            .arg(DEL_IF_HELD)
            .arg(1)
            .arg(key)
            .arg(id)
            .query_async(&mut self.lock_conn().await)
            .await
            .expect("DEL the lock key");
        self.crew.end(fault);
        deleted == 1
    }

    /// `CLIENT KILL TYPE normal` on the lock server: every client but this one.
    pub async fn client_kill(&mut self) {
        let index = self.crew.begin(FaultKind::ClientKill, Target::Server);
        let _: i64 = redis::cmd("CLIENT")
            .arg(&["KILL", "TYPE", "normal"])
            .query_async(&mut self.lock_conn().await)
            .await
            .expect("CLIENT KILL");
        self.crew.end(index);
    }
}

impl Fleet for ServerFleet {
    fn crew(&self) -> &Crew {
        &self.crew
    }

    fn crew_mut(&mut self) -> &mut Crew {
        &mut self.crew
    }

    fn ttl_ms(&self) -> u64 {
        self.ttl_ms
    }

    /// Starts worker `name` behind a new proxy to the lock server.
    async fn spawn(&mut self, name: &str, spec: &Spec) {
        self.keys = self.keys.max(spec.first_key + spec.keys);
        let proxy = Proxy::start(self.lock.port()).await;
        let mut command = worker_command(name, spec, self.ttl_ms, &self.mutex);
        command.env("FW_LOCK_URL", proxy.url());
        self.crew.launch_behind(name, command, proxy).await;
    }

    /// The lock server's keys other than fence and data counters.
    async fn keys_left(&self) -> Vec<String> {
        keys_left_on(&self.lock_conn().await).await
    }

    /// The data counters on the lock server.
    async fn data_counters(&self) -> Vec<(String, i64)> {
        data_counters_on(&self.lock_conn().await).await
    }

    fn noted_held(&self) -> &[HeldLock] {
        &self.held
    }
}
