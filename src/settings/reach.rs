//! How a handle reaches Redis: one connection, or a quorum of them.

use crate::protocol::topology::Topology;

/// How a handle reaches Redis: over one connection, whose keys live where its
/// [`Topology`] says, or over a quorum of `nodes` connections to independent masters.
///
/// A quorum is a variant here, not a `Topology::Quorum(n)`: a [`Topology`] is what the
/// scripts sent on one connection must know, and the quorum's backend sends them on each
/// node's own connection as a [`Topology::QuorumNode`]; no script is ever sent to "a
/// quorum". What a quorum's settings keep of [`Topology`] is what each node's connection
/// reaches as its type says (or `Builder::cluster`, feature `cluster`), which
/// must be one server (a Redis Cluster is refused by `Settings::check`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// One connection: to one server, the primary Sentinel names, or a Redis Cluster
    /// (never [`Topology::QuorumNode`]).
    Connection(Topology),
    /// A quorum of `nodes` independent masters.
    Quorum {
        /// How many nodes the quorum has.
        nodes: usize,
        /// Where the keys behind each node's connection live, as its type says.
        each: Topology,
    },
}

impl Reach {
    /// Where the keys behind the connection (over a quorum: each node's connection)
    /// live.
    pub(crate) fn topology(self) -> Topology {
        match self {
            Self::Connection(topology) | Self::Quorum { each: topology, .. } => topology,
        }
    }

    /// Sets where the keys behind the connection (over a quorum: each node's) live, as
    /// `Builder::cluster` says (feature `cluster`); a quorum keeps its nodes.
    #[cfg(any(feature = "cluster", test))]
    pub(crate) fn set_topology(&mut self, topology: Topology) {
        match self {
            Self::Connection(on) | Self::Quorum { each: on, .. } => *on = topology,
        }
    }

    /// How many nodes the quorum has, when over one.
    pub(crate) fn quorum(self) -> Option<usize> {
        match self {
            Self::Quorum { nodes, .. } => Some(nodes),
            Self::Connection(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quorum_keeps_its_nodes_when_its_connections_topology_is_set() {
        let mut quorum = Reach::Quorum {
            nodes: 3,
            each: Topology::Server,
        };
        assert_eq!(
            (quorum.topology(), quorum.quorum()),
            (Topology::Server, Some(3))
        );
        quorum.set_topology(Topology::Cluster);
        assert_eq!(
            quorum,
            Reach::Quorum {
                nodes: 3,
                each: Topology::Cluster
            }
        );
        let mut one = Reach::Connection(Topology::Cluster);
        assert_eq!((one.topology(), one.quorum()), (Topology::Cluster, None));
        one.set_topology(Topology::Server);
        assert_eq!(one, Reach::Connection(Topology::Server));
    }
}
