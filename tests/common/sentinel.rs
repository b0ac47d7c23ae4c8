//! A replicated Redis under Sentinel for one test: one primary and two replicas
//! (`--replicaof`), each a [`RedisServer`], and three Sentinels monitoring the primary
//! as [`MASTER_NAME`] with a quorum of two, all on free loopback ports in temporary
//! directories of their own, all killed when dropped. Faults: kill or freeze the
//! primary (Sentinel fails over), freeze a replica, force a failover with `SENTINEL
//! FAILOVER` (see `failover.rs` for the old primary, which stays writable for about
//! 10 s), bring a killed node back as a replica of the new primary.
//!
//! Measured on loopback with Redis 7.0: start-up about 2.2 s; a killed or frozen
//! primary is replaced in about 4.2 s; a forced failover takes about 11 s until Sentinel
//! has demoted the old primary, 2 s when the harness demotes it.
//!
//! Data nodes are named by index, `0..3`; node 0 is the first primary. The waits here are
//! bounded by [`SETTLE`] and panic with every process's log.

mod failover;
mod faults;
mod logs;
mod probe;
mod process;
mod settled;

use std::time::Duration;

use redis::sentinel::{SentinelClient, SentinelServerType};

use probe::replication;
use process::{Monitor, SentinelProcess};
use settled::{poll_until, settled};

use super::RedisServer;

/// The name the Sentinels monitor the primary under.
pub const MASTER_NAME: &str = "mymaster";
/// `down-after-milliseconds`: a primary that does not answer for this long is suspected.
pub const DOWN_AFTER_MS: u64 = 1000;
/// `failover-timeout`, in ms.
pub const FAILOVER_TIMEOUT_MS: u64 = 3000;
/// How long the deployment may take to form, and a failover to complete.
pub const SETTLE: Duration = Duration::from_secs(30);

const DATA_NODES: usize = 3;
const SENTINELS: usize = 3;
const QUORUM: usize = 2;
/// Without persistence a full resync is diskless; no waiting for more replicas first.
const NODE_ARGS: [&str; 2] = ["--repl-diskless-sync-delay", "0"];

/// What the harness did to a data node's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Running,
    /// SIGSTOP: connections stay open and nothing is answered.
    Frozen,
    /// SIGKILL: connections are reset and refused.
    Killed,
}

/// One primary, two replicas and three Sentinels.
#[derive(Debug)]
pub struct Sentinels {
    sentinels: Vec<SentinelProcess>,
    nodes: Vec<RedisServer>,
    states: Vec<State>,
    /// The primary when the deployment last settled.
    settled_primary: usize,
}

impl Sentinels {
    /// Starts the data nodes, waits until both replicas are in sync, starts the
    /// Sentinels, and waits until the deployment is settled: every Sentinel names node 0,
    /// hears from the two others and sees both replicas healthy. Panics with the logs (or
    /// the install hint) after [`SETTLE`].
    pub fn start() -> Self {
        Self::start_with_down_after(DOWN_AFTER_MS)
    }

    /// [`start`](Self::start) with another `down-after-milliseconds`: a primary frozen
    /// for less than `down_after_ms` is not suspected, so not failed over.
    pub fn start_with_down_after(down_after_ms: u64) -> Self {
        let primary = RedisServer::start_with(&NODE_ARGS);
        let port = primary.port().to_string();
        let replicas: Vec<RedisServer> = std::thread::scope(|scope| {
            let started: Vec<_> = (1..DATA_NODES)
                .map(|_| scope.spawn(|| RedisServer::start_with(&replica_args(&port))))
                .collect();
            started
                .into_iter()
                .map(|handle| handle.join().expect("a replica started"))
                .collect()
        });
        let nodes: Vec<RedisServer> = std::iter::once(primary).chain(replicas).collect();
        let monitor = Monitor {
            name: MASTER_NAME,
            primary_port: nodes[0].port(),
            quorum: QUORUM,
            down_after_ms,
            failover_timeout_ms: FAILOVER_TIMEOUT_MS,
        };
        let mut deployment = Self {
            sentinels: Vec::new(),
            states: vec![State::Running; nodes.len()],
            nodes,
            settled_primary: 0,
        };
        deployment.wait_in_sync();
        for _ in 0..SENTINELS {
            let sentinel = SentinelProcess::start(&monitor).unwrap_or_else(|err| panic!("{err}"));
            deployment.sentinels.push(sentinel);
        }
        let layout = deployment.layout();
        if let Err(why) = poll_until(SETTLE, || settled(&layout)) {
            deployment.fail(&format!("did not settle within {SETTLE:?}: {why}"));
        }
        deployment
    }

    /// Waits until every replica reports `master_link_status:up`.
    fn wait_in_sync(&self) {
        let primary = self.nodes[0].port();
        let replicas: Vec<u16> = self.nodes[1..].iter().map(RedisServer::port).collect();
        let in_sync = || {
            replicas
                .iter()
                .try_for_each(|&port| match replication(port)? {
                    seen if seen.link_up && seen.master_port == Some(primary) => Ok(()),
                    seen => Err(format!("{port} is not in sync: {seen:?}")),
                })
        };
        if let Err(why) = poll_until(SETTLE, in_sync) {
            self.fail(&format!("replicas not in sync within {SETTLE:?}: {why}"));
        }
    }

    /// The name the Sentinels monitor the primary under.
    pub fn master_name(&self) -> &'static str {
        MASTER_NAME
    }

    /// `redis://127.0.0.1:<port>/` of every Sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(SentinelProcess::url).collect()
    }

    /// A redis-rs client that asks the Sentinels for the primary on each connection.
    // The name is a `String` without redis-rs's `tls-rustls` and any `AsRef<str>` with it.
    #[allow(clippy::unnecessary_to_owned)]
    pub fn sentinel_client(&self) -> SentinelClient {
        SentinelClient::build(
            self.sentinel_urls(),
            MASTER_NAME.to_string(),
            None,
            SentinelServerType::Master,
        )
        .expect("valid Sentinel urls")
    }

    /// The number of data nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Data node `i`: its url, connections, log, and raw process control.
    pub fn server(&self, i: usize) -> &RedisServer {
        &self.nodes[i]
    }

    /// What the harness did to data node `i`.
    pub fn state(&self, i: usize) -> State {
        self.states[i]
    }

    /// The data node the first Sentinel that answers names as the primary now
    /// (`SENTINEL GET-MASTER-ADDR-BY-NAME`); during a failover, the one being promoted.
    pub fn primary(&self) -> usize {
        let named = self
            .sentinels
            .iter()
            .find_map(|sentinel| probe::master_addr(sentinel.port(), MASTER_NAME).ok());
        match named {
            Some(port) => self.index(port),
            None => self.fail("no Sentinel names a primary"),
        }
    }

    /// The data nodes other than [`primary`](Self::primary), in order.
    pub fn replicas(&self) -> Vec<usize> {
        let primary = self.primary();
        (0..self.len()).filter(|&i| i != primary).collect()
    }

    /// The index of the data node on `port`.
    fn index(&self, port: u16) -> usize {
        match self.nodes.iter().position(|node| node.port() == port) {
            Some(i) => i,
            None => self.fail(&format!("{port} is no data node")),
        }
    }
}

/// `--replicaof 127.0.0.1 <primary>` and the data nodes' other arguments.
fn replica_args(primary: &str) -> Vec<&str> {
    let mut args = vec!["--replicaof", "127.0.0.1", primary];
    args.extend(NODE_ARGS);
    args
}
