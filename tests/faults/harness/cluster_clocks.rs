//! A Redis Cluster whose nodes each run on a wall clock of their own (`clock.rs`), so
//! that a test moves one master's clock (its `TIME`, its key expiry, and the clock its
//! cluster bus times pings by) and leaves the others alone.

use crate::common::clock::ServerClock;
use crate::common::cluster::{Cluster, NodeEnv, NODES};

/// The clock of every node of a cluster started by [`Cluster::start_on_clocks`], by
/// port.
#[derive(Debug)]
pub struct NodeClocks {
    clocks: Vec<(u16, ServerClock)>,
}

impl NodeClocks {
    /// The clock of the node on `port`; panics if no node of the cluster has it.
    pub fn of(&self, port: u16) -> &ServerClock {
        let found = self.clocks.iter().find(|(own, _)| *own == port);
        let (_, clock) = found.unwrap_or_else(|| panic!("no node on a clock has port {port}"));
        clock
    }
}

impl Cluster {
    /// [`Cluster::start`] with every node on a clock of its own, each reading the real
    /// time until the test moves it; the clocks outlive a node's restart.
    pub fn start_on_clocks() -> (Cluster, NodeClocks) {
        let clocks: Vec<ServerClock> = (0..NODES).map(|_| ServerClock::new()).collect();
        let envs: Vec<NodeEnv> = clocks.iter().map(ServerClock::env).collect();
        let cluster = Cluster::start_with_env(crate::common::cluster::NODE_TIMEOUT_MS, &envs);
        let ports = cluster.nodes().into_iter().map(|node| node.port);
        let clocks = ports.zip(clocks).collect();
        (cluster, NodeClocks { clocks })
    }
}
