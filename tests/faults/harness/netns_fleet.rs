//! The fault suite on one lock server partitioned by the kernel: the server runs in a
//! network namespace of its own ([`NetnsServer`]), each worker (`examples/fault_worker.rs`)
//! in another, joined to the server's by a veth pair of its own ([`Netns`]), so that a
//! [`NetFault`] on that pair (link down, traffic dropped, link slowed) hits that worker
//! alone. The referee stays in the root namespace; the workers reach it, and the test
//! reaches the lock server, over Unix sockets, which cross namespaces. Notes who holds
//! which lock as a fault starts, for the report's fire lead.

use std::collections::HashMap;

use redis::aio::MultiplexedConnection;

use super::fleet::{data_counters_on, keys_left_on, worker_command_in, Fleet, Spec};
use super::needs_root;
use super::netns::{NetFault, Netns};
use super::netns_server::NetnsServer;
use crate::common::crew::Crew;
use crate::common::record::{HeldLock, Target};

/// The lock server and the workers in their namespaces, the faults on their links.
#[derive(Debug)]
pub struct NetnsFleet {
    /// The workers, their events, the referee and the faults so far.
    pub crew: Crew,
    pub lock: NetnsServer,
    /// Locks seen held right as a fault started (or read by an expiry watch), with
    /// their server expiry.
    pub held: Vec<HeldLock>,
    pub ttl_ms: u64,
    pub mutex: String,
    /// How many lock keys the workers use at most.
    pub keys: u64,
    /// Each worker's link index.
    links: HashMap<String, usize>,
    /// The link faults not healed yet, by their index in the crew's faults: (link, fault).
    open: HashMap<usize, (usize, NetFault)>,
    /// Declared last: dropped after the processes running in it.
    pub net: Netns,
}

impl NetnsFleet {
    /// Makes the server's namespace, starts the lock server in it and the referee (on
    /// a Unix socket too); no workers yet. `Err` says why namespaces cannot be made
    /// here ([`Netns::create`]).
    pub async fn start(ttl_ms: u64) -> Result<NetnsFleet, String> {
        let net = Netns::create()?;
        let lock = NetnsServer::start(&net.server);
        Ok(NetnsFleet {
            crew: Crew::start_unix().await,
            lock,
            held: Vec::new(),
            ttl_ms,
            mutex: "faults".to_string(),
            keys: 1,
            links: HashMap::new(),
            open: HashMap::new(),
            net,
        })
    }

    /// [`start`](Self::start), or `None` after skipping the calling test, or `part` of
    /// it, where namespaces cannot be made (a failure with
    /// `REDISMUTEX_REQUIRE_ROOT_TESTS=1`): `how` runs it as root
    /// ([`needs_root::skip`]).
    pub async fn start_or_skip(ttl_ms: u64, part: Option<&str>, how: &str) -> Option<NetnsFleet> {
        match NetnsFleet::start(ttl_ms).await {
            Ok(fleet) => Some(fleet),
            Err(refused) => {
                needs_root::skip(part, needs_root::NETNS_NEEDS, &refused, how);
                None
            }
        }
    }

    /// A connection to the lock server over its Unix socket (no link fault reaches it).
    pub async fn lock_conn(&self) -> MultiplexedConnection {
        self.lock.conn().await
    }

    /// The names of the lock keys the workers use: `<mutex>:k0` ...
    pub fn lock_keys(&self) -> Vec<String> {
        (0..self.keys)
            .map(|k| format!("{}:k{k}", self.mutex))
            .collect()
    }

    /// Worker `name`'s link index.
    pub fn link(&self, name: &str) -> usize {
        *self
            .links
            .get(name)
            .unwrap_or_else(|| panic!("no worker {name}"))
    }

    /// Breaks worker `name`'s link with `fault`, recorded as the fault's kind aimed at
    /// `name` until [`heal`](Self::heal); returns the record's index.
    pub fn cut(&mut self, name: &str, fault: NetFault) -> usize {
        let link = self.link(name);
        let index = self
            .crew
            .begin(fault.kind(), Target::Worker(name.to_string()));
        self.net.cut(link, fault);
        self.open.insert(index, (link, fault));
        index
    }

    /// Undoes the link fault recorded at `index`, and records its end.
    pub fn heal(&mut self, index: usize) {
        let (link, fault) = self
            .open
            .remove(&index)
            .unwrap_or_else(|| panic!("fault {index} is no open link fault"));
        self.net.heal(link, fault);
        self.crew.end(index);
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
}

impl Fleet for NetnsFleet {
    fn crew(&self) -> &Crew {
        &self.crew
    }

    fn crew_mut(&mut self) -> &mut Crew {
        &mut self.crew
    }

    fn ttl_ms(&self) -> u64 {
        self.ttl_ms
    }

    /// Makes the worker's namespace and link, and starts it there with `ip netns exec`,
    /// reaching the server at the server's address on its link.
    async fn spawn(&mut self, name: &str, spec: &Spec) {
        self.keys = self.keys.max(spec.first_key + spec.keys);
        let link = self.net.add_worker();
        let prefix = ["ip", "netns", "exec", self.net.worker(link)];
        let mut command = worker_command_in(&prefix, name, spec, self.ttl_ms, &self.mutex);
        command.env(
            "FW_LOCK_URL",
            self.lock.tcp_url(&self.net.server_addr(link)),
        );
        self.links.insert(name.to_string(), link);
        self.crew.launch(name, command).await;
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
